"""Rendering a Megatron-scale month (issue 14's 1,419 PRs) at a mid-month cutoff, Markdown and HTML.

The month: every real Megatron-LM PR of the shared test data (data/megatron/; 987, March-June 2026) moved into
one month (their days of month kept), plus made-up ones up to --prs, each with a description written as PR
templates are (bench/_stories.py: reports read it for their summary sentences), opened, pushed 0-2
times and merged or left open, with its real changed paths as the files of every head. Deliveries
are stored straight into a SQLite ledger and derived with `rebuild` (the webhook path is measured
by ingest.py); files go straight into the head store (the GitHub path is measured elsewhere).

Figures (medians of --runs) of Markdown (en, zh-CN) and HTML, as the web serves them (`rendered` with
the Redis cache), against the baseline of the JSON snapshot's numbers alone
(tracker.reports.loading.load_snapshot) in the same run:
- cold: nothing cached anywhere (the Redis cache of rendered reports and groupings flushed, the
  process's remembered groupings forgotten): the first request after a change no worker warmed;
- warm by the workers: each section's grouping in Redis (what tracker.reports.warm leaves, or an
  earlier request at a cutoff whose sections hold the same changes), the rendered report not cached and
  nothing remembered in the process: what a request at another cutoff or after the next change pays;
- unchanged: from the Redis cache keyed by the month's version (what the month-to-date request reads
  once a worker warmed it).
It also prints what warming the month costs a worker (tracker.reports.warm.warm_month: the report once,
six documents rendered). Targets (issue 14): under 100 ms cold, under 5 ms unchanged.

Run: .venv/bin/python bench/render.py [--prs 1419] [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _load import median_ms  # noqa: E402
from _stories import description, with_description  # noqa: E402

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from bench.fixtures.scenario import REPO, real_prs  # noqa: E402
from tracker.config import load_config  # noqa: E402
from tracker.core import clusters  # noqa: E402
from tracker.core.classify import ChangedFile  # noqa: E402
from tracker.embedded_redis import EmbeddedRedis  # noqa: E402
from tracker.queue import connect_redis  # noqa: E402
from tracker.reports.cache import rendered  # noqa: E402
from tracker.reports.loading import load_snapshot, report_for, resolve  # noqa: E402
from tracker.reports.render import Document  # noqa: E402
from tracker.reports.warm import warm_month  # noqa: E402
from tracker.services import Services  # noqa: E402
from tracker.settings import load_settings  # noqa: E402
from tracker.store.database import connect  # noqa: E402
from tracker.store.heads import HeadStore  # noqa: E402
from tracker.store.ledger import Delivery, Ledger, now_ms  # noqa: E402
from tracker.store.month_state import MonthState  # noqa: E402
from tracker.store.rebuild import rebuild  # noqa: E402

CONFIG = ROOT / "examples" / "megatron-lm.yaml"


def build_month(directory: Path, count: int, seed: int) -> tuple[Ledger, MonthState]:
    rng = random.Random(seed)
    engine = connect(f"sqlite:///{directory / 'ledger.sqlite3'}")
    ledger, state = Ledger(engine), MonthState(engine)
    prs = real_prs()
    while len(prs) < count:
        prs.append({**rng.choice(prs[:987]), "pr_number": 20000 + len(prs)})
    heads = []
    for pr in prs[:count]:
        day = min(28, datetime.fromisoformat(pr["committer_date"]).day)
        merged_at = datetime(2026, 9, day, rng.randrange(0, 24), tzinfo=UTC)
        opened = merged_at - timedelta(hours=rng.randrange(2, 200))
        story = PullRequestStory(pr["pr_number"], opened, base=pr["branch"], title=pr["title"]).opened()
        for _ in range(rng.randrange(0, 3)):
            story.pushed(opened + (merged_at - opened) * rng.random())
        if rng.random() < 0.8:
            story.merged(merged_at)
        paths = [f["path"] for f in pr["files"]] or ["README.md"]
        body = description(pr["title"], rng)
        for d in story.deliveries:
            payload = json.loads(d.body)
            ledger.store(
                Delivery(
                    d.delivery_id,
                    "pull_request",
                    payload["action"],
                    REPO,
                    None,
                    "application/json",
                    {},
                    with_description(d.body, body),
                    now_ms(),
                )
            )
            heads.append((pr["pr_number"], payload["pull_request"]["head"]["sha"], paths))
    config = load_config(load_settings(config_path=CONFIG))
    rebuild(ledger, state, config)
    store = HeadStore(engine)
    rules = config.rules_for(REPO)
    for number, sha, paths in heads:
        files = [ChangedFile(p, patch="@@ -1 +1 @@\n-a = 1\n+a = 2") for p in paths]
        store.store(REPO.lower(), number, sha, files, truncated=False, source="pulls", rules=rules)
    return ledger, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prs", type=int, default=1419)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--cutoff", default="2026-09-15")
    args = parser.parse_args()
    config = load_config(load_settings(config_path=CONFIG))
    with tempfile.TemporaryDirectory(prefix="trk-render-") as directory:
        started = time.perf_counter()
        ledger, state = build_month(Path(directory), args.prs, args.seed)
        services = Services.over(state.engine, config)
        print(
            f"built a month of {args.prs} PRs, {ledger.counts().received} deliveries in "
            f"{time.perf_counter() - started:.1f} s"
        )
        server = EmbeddedRedis(Path(directory))
        server.start()
        try:
            cache = connect_redis(server.url)
            wanted = resolve(services, REPO, "2026-09", args.cutoff)
            document = json.loads(rendered(services, wanted, Document("json")))
            narrated = sum(1 for pr in document["pull_requests"] if pr["section"])
            print(
                f"cutoff {args.cutoff}: {len(document['pull_requests'])} PRs in the window, {narrated} narrated, "
                f"{sum(len(s['themes']) for s in document['report']['sections'])} themes"
            )
            baseline = median_ms(lambda: load_snapshot(services, REPO, "2026-09", args.cutoff), args.runs)
            print(f"baseline: the snapshot's numbers alone: {baseline:.1f} ms")

            def nothing_cached() -> None:
                cache.flushdb()  # rendered reports and groupings
                clusters.forget()  # the groupings this process remembers

            def grouped_by_the_workers() -> None:
                nothing_cached()
                report_for(services, wanted, cache=cache)  # keeps each section's grouping in Redis
                clusters.forget()

            for fmt, lang in (("md", "en"), ("md", "zh-CN"), ("html", "en")):

                def serve(f: str = fmt, la: str = lang) -> None:
                    rendered(services, wanted, Document(f, la), cache=cache)

                cold = median_ms(serve, args.runs, setup=nothing_cached)
                warm = median_ms(serve, args.runs, setup=grouped_by_the_workers)
                serve()
                unchanged = median_ms(serve, args.runs)
                print(
                    f"{fmt} {lang}: {cold:.1f} ms cold ({cold / baseline:.2f} x baseline; target < 100 ms), "
                    f"{warm:.1f} ms warm by the workers ({warm / baseline:.2f} x baseline), "
                    f"{unchanged:.2f} ms unchanged, from the cache ({unchanged / baseline:.3f} x baseline; "
                    "target < 5 ms)"
                )
            month_to_date = resolve(services, REPO, "2026-09", None)
            worker = median_ms(
                lambda: warm_month(replace(services, redis=cache), REPO, "2026-09"), 5, setup=nothing_cached
            )
            print(
                f"warming the month to date ({month_to_date.window.cutoff}) in a worker: {worker:.1f} ms "
                f"({worker / baseline:.2f} x baseline)"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
