"""What changed in a month between two cutoffs of it: the "Since" section of a report. Pure.

Both cutoffs are of one month, so the later window holds the earlier one (they share their start) and
every PR of the earlier snapshot has activity in the later one too. The difference reads the two
snapshots and where each report narrates each PR, nothing else:

- newly merged, newly opened, closed without merge: PRs substantive at the later cutoff that its
  statistic counts (`PullRequestStatus.counts_*`, what `MonthStats.of` adds up) and whose status at the
  earlier cutoff it did not count (or the PR was not in the earlier snapshot). Only the status is
  compared: a PR whose category changed is re-classified, and a PR excluded at the later cutoff is in
  none of these lists, as it is in no statistic.
- reopened: PRs substantive and open at the later cutoff that were reopened inside its window, unless
  they were already open and reopened at the earlier cutoff (a PR closed at the earlier cutoff, or
  closed before the month, and reopened since).
- re-classified: PRs of both snapshots whose category differs (a push that leaves only tests makes a
  substantive PR test-only; files arriving make a pending PR substantive), with both categories.
- moved: PRs narrated in the same section by both reports under different themes, with both themes. A
  PR that changed section (merged since) is said by the lists above; its themes belong to the groupings
  of two different sections and are not compared.

Every list is sorted by PR number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from tracker.core.classify import Category
from tracker.core.report import REVERTED, Report
from tracker.core.snapshot import MonthSnapshot, PullRequestSnapshot
from tracker.core.timeline import PRState
from tracker.core.window import Month, Window

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class SinceError(ValueError):
    """A `since` a user gave that cannot be compared with the report's cutoff."""


@dataclass(frozen=True)
class ThemeRef:
    """Where a report narrates a PR: its section and its theme, with the theme's names."""

    section: str
    id: str
    en: str
    zh: str

    def as_dict(self) -> dict[str, str]:
        return {"section": self.section, "id": self.id, "en": self.en, "zh": self.zh}


@dataclass(frozen=True)
class Reclassified:
    number: int
    before: Category
    after: Category

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "from": self.before.value, "to": self.after.value}


@dataclass(frozen=True)
class Moved:
    number: int
    before: ThemeRef
    after: ThemeRef

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "from": self.before.as_dict(), "to": self.after.as_dict()}


@dataclass(frozen=True)
class Since:
    """What changed between the cutoff `since` (`earlier`) and the report's own cutoff."""

    since: date
    cutoff: date
    newly_merged: tuple[int, ...] = ()
    newly_opened: tuple[int, ...] = ()
    closed_unmerged: tuple[int, ...] = ()
    reopened: tuple[int, ...] = ()
    reclassified: tuple[Reclassified, ...] = ()
    moved: tuple[Moved, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.newly_merged
            or self.newly_opened
            or self.closed_unmerged
            or self.reopened
            or self.reclassified
            or self.moved
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON document's `since`."""
        return {
            "from": self.since.isoformat(),
            "newly_merged": list(self.newly_merged),
            "newly_opened": list(self.newly_opened),
            "closed_unmerged": list(self.closed_unmerged),
            "reopened": list(self.reopened),
            "reclassified": [item.as_dict() for item in self.reclassified],
            "moved": [item.as_dict() for item in self.moved],
        }


def themes_of(report: Report) -> dict[int, ThemeRef]:
    """Each narrated PR's section and theme in `report` (`Report.placement`), with the theme's names."""
    names = {(section.id, theme.id): (theme.en, theme.zh) for section in report.sections for theme in section.themes}
    reverted = (REVERTED[1], REVERTED[2])
    return {
        number: ThemeRef(
            place["section"],
            place["theme"],
            *names.get((place["section"], place["theme"]), reverted),
        )
        for number, place in report.placement().items()
    }


def since_of(earlier: Report, later: Report) -> Since:
    """The difference of two reports of one month, `earlier` at the earlier cutoff."""
    return difference(earlier.snapshot, later.snapshot, themes_of(earlier), themes_of(later))


def difference(
    earlier: MonthSnapshot,
    later: MonthSnapshot,
    earlier_themes: Mapping[int, ThemeRef],
    later_themes: Mapping[int, ThemeRef],
) -> Since:
    """What changed from `earlier` to `later` (two snapshots of one month; see the module's docstring).
    `*_themes`: where each report narrates each PR (`themes_of`)."""
    if earlier.window.month != later.window.month or earlier.window.cutoff > later.window.cutoff:
        raise ValueError("the earlier snapshot must be of the same month at a cutoff not after the later one's")
    before = {pr.status.number: pr for pr in earlier.pull_requests}
    counted = [pr for pr in later.pull_requests if pr.substantive]

    def new(test: Any) -> tuple[int, ...]:
        return tuple(
            pr.status.number
            for pr in counted
            if test(pr) and not (pr.status.number in before and test(before[pr.status.number]))
        )

    both = [(before[pr.status.number], pr) for pr in later.pull_requests if pr.status.number in before]
    moved = []
    for number in sorted(set(earlier_themes) & set(later_themes)):
        old, now = earlier_themes[number], later_themes[number]
        if old.section == now.section and old.id != now.id:
            moved.append(Moved(number, old, now))
    return Since(
        since=earlier.window.cutoff,
        cutoff=later.window.cutoff,
        newly_merged=new(lambda pr: pr.status.counts_merged),
        newly_opened=new(lambda pr: pr.status.counts_opened),
        closed_unmerged=new(lambda pr: pr.status.counts_closed_unmerged),
        reopened=new(_reopened),
        reclassified=tuple(
            Reclassified(now.status.number, old.category, now.category)
            for old, now in both
            if old.category is not now.category
        ),
        moved=tuple(moved),
    )


def _reopened(pr: PullRequestSnapshot) -> bool:
    return pr.status.activity.reopened and pr.status.state is PRState.OPEN


def since_day(text: str, window: Window) -> date:
    """The earlier cutoff a reader asked for (`YYYY-MM-DD`) against the report's `window`: a day before
    the month's first is its first day (the month has nothing earlier to compare with); a day after the
    cutoff is refused (SinceError), as is anything but a real day."""
    try:
        day = date.fromisoformat(text) if _DAY.fullmatch(text) else None
    except ValueError:
        day = None
    if day is None:
        raise SinceError(f"since {text!r} is not a day: use YYYY-MM-DD (for example 2026-09-08) or last-publication")
    if day > window.cutoff:
        raise SinceError(
            f"since {day.isoformat()} is after the cutoff {window.cutoff.isoformat()}: give a day from "
            f"{window.month.first_day.isoformat()} to {window.cutoff.isoformat()}"
        )
    return max(day, window.month.first_day)


def publication_cutoff(at: int, month: Month, timezone: str) -> date:
    """The cutoff of a publication made at `at` (epoch seconds) of `month`: a partial edition renders the
    month to the day it ran in the repository's time zone; a final one, after the month, its last day."""
    day = datetime.fromtimestamp(at, ZoneInfo(timezone)).date()
    return min(max(day, month.first_day), month.last_day)
