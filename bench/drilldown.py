"""Drill-down pages (issue 34) of a Megatron-scale month (issue 14's 1,419 PRs) at a mid-month cutoff.

The month is bench/render.py's (`build_month`: every real Megatron-LM PR of the shared test data moved into
September 2026, made-up ones up to --prs, each head's real changed paths as its files), in a SQLite ledger
with the embedded Redis. Each figure is the median of --runs requests through the web app in this process
(Flask's test client: routing, access, loading, the page), with its ratio to the baseline:

- baseline, same run: the snapshot's numbers alone read from the database (tracker.reports.loading.
  load_snapshot), as bench/render.py's;
- the pages: `prs.html?stat=merged` (the longest list: most of the month's PRs), its JSON
  (`/api/v1/repos/<o>/<r>/months/<M>/prs?stat=merged`), `prs.html?stat=test_only`, and a theme's page
  (`?theme=<the first Delivered theme>&section=delivered`, which needs the report model), each
  - warm: the workers kept the month's digest (tracker.reports.warm.warm_month) and this process holds the
    window (it answered a page of that cutoff before: a reader going from the report to its numbers);
  - cold: the workers kept the month's digest, this process holds nothing of the month (the windows and
    every memo of PR text forgotten: `forget_memos`, as a web process that never read it);
  - nothing kept: Redis flushed as well (no worker ever ran): the window is read from the database.

Targets (issue 34): a drill-down page of the 1,419-PR month answers in at most 50 ms warm and 150 ms cold
(PASS/FAIL printed for the statistic's pages; the theme page and "nothing kept" are shown for comparison).
The machine's load is printed before and after: on a shared 2-core machine it moves every absolute figure.

Run: .venv/bin/python bench/drilldown.py [--prs 1419] [--runs 15] [--cutoff 2026-09-15]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _load import median_ms  # noqa: E402
from _stack import load_note  # noqa: E402
from render import CONFIG, build_month  # noqa: E402
from snapshot import forget_memos  # noqa: E402

from bench.fixtures.scenario import REPO  # noqa: E402
from tracker.embedded_redis import EmbeddedRedis  # noqa: E402
from tracker.queue import connect_redis  # noqa: E402
from tracker.reports.loading import load_snapshot  # noqa: E402
from tracker.reports.warm import warm_month  # noqa: E402
from tracker.settings import load_settings  # noqa: E402
from tracker.web.app import create_app  # noqa: E402
from tracker.web.context import services  # noqa: E402

MONTH = "2026-09"
WARM_TARGET_MS = 50.0
COLD_TARGET_MS = 150.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prs", type=int, default=1419)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--cutoff", default="2026-09-15")
    args = parser.parse_args()
    print(f"drilldown: {load_note()}")
    with tempfile.TemporaryDirectory(prefix="trk-drill-") as directory:
        started = time.perf_counter()
        ledger, _ = build_month(Path(directory), args.prs, args.seed)
        print(
            f"built a month of {args.prs} PRs, {ledger.counts().received} deliveries in "
            f"{time.perf_counter() - started:.1f} s"
        )
        server = EmbeddedRedis(Path(directory))
        server.start()
        try:
            settings = load_settings(
                config_path=CONFIG,
                webhook_secret="bench-webhook-secret",
                data_dir=Path(directory) / "var",
                database_url=str(ledger.engine.url),
                redis_url=server.url,
            )
            app = create_app(settings)
            client = app.test_client()
            with app.app_context():
                built = services()
            cache = connect_redis(server.url)
            base = f"/reports/{REPO}/{MONTH}"
            api = f"/api/v1/repos/{REPO}/months/{MONTH}/prs"

            def get(url: str) -> bytes:
                answer = client.get(url)
                if answer.status_code != 200:
                    raise SystemExit(f"{url}: {answer.status_code} {answer.get_data(as_text=True)[:500]}")
                return answer.get_data()

            report = json.loads(get(f"{base}.json?cutoff={args.cutoff}"))
            delivered = report["report"]["sections"][0]["themes"]
            if not delivered:
                raise SystemExit("the month has no Delivered theme to open")
            theme = delivered[0]["id"]
            pages = {
                "merged page": f"{base}/prs.html?stat=merged&lang=en&cutoff={args.cutoff}",
                "merged JSON": f"{api}?stat=merged&cutoff={args.cutoff}",
                "test_only page": f"{base}/prs.html?stat=test_only&lang=en&cutoff={args.cutoff}",
                "theme page": f"{base}/prs.html?theme={theme}&section=delivered&lang=en&cutoff={args.cutoff}",
            }
            merged = json.loads(get(pages["merged JSON"]))
            assert merged["count"] == report["stats"]["merged"]
            print(
                f"cutoff {args.cutoff}: {len(report['pull_requests'])} PRs in the window, {merged['count']} merged "
                f"({len(get(pages['merged page'])) / 1024:.0f} KB of HTML, {len(get(pages['merged JSON'])) / 1024:.0f} "
                f"KB of JSON), {report['excluded']['test_only']} test-only, theme {theme!r} of "
                f"{sum(len(h['changes']) for h in delivered[0]['highlights'])} changes"
            )

            baseline = median_ms(lambda: load_snapshot(built, REPO, MONTH, args.cutoff), args.runs)
            print(f"baseline  the snapshot's numbers alone (load_snapshot)     median {baseline:7.1f} ms")

            def workers_warmed() -> None:
                cache.flushdb()
                warm_month(built, REPO, MONTH)  # the digest, and the groupings a worker keeps
                forget_memos()

            workers_warmed()

            def process_cold() -> None:
                forget_memos()  # the windows this process holds and its memos of PR text

            def nothing_kept() -> None:
                cache.flushdb()
                forget_memos()

            verdicts = []
            for label, url in pages.items():
                targeted = label != "theme page"
                workers_warmed()
                get(url)  # this process now holds the window (and, for a theme, the report's grouping)
                warm = median_ms(lambda u=url: get(u), args.runs)
                cold = median_ms(lambda u=url: get(u), args.runs, setup=process_cold)
                bare = median_ms(lambda u=url: get(u), args.runs, setup=nothing_kept)
                line = (
                    f"{label:<15} warm {warm:7.1f} ms ({warm / baseline:4.2f} x baseline)  "
                    f"cold {cold:7.1f} ms ({cold / baseline:4.2f} x)  nothing kept {bare:7.1f} ms "
                    f"({bare / baseline:4.2f} x)"
                )
                if targeted:
                    passed = warm <= WARM_TARGET_MS and cold <= COLD_TARGET_MS
                    verdicts.append(passed)
                    line += (
                        f"  target warm <= {WARM_TARGET_MS:g} ms, cold <= {COLD_TARGET_MS:g} ms: "
                        f"{'PASS' if passed else 'FAIL'}"
                    )
                print(line)
            print(f"drilldown: done; {load_note()}")
            built.close()
            return 0 if all(verdicts) else 1
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
