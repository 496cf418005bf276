"""A pull request's timeline: facts with GitHub's timestamps, and its state folded at an instant.

Folding sorts by (time, tie order), so the result never depends on the order deliveries arrived in,
and a fact seen twice is one fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from tracker.core.payloads import PullRequestEvent
from tracker.core.window import Window, epoch


class FactKind(StrEnum):
    OPENED = "opened"
    COMMIT = "commit"
    CLOSED = "closed"
    REOPENED = "reopened"
    MERGED = "merged"


# SEMANTICS: events at the same instant are ordered opened < closed < reopened < merged.
# Commit activity changes no state, so its place among ties does not matter.
TIE_ORDER = {
    FactKind.OPENED: 0,
    FactKind.CLOSED: 1,
    FactKind.REOPENED: 2,
    FactKind.MERGED: 3,
    FactKind.COMMIT: 4,
}


class PRState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"
    MERGED = "merged"


# How sure a fact's instant is, best first: a webhook delivery stamped it as it happened; GitHub
# recorded the event's time (a timeline event); only a commit's own date is known (a commit can be
# made long before it is pushed). Of several reports of one fact, a report uses the best.
WEBHOOK_TIME, EVENT_TIME, COMMIT_DATE = 0, 1, 2


@dataclass(frozen=True)
class Fact:
    kind: FactKind
    at: int  # UTC epoch seconds, as GitHub stamped it
    # What makes two reports of one fact the same fact (see month_state): the head sha of commit
    # activity when known, else the instant. Neither it nor `rank` takes part in comparisons: folding
    # a timeline needs only the kind and the instant.
    ident: str = field(default="", compare=False)
    rank: int = field(default=WEBHOOK_TIME, compare=False)

    @property
    def identity(self) -> str:
        return self.ident or str(self.at)

    @property
    def sort_key(self) -> tuple[int, int]:
        return (self.at, TIE_ORDER[self.kind])


def facts_of(event: PullRequestEvent) -> list[Fact]:
    """Every fact one delivery proves.

    Each payload carries the PR's `created_at`, and `merged_at`/`closed_at` for its current state,
    so any delivery re-proves those facts (a lost `opened` delivery costs nothing). Commit activity
    and reopening are only visible in their own actions, stamped with the payload's `updated_at`.
    """
    pr = event.pull_request
    facts = [Fact(FactKind.OPENED, epoch(pr.created_at))]
    if pr.merged_at is not None:
        facts.append(Fact(FactKind.MERGED, epoch(pr.merged_at)))
    elif pr.state == "closed" and pr.closed_at is not None:
        facts.append(Fact(FactKind.CLOSED, epoch(pr.closed_at)))
    if event.action == "synchronize":
        # A push is identified by the head it made, which a backfill also sees (as a commit).
        facts.append(Fact(FactKind.COMMIT, epoch(pr.updated_at), ident=(pr.head.sha or "").lower()))
    elif event.action == "reopened":
        facts.append(Fact(FactKind.REOPENED, epoch(pr.updated_at)))
    return facts


def ordered(facts: Iterable[Fact]) -> list[Fact]:
    # By `sort_key`: equal facts are one in the set, and different ones never share an instant and a kind.
    return sorted(set(facts), key=_sort_key)


def _sort_key(fact: Fact) -> tuple[int, int]:
    return (fact.at, TIE_ORDER[fact.kind])  # Fact.sort_key, without a property call per comparison key


def state_before(facts: Sequence[Fact], end: int) -> PRState | None:
    """The PR's state just before `end`, or None if it did not exist yet. `facts` must be ordered."""
    state: PRState | None = None
    for fact in facts:
        if fact.at >= end:
            break
        if fact.kind in (FactKind.OPENED, FactKind.REOPENED):
            state = PRState.OPEN
        elif fact.kind is FactKind.CLOSED:
            state = PRState.CLOSED
        elif fact.kind is FactKind.MERGED:
            state = PRState.MERGED
    return state


@dataclass(frozen=True)
class Activity:
    """Which kinds of fact fall inside a window."""

    opened: bool
    committed: bool
    closed: bool
    reopened: bool
    merged: bool

    @property
    def any(self) -> bool:
        return self.opened or self.committed or self.closed or self.reopened or self.merged

    @classmethod
    def in_window(cls, facts: Iterable[Fact], window: Window) -> Activity:
        start, end = window.start, window.end
        kinds = {fact.kind for fact in facts if start <= fact.at < end}
        return cls(
            opened=FactKind.OPENED in kinds,
            committed=FactKind.COMMIT in kinds,
            closed=FactKind.CLOSED in kinds,
            reopened=FactKind.REOPENED in kinds,
            merged=FactKind.MERGED in kinds,
        )
