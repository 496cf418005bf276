"""The sample month `tracker demo` loads, and the statistics its own story data says to expect.

The bundle (`megatron-lm-2026-05.json.gz`, package data, built once by tools/make_demo.py) holds real
public NVIDIA/Megatron-LM pull requests of May 2026 (numbers, titles, base branches, changed paths,
merge instants) with made-up lives: the webhook deliveries GitHub would have sent for them, each
head's files as GitHub's files listing would give them, and each PR's story (what happened when).

`expected` counts the month from the stories alone, the way SEMANTICS defines the statistics, and
classifies each PR with the repository's exclusion rules; it never reads the ledger or a report, so
comparing it with the report checks the whole ingestion path.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from tracker.core.classify import Category, ChangedFile, Rules, classify_head, classify_pull_request
from tracker.core.window import Month, Window, month_window

BUNDLE = "megatron-lm-2026-05.json.gz"
SAMPLE_USER_AGENT = "GitHub-Hookshot/tracker-demo"


@dataclass(frozen=True)
class SampleDelivery:
    event: str
    delivery_id: str
    received_at: int  # epoch ms: when the event happened, as if GitHub sent it at once
    body: bytes


@dataclass(frozen=True)
class Step:
    action: str  # opened, synchronize, labeled, closed, reopened or merged
    at: int  # UTC epoch seconds
    head: str  # the PR's head sha after this step
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Story:
    number: int
    title: str
    base: str
    life: tuple[Step, ...]
    heads: dict[str, tuple[dict[str, Any], ...]]  # head sha -> GitHub's files listing of it


@dataclass(frozen=True)
class Bundle:
    repository: str
    month: str
    about: str
    stories: tuple[Story, ...]
    deliveries: tuple[SampleDelivery, ...]


@dataclass(frozen=True)
class Expected:
    window: Window
    stats: dict[str, int]  # opened, merged, closed_unmerged, active_at_cutoff (substantive PRs only)
    excluded: dict[str, int]  # category -> PRs of the month left out by the exclusion rules


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


@cache
def read_bundle() -> Bundle:
    raw = resources.files(__name__).joinpath(BUNDLE).read_bytes()
    data: dict[str, Any] = json.loads(gzip.decompress(raw))
    stories = tuple(
        Story(
            number=int(pr["number"]),
            title=str(pr["title"]),
            base=str(pr["base"]),
            life=tuple(
                Step(step["action"], _epoch(step["at"]), step["head"], tuple(step.get("labels", ())))
                for step in pr["life"]
            ),
            heads={head["sha"]: tuple(head["files"]) for head in pr["heads"]},
        )
        for pr in data["pull_requests"]
    )
    deliveries = tuple(
        SampleDelivery(d["event"], d["delivery_id"], int(d["received_at"]), d["body"].encode("utf-8"))
        for d in data["deliveries"]
    )
    return Bundle(data["repository"], data["month"], data["about"], stories, deliveries)


def changed_files(listing: tuple[dict[str, Any], ...]) -> list[ChangedFile]:
    """GitHub's files listing as the classifier reads it."""
    return [
        ChangedFile(
            path=str(item["filename"]),
            status=str(item.get("status", "modified")),
            previous_path=item.get("previous_filename"),
            additions=int(item.get("additions") or 0),
            deletions=int(item.get("deletions") or 0),
            patch=item.get("patch"),
        )
        for item in listing
    ]


def expected(bundle: Bundle, timezone: str, rules: Rules) -> Expected:
    """The month's statistics at its last day, in `timezone`, from the stories alone.

    A PR counts when something happened to it inside the window: opened if it was opened then, merged
    if merged then, closed without merge if closed then and still closed at the end, active at the
    cutoff if open at the end and opened or pushed to then; only PRs whose head at the end (with the
    title and labels then) the rules call substantive count."""
    month = Month.parse(bundle.month)
    window = month_window(month, month.last_day, timezone, ended=True)
    stats = Counter({"opened": 0, "merged": 0, "closed_unmerged": 0, "active_at_cutoff": 0})
    excluded: Counter[str] = Counter()
    for story in bundle.stories:
        before = [step for step in story.life if step.at < window.end]
        # A label changes no state and proves nothing about the window: it is not activity.
        inside = {step.action for step in before if step.at >= window.start and step.action != "labeled"}
        if not before or not inside:
            continue
        state = "open"
        for step in before:
            if step.action in ("opened", "reopened"):
                state = "open"
            elif step.action in ("closed", "merged"):
                state = step.action
        last = before[-1]
        verdict = classify_head(last.head, changed_files(story.heads[last.head]), rules)
        category, _ = classify_pull_request(verdict, story.title, last.labels, rules)
        if category is not Category.SUBSTANTIVE:
            excluded[category.value] += 1
            continue
        stats["opened"] += "opened" in inside
        stats["merged"] += "merged" in inside
        stats["closed_unmerged"] += "closed" in inside and state == "closed"
        stats["active_at_cutoff"] += state == "open" and bool(inside & {"opened", "synchronize"})
    return Expected(window, dict(stats), dict(sorted(excluded.items())))
