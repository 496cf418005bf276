"""Worker benchmark: how fast `tracker worker --burst` turns stored deliveries into facts.

--deliveries deliveries of realistic PR lives (bench/_stories.py, ~24 KB each) are stored with
Ledger.store and enqueued with tracker.queue.enqueue_deliveries; then 1, and then 2, `tracker worker
--burst` processes run as subprocesses (TRACKER_DATA_DIR / TRACKER_DATABASE_URL / REDIS_URL set),
timed from their start until the ledger shows every delivery processed.

Baseline, same run, same Redis: as many no-op RQ jobs enqueued with the same options and run by the
same number of SimpleWorker burst processes (bench/_noop_jobs.py). Ratio = tracker / no-op.

    .venv/bin/python bench/worker.py [--deliveries 5000 --processes 1 2]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _noop_jobs import QUEUE_NAME as NOOP_QUEUE
from _noop_jobs import enqueue_noops
from _stack import Stack, load_note, tracker_command
from _stories import ledger_delivery, plan_month, stories
from rq import Queue
from rq.registry import FinishedJobRegistry, StartedJobRegistry
from sqlalchemy import func, select, update

from tracker.queue import delivery_queue, enqueue_deliveries
from tracker.store.ledger import PENDING, Ledger
from tracker.store.month_state import MonthState
from tracker.store.schema import deliveries, pr_facts, pr_versions

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Drain:
    """One timed burst: from spawning the workers to the last item done, then to an idle queue."""

    items: int
    seconds: float  # spawn -> last item done
    steady_seconds: float  # first item done seen -> last item done
    first_seen: int
    idle_after: float  # spawn -> the measured queue empty, no job of it running (duplicates included)
    jobs_run: dict[str, int]  # by queue
    requeued_by_sweep: int

    @property
    def rate(self) -> float:
        return self.items / self.seconds

    @property
    def steady_rate(self) -> float:
        return (self.items - self.first_seen) / self.steady_seconds if self.steady_seconds > 0 else float("nan")


def queue_idle(queue: Queue) -> Callable[[], bool]:
    registry = StartedJobRegistry(queue=queue, connection=queue.connection)
    return lambda: queue.count == 0 and registry.count == 0


def drain(
    stack: Stack,
    command: list[str],
    processes: int,
    done_count: Callable[[], int],
    items: int,
    idle: Callable[[], bool],
    logs: Path,
    timeout: float,
) -> Drain:
    """Run burst workers until `items` are done and the measured queue is idle, then stop them
    (other queues, such as the GitHub fetches, are not waited for)."""
    logs.mkdir(exist_ok=True)
    started = time.monotonic()
    children = [stack.spawn(command, log=logs / f"worker-{n}.log") for n in range(processes)]
    first_at = finished_at = idle_at = None
    first_seen = 0
    deadline = started + timeout
    while time.monotonic() < deadline:
        now = time.monotonic()
        if finished_at is None:
            count = done_count()
            if count and first_at is None:
                first_at, first_seen = now, count
            if count >= items:
                finished_at = now
        if finished_at is not None and idle():
            idle_at = time.monotonic()
            break
        if all(child.poll() is not None for child in children):
            break
        time.sleep(0.05)
    for child in children:
        stack.stop(child)  # SIGTERM: RQ finishes the job in hand, then exits
    if finished_at is None:
        tail = "\n".join((logs / f"worker-{n}.log").read_text()[-1500:] for n in range(processes))
        raise SystemExit(f"only {done_count()} of {items} done within {timeout:.0f} s; worker logs:\n{tail}")
    text = "\n".join((logs / f"worker-{n}.log").read_text() for n in range(processes))
    requeued = sum(int(m) for m in re.findall(r"sweep re-enqueued (\d+) pending", text))
    return Drain(
        items=items,
        seconds=finished_at - started,
        steady_seconds=finished_at - (first_at or started),
        first_seen=first_seen,
        idle_after=(idle_at or time.monotonic()) - started,
        jobs_run=dict(Counter(re.findall(r": ([\w-]+): Job OK", text))),
        requeued_by_sweep=requeued,
    )


def jobs_text(jobs: dict[str, int]) -> str:
    return ", ".join(f"{n:,} on {queue}" for queue, n in sorted(jobs.items())) or "none"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deliveries", type=int, default=5000)
    parser.add_argument("--prs", type=int, default=0, help="PRs the deliveries belong to (default: deliveries / 20)")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2], help="worker process counts to run")
    parser.add_argument("--timeout", type=float, default=240.0, help="give up on one burst after this many seconds")
    parser.add_argument("--database-url", help="default: TRACKER_DATABASE_URL, else SQLite in a temp dir")
    parser.add_argument("--redis-url", help="default: REDIS_URL (must be empty), else an embedded Redis")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (ledger, worker logs)")
    args = parser.parse_args()
    count = args.deliveries
    prs = args.prs or max(1, count // 20)

    with Stack(args.database_url, args.redis_url, keep=args.keep) as stack:
        ledger, state = Ledger(stack.engine), MonthState(stack.engine)
        started = time.monotonic()
        generated = [d for part in stories(plan_month("2026-04", prs, count, seed=3), processes=2) for d in part]
        generated.sort(key=lambda d: (d.received_at, d.id))  # jobs interleave PRs, as live traffic does
        made = time.monotonic() - started
        started = time.monotonic()
        for item in generated:
            ledger.store(ledger_delivery(item))
        stored = time.monotonic() - started
        ids = [item.id for item in generated]
        size = sum(len(item.body) for item in generated) / len(generated)
        del generated
        print(
            f"worker: {count:,} deliveries of {prs:,} PRs ({size / 1024:.1f} KB avg) built in {made:.1f} s, "
            f"stored with "
            f"Ledger.store in {stored:.1f} s ({count / stored:,.0f}/s); ledger {stack.database_url.split(':')[0]}, "
            f"redis {'embedded' if stack.embedded else 'REDIS_URL'}; {load_note()}"
        )
        connection = stack.redis()
        noop_queue = Queue(NOOP_QUEUE, connection=connection)
        tracker_queue = delivery_queue(connection)
        noop_done = FinishedJobRegistry(queue=noop_queue, connection=connection)

        def processed() -> int:
            with stack.engine.connect() as conn:
                return int(
                    conn.execute(
                        select(func.count()).select_from(deliveries).where(deliveries.c.status == "processed")
                    ).scalar_one()
                )

        ok = True
        for processes in args.processes:
            # Baseline: no-op jobs with the tracker's job options, SimpleWorker burst processes.
            connection.flushdb()
            enqueue_noops(noop_queue, ids)
            base = drain(
                stack, [sys.executable, str(HERE / "_noop_jobs.py")], processes, lambda: noop_done.count, count,
                queue_idle(noop_queue), stack.directory / f"logs-noop-{processes}", args.timeout,
            )  # fmt: skip

            # The tracker: pending deliveries, empty derived tables, a fresh queue.
            connection.flushdb()
            state.drop_and_recreate()
            with stack.engine.begin() as conn:
                conn.execute(update(deliveries).values(status=PENDING, processed_at=None, attempts=0, last_error=None))
            for start in range(0, len(ids), 500):
                enqueue_deliveries(tracker_queue, ids[start : start + 500])
            real = drain(
                stack, [*tracker_command(), "worker", "--burst"], processes, processed, count,
                queue_idle(tracker_queue), stack.directory / f"logs-tracker-{processes}", args.timeout,
            )  # fmt: skip
            with stack.engine.connect() as conn:
                facts = conn.execute(select(func.count()).select_from(pr_facts)).scalar_one()
                versions = conn.execute(select(func.count()).select_from(pr_versions)).scalar_one()
            counts = ledger.counts()
            ok = ok and counts.processed == count and counts.failed == 0

            print(
                f"worker × {processes}  no-op RQ jobs  {base.rate:7,.0f} jobs/s        1.00 × no-op  "
                f"(steady {base.steady_rate:,.0f}/s; {base.items:,} jobs in {base.seconds:.1f} s from spawn)"
            )
            print(
                f"worker × {processes}  tracker        {real.rate:7,.0f} deliveries/s  "
                f"{real.rate / base.rate:4.2f} × no-op  "
                f"(steady {real.steady_rate:,.0f}/s, {real.steady_rate / base.steady_rate:4.2f} × no-op; "
                f"{count:,} processed "
                f"in {real.seconds:.1f} s from spawn, delivery queue idle after {real.idle_after:.1f} s)"
            )
            print(
                f"worker × {processes}  facts recorded {(facts + versions) / real.seconds:7,.0f} rows/s        "
                f"{(facts + versions) / real.seconds / base.rate:4.2f} × no-op jobs/s  ({facts:,} pr_facts + "
                f"{versions:,} pr_versions rows; failed {counts.failed}; "
                f"jobs run {jobs_text(real.jobs_run)} for {count:,} deliveries, "
                f"{real.requeued_by_sweep:,} re-enqueued by the start-up sweep)"
            )
        connection.close()
        print(f"worker: done; {load_note()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
