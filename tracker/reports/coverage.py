"""Coverage as reports and status show it: the intervals whose history is complete, and the days of
a report's window outside them (tracker.core.coverage)."""

from __future__ import annotations

import time
from typing import Any

from tracker.core.coverage import Coverage, merged, window_coverage
from tracker.core.window import Window, iso_utc
from tracker.history.store import HistoryStore


def window_coverage_of(history: HistoryStore, full_name: str, window: Window, now: int | None = None) -> Coverage:
    moment = int(time.time()) if now is None else now
    intervals = [(start, end) for _source, start, end in history.intervals(full_name, moment)]
    return window_coverage(intervals, window, moment)


def coverage_summary(history: HistoryStore, full_name: str, now: int) -> dict[str, Any]:
    """Every interval with what read it, and their union."""
    intervals = history.intervals(full_name, now)
    return {
        "intervals": [
            {"source": source, "start": iso_utc(start), "end": iso_utc(end)} for source, start, end in intervals
        ],
        "complete": [
            {"start": iso_utc(start), "end": iso_utc(end)} for start, end in merged((s, e) for _, s, e in intervals)
        ],
    }
