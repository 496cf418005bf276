"""Helpers of bench/service.py: `tracker run` as a child, its process tree, deliveries to feed it.

- `Service`: `tracker run` started the README's way (its own data directory, a webhook secret, a
  free port), with its output in a log file. Its children lead sessions of their own (the
  supervisor's design: Ctrl-C in a terminal reaches only the supervisor), so stopping its process
  group is not enough: every process ever seen in its tree is remembered by (pid, start time) and,
  once the supervisor has stopped (SIGTERM, then up to 45 s), whichever of them still runs is
  stopped by its pid (TERM, then KILL).
- `processes`: the tree under the supervisor from /proc, each process with the role of the child
  of `tracker run` it descends from (web, worker, sweep, schedule, redis), read from that child's
  command line (`python -m tracker worker`, `redis-server …`).
- `CpuMeter`: user + system CPU seconds per role between two moments, from /proc/<pid>/stat.
- `Feed`: unique signed ~24 KB deliveries of realistic PR lives (bench/_stories.py) in time order,
  built between measurements, never during one.
- `Background`: a paced open-loop sender in its own process that runs until told to stop.
- `FakeGitHub`: bench/_fake_github_server.py in a process of its own, the GitHub the workers fetch
  PR heads' files from (it answers at once, from the ledger's current heads).
- `finished_jobs`, `drain_cpu`, `fetch_outcomes`: what RQ kept of the jobs that finished (their return
  values, kept RESULT_TTL = 600 s): the drain jobs' own CPU ("… (N ms of CPU)"), the fetch jobs' outcomes.
- `head_counts`: the ledger's heads with files, heads wanted by deliveries, and those still missing.
- `ledger_counts`: the ledger's deliveries by status, the inbox's (not yet moved into the ledger) counted
  as pending; `queue_jobs`: an RQ queue's jobs waiting, running and scheduled.
- `code_version`: the commit the figures are of, and whether the work tree differs from it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _load
from _stories import REPO, ROOT, month_start, plan_month, stories
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import FinishedJobRegistry, ScheduledJobRegistry, StartedJobRegistry
from sqlalchemy import Engine, and_, func, select

from tracker.store.inbox import Inbox
from tracker.store.schema import deliveries, heads, wanted_heads
from tracker.web.signature import sign

TICK = os.sysconf("SC_CLK_TCK")
ROLES = ("web", "worker", "redis", "sweep", "schedule", "supervisor", "other")


# --- /proc ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start: int  # clock ticks after boot: with the pid, names one process whatever reuses the pid
    state: str
    cpu: float  # user + system seconds so far


def read_proc(pid: int) -> Proc | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After "pid (comm)": state ppid ... utime(14) stime(15) ... starttime(22), counted from field 3.
    return Proc(pid, int(fields[1]), int(fields[19]), fields[0], (int(fields[11]) + int(fields[12])) / TICK)


def command_line(pid: int) -> list[str]:
    try:
        return [part for part in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if part]
    except OSError:
        return []


def role_of(args: Sequence[str]) -> str:
    """The part of `tracker run` a direct child of the supervisor is, from its command line."""
    if args and "redis-server" in args[0]:
        return "redis"
    for index, part in enumerate(args[:-1]):
        module = part == "tracker" and index > 0 and args[index - 1] == "-m"
        if module or part.endswith("/tracker"):
            command = args[index + 1]
            return command if command in ROLES else "other"
    return "other"


def processes(root: int) -> dict[tuple[int, int], tuple[str, Proc]]:
    """Every live process under `root` (itself included), keyed by (pid, start), with its role."""
    table: dict[int, Proc] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            proc = read_proc(int(entry.name))
            if proc is not None:
                table[proc.pid] = proc
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found: dict[tuple[int, int], tuple[str, Proc]] = {}
    if root not in table:
        return found
    found[(root, table[root].start)] = ("supervisor", table[root])
    stack = [(pid, role_of(command_line(pid))) for pid in children.get(root, [])]
    while stack:
        pid, role = stack.pop()
        proc = table.get(pid)
        if proc is None:
            continue
        found[(pid, proc.start)] = (role, proc)
        stack.extend((child, role) for child in children.get(pid, []))
    return found


def alive(key: tuple[int, int]) -> bool:
    proc = read_proc(key[0])
    return proc is not None and proc.start == key[1] and proc.state not in ("Z", "X")


# --- the service ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(port: int, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def healthy(port: int) -> bool:
    try:
        return http_get(port, "/healthz", timeout=2.0)[0] == 200
    except OSError:
        return False


class Service:
    """`tracker run` in a session of its own; `close` stops it and everything it started."""

    def __init__(self, command: Sequence[str], env: dict[str, str], log: Path, cwd: Path) -> None:
        self.command, self.env, self.log, self.cwd = list(command), env, log, cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.seen: dict[tuple[int, int], str] = {}  # every process ever seen in its tree, with its role
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, port: int, timeout: float = 120.0) -> float:
        """Start it and wait until /healthz answers 200; seconds it took."""
        started = time.monotonic()
        with open(self.log, "ab") as output:
            self.process = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = started + timeout
        while time.monotonic() < deadline:
            self.tree()
            if self.process.poll() is not None:
                raise RuntimeError(f"`tracker run` exited with {self.process.returncode}:\n{self.tail()}")
            if healthy(port):
                return time.monotonic() - started
            time.sleep(0.2)
        raise RuntimeError(f"`tracker run` did not answer /healthz within {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def tree(self) -> dict[tuple[int, int], tuple[str, Proc]]:
        """The live tree now; every process in it is remembered for `close`."""
        if self.process is None:
            return {}
        found = processes(self.process.pid)
        with self._lock:
            for key, (role, _) in found.items():
                self.seen.setdefault(key, role)
        return found

    def close(self) -> list[str]:
        """Stop the supervisor (it stops its parts, Redis last), then whatever it left running.
        Returns what had to be stopped by hand."""
        if self.process is None:
            return []
        with contextlib.suppress(Exception):
            self.tree()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(45)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                self.process.wait()
        with self._lock:
            leftovers = [(key, role) for key, role in self.seen.items() if alive(key)]
        by_hand = [f"{role} pid {key[0]}" for key, role in leftovers]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for (pid, _), _role in leftovers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and any(alive(key) for key, _ in leftovers):
                time.sleep(0.05)
            leftovers = [(key, role) for key, role in leftovers if alive(key)]
            if not leftovers:
                break
        self.process = None
        return by_hand


class CpuMeter:
    """CPU seconds per role used by a service's processes since `reset` (sampled at every `sample`;
    a process that exits between two samples loses at most one interval)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.base: dict[tuple[int, int], float] = {}
            self.last: dict[tuple[int, int], tuple[str, float]] = {}
        now = self.service.tree()
        with self._lock:
            for key, (role, proc) in now.items():
                self.base[key] = proc.cpu
                self.last[key] = (role, proc.cpu)

    def sample(self) -> None:
        now = self.service.tree()
        with self._lock:
            for key, (role, proc) in now.items():
                self.last[key] = (role, proc.cpu)

    def totals(self) -> dict[str, float]:
        self.sample()
        with self._lock:
            out = dict.fromkeys(ROLES, 0.0)
            for key, (role, cpu) in self.last.items():
                out[role] += cpu - self.base.get(key, 0.0)
            return out

    def pids(self, role: str) -> list[int]:
        with self._lock:
            return sorted(key[0] for key, (seen, _) in self.last.items() if seen == role)


# --- deliveries ---------------------------------------------------------------------------------------


class Feed:
    """Unique signed deliveries of one month of one repository, consumed in order. Built in batches
    (PR lives of `per_pr` deliveries on average, sorted by time so that PRs interleave) whenever a
    `take` asks for more than is left; `advance` consumes what a run really sent."""

    def __init__(self, month: str, secret: bytes, first_number: int, seed: int, per_pr: int = 20) -> None:
        self.month, self.secret, self.number, self.seed, self.per_pr = month, secret, first_number, seed, per_pr
        self.items: list[_load.Payload] = []
        self.cursor = 0
        self.built = 0
        self.build_seconds = 0.0

    def _build(self, count: int) -> None:
        started = time.monotonic()
        prs = max(1, count // self.per_pr)
        plans = plan_month(self.month, prs, count, seed=self.seed + self.built, first_number=self.number)
        self.number += prs
        batch = [delivery for chunk in stories(plans, processes=2 if count >= 2_000 else 1) for delivery in chunk]
        batch.sort(key=lambda d: (d.received_at, d.number))
        self.items += [_load.Payload(d.body, sign(self.secret, d.body)) for d in batch]
        self.built += 1
        self.build_seconds += time.monotonic() - started

    def take(self, count: int) -> list[_load.Payload]:
        missing = self.cursor + count - len(self.items)
        if missing > 0:
            self._build(max(missing, 1_000))
        return self.items[self.cursor : self.cursor + count]

    def advance(self, used: int) -> None:
        self.cursor = min(len(self.items), self.cursor + used)
        # What was sent is not needed again: let its memory go.
        self.items[: self.cursor] = [None] * self.cursor  # type: ignore[list-item]

    @property
    def size_kb(self) -> float:
        sizes = [len(p.body) for p in self.items[self.cursor : self.cursor + 200] if p is not None]
        return sum(sizes) / max(1, len(sizes)) / 1024


def probe_payload(number: int, month: str, secret: bytes, index: int) -> _load.Payload:
    """An `opened` delivery of a PR numbered `number`, created in the middle of `month`."""
    from _stories import _factory

    created = month_start(month).replace(microsecond=0)
    created = datetime.fromtimestamp(created.timestamp() + 14 * 86_400 + index * 60, tz=created.tzinfo)
    story = _factory().PullRequestStory(number, created, repo=REPO, base="main", title=f"Service probe {index}")
    story.opened()
    body = story.deliveries[0].body
    return _load.Payload(body, sign(secret, body))


def snapshot_numbers(body: bytes) -> set[int]:
    document = json.loads(body)
    return {int(pr["number"]) for pr in document.get("pull_requests", [])}


# --- a sender that runs until stopped -----------------------------------------------------------------


@dataclass
class BackgroundResult:
    sent: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    accepted: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    last_slot: int = -1
    seconds: float = 0.0  # from the first slot's due time to the stop


def _background(
    port: int,
    payloads: Sequence[_load.Payload],
    prefix: str,
    rate: float,
    threads: int,
    stop: Any,
    out: Any,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it
    result = BackgroundResult()
    lock = threading.Lock()
    slots = iter(range(len(payloads)))
    t0 = time.monotonic() + 0.1

    def loop() -> None:
        while not stop.is_set():
            with lock:
                slot = next(slots, None)
            if slot is None:
                return
            due = t0 + slot / rate
            pause = due - time.monotonic()
            if pause > 0 and stop.wait(pause):
                return
            delivery = _load.delivery_id(prefix, slot)
            data = _load.request_bytes("127.0.0.1", port, "/webhook", payloads[slot], delivery)
            try:
                status = _load.exchange("127.0.0.1", port, data, 10.0)
            except OSError:
                status = 0
            finished = time.monotonic()
            with lock:
                result.sent += 1
                result.statuses[status] = result.statuses.get(status, 0) + 1
                result.latencies.append(finished - due)
                result.last_slot = max(result.last_slot, slot)
                if status == 202:
                    result.accepted.append(delivery)

    workers = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    result.seconds = time.monotonic() - t0
    out.put(result)


class Background:
    """Deliveries POSTed to /webhook at `rate` per second, open loop, from a process of its own,
    until `stop` (or until `payloads` run out)."""

    def __init__(
        self, port: int, payloads: Sequence[_load.Payload], prefix: str, rate: float, threads: int = 8
    ) -> None:
        context = multiprocessing.get_context("fork")
        self._stop = context.Event()
        self._out: Any = context.Queue()
        self.process = context.Process(
            target=_background, args=(port, payloads, prefix, rate, threads, self._stop, self._out), daemon=True
        )

    def __enter__(self) -> Background:
        self.process.start()
        return self

    def stop(self, timeout: float = 30.0) -> BackgroundResult:
        self._stop.set()
        try:
            result: BackgroundResult = self._out.get(timeout=timeout)
        except Exception:  # noqa: BLE001 - a dead sender: report nothing rather than hang
            result = BackgroundResult()
        self.process.join(5)
        return result

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.process.join(15)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def wait_until(condition: Callable[[], bool], timeout: float, every: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return condition()


# --- a function in a process of its own -----------------------------------------------------------------


def _call(function: Callable[..., Any], args: tuple[Any, ...], out: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it
    try:
        out.put(("ok", function(*args)))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises it
        out.put(("error", f"{type(exc).__name__}: {exc}"))


class InProcess:
    """`function(*args)` in a forked process, so that the caller can watch the service meanwhile
    without threads (a fork from a process with threads can inherit a lock held by one of them)."""

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        context = multiprocessing.get_context("fork")
        self._out: Any = context.Queue()
        self.process = context.Process(target=_call, args=(function, args, self._out))
        self.process.start()
        self._result: tuple[str, Any] | None = None

    def done(self) -> bool:
        if self._result is None:
            with contextlib.suppress(Exception):
                self._result = self._out.get_nowait()
            if self._result is None and not self.process.is_alive():
                with contextlib.suppress(Exception):
                    self._result = self._out.get(timeout=1)
                if self._result is None:
                    self._result = ("error", f"the load process died (exit code {self.process.exitcode})")
        return self._result is not None

    def result(self) -> Any:
        while not self.done():
            time.sleep(0.05)
        self.process.join(10)
        assert self._result is not None
        kind, value = self._result
        if kind != "ok":
            raise RuntimeError(value)
        return value

    def kill(self) -> None:
        """Stop it and whatever it started (its load generator's pool), by pid."""
        if self.process.pid is None:
            return
        tree = [key for key in processes(self.process.pid) if key[0] != self.process.pid]
        if self.process.is_alive():
            # It dies at once (forked children keep no Python SIGTERM handler: bench/_stack.py); the
            # workers of its load generator's pool, if any are left, are stopped below by pid.
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            left = [key for key in tree if alive(key)]
            for pid, _ in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if left:
                time.sleep(1)


# --- wrk ------------------------------------------------------------------------------------------------

WRK_SCRIPT = r"""
-- Written by bench/service.py: thread k of T sends the bodies k, k+T, k+2T, ... of the index once each
-- (each a body of its own, signed, under the delivery id <prefix>-<slot>), wrapping round only if
-- it runs out; it writes the ids answered 202.
local index_file, bodies_file, prefix, out_dir, nthreads = "@INDEX@", "@BODIES@", "@PREFIX@", "@OUTDIR@", @THREADS@
local threads, made = {}, 0
function setup(thread)
  made = made + 1
  thread:set("tid", made)
  table.insert(threads, thread)
end

n, accepted, other, wrapped, used_max = 0, 0, 0, 0, -1
local bodies, sigs, slots, out = {}, {}, {}, nil
function init(args)
  local f = assert(io.open(bodies_file, "rb"))
  local k = 0
  for line in io.lines(index_file) do
    if k % nthreads == tid - 1 then
      local slot, sig, offset, length = line:match("^(%d+) (%S+) (%d+) (%d+)$")
      f:seek("set", tonumber(offset))
      bodies[#bodies + 1] = f:read(tonumber(length))
      sigs[#sigs + 1] = sig
      slots[#slots + 1] = tonumber(slot)
    end
    k = k + 1
  end
  f:close()
  out = assert(io.open(out_dir .. "/" .. prefix .. "-" .. tid .. ".ids", "w"))
  out:setvbuf("line")
end

function request()
  n = n + 1
  local k = n
  if k > #bodies then
    k = ((k - 1) % #bodies) + 1
    wrapped = wrapped + 1
  end
  if slots[k] > used_max then used_max = slots[k] end
  return wrk.format("POST", nil, {
    ["Content-Type"] = "application/json",
    ["User-Agent"] = "GitHub-Hookshot/bench",
    ["X-GitHub-Event"] = "pull_request",
    ["X-GitHub-Delivery"] = prefix .. "-" .. slots[k],
    ["X-GitHub-Hook-ID"] = "4242",
    ["X-Hub-Signature-256"] = sigs[k],
  }, bodies[k])
end

function response(status, headers, body)
  if status == 202 then
    accepted = accepted + 1
    local id = body:match('"delivery":%s*"([^"]+)"')
    if id then out:write(id, "\n") end
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local acc, oth, wrp, used = 0, 0, 0, -1
  for _, t in ipairs(threads) do
    acc = acc + t:get("accepted")
    oth = oth + t:get("other")
    wrp = wrp + t:get("wrapped")
    if t:get("used_max") > used then used = t:get("used_max") end
  end
  local e = summary.errors
  io.write(string.format(
    "BENCH requests=%d duration_us=%d accepted=%d other=%d wrapped=%d used_max=%d connect=%d read=%d write=%d " ..
    "status=%d timeout=%d p50_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.duration, acc, oth, wrp, used, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""


def run_wrk(
    wrk: str,
    work: Path,
    port: int,
    path: str,
    payloads: Sequence[_load.Payload],
    prefix: str,
    connections: int,
    threads: int,
    seconds: float,
) -> tuple[dict[str, int], set[str]]:
    """wrk's figures for one closed-loop run, and the delivery ids it saw answered 202."""
    work.mkdir(parents=True, exist_ok=True)
    bodies, index = work / f"{prefix}.bodies", work / f"{prefix}.index"
    offset = 0
    with open(bodies, "wb") as out, open(index, "w") as lines:
        for slot, payload in enumerate(payloads):
            out.write(payload.body)
            lines.write(f"{slot} {payload.signature} {offset} {len(payload.body)}\n")
            offset += len(payload.body)
    script = work / f"{prefix}.lua"
    script.write_text(
        WRK_SCRIPT.replace("@INDEX@", str(index))
        .replace("@BODIES@", str(bodies))
        .replace("@PREFIX@", prefix)
        .replace("@OUTDIR@", str(work))
        .replace("@THREADS@", str(threads))
    )
    command = [
        wrk, "-t", str(threads), "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "5s",
        "-s", str(script), f"http://127.0.0.1:{port}{path}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120, check=False)
    figures = None
    for line in done.stdout.splitlines():
        if line.startswith("BENCH "):
            figures = {key: int(value) for key, value in (item.split("=") for item in line.split()[1:])}
    ids: set[str] = set()
    for file in work.glob(f"{prefix}-*.ids"):
        ids.update(line.strip() for line in file.read_text().splitlines() if line.strip())
        file.unlink()
    bodies.unlink()
    if figures is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    return figures, ids


# --- the GitHub the workers fetch from ------------------------------------------------------------------

FAKE_GITHUB = Path(__file__).resolve().parent / "_fake_github_server.py"


class FakeGitHub:
    """bench/_fake_github_server.py, started by `stack.spawn` (so the stack stops it at the end)."""

    def __init__(self, stack: Any, database_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = stack.directory / "fake-github.log"
        self.process: subprocess.Popen[bytes] = stack.spawn(
            [sys.executable, str(FAKE_GITHUB), "--port", str(self.port), "--database-url", database_url],
            log=self.log,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            with contextlib.suppress(OSError):
                if http_get(self.port, "/", timeout=2.0)[0] == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"the fake GitHub did not come up:\n{self.log.read_text(errors='replace')[-3000:]}")

    def stats(self) -> Counter[str]:
        """Requests answered so far, per route (`files`, `compare`, `pull`, `304`, `files 404`, ...)."""
        try:
            return Counter(json.loads(http_get(self.port, "/_fake/stats")[1])["requests"])
        except (OSError, ValueError, KeyError):
            return Counter()

    def cpu(self) -> float:
        proc = read_proc(self.process.pid)
        return proc.cpu if proc is not None else 0.0


# --- what RQ kept of finished jobs ------------------------------------------------------------------


@dataclass(frozen=True)
class Finished:
    function: str
    value: str  # the job's return value
    started: float  # epoch seconds
    ended: float


def _epoch(moment: datetime | None) -> float:
    if moment is None:
        return 0.0
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


def finished_jobs(connection: Redis, queue_name: str, since: float, until: float | None = None) -> list[Finished]:
    """The jobs of `queue_name` that finished (successfully) in [since, until] (epoch seconds), with
    their return values; RQ keeps them for the jobs' result_ttl."""
    registry = FinishedJobRegistry(queue=Queue(queue_name, connection=connection))
    out = []
    for job in Job.fetch_many(registry.get_job_ids(), connection=connection):
        if job is None:
            continue
        ended = _epoch(job.ended_at)
        if ended < since or (until is not None and ended > until):
            continue
        try:
            value = job.return_value()
        except Exception:  # noqa: BLE001 - an unreadable result is reported as such
            value = "(result unreadable)"
        out.append(Finished(job.func_name or "", "" if value is None else str(value), _epoch(job.started_at), ended))
    return out


_DRAIN = re.compile(r"processed (\d+) deliveries in (\d+) batches \((\d+) ms of CPU\)")


def drain_cpu(jobs: Sequence[Finished]) -> tuple[float, int, int, int]:
    """(CPU seconds, deliveries, batches, jobs) the finished drain jobs report of themselves."""
    cpu_ms = deliveries = batches = count = 0
    for job in jobs:
        match = _DRAIN.search(job.value)
        if job.function.endswith("drain_deliveries") and match:
            deliveries += int(match.group(1))
            batches += int(match.group(2))
            cpu_ms += int(match.group(3))
            count += 1
    return cpu_ms / 1000, deliveries, batches, count


_BATCH = re.compile(r"^(\d+) heads: (.*?) \(\d+ ms of CPU\)$")


def _fetch_job(job: Finished) -> bool:
    return job.function.endswith(("fetch_head_files", "fetch_heads"))


def fetch_outcomes(jobs: Sequence[Finished]) -> Counter[str]:
    """The heads the finished fetch jobs (one head, or a batch: workers.jobs.fetch_heads) handled, by
    outcome ("stored", "stored from compare", "already known", ...)."""
    outcomes: Counter[str] = Counter()
    for job in jobs:
        batch = _BATCH.match(job.value)
        if job.function.endswith("fetch_heads") and batch:
            for part in filter(None, batch.group(2).split(", ")):
                count, _, outcome = part.partition(" ")
                outcomes[outcome] += int(count)
        elif job.function.endswith("fetch_head_files"):
            outcomes[job.value.split(" (")[0]] += 1
    return outcomes


def fetch_durations(jobs: Sequence[Finished]) -> list[float]:
    """Wall-clock seconds per head of the finished fetch jobs, from RQ's started_at to ended_at (a
    batch's divided by its heads)."""
    durations = []
    for job in jobs:
        if _fetch_job(job) and job.started:
            batch = _BATCH.match(job.value)
            durations.append((job.ended - job.started) / (int(batch.group(1)) if batch else 1))
    return durations


def github_jobs(connection: Redis) -> dict[str, int]:
    """Jobs of the `github` queue: waiting in it, running, and scheduled (retries, rate-limit waits)."""
    return queue_jobs(connection, "github")


def queue_jobs(connection: Redis, name: str) -> dict[str, int]:
    """Jobs of the queue `name`: waiting in it, running, and scheduled (retries, waits)."""
    queue = Queue(name, connection=connection)
    return {
        "queued": queue.count,
        "started": StartedJobRegistry(queue=queue).count,
        "scheduled": ScheduledJobRegistry(queue=queue).count,  # type: ignore[no-untyped-call]
    }


def head_counts(reader: Engine, fetched_since_ms: int | None = None) -> dict[str, int]:
    """`heads` (rows of the heads table: heads whose files are stored), `wanted` (heads deliveries
    showed) and `missing` (wanted without files); with `fetched_since_ms`, also `since` (heads stored
    from that moment) and `last_ms` (when the last of them was stored)."""
    join = wanted_heads.outerjoin(
        heads,
        and_(
            heads.c.repo == wanted_heads.c.repo,
            heads.c.number == wanted_heads.c.number,
            heads.c.head_sha == wanted_heads.c.head_sha,
        ),
    )
    with reader.connect() as conn:
        out = {
            "heads": int(conn.execute(select(func.count()).select_from(heads)).scalar_one()),
            "wanted": int(conn.execute(select(func.count()).select_from(wanted_heads)).scalar_one()),
            "missing": int(
                conn.execute(select(func.count()).select_from(join).where(heads.c.head_sha.is_(None))).scalar_one()
            ),
        }
        if fetched_since_ms is not None:
            since, last = conn.execute(
                select(func.count(), func.max(heads.c.fetched_at)).where(heads.c.fetched_at >= fetched_since_ms)
            ).one()
            out["since"], out["last_ms"] = int(since), int(last or 0)
    return out


def ledger_counts(reader: Engine, inbox: Inbox | None, since_ms: int | None = None) -> dict[str, int]:
    """The ledger's deliveries by status (received at or after `since_ms`), the inbox's as pending (accepted,
    not yet moved into the ledger: tracker.store.inbox), and `stored`, their sum."""
    query = select(deliveries.c.status, func.count()).group_by(deliveries.c.status)
    if since_ms is not None:
        query = query.where(deliveries.c.received_at >= since_ms)
    with reader.connect() as conn:
        rows: dict[str, int] = {status: count for status, count in conn.execute(query)}
    if inbox is not None:
        rows["pending"] = rows.get("pending", 0) + inbox.count(received_since=since_ms)
    rows["stored"] = sum(rows.values())
    return rows


# --- the code measured ----------------------------------------------------------------------------------


def code_version() -> str:
    """The commit, and whether the work tree differs from it (the figures are of what is on disk)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True,
            timeout=10, check=True,
        ).stdout.splitlines()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    return f"{head}" + (f" + {len(changed)} modified files" if changed else "")
