"""Reading a month's snapshot from the derived state (the I/O edge around the pure core)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date

from tracker.config import TrackerConfig
from tracker.snapshot import MonthSnapshot, build_snapshot
from tracker.state import MonthState
from tracker.window import Window, resolve_window, today_in


class UnknownRepository(LookupError):
    pass


@dataclass(frozen=True)
class MonthRequest:
    repo: str  # as the repository spells itself
    window: Window


def resolve(
    state: MonthState,
    config: TrackerConfig,
    repo: str,
    month: str,
    cutoff: str | None,
    today: date | None = None,
) -> MonthRequest:
    """`repo` (any case) for `month` (`YYYY-MM` or `current`) at `cutoff` (`YYYY-MM-DD` or None).
    Raises UnknownRepository, or window.WindowError for a bad month or cutoff."""
    stored = state.repository_name(repo)
    if stored is None:
        raise UnknownRepository(f"no deliveries have been received for {repo}")
    tz = config.timezone_for(stored)
    return MonthRequest(stored, resolve_window(month, cutoff, tz, today if today is not None else today_in(tz)))


def snapshot_for(state: MonthState, config: TrackerConfig, request: MonthRequest) -> MonthSnapshot:
    window = request.window
    inputs = state.month_inputs(request.repo, str(window.month), window.end)
    return build_snapshot(
        request.repo,
        window,
        inputs.timelines,
        inputs.versions,
        inputs.verdicts,
        config.rules_for(request.repo),
        inputs.unavailable,
    )


def load_snapshot(
    state: MonthState,
    config: TrackerConfig,
    repo: str,
    month: str,
    cutoff: str | None,
    today: date | None = None,
) -> MonthSnapshot:
    """The snapshot of `repo` for `month` at `cutoff` (see `resolve`)."""
    return snapshot_for(state, config, resolve(state, config, repo, month, cutoff, today))


def snapshot_json(snapshot: MonthSnapshot) -> str:
    """The snapshot as JSON text; the same state always gives the same bytes."""
    return json.dumps(snapshot.as_dict(), ensure_ascii=False, indent=2) + "\n"
