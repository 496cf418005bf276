"""Ingest benchmark: signed ~25 KB pull_request deliveries POSTed over loopback to a real gunicorn.

The server is bench/ingest_app.py: tracker.server.WebServer (sync workers, as `tracker web`) serving
the tracker's app plus `POST /bare` (reads the body, answers 202, nothing else), the baseline of
every ratio, measured in the same server in the same run.

(a) Throughput: wrk (or, without wrk, a Python closed-loop client) with --connections concurrent
    connections for --duration seconds, /bare then /webhook, --repeats times; medians.
(b) Latency at a fixed offered rate (--rate/s, open loop, latency counted from each request's due
    time) for --rate-seconds, /bare then /webhook.
Then it checks the ledger: every delivery answered 202 must be stored.

Targets (issue): /webhook >= 1,000 deliveries/s; p99 < 30 ms at 500 deliveries/s.

    .venv/bin/python bench/ingest.py [--connections 16 --duration 10 --repeats 3 --rate 500]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import _load
from _stack import SECRET, Stack, load_note, wait_for
from _stories import plan_month, tell_many
from rq import Queue
from sqlalchemy import select

from tracker.queue import QUEUE_NAME
from tracker.store.schema import deliveries
from tracker.web.signature import sign

HERE = Path(__file__).resolve().parent
THROUGHPUT_TARGET = 1_000.0
P99_TARGET_MS = 30.0

WRK_SCRIPT = r"""
-- Written by bench/ingest.py: signed bodies, a unique X-GitHub-Delivery per request (GitHub's
-- signature covers only the body), and the ids of the deliveries answered 202.
local manifest, prefix, out_dir = "@MANIFEST@", "@PREFIX@", "@OUTDIR@"
local bodies, sigs = {}, {}
for line in io.lines(manifest) do
  local sig, path = line:match("^(%S+) (.+)$")
  local f = assert(io.open(path, "rb"))
  bodies[#bodies + 1] = f:read("*a")
  f:close()
  sigs[#sigs + 1] = sig
end

local threads = {}
function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

n, accepted, other = 0, 0, 0
local out
function init(args)
  out = assert(io.open(out_dir .. "/" .. prefix .. "-" .. tid .. ".ids", "w"))
  out:setvbuf("line")
end

function request()
  n = n + 1
  local k = (n % #bodies) + 1
  return wrk.format("POST", nil, {
    ["Content-Type"] = "application/json",
    ["User-Agent"] = "GitHub-Hookshot/bench",
    ["X-GitHub-Event"] = "pull_request",
    ["X-GitHub-Delivery"] = prefix .. "-" .. tid .. "-" .. n,
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
  local acc, oth = 0, 0
  for _, t in ipairs(threads) do
    acc = acc + t:get("accepted")
    oth = oth + t:get("other")
  end
  local e = summary.errors
  io.write(string.format(
    "BENCH requests=%d duration_us=%d accepted=%d other=%d connect=%d read=%d write=%d status=%d timeout=%d " ..
    "p50_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.duration, acc, oth, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""


@dataclass
class Throughput:
    path: str
    rates: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    redis_us: list[float] = field(default_factory=list)
    errors: int = 0
    not_202: int = 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_group_cpu(leader: int) -> float:
    """CPU seconds (user + system) used so far by `leader` and its live children (gunicorn workers)."""
    pids = [leader]
    with contextlib.suppress(OSError):
        pids += [int(p) for p in Path(f"/proc/{leader}/task/{leader}/children").read_text().split()]
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def healthy(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            return sock.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def make_payloads(count: int) -> list[_load.Payload]:
    """`count` distinct deliveries of a few real-titled PRs (opened, pushes, labels, merges)."""
    plans = plan_month("2026-04", max(1, count // 8), count, seed=7)
    return [_load.Payload(d.body, sign(SECRET.encode(), d.body)) for d in tell_many(plans)]


def run_wrk(
    work: Path, port: int, path: str, prefix: str, connections: int, threads: int, seconds: float
) -> dict[str, int]:
    script = work / f"{prefix}.lua"
    script.write_text(
        WRK_SCRIPT.replace("@MANIFEST@", str(work / "payloads.txt"))
        .replace("@PREFIX@", prefix)
        .replace("@OUTDIR@", str(work))
    )
    command = [
        "wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "5s",
        "-s", str(script), f"http://127.0.0.1:{port}{path}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("BENCH "):
            return {key: int(value) for key, value in (item.split("=") for item in line.split()[1:])}
    raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")


def accepted_ids_from_wrk(work: Path) -> set[str]:
    ids: set[str] = set()
    for file in work.glob("*.ids"):
        ids.update(line.strip() for line in file.read_text().splitlines() if line.strip())
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections (throughput)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per throughput run")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per path")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs per path (median)")
    parser.add_argument("--rate", type=float, default=500.0, help="offered deliveries/s of the latency run")
    parser.add_argument("--rate-seconds", type=float, default=20.0, help="seconds of each latency run")
    parser.add_argument("--processes", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto", help="throughput client")
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--payloads", type=int, default=64, help="distinct signed bodies to cycle through")
    parser.add_argument("--database-url", help="default: TRACKER_DATABASE_URL, else SQLite in a temp dir")
    parser.add_argument("--redis-url", help="default: REDIS_URL (must be empty), else an embedded Redis")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (ledger, logs)")
    args = parser.parse_args()

    client = args.client
    if client == "auto":
        client = "wrk" if shutil.which("wrk") else "python"
        if client == "python":
            print("note: wrk not found (apt-get install -y wrk); throughput from the Python client instead")
    elif client == "wrk" and not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: apt-get install -y wrk, or pass --client python")

    with Stack(args.database_url, args.redis_url, keep=args.keep) as stack:
        work = stack.directory / "load"
        work.mkdir()
        payloads = make_payloads(args.payloads)
        manifest = []
        for index, payload in enumerate(payloads):
            body_file = work / f"body-{index}.json"
            body_file.write_bytes(payload.body)
            manifest.append(f"{payload.signature} {body_file}")
        (work / "payloads.txt").write_text("\n".join(manifest) + "\n")
        size = statistics.mean(len(p.body) for p in payloads)

        port = free_port()
        log = stack.directory / "gunicorn.log"
        server = stack.spawn(
            [sys.executable, str(HERE / "ingest_app.py"), "--port", str(port), "--processes", str(args.processes)],
            log=log,
        )
        if not wait_for(lambda: healthy(port) or server.poll() is not None, 30) or server.poll() is not None:
            print(log.read_text()[-3000:])
            raise SystemExit("the bench server did not come up")
        print(
            f"ingest: gunicorn sync × {args.processes} on 127.0.0.1:{port}, ledger {stack.database_url.split(':')[0]}, "
            f"redis {'embedded' if stack.embedded else 'REDIS_URL'}, {len(payloads)} bodies of "
            f"{size / 1024:.1f} KB avg, "
            f"client {client}; {load_note()}"
        )
        redis_process = getattr(stack.embedded, "_process", None)
        redis_pid = redis_process.pid if redis_process is not None else None

        # --- (a) throughput --------------------------------------------------------------------
        results = {path: Throughput(path) for path in ("/bare", "/webhook")}
        python_accepted: set[str] = set()
        run_id = uuid.uuid4().hex[:8]
        for repeat in range(args.repeats + 1):  # round 0 is the warm-up
            seconds = args.warmup if repeat == 0 else args.duration
            if seconds <= 0:
                continue
            for path, result in results.items():
                prefix = f"{run_id}{path.strip('/')[0]}{repeat}"
                cpu0 = process_group_cpu(server.pid)
                redis0 = process_group_cpu(redis_pid) if redis_pid else 0.0
                if client == "wrk":
                    figures = run_wrk(work, port, path, prefix, args.connections, args.wrk_threads, seconds)
                    requests, elapsed = figures["requests"], figures["duration_us"] / 1e6
                    errors = sum(figures[k] for k in ("connect", "read", "write", "timeout"))
                    not_202 = figures["other"]
                    p50, p99 = figures["p50_us"] / 1000, figures["p99_us"] / 1000
                else:
                    started = time.monotonic()
                    done = _load.run(
                        "127.0.0.1", port, path, payloads, prefix, count=10**7, duration=seconds, rate=None,
                        processes=2, threads=max(1, args.connections // 2),
                    )  # fmt: skip
                    elapsed = time.monotonic() - started - 0.3
                    requests = sum(1 for r in done if r.status)
                    errors = sum(1 for r in done if not r.status)
                    not_202 = sum(1 for r in done if r.status and r.status != 202)
                    latencies = [r.finished - r.started for r in done if r.status]
                    p50, p99 = (_load.percentile(latencies, q) * 1000 for q in (50, 99))
                    if path == "/webhook":
                        python_accepted.update(_load.delivery_id(prefix, r.slot) for r in done if r.status == 202)
                cpu = process_group_cpu(server.pid) - cpu0
                redis_cpu = process_group_cpu(redis_pid) - redis0 if redis_pid else float("nan")
                if repeat == 0:
                    continue
                result.rates.append(requests / elapsed)
                result.p50_ms.append(p50)
                result.p99_ms.append(p99)
                result.cpu_us.append(cpu / max(1, requests) * 1e6)
                result.redis_us.append(redis_cpu / max(1, requests) * 1e6)
                result.errors += errors
                result.not_202 += not_202
                print(
                    f"  run {repeat} {path:<9} {requests / elapsed:8,.0f} req/s  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  "
                    f"server CPU {cpu / max(1, requests) * 1e6:5.0f} µs/req  errors {errors}  non-202 {not_202}"
                )
        wrk_accepted = accepted_ids_from_wrk(work) if client == "wrk" else set()

        bare, hook = results["/bare"], results["/webhook"]
        bare_rate = statistics.median(bare.rates)
        print(
            f"(a) throughput, {args.connections} connections, {args.duration:g} s × {args.repeats} runs, "
            f"medians ({client}):"
        )
        for result in (bare, hook):
            rate = statistics.median(result.rates)
            verdict = ""
            if result is hook:
                verdict = f"  target >= {THROUGHPUT_TARGET:,.0f}/s: {'PASS' if rate >= THROUGHPUT_TARGET else 'FAIL'}"
            print(
                f"throughput {result.path:<9} {rate:8,.0f} req/s  {rate / bare_rate:5.2f} × bare  "
                f"closed-loop p50 {statistics.median(result.p50_ms):6.2f} ms p99 "
                f"{statistics.median(result.p99_ms):6.2f} ms  "
                f"server CPU {statistics.median(result.cpu_us):5.0f} µs/req "
                f"({statistics.median(result.cpu_us) / statistics.median(bare.cpu_us):4.2f} × bare), "
                f"Redis CPU {statistics.median(result.redis_us):4.0f} µs/req  "
                f"errors {result.errors} non-202 {result.not_202}{verdict}"
            )

        # --- (b) latency at a fixed offered rate -----------------------------------------------
        count = int(args.rate * args.rate_seconds)
        paced: dict[str, dict[str, float]] = {}
        paced_prefix = f"{run_id}paced"
        paced_accepted: set[str] = set()
        for path in ("/bare", "/webhook"):
            prefix = f"{paced_prefix}{path.strip('/')[0]}"
            done = _load.run(
                "127.0.0.1", port, path, payloads, prefix, count=count, duration=args.rate_seconds + 5,
                rate=args.rate, processes=2, threads=16,
            )  # fmt: skip
            answered = [r for r in done if r.status]
            latencies = [r.latency for r in answered]
            span = max(r.due for r in done) - min(r.due for r in done) if len(done) > 1 else 1.0
            paced[path] = {
                "sent": len(done),
                "rate": (len(done) - 1) / span if span else 0.0,
                "p50": _load.percentile(latencies, 50) * 1000,
                "p99": _load.percentile(latencies, 99) * 1000,
                "p999": _load.percentile(latencies, 99.9) * 1000,
                "max": max(latencies) * 1000 if latencies else float("nan"),
                "errors": len(done) - len(answered),
                "not_202": sum(1 for r in answered if r.status != 202),
            }
            if path == "/webhook":
                paced_accepted = {_load.delivery_id(prefix, r.slot) for r in done if r.status == 202}
        print(f"(b) latency at {args.rate:g} deliveries/s offered, {args.rate_seconds:g} s, open loop, from due time:")
        for path, seen in paced.items():
            ratio = seen["p99"] / paced["/bare"]["p99"]
            verdict = ""
            if path == "/webhook":
                verdict = f"  target p99 < {P99_TARGET_MS:g} ms: {'PASS' if seen['p99'] < P99_TARGET_MS else 'FAIL'}"
            print(
                f"latency {path:<9} {seen['sent']:6,.0f} sent at {seen['rate']:5.0f}/s  p50 "
                f"{seen['p50']:6.2f} ms "
                f"({seen['p50'] / paced['/bare']['p50']:4.2f} × bare)  p99 {seen['p99']:6.2f} ms "
                f"({ratio:4.2f} × bare)  "
                f"p99.9 {seen['p999']:6.2f} ms  max {seen['max']:6.1f} ms  errors {seen['errors']:.0f} "
                f"non-202 {seen['not_202']:.0f}{verdict}"
            )

        # --- nothing lost ----------------------------------------------------------------------
        stack.stop(server)
        with stack.engine.connect() as conn:
            stored = set(conn.execute(select(deliveries.c.id)).scalars())
        accepted = wrk_accepted | python_accepted | paced_accepted
        missing = accepted - stored
        unread = stored - accepted
        paced_stored = {i for i in stored if i.startswith(paced_prefix + "w")}
        connection = stack.redis()
        queued = Queue(QUEUE_NAME, connection=connection).count
        connection.close()
        max_unread = args.connections * (args.repeats + 1)
        print(
            f"ledger: {len(accepted):,} deliveries answered 202, {len(stored):,} rows stored, "
            f"{len(missing)} answered-but-missing ({'PASS' if not missing else 'FAIL: deliveries lost'}); "
            f"{len(unread)} stored without a 202 read by the client (in flight when a timed run stopped, "
            f"at most {max_unread}: {'ok' if len(unread) <= max_unread else 'UNEXPECTED'})"
        )
        print(
            f"ledger, paced /webhook run: {len(paced_accepted):,} answered 202 = {len(paced_stored):,} stored: "
            f"{'PASS' if paced_accepted == paced_stored else 'FAIL'}; jobs queued in Redis {queued:,} for "
            f"{len(stored):,} stored ({'PASS' if queued == len(stored) else 'MISMATCH'})"
        )
        ok = not missing and paced_accepted == paced_stored
        print(f"ingest: done; {load_note()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
