"""Past cutoffs benchmark: the first request for any cutoff of an ended month, from `tracker run` (issue 33).

bench/snapshot.py measures the request at a past cutoff in the state its own run of the warm job leaves
(the month's digest and the grouping of every cutoff kept in Redis). This script asks whether the service
as users run it reaches that state: it measures, from the client's side, what a reader gets who opens a
past cutoff of the busy month for the first time.

`tracker run` is started the README's way (embedded defaults: SQLite ledger and Redis under a temporary
TRACKER_DATA_DIR, a webhook secret, a free port, `--workers` RQ workers and `--web-processes` web
processes); its workers fetch PR heads' files from the local fake GitHub of bench/service.py
(bench/_fake_github_server.py), which answers at once. Then:

1. The month: bench/snapshot.py's month (--month, default 2026-04, which has ended, so every day is a
   cutoff; --prs 1,419 PRs, --deliveries 11,894 deliveries, bench/_stories.py with its seed) but the
   deliveries of its last --late-days days (UTC), each delivery a signed POST /webhook in the stories'
   time order, closed loop with --connections connections; then the wait until classification has
   finished (every delivery processed in the ledger, every head the deliveries showed has its files, the
   `deliveries` and `github` queues idle) and until the workers have warmed the month (its digest kept at
   its current version, the `records` queue idle): the month as it rests.
   The burst: the deliveries of its last --late-days days (1,591 of the 11,894), the same way, and the wait until
   classification has finished. They change the month's last cutoffs and, through the month's version,
   what every cutoff's digest is kept under: a request reads again the PRs they changed.
   (Right after a replay of the whole month, every PR changed since any digest: the first request of a
   cutoff then reads its window from the database and groups its sections, 200-600 ms on this machine,
   until the warm job runs, 10 s after classification ends.)
2. Right after the burst: at once, --per-phase cutoff days in a seeded random order (the month's last
   day and the 15th among them; one day of each of --per-phase pairs of neighbouring days, the other
   day of each pair being asked at rest, so that both phases ask cutoffs of the same sizes), each asked
   for the first time in both formats: the JSON (`GET /api/v1/repos/<o>/<r>/months/<M>?cutoff=<day>`)
   and the Markdown (`GET /reports/<o>/<r>/<M>.md?cutoff=<day>`). Half the days start with the Markdown
   (alternate pairs by date), so that each format is the first request at its cutoff for days of every
   size. Each (cutoff, format) is asked once, on a new connection, timed from before the connect to the
   last byte of the answer.
3. At rest: --rest seconds with no delivery, then the other day of each pair, never asked before, the
   same way.

Baseline, same run: each document asked a second time right after its first answer (the render
cache's answer, the same bytes), and GET /healthz before each phase. Figures: p50, min and max per
format, with the ratio of the p50 to the cache's; judged on the requests that were the first at their
cutoff, and shown also over every first request of the format (the second format of a day finds the
grouping the first one kept). Also shown: how long the service took to process the deliveries and to
classify every head, and what the jobs of the `records` queue (the warm job, a finalisation the
schedule queues) did and when, from RQ's finished registry; before each phase, what Redis holds for
requests (digests, groupings, rendered documents) and the month's version against the version of the
digest the warm job kept, with the PRs changed since (a request reads those again, or its window whole:
tracker.reports.digests); a request answered from the month's record (`X-Tracker-Record`: the schedule
finalises an ended month once its deliveries and files are in) is marked.

Targets (issue 33): the first request for any cutoff, right after a burst and at rest: JSON p50 at most
150 ms, Markdown p50 at most 100 ms.

    .venv/bin/python bench/past_cutoffs.py            # about 3 minutes on 2 cores
    .venv/bin/python bench/past_cutoffs.py --quick    # a quarter of the month, 30 s of rest: about 1 minute
"""

from __future__ import annotations

import argparse
import calendar
import http.client
import json
import os
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from urllib.parse import quote

import _load
from _service import (
    FakeGitHub,
    Finished,
    Service,
    code_version,
    finished_jobs,
    free_port,
    head_counts,
    ledger_counts,
    queue_jobs,
)
from _stack import SECRET, Stack, load_note, tracker_command
from _stories import REPO, ROOT, plan_months, stories
from redis import Redis

from tracker.core.repository import repository_key
from tracker.embedded_redis import EmbeddedRedis
from tracker.queue import GITHUB_QUEUE_NAME, QUEUE_NAME, RECORDS_QUEUE_NAME
from tracker.store.changes import changes_since
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState
from tracker.web.signature import sign

TARGET_MS = {"json": 150.0, "md": 100.0}
FORMATS = ("json", "md")
GITHUB_TOKEN = "bench-dummy-token"  # the fake GitHub takes any token
SEED = 5  # bench/snapshot.py's: the same month


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


@dataclass(frozen=True)
class Answer:
    status: int
    ms: float
    size: int
    record: bool  # answered from the month's record (X-Tracker-Record)


def timed_get(port: int, path: str, timeout: float = 120.0) -> Answer:
    """GET `path` on a new connection; the time from before the connect to the answer's last byte."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    ms = (time.perf_counter() - started) * 1000
    return Answer(response.status, ms, len(body), response.getheader("X-Tracker-Record") is not None)


def document_path(month: str, day: str, fmt: str) -> str:
    owner, repo = (quote(part) for part in REPO.split("/"))
    if fmt == "json":
        return f"/api/v1/repos/{owner}/{repo}/months/{month}?cutoff={day}"
    return f"/reports/{owner}/{repo}/{month}.{fmt}?cutoff={day}"


@dataclass(frozen=True)
class Asked:
    day: str
    fmt: str
    first_at_day: bool  # the first request of any format at this cutoff
    first: Answer
    again: Answer  # the same URL at once: the render cache's answer


def month_payloads(month: str, prs: int, count: int, late_days: int) -> tuple[list[_load.Payload], list[_load.Payload]]:
    """bench/snapshot.py's month (same plan and seed), signed, in the stories' time order: the deliveries of
    events before the month's last `late_days` days (UTC), and those of events from then on."""
    plans = plan_months([month], prs, count, seed=SEED)
    built = [delivery for chunk in stories(plans, processes=2) for delivery in chunk]
    built.sort(key=lambda d: (d.received_at, d.id))
    year, number = (int(part) for part in month.split("-"))
    last = calendar.monthrange(year, number)[1]
    cut = calendar.timegm((year, number, last - late_days + 1, 0, 0, 0)) * 1000
    secret = SECRET.encode()
    payloads = [(d.received_at < cut, _load.Payload(d.body, sign(secret, d.body))) for d in built]
    return [p for early, p in payloads if early], [p for early, p in payloads if not early]


def pick_days(month: str, per_phase: int, seed: int) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """The cutoff days of the two phases, each in a seeded random order, with whether the day's JSON is asked
    before its Markdown: `per_phase` pairs of neighbouring days (counted from the month's end), one day of
    each pair asked right after the burst and the other at rest, so that both phases ask days of the same
    sizes (a later cutoff holds more PRs); the pairs by date start with the JSON and the Markdown in turn,
    so that each format is the first at days of every size. The pairs of the last day and of the 15th are
    always taken, those two days right after the burst."""
    year, number = (int(part) for part in month.split("-"))
    days = [date(year, number, day).isoformat() for day in range(calendar.monthrange(year, number)[1], 0, -1)]
    pairs = [days[i : i + 2] for i in range(0, len(days) - 1, 2)]
    if not 2 <= per_phase <= len(pairs):
        raise SystemExit(f"--per-phase {per_phase}: {month} has {len(pairs)} pairs of days, give 2 to {len(pairs)}")
    rng = random.Random(seed)
    forced = {days[0], f"{month}-15"}
    chosen = [pair for pair in pairs if forced & set(pair)]
    chosen += rng.sample([pair for pair in pairs if pair not in chosen], per_phase - len(chosen))
    burst, rest = [], []
    for index, pair in enumerate(sorted(chosen)):
        first, second = pair if pair[0] in forced or (pair[1] not in forced and rng.random() < 0.5) else pair[::-1]
        burst.append((first, index % 2 == 0))
        rest.append((second, index % 2 == 0))
    rng.shuffle(burst)
    rng.shuffle(rest)
    return burst, rest


class Bench:
    def __init__(self, args: argparse.Namespace, stack: Stack, port: int) -> None:
        self.args, self.stack, self.port = args, stack, port
        self.reader = stack.engine.execution_options(read_only=True)  # no BEGIN IMMEDIATE
        self.inbox = Ledger(stack.engine).inbox
        self.redis = Redis.from_url(EmbeddedRedis(stack.data_dir).url)  # `tracker run`'s
        self.results: list[tuple[str, str, str, bool]] = []
        self.failed: list[str] = []  # requests not answered 200, "<phase>: GET <path> answered ..."
        self.jobs_shown: set[Finished] = set()
        self.burst_wall = 0.0  # epoch seconds the burst began: every time below is counted from it
        self.burst_mono = 0.0

    def since(self) -> float:
        return time.monotonic() - self.burst_mono

    def burst(self, name: str, payloads: Sequence[_load.Payload], stored_before: int = 0) -> None:
        args = self.args
        print(
            f"{name}: {len(payloads):,} deliveries of {args.month} (~{len(payloads[0].body) / 1024:.0f} KB each), "
            f"POST /webhook in time order, closed loop with {args.connections} connections; {load_note()}"
        )
        self.burst_wall, self.burst_mono = time.time(), time.monotonic()
        self.jobs_shown.clear()
        done = _load.run(
            "127.0.0.1", self.port, "/webhook", payloads, f"b{os.getpid()}-{stored_before}", count=len(payloads),
            duration=1800, rate=None, processes=2, threads=max(1, args.connections // 2),
        )  # fmt: skip
        seconds = self.since()
        statuses = Counter(r.status for r in done)
        latencies = [r.finished - r.started for r in done if r.status]
        print(
            f"  sent in {seconds:.1f} s = {len(done) / seconds:,.0f}/s; statuses {dict(sorted(statuses.items()))}; "
            f"answer p50 {_load.percentile(latencies, 50) * 1000:.1f} ms, "
            f"p99 {_load.percentile(latencies, 99) * 1000:.1f} ms"
        )
        if statuses[202] != len(payloads):
            raise SystemExit(f"{len(payloads) - statuses[202]:,} deliveries not answered 202: the month is incomplete")
        self.settle(stored_before + len(payloads), seconds)

    def warmed(self, timeout: float = 600.0) -> None:
        """Wait until the month is at rest as the workers leave it: its digest kept at its current version
        and nothing running or waiting in the `records` queue but scheduled jobs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            waiting = queue_jobs(self.redis, RECORDS_QUEUE_NAME)
            if waiting["queued"] + waiting["started"] == 0 and self.digest_note().endswith("PRs changed since: none"):
                print(f"  warmed at {self.since():.1f} s: {self.digest_note()}")
                return
            time.sleep(1.0)
        raise SystemExit(f"the month was not warmed within {timeout:g} s: {self.digest_note()}")

    def settle(self, sent: int, burst_seconds: float) -> None:
        """Wait until classification has finished; say when each part of it did."""
        moments: dict[str, float] = {}
        deadline = time.monotonic() + self.args.settle_timeout
        while time.monotonic() < deadline:
            counts = ledger_counts(self.reader, self.inbox)
            heads = head_counts(self.reader)
            github, drains = queue_jobs(self.redis, GITHUB_QUEUE_NAME), queue_jobs(self.redis, QUEUE_NAME)
            processed = counts["stored"] >= sent and counts.get("pending", 0) == 0
            if processed:
                moments.setdefault("processed", self.since())
            classified = processed and heads["missing"] == 0 and heads["wanted"] > 0
            if classified:
                moments.setdefault("classified", self.since())
            idle = github["queued"] + github["started"] + drains["queued"] + drains["started"] == 0
            if classified and idle:
                moments["settled"] = self.since()
                break
            time.sleep(0.25)
        else:
            raise SystemExit(
                f"classification did not finish within {self.args.settle_timeout:g} s: ledger {counts}, "
                f"heads {heads}, github jobs {github}, deliveries jobs {drains}"
            )
        print(
            f"  every delivery processed {moments['processed']:.1f} s after the burst began "
            f"({moments['processed'] - burst_seconds:.1f} s after its last answer); statuses "
            + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()) if k != "stored")
        )
        print(
            f"  classification finished (every one of {heads['wanted']:,} heads with its files) at "
            f"{moments['classified']:.1f} s, queues `deliveries` and `github` idle at {moments['settled']:.1f} s "
            f"({moments['settled'] - burst_seconds:.1f} s after the burst's last answer)"
        )

    def records_jobs(self, note: str) -> None:
        """What the `records` queue's jobs did since the burst began (the warm job, finalisations), and what
        waits in it."""
        jobs = sorted(finished_jobs(self.redis, RECORDS_QUEUE_NAME, self.burst_wall), key=lambda job: job.ended)
        new = [job for job in jobs if job not in self.jobs_shown]
        self.jobs_shown.update(new)
        waiting = queue_jobs(self.redis, RECORDS_QUEUE_NAME)
        print(
            f"  `records` queue {note}: {waiting['queued']} queued, {waiting['started']} running, "
            f"{waiting['scheduled']} scheduled; finished since the burst began: {len(jobs) or 'none'}"
            + (f" ({len(new) or 'none'} since the last look)" if len(new) < len(jobs) else "")
        )
        for job in new:
            print(
                f"    {job.function.rsplit('.', 1)[-1]:<14} {job.started - self.burst_wall:7.1f} s to "
                f"{job.ended - self.burst_wall:7.1f} s ({job.ended - job.started:5.1f} s): {job.value}"
            )

    def kept(self) -> str:
        """What the service keeps in Redis for requests (tracker.reports: cache, digests, groupings)."""
        counts = {
            what: sum(1 for _ in self.redis.scan_iter(match=pattern, count=1000))
            for what, pattern in (
                ("digests", "tracker:digest:*"),
                ("groupings", "tracker:grouping:*"),
                ("rendered documents", "tracker:render:*"),
            )
        }
        return ", ".join(f"{count:,} {what}" for what, count in counts.items())

    def digest_note(self) -> str:
        """The month's version now against the version of the digest the warm job kept: a request brings that
        digest up to date by reading again the PRs changed since, or reads its window whole when a change is
        not recorded or most of the month changed (tracker.reports.digests)."""
        month = self.args.month
        version, _ = MonthState(self.stack.engine).month_version(REPO, month)
        bases = [json.loads(value) for key in self.redis.scan_iter(match=f"tracker:digest-base:*:{month}:*")
                 if (value := self.redis.get(key)) is not None]  # fmt: skip
        if not bases:
            return f"{month} at version {version:,}, no digest kept"
        base = max(bases, key=lambda item: int(item["version"]))
        with self.reader.connect() as conn:
            _, changed = changes_since(conn, repository_key(REPO), month, int(base["version"]))
        since = "none" if version <= base["version"] else "not recorded" if changed is None else f"{len(changed):,}"
        return (
            f"{month} at version {version:,}, its digest kept at version {base['version']:,} (read through "
            f"{base['through']:,}), PRs changed since: {since}"
        )

    def healthz(self, runs: int = 10) -> float:
        """p50 ms of GET /healthz: the service's smallest answer."""
        return statistics.median(timed_get(self.port, "/healthz").ms for _ in range(runs))

    def phase(self, name: str, days: Sequence[tuple[str, bool]]) -> None:
        args = self.args
        health = self.healthz()
        print(
            f"{name}: {len(days)} cutoffs, {self.since():.1f} s after the burst began; GET /healthz p50 "
            f"{health:.1f} ms; Redis holds {self.kept()}; {load_note()}"
        )
        print(f"  {self.digest_note()}")
        asked: list[Asked] = []
        for day, json_first in days:
            order = FORMATS if json_first else FORMATS[::-1]
            at = self.since()
            row = []
            for position, fmt in enumerate(order):
                path = document_path(args.month, day, fmt)
                first = timed_get(self.port, path)
                again = timed_get(self.port, path)
                if first.status != 200 or again.status != 200:
                    self.failed.append(f"{name}: GET {path} answered {first.status} then {again.status}")
                    row.append(f"{fmt:<4} answered {first.status} then {again.status}")
                    continue
                asked.append(Asked(day, fmt, position == 0, first, again))
                row.append(
                    f"{fmt:<4} {first.ms:7.1f} ms (again {again.ms:5.1f} ms, {first.size / 1024:4.0f} KB"
                    f"{', the record' if first.record else ''})"
                )
            print(
                f"  {day}{' (last day)' if day.endswith(self.last_day) else '':<11} at {at:6.1f} s  " + "   ".join(row)
            )
        failed = sum(line.startswith(f"{name}:") for line in self.failed)
        if failed:
            print(f"{name}: {failed} requests not answered 200 (each fails the phase's targets)")
        for fmt in FORMATS:
            if not any(a.fmt == fmt for a in asked):
                self.results.append((f"{name}, {fmt}", "no request answered 200", f"<= {TARGET_MS[fmt]:g} ms", False))
                continue
            cached = statistics.median(a.again.ms for a in asked if a.fmt == fmt)
            for what, chosen in (
                ("first at its cutoff", [a for a in asked if a.fmt == fmt and a.first_at_day]),
                ("every first request", [a for a in asked if a.fmt == fmt]),
            ):
                times = [a.first.ms for a in chosen] or [float("nan")]
                p50 = statistics.median(times)
                judged = what == "first at its cutoff"
                ok = p50 <= TARGET_MS[fmt] and not failed
                mark = f"  target p50 <= {TARGET_MS[fmt]:g} ms: {verdict(ok)}" if judged else ""
                records = sum(a.first.record for a in chosen)
                print(
                    f"{name} {fmt:<4} {what:<20} n={len(times):>2}  p50 {p50:7.1f} ms  min {min(times):7.1f} ms  "
                    f"max {max(times):7.1f} ms  {p50 / cached:5.1f} × the cache's {cached:.1f} ms "
                    f"({p50 / health:5.1f} × /healthz)" + (f"; {records} from the record" if records else "") + mark
                )
                if judged:
                    self.results.append(
                        (f"{name}, {fmt}", f"p50 {p50:.1f} ms (max {max(times):.1f} ms, n={len(times)})",
                         f"<= {TARGET_MS[fmt]:g} ms", ok)
                    )  # fmt: skip

    @property
    def last_day(self) -> str:
        year, number = (int(part) for part in self.args.month.split("-"))
        return f"-{calendar.monthrange(year, number)[1]:02d}"

    def rest(self) -> None:
        before = ledger_counts(self.reader, self.inbox)
        print(f"rest: {self.args.rest:g} s with no delivery, from {self.since():.1f} s after the burst began")
        time.sleep(self.args.rest)
        after = ledger_counts(self.reader, self.inbox)
        if after != before:
            print(f"  note: the ledger changed while at rest: {before} -> {after}")

    def summary(self, log: Path) -> None:
        print("summary (this run, this machine):")
        for what, figure, target, ok in self.results:
            print(f"  {what:<28} {figure:<40} target {target:<10} {verdict(ok)}")
        if self.failed:
            print("requests not answered 200:\n  " + "\n  ".join(self.failed))
            print(f"the service's first traceback ({log.name}):\n{first_traceback(log)}")


def first_traceback(log: Path, lines: int = 40) -> str:
    text = log.read_text(errors="replace").splitlines()
    start = next((i for i, line in enumerate(text) if line.startswith("Traceback")), None)
    if start is None:
        return "  (none in the log)"
    return "\n".join(text[max(0, start - 2) : start + lines])


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a quarter of the month, 6 cutoffs a phase, 30 s rest")
    parser.add_argument("--month", default="2026-04", help="an ended month (every day a cutoff)")
    parser.add_argument("--prs", type=int, help="PRs of the month (1,419; quick 355)")
    parser.add_argument("--deliveries", type=int, help="deliveries of the month (11,894; quick 2,974)")
    parser.add_argument("--per-phase", type=int, help="cutoff days asked in each phase (15; quick 6)")
    parser.add_argument("--rest", type=float, help="seconds at rest before the second phase (90; quick 30)")
    parser.add_argument("--seed", type=int, default=33, help="the order of the cutoffs")
    parser.add_argument(
        "--late-days", type=int, default=2, help="the month's last days whose deliveries are the burst (2)"
    )
    parser.add_argument("--connections", type=int, default=4, help="connections of the burst")
    parser.add_argument("--settle-timeout", type=float, default=900.0, help="seconds to wait for classification")
    parser.add_argument("--workers", type=int, default=2, help="tracker run --workers (RQ worker processes)")
    parser.add_argument("--web-processes", type=int, default=2, help="tracker run --web-processes")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (ledger, logs)")
    args = parser.parse_args()
    defaults = {"prs": 355, "deliveries": 2974, "per_phase": 6, "rest": 30.0} if args.quick else {
        "prs": 1419, "deliveries": 11894, "per_phase": 15, "rest": 90.0,
    }  # fmt: skip
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main() -> int:
    args = parse()
    for name in ("TRACKER_DATABASE_URL", "REDIS_URL"):  # the README's way: the embedded defaults
        os.environ.pop(name, None)
    started = time.monotonic()
    burst_days, rest_days = pick_days(args.month, args.per_phase, args.seed)
    built = time.monotonic()
    early, late = month_payloads(args.month, args.prs, args.deliveries, args.late_days)
    print(
        f"past cutoffs: {len(early) + len(late):,} deliveries of {args.prs:,} PRs of {args.month} built in "
        f"{time.monotonic() - built:.0f} s (bench/snapshot.py's month"
        f"{'; --quick: a quarter of it, not the issue month' if args.quick else ''}); code {code_version()}; "
        f"{load_note()}"
    )
    with Stack(with_redis=False, keep=args.keep) as stack:
        github = FakeGitHub(stack, stack.database_url)
        stack.env.update(GITHUB_API_URL=github.url, GITHUB_TOKEN=GITHUB_TOKEN)
        port = free_port()
        command = [
            *tracker_command(), "run", "--port", str(port), "--workers", str(args.workers),
            "--web-processes", str(args.web_processes),
        ]  # fmt: skip
        service = Service(command, stack.env, stack.directory / "tracker-run.log", ROOT)
        try:
            up = service.start(port)
            print(
                f"service: `tracker {' '.join(command[command.index('run') :])}` answered /healthz after {up:.1f} s; "
                f"TRACKER_DATA_DIR {stack.data_dir} (SQLite ledger, embedded Redis); head files from "
                f"bench/_fake_github_server.py at {github.url}"
            )
            bench = Bench(args, stack, port)
            bench.burst(f"the month but its last {args.late_days} days", early)
            bench.records_jobs("when classification had finished")
            bench.warmed()
            bench.burst(f"the burst: the deliveries of its last {args.late_days} days", late, len(early))
            del early, late
            bench.records_jobs("when classification had finished")
            bench.phase("right after the burst", burst_days)
            bench.records_jobs("after the first phase")
            bench.rest()
            bench.records_jobs("after the rest")
            bench.phase("at rest", rest_days)
            bench.summary(service.log)
            ok = all(result[3] for result in bench.results)
            print(f"whole run {time.monotonic() - started:.0f} s; {load_note()}")
        finally:
            by_hand = service.close()
            print(
                "service stopped"
                + (f"; left running by `tracker run` and stopped here: {', '.join(by_hand)}" if by_hand else
                   ", nothing left running")
            )  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
