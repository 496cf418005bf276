"""The month's statistics at a cutoff, per SEMANTICS ("Statistics"). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tracker.core.timeline import Activity, Fact, PRState, ordered, state_before
from tracker.core.window import Window


@dataclass(frozen=True)
class PullRequestStatus:
    """One PR as seen by one window: its state at the cutoff and its activity inside the window."""

    number: int
    state: PRState
    activity: Activity

    @property
    def counts_opened(self) -> bool:
        return self.activity.opened

    @property
    def counts_merged(self) -> bool:
        return self.activity.merged

    @property
    def counts_closed_unmerged(self) -> bool:
        # Closed and reopened inside the window counts 0; reopened after the cutoff counts 1.
        return self.activity.closed and self.state is PRState.CLOSED

    @property
    def counts_active(self) -> bool:
        return self.state is PRState.OPEN and (self.activity.opened or self.activity.committed)


def assess(number: int, facts: Iterable[Fact], window: Window) -> PullRequestStatus | None:
    """The PR's status in the window, or None when it has no activity inside it (nothing carries over)."""
    timeline = ordered(facts)
    activity = Activity.in_window(timeline, window)
    state = state_before(timeline, window.end)
    if not activity.any or state is None:
        return None
    return PullRequestStatus(number=number, state=state, activity=activity)


@dataclass(frozen=True)
class MonthStats:
    opened: int
    merged: int
    closed_unmerged: int
    active_at_cutoff: int

    @classmethod
    def of(cls, statuses: Sequence[PullRequestStatus]) -> MonthStats:
        return cls(
            opened=sum(s.counts_opened for s in statuses),
            merged=sum(s.counts_merged for s in statuses),
            closed_unmerged=sum(s.counts_closed_unmerged for s in statuses),
            active_at_cutoff=sum(s.counts_active for s in statuses),
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "opened": self.opened,
            "merged": self.merged,
            "closed_unmerged": self.closed_unmerged,
            "active_at_cutoff": self.active_at_cutoff,
        }
