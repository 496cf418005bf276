"""Group report benchmark (issue 34): a group of --repos repositories of --prs PRs each, against one repository's
report of the same size, measured in the same run.

Each repository's month (--month, default 2026-04) is made by bench/_stories.py (real Megatron-LM titles, base
branches and changed files; made-up lives: opens, pushes, labels, merges, closes, reopens), --deliveries-per-pr
deliveries a PR on average, a seed of its own, stored with Ledger.store (the repository's name in each body) and
derived with tracker.store.rebuild.rebuild, the files of every head stored as the fetch jobs would.

Documents measured: the group's JSON, Markdown (en) and HTML (en) through tracker.reports.groups.group_bytes
(what `/reports/groups/<name>/<month>.<fmt>` serves), and the same documents of one member through
tracker.reports.cache.rendered_bytes (what `/reports/<owner>/<repo>/<month>.<fmt>` serves), at the month's last
day (the month to date the warm job renders) and at mid-month, in these states:

- nothing kept: Redis flushed and this process's memos forgotten (no worker ever ran);
- digests kept: the warm job (tracker.reports.warm.warm_month, for every member, in another process) kept each
  month's digest and groupings; every rendered document deleted, this process's memos forgotten: each member's
  report is built from its digest, as a single repository's is in bench/snapshot.py's "workers warmed";
- members' documents kept: as the warm job leaves it at the month's last day (what a group reads of each member,
  tracker.reports.render.MEMBER_DOCUMENT, rendered); only the group's own rendered documents deleted: the group
  reads its members' documents from Redis and merges them;
- another document first: digests kept, then the group's Chinese Markdown at that cutoff asked for (it renders
  and keeps each member's document), then the group's rendered documents deleted: a reader asking for a second
  form of a group report at a cutoff no worker warmed;
- unchanged: the group's document from the render cache.

Target (issue 34): a group of 10 repositories x 300 PRs within twice issue 14's single-repository limits for a
document not rendered before with the workers' state: JSON <= 300 ms, Markdown and HTML <= 200 ms.

    .venv/bin/python bench/groups.py [--repos 10 --prs 300 --deliveries-per-pr 4 --runs 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

from _heads import store_heads
from _load import percentile
from _stack import Stack, load_note
from _stories import ledger_delivery, plan_month, stories
from snapshot import forget_memos

from tracker.config import load_config
from tracker.core.window import Month
from tracker.queue import connect_redis
from tracker.reports.cache import rendered_bytes
from tracker.reports.groups import group_bytes, resolve_group
from tracker.reports.loading import resolve
from tracker.reports.render import Document
from tracker.services import Services
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState
from tracker.store.rebuild import rebuild

GROUP = "bench"
JSON_TARGET_MS, RENDER_TARGET_MS = 150.0, 100.0  # issue 14, one repository; a group's target is twice these
DOCUMENTS = (Document("json"), Document("md", "en"), Document("html", "en"))

WARM_IN_A_WORKER = """
import sys, time
from tracker.reports.warm import warm_month
from tracker.services import Services
from tracker.settings import load_settings
services = Services.from_settings(load_settings())
started = time.monotonic()
for repo in sys.argv[2:]:
    warm_month(services, repo, sys.argv[1], rested=True)
print(f"{time.monotonic() - started:.1f}")
"""


def repository_names(count: int) -> list[str]:
    return [f"bench-org/repo-{index:02d}" for index in range(1, count + 1)]


def as_repository(delivery: Any, repo: str) -> Any:
    """A generated delivery (of bench/_stories.py's repository) as `repo`'s: its body and id."""
    payload = json.loads(delivery.body)
    owner, _, name = repo.partition("/")
    payload["repository"].update(full_name=repo, name=name)
    payload["repository"]["owner"]["login"] = owner
    stored = ledger_delivery(delivery)
    unique = hashlib.sha256(f"{repo}:{delivery.id}".encode()).hexdigest()[:32]
    return dataclasses.replace(stored, id=unique, repo=repo, body=json.dumps(payload).encode())


def timed_after(function: Callable[[], object], setup: Callable[[], object], runs: int) -> list[float]:
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
    parser.add_argument("--repos", type=int, default=10)
    parser.add_argument("--prs", type=int, default=300)
    parser.add_argument("--deliveries-per-pr", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--database-url", help="default: TRACKER_DATABASE_URL, else SQLite in a temp dir")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (the ledger)")
    args = parser.parse_args()
    month = Month.parse(args.month)
    today = month.last_day + timedelta(days=7)  # a past month, whatever the machine's clock says
    names = repository_names(args.repos)

    with Stack(args.database_url, keep=args.keep) as stack:
        config_path = stack.directory / "tracker.yaml"
        config_path.write_text(f"groups:\n  {GROUP}: [{', '.join(names)}]\n", encoding="utf-8")
        settings = stack.settings.model_copy(update={"config_path": config_path})
        stack.env["TRACKER_CONFIG"] = str(config_path)
        config = load_config(settings)
        ledger, state = Ledger(stack.engine), MonthState(stack.engine)
        started = time.monotonic()
        heads = 0
        for index, repo in enumerate(names):
            plans = plan_month(args.month, args.prs, args.prs * args.deliveries_per_pr, seed=100 + index)
            seen: set[tuple[int, str, str]] = set()
            for part in stories(plans, processes=2):
                for item in part:
                    ledger.store(as_repository(item, repo))
                    seen.add((item.number, item.head_sha, item.title))
            heads += store_heads(stack.engine, config, repo, sorted(seen))
        loaded = time.monotonic() - started
        started = time.monotonic()
        processed, failed = rebuild(ledger, state, config)[:2]
        print(
            f"groups: {args.repos} repositories x {args.prs} PRs ({processed:,} deliveries, {failed} failed, {heads:,} "
            f"heads with files) stored in {loaded:.1f} s, rebuilt in {time.monotonic() - started:.1f} s; ledger "
            f"{stack.database_url.split(':')[0]}; {load_note()}"
        )
        services = Services.from_settings(settings)
        cache = connect_redis(stack.redis_url)

        def warm_members() -> None:
            done = subprocess.run(
                [sys.executable, "-c", WARM_IN_A_WORKER, args.month, *names],
                env=stack.env,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"the warm job failed: {done.stderr.strip()[-2000:]}")
            print(f"  warm job of {args.repos} members in a worker process: {done.stdout.strip()} s")

        def nothing_kept() -> None:
            cache.flushdb()
            forget_memos()

        def documents_deleted() -> None:
            for key in cache.scan_iter(match="tracker:render*", count=1000):
                cache.delete(key)
            forget_memos()

        def group_deleted() -> None:
            for key in cache.scan_iter(match="tracker:render:group:*", count=1000):
                cache.delete(key)
            forget_memos()

        ratios: list[tuple[str, float]] = []
        for day in (str(month.last_day), f"{args.month}-15"):
            group = resolve_group(services, GROUP, args.month, day, lambda repo, window: True, today=today)
            single = resolve(services, names[0], args.month, day, today=today)

            def serve_group(document: Document, group: Any = group) -> bytes:
                return group_bytes(services, group, document, cache)

            def serve_single(document: Document, single: Any = single) -> bytes:
                return rendered_bytes(services, single, document, cache=cache)

            figures: dict[tuple[str, str, Document], list[float]] = {}
            states: list[tuple[str, Callable[[], None]]] = [("nothing kept", nothing_kept)]
            states.append(("digests kept", documents_deleted))
            if day == str(month.last_day):
                states.append(("members' documents kept", group_deleted))

            def another_document_first(group: Any = group) -> None:
                documents_deleted()
                group_bytes(services, group, Document("md", "zh-CN"), cache)  # a form not measured here
                group_deleted()

            states.append(("another document first", another_document_first))
            for state_name, setup in states:
                if state_name != "nothing kept":
                    nothing_kept()
                    warm_members()
                for _ in range(args.runs):  # each document in turns, so a slow spell of the host falls on all
                    for document in DOCUMENTS:
                        for who, serve in (("group", serve_group), ("single", serve_single)):
                            key = (state_name, who, document)
                            if state_name in ("members' documents kept", "another document first") and who == "single":
                                continue  # a single repository's kept document is the cache hit below
                            figures.setdefault(key, []).extend(timed_after(partial(serve, document), setup, 1))
            for document in DOCUMENTS:
                size = len(serve_group(document))
                unchanged = timed_after(partial(serve_group, document), lambda: None, args.runs)
                figures[("unchanged", "group", document)] = unchanged
                target = 2 * (JSON_TARGET_MS if document.fmt == "json" else RENDER_TARGET_MS)
                for state_name, _ in [*states, ("unchanged", None)]:
                    times = figures[(state_name, "group", document)]
                    median = statistics.median(times)
                    alone = figures.get((state_name, "single", document))
                    ratio = ""
                    if alone:
                        ratio = f"  {median / statistics.median(alone):5.1f} x one repository "
                        ratio += f"({statistics.median(alone):6.1f} ms)"
                        ratios.append((f"{document.fmt} {day} {state_name}", median / statistics.median(alone)))
                    verdict = ""
                    if state_name in ("digests kept", "members' documents kept"):
                        verdict = f"  target <= {target:g} ms: {'PASS' if median <= target else 'FAIL'}"
                    print(
                        f"group {document.fmt:<4} {day} {state_name:<24} median {median:7.1f} ms  "
                        f"p95 {percentile(times, 95):7.1f} ms{ratio}  ({size / 1024:.0f} KB){verdict}"
                    )
        print(f"groups: done; {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
