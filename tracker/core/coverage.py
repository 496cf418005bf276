"""Which days of a report's window have complete history. Pure.

History is complete over an interval when something saw all of it: webhook deliveries (from the
first instant one stamped on), a backfill, or a reconciliation (tracker.history.store). A report
says which local days of its window fall outside every such interval, and how to fill them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from tracker.core.window import Window


@dataclass(frozen=True)
class Coverage:
    missing: tuple[tuple[date, date], ...] = ()  # inclusive ranges of local days not fully covered

    @property
    def complete(self) -> bool:
        return not self.missing

    def as_dict(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "missing": [{"from": first.isoformat(), "to": last.isoformat()} for first, last in self.missing],
        }


def merged(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of [start, end) intervals, as disjoint intervals in order."""
    union: list[tuple[int, int]] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if union and start <= union[-1][1]:
            union[-1] = (union[-1][0], max(union[-1][1], end))
        else:
            union.append((start, end))
    return union


def window_coverage(intervals: Sequence[tuple[int, int]], window: Window, now: int) -> Coverage:
    """The days of the window, up to `now`, that no interval covers completely."""
    end = min(window.end, now)
    if end <= window.start:
        return Coverage()
    gaps = []
    cursor = window.start
    for start, stop in merged(intervals):
        if stop <= cursor:
            continue
        if start >= end:
            break
        if start > cursor:
            gaps.append((cursor, start))
        cursor = max(cursor, stop)
        if cursor >= end:
            break
    if cursor < end:
        gaps.append((cursor, end))
    tz = ZoneInfo(window.timezone)
    days: list[tuple[date, date]] = []
    for start, stop in gaps:
        first = datetime.fromtimestamp(start, tz).date()
        last = datetime.fromtimestamp(stop - 1, tz).date()
        if days and (first - days[-1][1]).days <= 1:
            days[-1] = (days[-1][0], max(days[-1][1], last))
        else:
            days.append((first, last))
    return Coverage(tuple(days))
