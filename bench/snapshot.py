"""Snapshot benchmark: one month's JSON, the API's work, over a busy month (issue 14's: 1,419 PRs).

A month (--month, default 2026-04) of --prs PRs and --deliveries deliveries (bench/_stories.py: real
Megatron-LM titles and base branches; opens spread over the month, about 15 % opened the month
before; pushes, labels, retitles, merges, closes, reopens; some still open) is stored with
Ledger.store and derived with tracker.store.rebuild.rebuild.

Figures, each with its ratio to the baseline:
- the snapshot's numbers alone (tracker.reports.loading.load_snapshot + snapshot_json) at a mid-month
  cutoff, --runs times after 3 warm-up runs: median and p95, and its parts (the SQL reads of
  MonthState.month_inputs, the pure build_snapshot, snapshot_json);
- every document a reader asks for (tracker.reports.warm.DOCUMENTS: the API's JSON, `GET
  /api/v1/repos/<o>/<r>/months/<m>?cutoff=`, and its `?detail=summary`; Markdown and HTML in both
  languages; tracker.reports.cache.rendered_bytes with the Redis cache), at the mid-month cutoff and at
  the month's last day, in three states:
  - workers warmed: what a request finds in the running service. The warm job (tracker.reports.warm.
    warm_month, run in another process, as a worker runs it) kept the month's digest and the grouping of
    every cutoff; the rendered documents of the measured cutoff are deleted before each run and everything
    this process remembers of PRs forgotten (`forget_memos`: a web process that never rendered the month),
    so each run reads the cutoff's part of the digest, builds the report and renders it;
  - nothing kept: Redis flushed and the process's groupings and windows forgotten (no workers ever ran):
    the SQL reads and the clustering into themes are paid;
  - changed since: a batch of deliveries (--changes-per-run) applied before each run, the process holding
    the windows it answered before (a polled web process);
  - unchanged: from the render cache.

Baseline, same run: the month's raw pr_facts rows (facts of the repository inside the month's
window) read with one SELECT into Python tuples.

Targets (issue 14): the snapshot's numbers under 150 ms; a document not rendered before, with the workers'
state, at any cutoff: JSON p50 at most 150 ms (goal 50 ms), Markdown and HTML at most 100 ms; at most 5 ms
unchanged.

    .venv/bin/python bench/snapshot.py [--prs 1419 --deliveries 11894 --cutoff 2026-04-15 --runs 30]
"""

from __future__ import annotations

import argparse
import gc
import inspect
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date, timedelta
from functools import partial
from typing import Any

from _heads import HeadsUnsupported, store_heads
from _load import percentile
from _stack import Stack, load_note
from _stories import REPO, ledger_delivery, plan_months, previous_month, stories
from sqlalchemy import func, select

from tracker.config import load_config
from tracker.core import clusters
from tracker.core.snapshot import build_snapshot
from tracker.core.window import Month, month_window
from tracker.queue import connect_redis
from tracker.reports.cache import rendered_bytes
from tracker.reports.digests import forget_held
from tracker.reports.loading import load_snapshot, resolve, snapshot_json
from tracker.reports.render import FULL, Document
from tracker.reports.warm import DOCUMENTS
from tracker.services import Services
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState
from tracker.store.rebuild import rebuild
from tracker.store.schema import month_activity, pr_facts, pr_versions
from workers.drain import process_batch

try:  # derived tables key repositories by a case-folded name (tracker.core.repository.repository_key)
    from tracker.core.repository import repository_key
except ImportError:  # older trees stored the name as given

    def repository_key(full_name: str) -> str:
        return full_name


TARGET_MS = 150.0
UNCHANGED_TARGET_MS = 5.0
RENDER_TARGET_MS = 100.0  # Markdown and HTML


def stored_name(state: MonthState, full_name: str) -> str:
    lookup = getattr(state, "repository_name", None) or getattr(state, "has_repository")  # noqa: B009
    return str(lookup(full_name) or full_name)


def forget_memos() -> None:
    """Forget what this process remembers of the PRs it rendered before: the groupings (clusters.forget) and
    every memo of a pure function of PR data (cleaned titles, escaped text, paths: an lru_cache of 1,024
    entries or more in tracker.core and tracker.reports), as in a web process that never rendered the month
    (the warm job ran in a worker). Configuration memos (templates, a taxonomy's patterns) are kept."""
    clusters.forget()
    forget_held()  # the windows of the month this process read (tracker.reports.digests)
    for name, module in list(sys.modules.items()):
        if not name.startswith(("tracker.core.", "tracker.reports.")):
            continue
        for value in vars(module).values():
            parameters = getattr(value, "cache_parameters", None)
            if parameters is not None and (parameters()["maxsize"] or 0) >= 1024:
                value.cache_clear()


WARM_IN_A_WORKER = """
import sys, time
from tracker.reports.warm import warm_month
from tracker.services import Services
from tracker.settings import load_settings
services = Services.from_settings(load_settings())
started = time.monotonic()
warmed = warm_month(services, sys.argv[1], sys.argv[2])
print(f"{warmed.cutoff if warmed else '-'} {warmed.earlier if warmed else 0} {time.monotonic() - started:.1f}")
"""


def warm_in_a_worker(stack: Stack, repo: str, month: str) -> str:
    """Run the warm job (tracker.reports.warm.warm_month) in another process, as a worker does: the process
    that serves the requests never held what the job computed."""
    done = subprocess.run(
        [sys.executable, "-c", WARM_IN_A_WORKER, repo, month],
        env=stack.env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the warm job failed: {done.stderr.strip()[-2000:]}")
    cutoff, earlier, seconds = done.stdout.split()
    return (
        f"warm job of {month} in a worker process (digest, documents of {cutoff}, the grouping of {earlier} "
        f"earlier cutoffs): {seconds} s"
    )


def paused(function: Callable[[], object]) -> object:
    """`function()` with the cyclic collector held back, as tracker.reports.loading.snapshot_for holds it
    (trees before it did so: as it is)."""
    try:
        from tracker.reports.collector import collector_paused
    except ImportError:
        return function()
    with collector_paused():
        return function()


def timed(function: Callable[[], object], runs: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        function()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return times


def timed_after(function: Callable[[], object], setup: Callable[[], object], runs: int) -> list[float]:
    """`runs` timed calls of `function`, each after an untimed `setup`."""
    times = []
    for _ in range(runs):
        setup()
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--month", default="2026-04")
    parser.add_argument("--prs", type=int, default=1419)
    parser.add_argument("--deliveries", type=int, default=11894)
    parser.add_argument("--cutoff", default=None, help="YYYY-MM-DD (default: the 15th of the month)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cold-runs", type=int, default=11, help="runs of each cold and warm figure")
    parser.add_argument(
        "--changes-per-run",
        type=int,
        default=10,
        help="deliveries applied before each run of the 'changed since' state (the month's latest, held back)",
    )
    parser.add_argument(
        "--history-months",
        type=int,
        default=0,
        help="also load this many earlier months of the same volume, ending two months before (history)",
    )
    parser.add_argument(
        "--no-heads", action="store_true", help="store no changed files for the PR heads (no classification)"
    )
    parser.add_argument("--database-url", help="default: TRACKER_DATABASE_URL, else SQLite in a temp dir")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (the ledger)")
    args = parser.parse_args()
    cutoff = args.cutoff or f"{args.month}-15"
    month = Month.parse(args.month)
    today = month.last_day + timedelta(days=7)  # a past month, whatever the machine's clock says

    with Stack(args.database_url, keep=args.keep) as stack:
        ledger, state = Ledger(stack.engine), MonthState(stack.engine)
        config = load_config(stack.settings)
        services = Services.over(stack.engine, config, settings=stack.settings)
        # History ends two months before, so that none of its PRs is active in the measured month:
        # only the size of the tables changes, not the month's own work.
        months = [args.month]
        earlier = previous_month(args.month)
        for _ in range(args.history_months):
            earlier = previous_month(earlier)
            months.insert(0, earlier)
        plans = plan_months(months, args.prs * len(months), args.deliveries * len(months), seed=5)
        started = time.monotonic()
        seen_heads: set[tuple[int, str, str]] = set()
        generated = []
        for part in stories(plans, processes=2):
            for item in part:
                generated.append(item)
                seen_heads.add((item.number, item.head_sha, item.title))
        # The month's latest deliveries are held back for the "changed since the warm" state: applied a batch
        # before each of its runs, as the workers apply a stream after the warm job kept the month's digest.
        generated.sort(key=lambda item: (item.received_at, item.id))
        held = 2 * args.cold_runs * len(DOCUMENTS) * args.changes_per_run
        held_back = [ledger_delivery(item) for item in generated[len(generated) - held :]] if held else []
        for item in generated[: len(generated) - held]:
            ledger.store(ledger_delivery(item))
        del generated
        loaded = time.monotonic() - started
        started = time.monotonic()
        heads_note = "no head files"
        if not args.no_heads:
            try:
                stored_heads = store_heads(stack.engine, config, REPO, sorted(seen_heads))
                heads_note = f"files of {stored_heads:,} heads stored in {time.monotonic() - started:.1f} s"
            except HeadsUnsupported as exc:
                heads_note = str(exc)
        # A web process holds none of the generated month: drop it, so that the collector's passes in the
        # timed requests walk what a web process holds, not a million objects of the generator's.
        del plans, part, item, seen_heads
        gc.collect()
        started = time.monotonic()
        outcome = rebuild(ledger, state, config)  # (processed, failed[, heads classified])
        processed, failed = outcome[0], outcome[1]
        derived = time.monotonic() - started
        with stack.engine.connect() as conn:
            facts = conn.execute(select(func.count()).select_from(pr_facts)).scalar_one()
            versions = conn.execute(select(func.count()).select_from(pr_versions)).scalar_one()
            active = conn.execute(
                select(func.count()).select_from(month_activity).where(month_activity.c.month == args.month)
            ).scalar_one()
        history = f" (+ {', '.join(months[:-1])} as large)" if args.history_months else ""
        print(
            f"snapshot: {args.deliveries:,} deliveries of {args.prs:,} PRs{history} generated and stored in "
            f"{loaded:.1f} s, "
            f"rebuilt in {derived:.1f} s ({processed:,} processed, {failed} failed): {facts:,} pr_facts, "
            f"{versions:,} pr_versions, {active:,} PRs active in {args.month}; {heads_note}; ledger "
            f"{stack.database_url.split(':')[0]}; {load_note()}"
        )

        window = month_window(month, date.fromisoformat(cutoff), "Asia/Shanghai")
        whole_month = month_window(month, month.last_day, "Asia/Shanghai")

        def raw_facts() -> list[tuple[int, str, int]]:
            with stack.engine.connect().execution_options(read_only=True) as conn:
                return [
                    tuple(row)
                    for row in conn.execute(
                        select(pr_facts.c.number, pr_facts.c.kind, pr_facts.c.at).where(
                            pr_facts.c.repo == repository_key(REPO),
                            pr_facts.c.at >= whole_month.start,
                            pr_facts.c.at < whole_month.end,
                        )
                    )
                ]

        def full() -> str:
            return snapshot_json(load_snapshot(services, REPO, args.month, cutoff, today=today))

        def fold(inputs: Any) -> Any:
            """build_snapshot with what load_snapshot passes it (its arguments grew with classification)."""
            name = stored_name(state, REPO)
            if "verdicts" in inspect.signature(build_snapshot).parameters:
                return build_snapshot(
                    name, window, inputs.timelines, inputs.versions, inputs.verdicts, config.rules_for(name)
                )
            return build_snapshot(name, window, inputs.timelines, inputs.versions)

        inputs = state.month_inputs(REPO, args.month, window.end)
        snapshot = fold(inputs)
        baseline = timed(raw_facts, args.runs)
        total = timed(full, args.runs)
        parts = {  # each as load_snapshot runs it: the cyclic collector held back where the tree does so
            "  month_inputs (SQL reads)": timed(
                lambda: paused(lambda: state.month_inputs(REPO, args.month, window.end)), args.runs
            ),
            "  build_snapshot (pure fold)": timed(lambda: paused(lambda: fold(inputs)), args.runs),
            "  snapshot_json (as_dict + json.dumps)": timed(lambda: snapshot_json(snapshot), args.runs),
        }
        base = statistics.median(baseline)
        rows = len(raw_facts())
        if not rows:
            raise SystemExit("the baseline SELECT found no pr_facts rows: the schema's repository key changed?")
        print(
            f"baseline  SELECT raw pr_facts rows of {args.month}         median {base:7.2f} ms  "
            f"p95 {percentile(baseline, 95):7.2f} ms   1.00 × baseline  ({rows:,} rows)"
        )
        median = statistics.median(total)
        verdict = "PASS" if median < TARGET_MS else "FAIL"
        print(
            f"snapshot  load_snapshot + snapshot_json, cutoff {cutoff}  median {median:7.2f} ms  "
            f"p95 {percentile(total, 95):7.2f} ms  {median / base:5.1f} × baseline  "
            f"({len(snapshot.pull_requests):,} PRs in the snapshot, {len(full()) / 1024:.0f} KB of JSON)  "
            f"target < {TARGET_MS:g} ms: {verdict}"
        )
        for label, times in parts.items():
            print(
                f"{label:<50} median {statistics.median(times):7.2f} ms  p95 {percentile(times, 95):7.2f} ms  "
                f"{statistics.median(times) / base:5.1f} × baseline"
            )
        cache = connect_redis(stack.redis_url)
        services = Services.from_settings(stack.settings)

        def apply_held(batch: list[Any]) -> None:
            for delivery in batch:
                ledger.store(delivery)
            process_batch(services, ledger.fresh_pending(len(batch) + 10))

        medians = [median]
        for day in (cutoff, str(month.last_day)):
            request = resolve(services, REPO, args.month, day, today=today)

            def nothing_cached() -> None:
                cache.flushdb()  # rendered reports, groupings, digests
                forget_memos()  # what this process remembers

            def rendered_forgotten() -> None:
                """What a request finds after the workers warmed the month: its digest and the grouping of
                every cutoff kept, no rendered document of this cutoff."""
                for key in cache.scan_iter(match="tracker:render*", count=1000):
                    cache.delete(key)
                forget_memos()

            def serve(document: Document, wanted: Any = request) -> bytes:
                return rendered_bytes(services, wanted, document, cache=cache)

            # Runs of every document in turns (one run of each, then the next round), so that a slow spell
            # of the host (this machine's speed moves by up to 40 % from one minute to the next) falls on
            # all of them rather than on one.
            nothing_cached()
            print(warm_in_a_worker(stack, REPO, args.month))
            warm: dict[Document, list[float]] = {document: [] for document in DOCUMENTS}
            for _ in range(args.cold_runs):
                for document in DOCUMENTS:
                    warm[document] += timed_after(partial(serve, document), rendered_forgotten, 1)
            cold: dict[Document, list[float]] = {document: [] for document in DOCUMENTS}
            for _ in range(args.cold_runs):
                for document in DOCUMENTS:
                    cold[document] += timed_after(partial(serve, document), nothing_cached, 1)
            # Changed since the warm: a batch of the held-back deliveries applied (by this process, untimed: the
            # workers' part) before each run, so that the month is some versions past its digest (the digest
            # patched with the PRs changed since, tracker.store.changes) and the document is not rendered yet;
            # the groupings the batch did not change stay kept, and this process holds the windows it answered
            # (tracker.reports.digests: it reads again the PRs changed since its last run), as a web process
            # that a page polls.
            nothing_cached()
            print(warm_in_a_worker(stack, REPO, args.month))
            changed: dict[Document, list[float]] = {document: [] for document in DOCUMENTS}
            for _ in range(args.cold_runs):
                for document in DOCUMENTS:
                    batch, held_back[: args.changes_per_run] = held_back[: args.changes_per_run], []
                    changed[document] += timed_after(partial(serve, document), partial(apply_held, batch), 1)
            for document in DOCUMENTS:
                fmt, lang, detail = document
                size = len(serve(document))
                unchanged = timed(partial(serve, document), args.runs)
                target = TARGET_MS if fmt == "json" else RENDER_TARGET_MS
                if detail == FULL:
                    medians.append(statistics.median(warm[document]) / target * TARGET_MS)
                label = f"{fmt}{' summary' if detail != FULL else ''} {lang if fmt != 'json' else ''}".strip()
                for kind, times, goal in (
                    ("nothing kept", cold[document], None),
                    ("workers warmed", warm[document], target if detail == FULL else None),
                    ("changed since", changed[document], None),
                    ("unchanged", unchanged, UNCHANGED_TARGET_MS),
                ):
                    verdict = ""
                    if goal is not None:
                        verdict = f"  target <= {goal:g} ms: {'PASS' if statistics.median(times) <= goal else 'FAIL'}"
                    print(
                        f"api {label:<12} {day} {kind:<15} median {statistics.median(times):7.2f} ms  "
                        f"p95 {percentile(times, 95):7.2f} ms  {statistics.median(times) / base:5.1f} × baseline  "
                        f"({size / 1024:.0f} KB){verdict}"
                    )
        print(f"snapshot: done; {load_note()}")
    return 0 if all(m <= TARGET_MS for m in medians) else 1


if __name__ == "__main__":
    sys.exit(main())
