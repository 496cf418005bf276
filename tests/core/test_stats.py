"""`tracker/stats.py` and `tracker/snapshot.py`: SEMANTICS "Statistics", rule by rule.

Every case is the September 2026 window of a repository in Asia/Shanghai at cutoff 2026-09-13,
i.e. [2026-09-01 00:00, 2026-09-14 00:00) local = [2026-08-31T16:00Z, 2026-09-13T16:00Z).
Times are written in Shanghai local time and converted by hand (UTC = local - 8 h).
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, date, datetime

import pytest

from tracker.core.attributes import AttributeVersion
from tracker.core.classify import Category, HeadVerdict
from tracker.core.snapshot import MonthSnapshot, build_snapshot
from tracker.core.stats import MonthStats, PullRequestStatus, assess
from tracker.core.timeline import Fact, FactKind, PRState
from tracker.core.window import Month, Window, month_window

SHANGHAI = "Asia/Shanghai"
WINDOW = month_window(Month(2026, 9), date(2026, 9, 13), SHANGHAI)
FINAL = month_window(Month(2026, 9), date(2026, 9, 30), SHANGHAI)
AUGUST = month_window(Month(2026, 8), date(2026, 8, 31), SHANGHAI)


def local(month: int, day: int, hour: int = 12, minute: int = 0, second: int = 0) -> int:
    """Epoch seconds of a Shanghai wall-clock time in 2026 (UTC+8, no DST)."""
    return int(datetime(2026, month, day, hour, minute, second, tzinfo=UTC).timestamp()) - 8 * 3600


def opened(at: int) -> Fact:
    return Fact(FactKind.OPENED, at)


def commit(at: int) -> Fact:
    return Fact(FactKind.COMMIT, at)


def closed(at: int) -> Fact:  # without merge
    return Fact(FactKind.CLOSED, at)


def reopened(at: int) -> Fact:
    return Fact(FactKind.REOPENED, at)


def merged(at: int) -> Fact:
    return Fact(FactKind.MERGED, at)


AUG = local(8, 20)
AUG_LATE = local(8, 25)
AFTER = local(9, 20)  # after the cutoff, still September
OPEN, CLOSED, MERGED = PRState.OPEN, PRState.CLOSED, PRState.MERGED

# (facts, expected) with expected = None (the PR is not in the month) or
# (state at cutoff, opened, merged, closed_unmerged, active_at_cutoff) as 0/1.
CASES: dict[str, tuple[list[Fact], tuple[PRState, int, int, int, int] | None]] = {
    # opened: created_at inside the window
    "opened-in-window": ([opened(local(9, 2))], (OPEN, 1, 0, 0, 1)),
    "opened-first-second-of-month": ([opened(local(9, 1, 0, 0, 0))], (OPEN, 1, 0, 0, 1)),
    "opened-last-second-of-cutoff-day": ([opened(local(9, 13, 23, 59, 59))], (OPEN, 1, 0, 0, 1)),
    "opened-first-second-after-cutoff": ([opened(local(9, 14, 0, 0, 0))], None),
    "opened-last-second-of-august": ([opened(local(8, 31, 23, 59, 59))], None),
    # a PR from an earlier month enters only through activity inside the window
    "earlier-month-commit-in-window-is-active": ([opened(AUG), commit(local(9, 5))], (OPEN, 0, 0, 0, 1)),
    "earlier-month-no-fact-in-window": ([opened(AUG)], None),  # e.g. only a label this month
    "earlier-month-commit-after-cutoff": ([opened(AUG), commit(AFTER)], None),
    "earlier-month-commit-at-month-start": (
        [opened(local(8, 31, 23, 59, 59)), commit(local(9, 1, 0, 0, 0))],
        (OPEN, 0, 0, 0, 1),
    ),
    "earlier-month-merged-last-month": ([opened(AUG), merged(AUG_LATE)], None),
    "earlier-month-closed-last-month": ([opened(AUG), closed(AUG_LATE)], None),
    "earlier-month-reopened-after-cutoff": ([opened(AUG), closed(AUG_LATE), reopened(AFTER)], None),
    "earlier-month-merge-after-cutoff-only": ([opened(AUG), merged(AFTER)], None),
    # merged: a merge inside the window
    "earlier-month-merged-in-window": ([opened(AUG), merged(local(9, 5))], (MERGED, 0, 1, 0, 0)),
    "opened-and-merged-in-window": ([opened(local(9, 2)), merged(local(9, 5))], (MERGED, 1, 1, 0, 0)),
    "merge-after-cutoff-is-open-at-cutoff": ([opened(local(9, 2)), merged(AFTER)], (OPEN, 1, 0, 0, 1)),
    "merge-at-window-end-is-after-cutoff": ([opened(local(9, 2)), merged(local(9, 14, 0, 0, 0))], (OPEN, 1, 0, 0, 1)),
    "merge-last-second-of-cutoff-day": ([opened(local(9, 2)), merged(local(9, 13, 23, 59, 59))], (MERGED, 1, 1, 0, 0)),
    "commit-in-window-merge-after-cutoff": ([opened(AUG), commit(local(9, 3)), merged(AFTER)], (OPEN, 0, 0, 0, 1)),
    # closed without merge: a close inside the window and closed (not merged) at the cutoff
    "earlier-month-closed-in-window": ([opened(AUG), closed(local(9, 5))], (CLOSED, 0, 0, 1, 0)),
    "opened-and-closed-in-window": ([opened(local(9, 2)), closed(local(9, 5))], (CLOSED, 1, 0, 1, 0)),
    "closed-then-reopened-in-window-counts-0": (
        [opened(AUG), closed(local(9, 5)), reopened(local(9, 6))],
        (OPEN, 0, 0, 0, 0),
    ),
    "opened-closed-reopened-in-window": (
        [opened(local(9, 2)), closed(local(9, 5)), reopened(local(9, 6))],
        (OPEN, 1, 0, 0, 1),
    ),
    "closed-in-window-reopened-after-cutoff-counts-1": (
        [opened(AUG), closed(local(9, 5)), reopened(AFTER)],
        (CLOSED, 0, 0, 1, 0),
    ),
    "closed-reopened-closed-in-window": (
        [opened(local(9, 2)), closed(local(9, 3)), reopened(local(9, 4)), closed(local(9, 5))],
        (CLOSED, 1, 0, 1, 0),
    ),
    "closed-reopened-merged-in-window": (
        [opened(AUG), closed(local(9, 3)), reopened(local(9, 4)), merged(local(9, 5))],
        (MERGED, 0, 1, 0, 0),
    ),
    "closed-last-second-of-cutoff-day": ([opened(AUG), closed(local(9, 13, 23, 59, 59))], (CLOSED, 0, 0, 1, 0)),
    "closed-after-cutoff-commit-in-window": ([opened(AUG), commit(local(9, 3)), closed(AFTER)], (OPEN, 0, 0, 0, 1)),
    "committed-then-closed-in-window-is-not-active": (
        [opened(AUG), commit(local(9, 3)), closed(local(9, 5))],
        (CLOSED, 0, 0, 1, 0),
    ),
    # reopening is activity (the PR is in the month) but neither opening nor a commit
    "closed-last-month-reopened-in-window": (
        [opened(AUG), closed(AUG_LATE), reopened(local(9, 5))],
        (OPEN, 0, 0, 0, 0),
    ),
    "closed-last-month-reopened-and-committed": (
        [opened(AUG), closed(AUG_LATE), reopened(local(9, 5)), commit(local(9, 6))],
        (OPEN, 0, 0, 0, 1),
    ),
    # ties at one instant: opened < closed < reopened < merged, whatever the input order
    "tie-closed-opened": ([closed(local(9, 5)), opened(local(9, 5))], (CLOSED, 1, 0, 1, 0)),
    "tie-reopened-closed": ([opened(AUG), reopened(local(9, 5)), closed(local(9, 5))], (OPEN, 0, 0, 0, 0)),
    "tie-merged-reopened": (
        [opened(AUG), closed(local(9, 4)), merged(local(9, 5)), reopened(local(9, 5))],
        (MERGED, 0, 1, 0, 0),
    ),
    "tie-merged-opened": ([merged(local(9, 5)), opened(local(9, 5))], (MERGED, 1, 1, 0, 0)),
    # duplicates of a fact count once
    "duplicates": (
        [
            opened(local(9, 2)),
            opened(local(9, 2)),
            closed(local(9, 5)),
            closed(local(9, 5)),
            reopened(local(9, 6)),
            reopened(local(9, 6)),
        ],
        (OPEN, 1, 0, 0, 1),
    ),
    "duplicate-merge": ([opened(AUG), merged(local(9, 5)), merged(local(9, 5))], (MERGED, 0, 1, 0, 0)),
}


def counts(status: PullRequestStatus) -> tuple[PRState, int, int, int, int]:
    return (
        status.state,
        int(status.counts_opened),
        int(status.counts_merged),
        int(status.counts_closed_unmerged),
        int(status.counts_active),
    )


@pytest.mark.parametrize(("facts", "expected"), list(CASES.values()), ids=list(CASES))
def test_assess(facts: list[Fact], expected: tuple[PRState, int, int, int, int] | None) -> None:
    status = assess(42, facts, WINDOW)
    if expected is None:
        assert status is None
    else:
        assert status is not None
        assert status.number == 42
        assert counts(status) == expected


@pytest.mark.parametrize(("facts", "expected"), list(CASES.values()), ids=list(CASES))
def test_assess_does_not_depend_on_fact_order(facts: list[Fact], expected: object) -> None:
    rng = random.Random(len(facts))
    orders = [list(reversed(facts))] + [rng.sample(facts, len(facts)) for _ in range(5)]
    if len(facts) <= 4:
        orders = [list(p) for p in itertools.permutations(facts)]
    reference = assess(42, facts, WINDOW)
    for order in orders:
        assert assess(42, order, WINDOW) == reference


@pytest.mark.parametrize(("facts", "expected"), list(CASES.values()), ids=list(CASES))
def test_month_stats_of_one_pr(facts: list[Fact], expected: tuple[PRState, int, int, int, int] | None) -> None:
    status = assess(1, facts, WINDOW)
    stats = MonthStats.of([status] if status is not None else [])
    want = expected[1:] if expected is not None else (0, 0, 0, 0)
    assert (stats.opened, stats.merged, stats.closed_unmerged, stats.active_at_cutoff) == want


def test_month_stats_sum_over_prs() -> None:
    timelines = {
        1: [opened(local(9, 2))],  # opened, active
        2: [opened(local(9, 3)), merged(local(9, 8))],  # opened, merged
        3: [opened(AUG), closed(local(9, 4))],  # closed unmerged
        4: [opened(AUG), closed(local(9, 4)), reopened(local(9, 5))],  # in the month, counts nothing
        5: [opened(AUG), commit(local(9, 6))],  # active
        6: [opened(AUG)],  # not in the month
        7: [opened(local(9, 10)), closed(local(9, 11)), reopened(AFTER)],  # opened, closed unmerged
        8: [opened(AUG), merged(AFTER), commit(local(9, 12))],  # active
    }
    statuses = [s for n, f in timelines.items() if (s := assess(n, f, WINDOW)) is not None]
    assert [s.number for s in statuses] == [1, 2, 3, 4, 5, 7, 8]
    stats = MonthStats.of(statuses)
    assert stats == MonthStats(opened=3, merged=1, closed_unmerged=2, active_at_cutoff=3)
    assert stats.as_dict() == {"opened": 3, "merged": 1, "closed_unmerged": 2, "active_at_cutoff": 3}


def test_month_stats_of_nothing() -> None:
    assert MonthStats.of([]).as_dict() == {"opened": 0, "merged": 0, "closed_unmerged": 0, "active_at_cutoff": 0}


def test_nothing_carries_over_between_months() -> None:
    # Opened in August and still open: August counts it, September does not see it at all.
    facts = [opened(AUG)]
    august = assess(9, facts, AUGUST)
    assert august is not None and counts(august) == (OPEN, 1, 0, 0, 1)
    assert assess(9, facts, WINDOW) is None
    assert assess(9, facts, FINAL) is None


def test_one_timeline_at_two_cutoffs() -> None:
    facts = [opened(AUG), closed(local(9, 5)), reopened(AFTER), merged(local(9, 25))]
    at_13 = assess(3, facts, WINDOW)
    at_30 = assess(3, facts, FINAL)
    assert at_13 is not None and counts(at_13) == (CLOSED, 0, 0, 1, 0)
    assert at_30 is not None and counts(at_30) == (MERGED, 0, 1, 0, 0)


# --- build_snapshot -----------------------------------------------------------------------------


def version(at: int, title: str, labels: tuple[str, ...] = (), delivery_id: str = "d") -> AttributeVersion:
    return AttributeVersion(
        at=at,
        delivery_id=delivery_id,
        title=title,
        body="",
        base_ref="main",
        head_ref="feature",
        head_sha="abc123",
        labels=labels,
        draft=False,
        author="octocat",
    )


def substantive(
    repo: str, window: Window, timelines: dict[int, list[Fact]], versions: dict[int, AttributeVersion]
) -> MonthSnapshot:
    """build_snapshot with head `abc123` classified substantive: every PR with a known version counts."""
    verdict = HeadVerdict("abc123", Category.SUBSTANTIVE, False, {"rule": "code_changed"})
    return build_snapshot(repo, window, timelines, versions, {(n, "abc123"): verdict for n in timelines})


def test_build_snapshot_lists_only_prs_with_activity_in_the_window() -> None:
    timelines = {
        30: [opened(local(9, 2)), merged(AFTER)],
        10: [opened(AUG), commit(local(9, 5))],
        20: [opened(AUG)],  # a label this month is not activity: absent
        40: [opened(AUG), closed(local(9, 4)), closed(local(9, 4))],
    }
    versions = {30: version(local(9, 2), "Thirty", ("bug",)), 10: version(local(9, 5), "Ten")}
    snapshot = substantive("NVIDIA/Megatron-LM", WINDOW, timelines, versions)
    document = snapshot.as_dict()

    assert document["repo"] == "NVIDIA/Megatron-LM"
    assert document["month"] == "2026-09"
    assert document["cutoff"] == "2026-09-13"
    assert document["timezone"] == SHANGHAI
    assert document["final"] is False
    assert document["window"] == {"start": "2026-08-31T16:00:00Z", "end": "2026-09-13T16:00:00Z"}
    # 40 has no known version, so no known head: pending, and not counted until its files are known.
    assert document["stats"] == {"opened": 1, "merged": 0, "closed_unmerged": 0, "active_at_cutoff": 2}
    assert document["pending_classification"] == 1
    assert [pr["number"] for pr in document["pull_requests"]] == [10, 30, 40]

    ten, thirty, forty = document["pull_requests"]
    assert ten["title"] == "Ten"
    assert ten["state_at_cutoff"] == "open"
    assert ten["created_at"] == "2026-08-20T04:00:00Z"
    assert ten["activity"] == {"opened": False, "committed": True, "closed": False, "reopened": False, "merged": False}
    assert ten["counted"] == {"opened": False, "merged": False, "closed_unmerged": False, "active_at_cutoff": True}

    # Merged after the cutoff: open at the cutoff, no merge time shown, not counted as merged.
    assert thirty["url"] == "https://github.com/NVIDIA/Megatron-LM/pull/30"
    assert thirty["state_at_cutoff"] == "open"
    assert thirty["merged_at"] is None
    assert thirty["labels"] == ["bug"]
    assert thirty["counted"] == {"opened": True, "merged": False, "closed_unmerged": False, "active_at_cutoff": True}

    # No version known: empty attributes, pending, not counted.
    assert forty["title"] == ""
    assert forty["labels"] == []
    assert forty["state_at_cutoff"] == "closed"
    assert forty["category"] == "pending"
    assert forty["counted"]["closed_unmerged"] is False


def test_build_snapshot_final_report_shows_the_merge() -> None:
    timelines = {30: [opened(local(9, 2)), merged(AFTER)]}
    document = substantive("o/r", FINAL, timelines, {30: version(local(9, 2), "Thirty")}).as_dict()
    assert document["final"] is True
    assert document["window"] == {"start": "2026-08-31T16:00:00Z", "end": "2026-09-30T16:00:00Z"}
    assert document["stats"] == {"opened": 1, "merged": 1, "closed_unmerged": 0, "active_at_cutoff": 0}
    (pr,) = document["pull_requests"]
    assert pr["state_at_cutoff"] == "merged"
    assert pr["merged_at"] == "2026-09-20T04:00:00Z"


def test_build_snapshot_counts_duplicates_once() -> None:
    once = {1: [opened(local(9, 2)), commit(local(9, 3))], 2: [opened(AUG), merged(local(9, 4))]}
    twice = {number: facts + list(reversed(facts)) for number, facts in once.items()}
    versions = {n: version(AUG, f"PR {n}") for n in once}
    a = substantive("o/r", WINDOW, once, versions).as_dict()
    b = substantive("o/r", WINDOW, twice, versions).as_dict()
    assert a == b
    assert a["stats"] == {"opened": 1, "merged": 1, "closed_unmerged": 0, "active_at_cutoff": 1}


def test_build_snapshot_does_not_depend_on_mapping_order() -> None:
    timelines = {3: [opened(local(9, 2))], 1: [opened(AUG), commit(local(9, 3))], 2: [opened(AUG), closed(local(9, 4))]}
    reordered = dict(sorted(timelines.items()))
    a = substantive("o/r", WINDOW, timelines, {})
    b = substantive("o/r", WINDOW, reordered, {})
    assert a.as_dict() == b.as_dict()
    assert [pr["number"] for pr in a.as_dict()["pull_requests"]] == [1, 2, 3]
