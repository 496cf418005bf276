"""A realistic month built from real Megatron-LM PRs, for golden reports, tests and benchmarks.

The PRs (numbers, titles, base branches, changed paths, merge instants) are real, from
../shared/data/megatron/; their lives before the merge (opening times, pushes, labels) and the
PRs still open at a partial cutoff are made up by a seeded generator, as the data README allows.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tests.factory import PullRequestStory
from tests.paths import MEGATRON

DATA = MEGATRON
REPO = "NVIDIA/Megatron-LM"


@dataclass
class MonthScenario:
    stories: list[PullRequestStory]
    # files of each (PR, head index): real paths
    files: dict[tuple[int, int], list[str]]

    def head_files(self) -> list[tuple[int, str, list[str]]]:
        """(number, head sha, paths) for every head of every story."""
        heads = []
        for story in self.stories:
            index = 0
            for d in story.deliveries:
                payload = json.loads(d.body)
                if payload["action"] in ("opened", "synchronize"):
                    heads.append(
                        (story.number, payload["pull_request"]["head"]["sha"], self.files[(story.number, index)])
                    )
                    index += 1
        return heads


def real_prs() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def megatron_month(month: str = "2026-05", count: int = 60, seed: int = 11, still_open: int = 8) -> MonthScenario:
    """`count` real PRs merged in `month` (every dev/main twin of a chosen PR comes along), opened
    1-10 days before their merge, with pushes and labels; `still_open` of them are left open."""
    rng = random.Random(seed)
    prs = [pr for pr in real_prs() if pr["month_shanghai"] == month]
    by_number = {pr["pr_number"]: pr for pr in prs}
    chosen: dict[int, dict[str, Any]] = {}
    for pr in sorted(prs, key=lambda p: p["committer_date"]):
        if len(chosen) >= count:
            break
        chosen[pr["pr_number"]] = pr
        for twin in pr["counterparts"]:
            if twin["pr_number"] in by_number:
                chosen[twin["pr_number"]] = by_number[twin["pr_number"]]
    open_numbers = set(rng.sample(sorted(chosen), k=min(still_open, len(chosen))))
    stories, files = [], {}
    for number in sorted(chosen):
        pr = chosen[number]
        merged_at = datetime.fromisoformat(pr["committer_date"])
        opened = merged_at - timedelta(hours=rng.randrange(6, 240))
        paths = [f["path"] for f in pr["files"]]
        story = PullRequestStory(number, opened, base=pr["branch"], title=pr["title"]).opened()
        files[(number, 0)] = paths
        moment = opened
        for push in range(rng.randrange(0, 3)):
            moment += (merged_at - moment) / 3
            story.pushed(moment)
            files[(number, push + 1)] = paths
        if rng.random() < 0.3:
            story.labeled(moment + timedelta(minutes=5), rng.choice(["moe", "inference", "bug", "enhancement"]))
        if number not in open_numbers:
            story.merged(merged_at)
        stories.append(story)
    return MonthScenario(stories, files)


def deliver(scenario: MonthScenario, app: Any, client: Any, github: Any) -> None:
    """Post every delivery through the webhook, each head's files known to the fake GitHub as it is
    pushed, and run the jobs after each PR."""
    from tests.conftest import post, run_jobs

    heads = {(number, sha): paths for number, sha, paths in scenario.head_files()}
    for story in scenario.stories:
        for d in story.deliveries:
            sha = json.loads(d.body)["pull_request"]["head"]["sha"]
            if (story.number, sha) in heads:
                github.set_files(REPO, story.number, sha, heads[(story.number, sha)])
            assert post(client, d.body, d.event, d.delivery_id).status_code == 202
        run_jobs(app)
