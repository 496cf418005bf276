"""`tracker/core/since.py`: what changed in a month between two cutoffs of it.

The property test draws months of PR stories (opened, pushed to, closed, reopened, merged; each push a new
head whose files are code, tests only, or not known yet) and two cutoffs of September 2026, builds both
snapshots and reports, and checks the Since section of the later against the earlier one equals the
difference computed here from the stories' facts and heads, not from `tracker.core.since`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_snapshot import RULES, SHANGHAI, code, local, version
from tracker.core.attributes import AttributeVersion, version_at
from tracker.core.classify import Category, ChangedFile, HeadVerdict, classify_head
from tracker.core.report import Report, build_report
from tracker.core.since import (
    Since,
    SinceError,
    ThemeRef,
    difference,
    publication_cutoff,
    since_day,
    since_of,
    themes_of,
)
from tracker.core.snapshot import MonthSnapshot, build_snapshot
from tracker.core.timeline import Fact, FactKind
from tracker.core.window import Month, Window, resolve_window

REPO = "NVIDIA/Megatron-LM"
TODAY = date(2026, 10, 5)
SEPTEMBER = Month(2026, 9)
START = local(8, 25)  # stories begin up to a week before the month
HOUR = 3600
# What a story's PR is about: its title and the code it changes (tests aside).
AREAS = (
    ("Fix MoE router load balancing", "megatron/core/transformer/moe/router.py"),
    ("Add MoE token dispatcher overlap", "megatron/core/transformer/moe/token_dispatcher.py"),
    ("Speed up distributed checkpoint save", "megatron/core/dist_checkpointing/strategies/torch.py"),
    ("Async checkpoint loading for resharding", "megatron/core/dist_checkpointing/serialization.py"),
    ("Inference engine CUDA graphs", "megatron/core/inference/engines/dynamic_engine.py"),
    ("Inference KV cache paging", "megatron/core/inference/contexts/dynamic_context.py"),
    ("Fused layer norm for fp8", "megatron/core/fusions/fused_layer_norm.py"),
    ("Pipeline parallel schedule interleaving", "megatron/core/pipeline_parallel/schedules.py"),
)
CODE, TESTS, UNKNOWN = "code", "tests", "unknown"


@dataclass
class Story:
    """One PR: its facts and its heads (sha, pushed at, what its files are)."""

    number: int
    title: str
    path: str
    facts: list[Fact] = field(default_factory=list)
    heads: list[tuple[str, int, str]] = field(default_factory=list)

    def versions(self) -> list[AttributeVersion]:
        return [version(self.number, at, self.title, sha) for sha, at, _ in self.heads]

    def verdicts(self) -> dict[tuple[int, str], HeadVerdict]:
        found = {}
        for sha, _, kind in self.heads:
            if kind == CODE:
                found[(self.number, sha)] = code(sha, self.path)
            elif kind == TESTS:
                test = f"tests/unit_tests/test_{self.number}.py"
                found[(self.number, sha)] = classify_head(sha, [ChangedFile(test, "@@ -1 +1 @@\n-a\n+b\n")], RULES)
        return found


@st.composite
def stories(draw: st.DrawFn) -> list[Story]:
    made = []
    for number in range(1, draw(st.integers(1, 24)) + 1):
        title, path = draw(st.sampled_from(AREAS))
        story = Story(number, f"{title} ({number})", path)
        at = START + draw(st.integers(0, 36 * 24)) * HOUR  # opened up to the end of September
        story.facts.append(Fact(FactKind.OPENED, at))
        story.heads.append((f"sha{number}-0", at, draw(st.sampled_from((CODE, CODE, TESTS, UNKNOWN)))))
        state = "open"
        for step in range(draw(st.integers(0, 5))):
            at += draw(st.integers(1, 6 * 24)) * HOUR
            kinds = {"open": ("commit", "close", "merge"), "closed": ("reopen",), "merged": ()}[state]
            if not kinds:
                break
            kind = draw(st.sampled_from(kinds))
            if kind == "commit":
                sha = f"sha{number}-{step + 1}"
                story.heads.append((sha, at, draw(st.sampled_from((CODE, TESTS, UNKNOWN)))))
                story.facts.append(Fact(FactKind.COMMIT, at, sha))
            elif kind == "close":
                story.facts.append(Fact(FactKind.CLOSED, at))
                state = "closed"
            elif kind == "reopen":
                story.facts.append(Fact(FactKind.REOPENED, at))
                state = "open"
            else:
                story.facts.append(Fact(FactKind.MERGED, at))
                state = "merged"
        made.append(story)
    return made


def report_at(made: Sequence[Story], window: Window) -> Report:
    timelines = {story.number: story.facts for story in made}
    versions = {}
    for story in made:
        at_end = version_at(story.versions(), window.end)
        if at_end is not None:
            versions[story.number] = at_end
    verdicts = {key: verdict for story in made for key, verdict in story.verdicts().items()}
    snapshot = build_snapshot(REPO, window, timelines, versions, verdicts, RULES)
    paths = {story.number: [story.path] for story in made}
    return build_report(snapshot, paths)


def window(day: date) -> Window:
    return resolve_window("2026-09", day.isoformat(), SHANGHAI, TODAY)


# --- the difference, computed from the stories alone ---------------------------------------------


def inside(facts: Sequence[Fact], kind: FactKind, start: int, end: int) -> bool:
    return any(f.kind is kind and start <= f.at < end for f in facts)


def state_at(facts: Sequence[Fact], end: int) -> str:
    state = "none"
    for fact in sorted(facts, key=lambda f: f.at):
        if fact.at >= end:
            break
        if fact.kind in (FactKind.OPENED, FactKind.REOPENED):
            state = "open"
        elif fact.kind is FactKind.MERGED:
            state = "merged"
        elif fact.kind is FactKind.CLOSED:
            state = "closed"
    return state


def category_at(story: Story, end: int) -> Category:
    head = max((h for h in story.heads if h[1] < end), key=lambda h: h[1], default=story.heads[0])
    return {CODE: Category.SUBSTANTIVE, TESTS: Category.TEST_ONLY, UNKNOWN: Category.PENDING}[head[2]]


def active(story: Story, w: Window) -> bool:
    return any(w.start <= f.at < w.end for f in story.facts)


def expected(made: Sequence[Story], a: Window, b: Window, earlier: Report, later: Report) -> dict[str, object]:
    start = b.start
    counted = [s for s in made if active(s, b) and category_at(s, b.end) is Category.SUBSTANTIVE]

    def closed_unmerged(story: Story, w: Window) -> bool:
        return inside(story.facts, FactKind.CLOSED, start, w.end) and state_at(story.facts, w.end) == "closed"

    def reopened(story: Story, w: Window) -> bool:
        return inside(story.facts, FactKind.REOPENED, start, w.end) and state_at(story.facts, w.end) == "open"

    def new(test: object) -> list[int]:
        assert callable(test)
        return [s.number for s in counted if test(s, b) and not (active(s, a) and test(s, a))]

    before, after = earlier.placement(), later.placement()
    return {
        "newly_merged": [s.number for s in counted if inside(s.facts, FactKind.MERGED, a.end, b.end)],
        "newly_opened": [s.number for s in counted if inside(s.facts, FactKind.OPENED, a.end, b.end)],
        "closed_unmerged": new(closed_unmerged),
        "reopened": new(reopened),
        "reclassified": [
            (s.number, category_at(s, a.end), category_at(s, b.end))
            for s in made
            if active(s, a) and category_at(s, a.end) is not category_at(s, b.end)
        ],
        "moved": [
            (n, before[n]["theme"], after[n]["theme"])
            for n in sorted(set(before) & set(after))
            if before[n]["section"] == after[n]["section"] and before[n]["theme"] != after[n]["theme"]
        ],
    }


def observed(since: Since) -> dict[str, object]:
    return {
        "newly_merged": list(since.newly_merged),
        "newly_opened": list(since.newly_opened),
        "closed_unmerged": list(since.closed_unmerged),
        "reopened": list(since.reopened),
        "reclassified": [(item.number, item.before, item.after) for item in since.reclassified],
        "moved": [(item.number, item.before.id, item.after.id) for item in since.moved],
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(made=stories(), first=st.integers(1, 30), length=st.integers(0, 29))
def test_the_since_section_is_the_difference_of_the_two_snapshots(made: list[Story], first: int, length: int) -> None:
    a_day = date(2026, 9, first)
    b_day = min(a_day + timedelta(days=length), SEPTEMBER.last_day)
    a, b = window(a_day), window(b_day)
    earlier, later = report_at(made, a), report_at(made, b)
    since = since_of(earlier, later)
    assert (since.since, since.cutoff) == (a_day, b_day)
    assert observed(since) == expected(made, a, b, earlier, later)
    for listed in (since.newly_merged, since.newly_opened, since.closed_unmerged, since.reopened):
        assert list(listed) == sorted(set(listed))
    assert [item.number for item in since.reclassified] == sorted({item.number for item in since.reclassified})
    assert since.as_dict()["from"] == a_day.isoformat()
    # A cutoff against itself: nothing changed.
    assert since_of(later, later).empty


def test_a_push_that_leaves_only_tests_shows_the_pr_with_both_categories() -> None:
    story = Story(7, "Fix MoE router load balancing", "megatron/core/transformer/moe/router.py")
    story.facts = [Fact(FactKind.OPENED, local(9, 2)), Fact(FactKind.COMMIT, local(9, 10), "sha7-1")]
    story.heads = [("sha7-0", local(9, 2), CODE), ("sha7-1", local(9, 10), TESTS)]
    earlier, later = report_at([story], window(date(2026, 9, 5))), report_at([story], window(date(2026, 9, 12)))
    since = since_of(earlier, later)
    assert since.as_dict() == {
        "from": "2026-09-05",
        "newly_merged": [],
        "newly_opened": [],
        "closed_unmerged": [],
        "reopened": [],
        "reclassified": [{"number": 7, "from": "substantive", "to": "test_only"}],
        "moved": [],
    }
    assert not since.empty


def test_a_moved_pr_names_both_themes() -> None:
    earlier = report_at([], window(date(2026, 9, 5)))
    a = ThemeRef("in_progress", "moe", "MoE", "MoE")
    b = ThemeRef("in_progress", "router", "Router", "路由")
    merged = ThemeRef("delivered", "router", "Router", "路由")
    snapshot: MonthSnapshot = earlier.snapshot
    later = report_at([], window(date(2026, 9, 9))).snapshot
    since = difference(snapshot, later, {1: a, 2: a}, {1: b, 2: merged})
    # PR 2 changed section: the lists say it, the themes of two sections are not compared.
    assert [item.as_dict() for item in since.moved] == [
        {"number": 1, "from": a.as_dict(), "to": b.as_dict()},
    ]
    with pytest.raises(ValueError):
        difference(later, snapshot, {}, {})


def test_themes_of_a_report_name_each_narrated_pr() -> None:
    stories_ = [
        Story(n, f"{AREAS[n % 2][0]} ({n})", AREAS[n % 2][1], [Fact(FactKind.OPENED, local(9, 2))]) for n in range(1, 5)
    ]
    for story in stories_:
        story.heads = [(f"sha{story.number}-0", local(9, 2), CODE)]
    report = report_at(stories_, window(date(2026, 9, 5)))
    themes = themes_of(report)
    assert sorted(themes) == [1, 2, 3, 4]
    names = {(s.id, t.id): (t.en, t.zh) for s in report.sections for t in s.themes}
    for ref in themes.values():
        assert names[(ref.section, ref.id)] == (ref.en, ref.zh)


def test_since_day() -> None:
    w = window(date(2026, 9, 13))
    assert since_day("2026-09-06", w) == date(2026, 9, 6)
    assert since_day("2026-09-13", w) == date(2026, 9, 13)
    assert since_day("2026-08-20", w) == date(2026, 9, 1)  # before the month: its first day
    for bad in ("2026-09-14", "yesterday", "2026-9-6", "2026-02-30", "2026-W36-1", "２０２６-０９-０６"):
        with pytest.raises(SinceError):
            since_day(bad, w)
    with pytest.raises(SinceError, match="after the cutoff 2026-09-13"):
        since_day("2026-09-20", w)


def test_a_publications_cutoff_is_its_day_in_the_repositorys_time_zone() -> None:
    # 2026-09-07T20:00Z is 2026-09-08 04:00 in Shanghai.
    assert publication_cutoff(local(9, 8, 4), SEPTEMBER, SHANGHAI) == date(2026, 9, 8)
    assert publication_cutoff(local(10, 1, 3), SEPTEMBER, SHANGHAI) == date(2026, 9, 30)  # the final edition
    assert publication_cutoff(local(8, 30), SEPTEMBER, SHANGHAI) == date(2026, 9, 1)
