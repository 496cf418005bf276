"""Slow-client benchmark: do real webhook deliveries still get through while K sockets trickle bytes?

GitHub gives a delivery 10 seconds and never retries by itself (issue 8, item 2: with 2 sync gunicorn
workers, two sockets sending `POST /webhook` with `Content-Length: 100000` one byte every 5 s made 2 of
3 real deliveries time out). For each server and each attack, a fresh server is started on the
benchmark's ledger and Redis, K slow sockets are opened and kept open (one reopened whenever the
server drops one, as an attacker would), and meanwhile one real signed ~24 KB delivery is posted every
--every seconds for --duration seconds, each on a new connection with GitHub's 10-second limit. It
prints how many were answered 202 within 10 s, their p50/p99 latency (a delivery not answered in time
counts as 10 s), how many slow sockets the server dropped and after how long, and at the end the
new server against the old one in the same run.

Attacks: `body` sends complete headers announcing a 100,000-byte body, then one body byte every
--drip seconds; `headers` sends the request line, then one header byte every --drip seconds, never
ending the headers. K = 0 is the baseline without attack.

Servers: `new` is the real `tracker web` (tracker.web.server.WebServer); `sync` is the configuration
before issue 8 (the same WebServer with gunicorn sync workers, as tracker/web/server.py had it);
`gthread` is the option the issue named first (gunicorn gthread, 16 threads a process, keep-alive
off, and a 3-second socket timeout on every body read the app makes).

    .venv/bin/python bench/slow_clients.py [--servers sync,new --slow 0,2,8,64 --attacks body,headers]
    .venv/bin/python bench/slow_clients.py --servers sync,gthread,new   # the three, about 12 minutes
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import socket
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _load  # noqa: E402
from _service import Feed  # noqa: E402
from _stack import SECRET, Stack, load_note, tracker_command, wait_for  # noqa: E402
from ingest import free_port, healthy  # noqa: E402

from tracker.settings import Settings, load_settings  # noqa: E402
from tracker.store.ledger import Ledger  # noqa: E402
from tracker.web.server import WebServer  # noqa: E402

# GitHub counts a delivery as failed when it is not answered within 10 seconds.
GITHUB_TIMEOUT = 10.0
SLOW_BODY_BYTES = 100_000
GTHREAD_READ_TIMEOUT = 3.0

# The servers measured other than `new` (which is `tracker web` itself): gunicorn settings layered
# over WebServer's.
LEGACY = {
    "sync": {"worker_class": "sync", "threads": 1, "timeout": 30, "graceful_timeout": 10},
    "gthread": {"worker_class": "gthread", "threads": 16, "keepalive": 0, "timeout": 30, "graceful_timeout": 10},
}


# --- the servers ---------------------------------------------------------------------------------


class LegacyServer(WebServer):
    """WebServer with one of the LEGACY gunicorn configurations instead of its own."""

    def __init__(self, settings: Settings, host: str, port: int, processes: int, kind: str) -> None:
        self.kind = kind
        super().__init__(settings, host, port, processes)

    def load_config(self) -> None:
        super().load_config()
        for key, value in LEGACY[self.kind].items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        app = super().load()
        return bounded_reads(app) if self.kind == "gthread" else app


def bounded_reads(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """Every read the app makes from the client's socket waits GTHREAD_READ_TIMEOUT at most."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            sock.settimeout(GTHREAD_READ_TIMEOUT)
        return app(environ, start_response)

    return wrapped


def serve(kind: str, port: int, processes: int) -> None:
    LegacyServer(load_settings(), "127.0.0.1", port, processes, kind).run()


def start_server(stack: Stack, kind: str, processes: int, log: Path) -> tuple[Any, int]:
    port = free_port()
    if kind == "new":
        command = [*tracker_command(), "web", "--host", "127.0.0.1", "--port", str(port), "--processes", str(processes)]
    else:
        command = [sys.executable, str(Path(__file__).resolve()), "--serve", kind, "--port", str(port)]
        command += ["--processes", str(processes)]
    server = stack.spawn(command, log=log)
    if not wait_for(lambda: healthy(port) or server.poll() is not None, 30) or server.poll() is not None:
        print(log.read_text()[-3000:])
        raise SystemExit(f"the {kind} server did not come up")
    return server, port


# --- the slow sockets ----------------------------------------------------------------------------


@dataclass
class Attack:
    """K sockets trickling one byte each every `drip` seconds; a socket the server closes is
    replaced at once, so that K stay open for as long as the attack runs."""

    port: int
    count: int
    kind: str  # "body" or "headers"
    drip: float
    opened: int = 0
    refused: int = 0  # connection attempts that failed
    lifetimes: list[float] = field(default_factory=list)  # seconds each dropped socket had lived
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def head(self, index: int) -> bytes:
        if self.kind == "headers":
            return b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        return (
            "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: slow-{index}\r\n"
            f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: {SLOW_BODY_BYTES}\r\n\r\n"
        ).encode()

    def start(self) -> None:
        if self.count:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _open(self, selector: selectors.BaseSelector) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=2)
            sock.sendall(self.head(self.opened))
        except OSError:
            self.refused += 1
            return
        sock.setblocking(False)
        now = time.monotonic()
        # [opened at, next byte due]; the first bytes of the K sockets are spread over one period
        selector.register(sock, selectors.EVENT_READ, [now, now + self.drip * (self.opened % self.count) / self.count])
        self.opened += 1

    def _drop(self, selector: selectors.BaseSelector, sock: socket.socket, opened_at: float) -> None:
        selector.unregister(sock)
        sock.close()
        self.lifetimes.append(time.monotonic() - opened_at)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        try:
            while not self._stop.is_set():
                while len(selector.get_map()) < self.count and not self._stop.is_set():
                    self._open(selector)
                for key, _ in selector.select(timeout=0.1):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    with contextlib.suppress(OSError):
                        sock.recv(65536)  # the server answered (an error) or closed: either way, done
                    self._drop(selector, sock, key.data[0])
                now = time.monotonic()
                for key in list(selector.get_map().values()):
                    if key.data[1] <= now:
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        try:
                            sock.send(b"x")
                        except OSError:
                            self._drop(selector, sock, key.data[0])
                            continue
                        key.data[1] = now + self.drip
        finally:
            for key in list(selector.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            selector.close()


# --- the real deliveries -------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    delivery: str
    status: int  # 0: no answer within GITHUB_TIMEOUT
    seconds: float


def deliver(port: int, payload: _load.Payload, delivery: str) -> Answer:
    """One delivery as GitHub makes it: a new connection, the whole exchange within 10 seconds."""
    started = time.monotonic()
    deadline = started + GITHUB_TIMEOUT
    data = _load.request_bytes("127.0.0.1", port, "/webhook", payload, delivery)
    answer = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=GITHUB_TIMEOUT) as sock:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall(data)
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
    except OSError:
        return Answer(delivery, 0, GITHUB_TIMEOUT)
    status = int(answer[9:12]) if answer.startswith(b"HTTP/1.") and len(answer) >= 12 else 0
    return Answer(delivery, status, time.monotonic() - started)


def post_deliveries(
    port: int, payloads: Iterator[_load.Payload], prefix: str, every: float, duration: float
) -> list[Answer]:
    """One delivery every `every` seconds for `duration` seconds, each on its own thread (open loop)."""
    answers: list[Answer] = []
    lock = threading.Lock()

    def one(index: int, payload: _load.Payload) -> None:
        answer = deliver(port, payload, f"{prefix}-{index}")
        with lock:
            answers.append(answer)

    threads = []
    t0 = time.monotonic()
    for index in range(int(duration / every)):
        time.sleep(max(0.0, t0 + index * every - time.monotonic()))
        thread = threading.Thread(target=one, args=(index, next(payloads)), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(GITHUB_TIMEOUT + 5)
    return answers


# --- one scenario --------------------------------------------------------------------------------


@dataclass
class Outcome:
    server: str
    attack: str
    slow: int
    answers: list[Answer]
    opened: int
    refused: int
    lifetimes: list[float]

    @property
    def accepted(self) -> int:
        return sum(1 for a in self.answers if a.status == 202 and a.seconds <= GITHUB_TIMEOUT)

    def latency(self, q: float) -> float:
        return _load.percentile([a.seconds if a.status == 202 else GITHUB_TIMEOUT for a in self.answers], q)

    def line(self) -> str:
        sent = len(self.answers)
        others = sum(1 for a in self.answers if a.status not in (0, 202))
        dropped = (
            f"{len(self.lifetimes)} dropped by the server, after a median {statistics.median(self.lifetimes):.1f} s"
            if self.lifetimes
            else "none dropped by the server"
        )
        attack = f"{self.slow:>2} slow ({self.attack})" if self.slow else " 0 slow (baseline)"
        return (
            f"{self.server:<7} {attack:<20} answered 202 within 10 s: {self.accepted:>3}/{sent} "
            f"({self.accepted / max(1, sent):4.0%})  p50 {_ms(self.latency(50))}  p99 {_ms(self.latency(99))}"
            f"  other answers {others}  |  slow sockets: {self.opened} opened, {dropped}"
            + (f", {self.refused} connects refused" if self.refused else "")
        )


def _ms(seconds: float) -> str:
    return "  ≥10 s  " if seconds >= GITHUB_TIMEOUT else f"{seconds * 1000:7.1f} ms"


def run_scenario(
    stack: Stack, kind: str, attack_kind: str, slow: int, args: argparse.Namespace, payloads: Iterator[_load.Payload]
) -> Outcome:
    log = stack.directory / f"{kind}-{attack_kind}-{slow}.log"
    server, port = start_server(stack, kind, args.processes, log)
    attack = Attack(port, slow, attack_kind, args.drip)
    try:
        attack.start()
        time.sleep(args.settle)  # let the server take the slow sockets in
        prefix = f"{uuid.uuid4().hex[:8]}-{kind}-{attack_kind}-{slow}"
        answers = post_deliveries(port, payloads, prefix, args.every, args.duration)
    finally:
        attack.stop()
        stack.stop(server)
    return Outcome(kind, attack_kind, slow, answers, attack.opened, attack.refused, attack.lifetimes)


# --- main ----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="sync,new", help="comma-separated: sync, gthread, new")
    parser.add_argument("--slow", default="0,2,8,64", help="comma-separated numbers of slow sockets (0: baseline)")
    parser.add_argument("--attacks", default="body,headers", help="comma-separated: body, headers")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of real deliveries per scenario")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between real deliveries")
    parser.add_argument("--drip", type=float, default=5.0, help="seconds between two bytes of a slow socket")
    parser.add_argument(
        "--settle", type=float, default=1.0, help="seconds between opening the slow sockets and the first delivery"
    )
    parser.add_argument("--processes", type=int, default=2, help="web processes")
    parser.add_argument("--database-url", help="default: TRACKER_DATABASE_URL, else SQLite in a temp dir")
    parser.add_argument("--redis-url", help="default: REDIS_URL (must be empty), else an embedded Redis")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (ledger, server logs)")
    parser.add_argument("--serve", choices=sorted(LEGACY), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.processes)
        return 0

    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    unknown = set(servers) - {"new", *LEGACY}
    if unknown:
        raise SystemExit(f"unknown servers: {', '.join(sorted(unknown))}")
    counts = [int(k) for k in args.slow.split(",")]
    attacks = [a.strip() for a in args.attacks.split(",") if a.strip()]
    scenarios = [(attack, k) for k in counts for attack in (attacks if k else ["-"])]
    print(
        f"slow clients: servers {', '.join(servers)} × {args.processes} processes; slow sockets {counts} "
        f"({', '.join(attacks)}), one byte every {args.drip:g} s; a real delivery every {args.every:g} s for "
        f"{args.duration:g} s per scenario; {load_note()}"
    )
    outcomes: list[Outcome] = []
    with Stack(args.database_url, args.redis_url, keep=args.keep) as stack:
        # A distinct body for every delivery: the webhook answers a body it already stored as a replay.
        wanted = len(scenarios) * len(servers) * int(args.duration / args.every)
        payloads = iter(Feed("2026-04", SECRET.encode(), first_number=1, seed=7, per_pr=8).take(wanted))
        for attack, k in scenarios:
            for kind in servers:
                outcome = run_scenario(stack, kind, attack, k, args, payloads)
                outcomes.append(outcome)
                print(outcome.line(), flush=True)

        stored = Ledger(stack.engine).accepted_ids()  # the inbox's too (tracker.store.inbox)
        accepted = {a.delivery for o in outcomes for a in o.answers if a.status == 202}
        missing = accepted - stored
        print(
            f"ledger: {len(accepted)} deliveries answered 202, {len(missing)} of them missing from the ledger "
            f"({'PASS' if not missing else 'FAIL'})"
        )

        if "new" in servers:
            print("new server against the others, same run (answered 202 within 10 s; p50 latency):")
            for attack, k in scenarios:
                new = next(o for o in outcomes if o.server == "new" and o.attack == attack and o.slow == k)
                for other in (o for o in outcomes if o.server != "new" and o.attack == attack and o.slow == k):
                    label = f"{k:>2} slow ({attack})" if k else " 0 slow (baseline)"
                    print(
                        f"  {label:<20} new {new.accepted:>3} vs {other.server} {other.accepted:>3}: "
                        f"{_ratio(new.accepted, other.accepted)}; p50 {_ms(new.latency(50)).strip()} vs "
                        f"{_ms(other.latency(50)).strip()} ({_ratio(new.latency(50), other.latency(50))})"
                    )
        print(f"slow clients: done; {load_note()}")
    return 0 if not missing else 1


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f} ×" if b else "∞ ×"


if __name__ == "__main__":
    sys.exit(main())
