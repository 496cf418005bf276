"""`tracker/timeline.py`: facts with GitHub's timestamps, folded into a state at an instant.

SEMANTICS, "Events and state": opened (`created_at`), commit activity (`synchronize` at
`pull_request.updated_at`), closed without merge, merged, reopened; everything else is not activity.
Ties at one instant are ordered opened < closed < reopened < merged.
"""

from __future__ import annotations

import itertools
import json
from datetime import date
from typing import Any

import pytest

from bench.fixtures.factory import pr_payload
from bench.fixtures.paths import WEBHOOKS, needs_shared
from tests.support.clock import utc
from tracker.core.payloads import parse_pull_request_event
from tracker.core.timeline import Activity, Fact, FactKind, PRState, facts_of, ordered, state_before
from tracker.core.window import Month, month_window

OPENED, COMMIT, CLOSED, REOPENED, MERGED = (
    FactKind.OPENED,
    FactKind.COMMIT,
    FactKind.CLOSED,
    FactKind.REOPENED,
    FactKind.MERGED,
)


def event(action: str, **fields: Any) -> Any:
    return parse_pull_request_event(json.dumps(pr_payload(action, 7, **fields)).encode())


T0 = "2026-09-02T03:00:00Z"  # created_at
T1 = "2026-09-03T04:05:06Z"
T2 = "2026-09-04T10:00:00Z"


# --- facts_of -----------------------------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize(
    ("action", "fields", "expected"),
    [
        ("opened", {"created_at": T0}, {Fact(OPENED, utc(2026, 9, 2, 3))}),
        (
            "synchronize",
            {"created_at": T0, "updated_at": T1},
            {Fact(OPENED, utc(2026, 9, 2, 3)), Fact(COMMIT, utc(2026, 9, 3, 4, 5, 6))},
        ),
        (
            "closed",
            {"created_at": T0, "updated_at": T2, "closed_at": T1},
            {Fact(OPENED, utc(2026, 9, 2, 3)), Fact(CLOSED, utc(2026, 9, 3, 4, 5, 6))},
        ),
        (
            "closed",
            {"created_at": T0, "updated_at": T2, "closed_at": T1, "merged_at": T1},
            {Fact(OPENED, utc(2026, 9, 2, 3)), Fact(MERGED, utc(2026, 9, 3, 4, 5, 6))},
        ),
        (
            "reopened",
            {"created_at": T0, "updated_at": T2},
            {Fact(OPENED, utc(2026, 9, 2, 3)), Fact(REOPENED, utc(2026, 9, 4, 10))},
        ),
        ("labeled", {"created_at": T0, "updated_at": T2, "labels": ("bug",)}, {Fact(OPENED, utc(2026, 9, 2, 3))}),
        ("unlabeled", {"created_at": T0, "updated_at": T2}, {Fact(OPENED, utc(2026, 9, 2, 3))}),
        ("edited", {"created_at": T0, "updated_at": T2, "title": "New"}, {Fact(OPENED, utc(2026, 9, 2, 3))}),
        ("assigned", {"created_at": T0, "updated_at": T2}, {Fact(OPENED, utc(2026, 9, 2, 3))}),
        ("review_requested", {"created_at": T0, "updated_at": T2}, {Fact(OPENED, utc(2026, 9, 2, 3))}),
        ("converted_to_draft", {"created_at": T0, "updated_at": T2, "draft": True}, {Fact(OPENED, utc(2026, 9, 2, 3))}),
        ("ready_for_review", {"created_at": T0, "updated_at": T2}, {Fact(OPENED, utc(2026, 9, 2, 3))}),
        # A non-activity delivery on a closed or merged PR still re-proves its state facts.
        (
            "labeled",
            {"created_at": T0, "updated_at": T2, "closed_at": T1},
            {Fact(OPENED, utc(2026, 9, 2, 3)), Fact(CLOSED, utc(2026, 9, 3, 4, 5, 6))},
        ),
        (
            "edited",
            {"created_at": T0, "updated_at": T2, "closed_at": T1, "merged_at": T1},
            {Fact(OPENED, utc(2026, 9, 2, 3)), Fact(MERGED, utc(2026, 9, 3, 4, 5, 6))},
        ),
    ],
    ids=[
        "opened",
        "synchronize-commit-at-updated_at",
        "closed-unmerged-at-closed_at",
        "closed-merged-at-merged_at",
        "reopened-at-updated_at",
        "labeled",
        "unlabeled",
        "edited",
        "assigned",
        "review_requested",
        "converted_to_draft",
        "ready_for_review",
        "labeled-on-closed-pr",
        "edited-on-merged-pr",
    ],
)
def test_facts_of(action: str, fields: dict[str, Any], expected: set[Fact]) -> None:
    facts = facts_of(event(action, **fields))
    assert set(facts) == expected
    assert len(facts) == len(expected)


@needs_shared
def test_facts_of_uses_payload_times_not_arrival() -> None:
    # A synchronize delivered long after the push is still stamped with the payload's updated_at.
    facts = facts_of(event("synchronize", created_at="2026-08-31T15:59:59Z", updated_at="2026-09-30T16:00:00Z"))
    assert set(facts) == {Fact(OPENED, utc(2026, 8, 31, 15, 59, 59)), Fact(COMMIT, utc(2026, 9, 30, 16))}


@needs_shared
def test_facts_of_a_merge_is_not_also_a_close() -> None:
    facts = facts_of(event("closed", created_at=T0, closed_at=T1, merged_at=T1))
    assert CLOSED not in {fact.kind for fact in facts}


@needs_shared
def test_facts_of_github_example_closed_payload() -> None:
    document = (WEBHOOKS / "pull_request.closed.json").read_bytes()
    facts = facts_of(parse_pull_request_event(document))
    assert set(facts) == {Fact(OPENED, utc(2019, 5, 15, 15, 20, 33)), Fact(CLOSED, utc(2019, 5, 15, 15, 21, 18))}


@needs_shared
def test_facts_of_github_example_synchronize_payload() -> None:
    document = (WEBHOOKS / "pull_request.synchronize.json").read_bytes()
    facts = facts_of(parse_pull_request_event(document))
    assert set(facts) == {Fact(OPENED, utc(2019, 5, 15, 15, 20, 33)), Fact(COMMIT, utc(2019, 5, 15, 15, 20, 33))}


@needs_shared
def test_facts_of_github_example_labeled_payload() -> None:
    document = (WEBHOOKS / "pull_request.labeled.json").read_bytes()
    assert facts_of(parse_pull_request_event(document)) == [Fact(OPENED, utc(2019, 5, 15, 15, 20, 33))]


# --- ordering and state -------------------------------------------------------------------------

AT = utc(2026, 9, 5, 12)


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ((CLOSED, OPENED), [OPENED, CLOSED]),
        ((REOPENED, CLOSED), [CLOSED, REOPENED]),
        ((MERGED, REOPENED), [REOPENED, MERGED]),
        ((MERGED, REOPENED, CLOSED, OPENED), [OPENED, CLOSED, REOPENED, MERGED]),
    ],
)
def test_tie_order_at_one_instant(kinds: tuple[FactKind, ...], expected: list[FactKind]) -> None:
    for permutation in itertools.permutations(kinds):
        result = [fact.kind for fact in ordered(Fact(kind, AT) for kind in permutation)]
        assert result == expected


def test_time_wins_over_tie_order() -> None:
    facts = [Fact(OPENED, AT + 1), Fact(MERGED, AT), Fact(CLOSED, AT + 2)]
    assert ordered(facts) == [Fact(MERGED, AT), Fact(OPENED, AT + 1), Fact(CLOSED, AT + 2)]


def test_ordered_drops_duplicates() -> None:
    facts = [Fact(OPENED, AT), Fact(COMMIT, AT + 5), Fact(OPENED, AT), Fact(COMMIT, AT + 5)]
    assert ordered(facts) == [Fact(OPENED, AT), Fact(COMMIT, AT + 5)]


@pytest.mark.parametrize(
    ("facts", "end", "expected"),
    [
        ([], AT, None),
        ([Fact(OPENED, AT)], AT, None),  # the end is exclusive
        ([Fact(OPENED, AT)], AT + 1, PRState.OPEN),
        ([Fact(OPENED, AT), Fact(CLOSED, AT + 10)], AT + 10, PRState.OPEN),
        ([Fact(OPENED, AT), Fact(CLOSED, AT + 10)], AT + 11, PRState.CLOSED),
        ([Fact(OPENED, AT), Fact(MERGED, AT + 10)], AT + 11, PRState.MERGED),
        ([Fact(OPENED, AT), Fact(CLOSED, AT + 10), Fact(REOPENED, AT + 20)], AT + 15, PRState.CLOSED),
        ([Fact(OPENED, AT), Fact(CLOSED, AT + 10), Fact(REOPENED, AT + 20)], AT + 21, PRState.OPEN),
        ([Fact(OPENED, AT), Fact(COMMIT, AT + 10)], AT + 11, PRState.OPEN),
        (
            [Fact(OPENED, AT), Fact(CLOSED, AT + 10), Fact(REOPENED, AT + 20), Fact(MERGED, AT + 30)],
            AT + 31,
            PRState.MERGED,
        ),
        # Ties, given in the "wrong" order on purpose.
        ([Fact(CLOSED, AT), Fact(OPENED, AT)], AT + 1, PRState.CLOSED),
        ([Fact(OPENED, AT - 5), Fact(REOPENED, AT), Fact(CLOSED, AT)], AT + 1, PRState.OPEN),
        ([Fact(OPENED, AT - 5), Fact(MERGED, AT), Fact(REOPENED, AT)], AT + 1, PRState.MERGED),
        ([Fact(MERGED, AT), Fact(OPENED, AT)], AT + 1, PRState.MERGED),
        ([Fact(COMMIT, AT), Fact(CLOSED, AT), Fact(OPENED, AT - 1)], AT + 1, PRState.CLOSED),
    ],
    ids=[
        "no-facts",
        "opened-at-end",
        "opened-before-end",
        "closed-at-end",
        "closed-before-end",
        "merged",
        "closed-reopen-later",
        "closed-reopened",
        "commit-changes-nothing",
        "closed-reopened-merged",
        "tie-opened-closed",
        "tie-closed-reopened",
        "tie-reopened-merged",
        "tie-opened-merged",
        "tie-commit-closed",
    ],
)
def test_state_before(facts: list[Fact], end: int, expected: PRState | None) -> None:
    assert state_before(ordered(facts), end) is expected


# --- Activity -----------------------------------------------------------------------------------

SEPTEMBER_13 = month_window(Month(2026, 9), date(2026, 9, 13), "Asia/Shanghai")  # [08-31 16:00Z, 09-13 16:00Z)


def test_activity_in_window_uses_window_bounds() -> None:
    facts = [
        Fact(OPENED, utc(2026, 8, 31, 15, 59, 59)),  # August in Shanghai
        Fact(COMMIT, utc(2026, 8, 31, 16)),  # the first second of September
        Fact(CLOSED, utc(2026, 9, 13, 15, 59, 59)),  # the last second of the cutoff day
        Fact(REOPENED, utc(2026, 9, 13, 16)),  # after the cutoff
        Fact(MERGED, utc(2026, 9, 20)),
    ]
    activity = Activity.in_window(facts, SEPTEMBER_13)
    assert activity == Activity(opened=False, committed=True, closed=True, reopened=False, merged=False)
    assert activity.any


def test_activity_nothing_inside() -> None:
    facts = [Fact(OPENED, utc(2026, 8, 1)), Fact(COMMIT, utc(2026, 9, 14))]
    activity = Activity.in_window(facts, SEPTEMBER_13)
    assert activity == Activity(opened=False, committed=False, closed=False, reopened=False, merged=False)
    assert not activity.any


@pytest.mark.parametrize("kind", list(FactKind))
def test_activity_any_for_each_kind(kind: FactKind) -> None:
    assert Activity.in_window([Fact(kind, utc(2026, 9, 5))], SEPTEMBER_13).any
