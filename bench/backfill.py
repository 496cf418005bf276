"""Backfilling a busy month from GitHub's REST API: requests per PR, wall time, and a repeat.

A month of `--prs` pull requests (real Megatron-LM titles and branches, lives made up by the seeded
generator of bench/_stories.py: opened, pushes, labels, retitles, closes, reopens, merges) is put on
the local fake GitHub (bench/fixtures/fake_github.py) as GitHub's REST API would show it afterwards
(bench/fixtures/world.py: PR objects, paged issue timelines, files of every head). Then `tracker backfill`'s
own code (tracker.history.github.read_history) reads it into an empty SQLite ledger, twice.

Baseline, in the same run against the same server: a bare httpx client making the requests a
backfill cannot do without (the listing pages, one timeline page and one files page per PR),
parsing the JSON and keeping nothing. Figures: requests per PR (target at most 3 on average,
files included), wall time and its ratio to the baseline, and for the repeat the share of answers
that were 304 Not Modified (target: nearly all).

Run: .venv/bin/python bench/backfill.py [--prs 700] [--deliveries 4200] [--seed 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench._stories import REPO, plan_month, tell  # noqa: E402
from bench.fixtures.fake_github import FakeGitHub  # noqa: E402
from bench.fixtures.world import publish_world  # noqa: E402
from tracker.history.derive import BACKFILL, history_range  # noqa: E402
from tracker.history.github import DAILY, END, read_history  # noqa: E402
from tracker.history.jobs import target  # noqa: E402
from tracker.services import Services  # noqa: E402
from tracker.settings import load_settings  # noqa: E402

MONTH = "2026-05"


def build_world(fake: FakeGitHub, prs: int, deliveries: int, seed: int) -> int:
    stories = []
    for plan in plan_month(MONTH, prs, deliveries, seed=seed):
        told = tell(plan)
        stories.append(
            SimpleNamespace(
                number=plan.number,
                repo=REPO,
                deliveries=[SimpleNamespace(delivery_id=d.id, event="pull_request", body=d.body) for d in told],
            )
        )
    publish_world(fake, stories)  # type: ignore[arg-type]
    return sum(len(s.deliveries) for s in stories)


def bare(fake: FakeGitHub, start: int) -> tuple[float, int, int]:
    """The requests a backfill cannot avoid, nothing kept: (seconds, requests, PRs)."""
    began = time.perf_counter()
    requests = 0
    numbers = []
    with httpx.Client(base_url=fake.url, timeout=30) as client:
        url: str | None = f"/repos/{REPO}/pulls?state=all&sort=updated&direction=desc&per_page=100"
        while url:
            answer = client.get(url)
            requests += 1
            stop = False
            for pr in answer.json():
                updated = int(time.mktime(time.strptime(pr["updated_at"], "%Y-%m-%dT%H:%M:%SZ"))) - time.timezone
                if updated < start:
                    stop = True
                    break
                numbers.append(pr["number"])
            url = None if stop else answer.links.get("next", {}).get("url")
        for number in numbers:
            client.get(f"/repos/{REPO}/issues/{number}/timeline?per_page=100").json()
            client.get(f"/repos/{REPO}/pulls/{number}/files?per_page=100").json()
            requests += 2
    return time.perf_counter() - began, requests, len(numbers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prs", type=int, default=700)
    parser.add_argument("--deliveries", type=int, default=4200, help="webhook events the month's lives hold")
    parser.add_argument("--seed", type=int, default=3)
    options = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    fake = FakeGitHub()
    try:
        events = build_world(fake, options.prs, options.deliveries, options.seed)
        print(f"world: {options.prs} PRs of {MONTH}, {events} events, served by the fake GitHub at {fake.url}")
        with tempfile.TemporaryDirectory() as directory:
            settings = load_settings(
                github_api_url=fake.url,
                data_dir=Path(directory),
                database_url=f"sqlite:///{Path(directory) / 'ledger.sqlite3'}",
                timezone="Asia/Shanghai",
            )
            services = Services.from_settings(settings, redis=False)
            start, end = history_range(MONTH, None, "Asia/Shanghai", int(time.time()))
            baseline, base_requests, listed = bare(fake, start)
            print(
                f"baseline (bare client, listing + 1 timeline + 1 files page per PR, nothing kept): "
                f"{baseline:.2f} s, {base_requests} requests for {listed} PRs"
            )
            services.close()
            for files in (DAILY, END):
                ledger = Path(directory) / f"{files}.sqlite3"
                services = Services.from_settings(
                    settings.model_copy(update={"database_url": f"sqlite:///{ledger}"}), redis=False
                )
                for label in (f"backfill --files {files}", f"repeat --files {files}"):
                    began = time.perf_counter()
                    with services.github(REPO) as client:
                        run = read_history(
                            client,
                            services.history,
                            services.heads,
                            target(services, REPO, start, end, files),
                            BACKFILL,
                        )
                    seconds = time.perf_counter() - began
                    print(
                        f"{label}: {run.done} PRs in {seconds:.2f} s ({seconds / baseline:.2f} × baseline); "
                        f"{run.requests} requests = {run.requests / max(run.total, 1):.2f} per PR "
                        f"({run.requests / max(base_requests, 1):.2f} × baseline's); "
                        f"{run.not_modified} answered 304 ({run.not_modified / max(run.requests, 1):.1%})"
                    )
                left = len(services.heads.missing(limit=1_000_000))
                print(
                    f"  --files {files}: {left} day-end heads left to the background head fetcher "
                    f"(about {left / max(run.total, 1):.2f} requests per PR more, later)"
                )
                services.close()
    finally:
        fake.close()
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
