"""A small HTTP load generator over loopback: open-loop (paced) or closed-loop, in several processes.

Requests are raw bytes on a fresh connection each (`Connection: close`: gunicorn's sync workers
close every connection after one response anyway), so the client spends little CPU per request.

Open loop: request i is due at t0 + i / rate whatever happened to the others, and its latency is
counted from that due time, so a stalled server shows up as latency instead of slowing the client
down (no coordinated omission). Each process owns every P-th slot and runs a few threads; a slot
waits for a free thread if all are busy, and that wait counts too. The processes get the bodies by
inheritance when they are forked, never pickled through the pool's pipe (10,000 bodies of ~24 KB,
one of its own per request, took 0.8-1.7 s to reach them on a busy 2-core machine, and every slot
was that late), and the first slot is due 0.3 s after they exist.
"""

from __future__ import annotations

import multiprocessing
import socket
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SIGNED_EVENT = "pull_request"


@dataclass(frozen=True)
class Payload:
    body: bytes
    signature: str  # X-Hub-Signature-256


# The bodies of the `run` in progress, set before its pool forks: what each client process sends.
_payloads: Sequence[Payload] = ()


@dataclass(frozen=True)
class Result:
    slot: int
    due: float  # time.monotonic() seconds (CLOCK_MONOTONIC is shared by all processes)
    started: float
    finished: float
    status: int  # 0: connection error or timeout

    @property
    def latency(self) -> float:
        return self.finished - self.due


@dataclass(frozen=True)
class Share:
    host: str
    port: int
    path: str
    id_prefix: str
    slots: range
    t0: float
    deadline: float
    rate: float | None  # None: closed loop, as fast as the threads go
    threads: int
    timeout: float


def delivery_id(prefix: str, slot: int) -> str:
    return f"{prefix}-{slot}"


def request_bytes(host: str, port: int, path: str, payload: Payload, delivery: str) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        "User-Agent: GitHub-Hookshot/bench\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(payload.body)}\r\n"
        f"X-GitHub-Event: {SIGNED_EVENT}\r\n"
        f"X-GitHub-Delivery: {delivery}\r\n"
        "X-GitHub-Hook-ID: 4242\r\n"
        f"X-Hub-Signature-256: {payload.signature}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + payload.body


def exchange(host: str, port: int, data: bytes, timeout: float) -> int:
    """Send one request, read the whole answer; its status code."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(data)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    answer = b"".join(chunks)
    return int(answer[9:12]) if answer.startswith(b"HTTP/1.") and len(answer) >= 12 else 0


def _run_share(share: Share) -> list[Result]:
    results: list[Result] = []
    slots = iter(share.slots)
    lock = threading.Lock()

    def loop() -> None:
        while True:
            with lock:
                slot = next(slots, None)
            if slot is None:
                return
            now = time.monotonic()
            due = share.t0 + slot / share.rate if share.rate else now
            if due > now:
                time.sleep(due - now)
            if time.monotonic() > share.deadline:
                return
            payload = _payloads[slot % len(_payloads)]
            data = request_bytes(share.host, share.port, share.path, payload, delivery_id(share.id_prefix, slot))
            started = time.monotonic()
            try:
                status = exchange(share.host, share.port, data, share.timeout)
            except OSError:
                status = 0
            results.append(Result(slot, due, started, time.monotonic(), status))

    workers = [threading.Thread(target=loop, daemon=True) for _ in range(share.threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results


def run(
    host: str,
    port: int,
    path: str,
    payloads: Sequence[Payload],
    id_prefix: str,
    *,
    count: int,
    duration: float,
    rate: float | None,
    processes: int = 2,
    threads: int = 8,
    timeout: float = 10.0,
) -> list[Result]:
    """At most `count` requests within `duration` seconds (plus `timeout` for the last answers);
    paced at `rate` per second, or closed-loop with processes × threads connections when None.
    Request `slot` sends `payloads[slot % len(payloads)]`. One run at a time per process."""
    global _payloads
    _payloads = payloads
    try:
        with multiprocessing.get_context("fork").Pool(processes) as pool:  # the processes fork here
            t0 = time.monotonic() + 0.3  # let every process take its share before the first slot is due
            end = t0 + duration
            shares = [
                Share(host, port, path, id_prefix, range(p, count, processes), t0, end, rate, threads, timeout)
                for p in range(processes)
            ]
            # Bounded: a client process that dies (killed from outside) would otherwise leave map() waiting.
            pending = pool.map_async(_run_share, shares)
            try:
                parts = pending.get(timeout=duration + timeout + 60)
            except multiprocessing.TimeoutError:
                raise RuntimeError(
                    f"the load generator did not finish within {duration + timeout + 60:.0f} s (a client process died?)"
                ) from None
    finally:
        _payloads = ()
    return sorted((r for part in parts for r in part), key=lambda r: r.slot)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of `values` (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def median_ms(function: Callable[[], object], runs: int, setup: Callable[[], object] | None = None) -> float:
    """The median of `runs` timed calls of `function`, in milliseconds, each after an untimed `setup`."""
    times = []
    for _ in range(runs):
        if setup is not None:
            setup()
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000
