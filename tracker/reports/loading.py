"""Loading a month: resolve what was asked (repository, month, cutoff), read the month's state in one
pass, and hand plain data to the pure core (snapshot, report model)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date

from tracker.config import TrackerConfig
from tracker.core.report import Report, build_report
from tracker.core.snapshot import MonthSnapshot, build_snapshot
from tracker.core.window import Window, resolve_window, today_in
from tracker.reports.coverage import window_coverage_of
from tracker.store.history import HistoryStore
from tracker.store.month_state import MonthInputs, MonthState


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


def report_for(state: MonthState, config: TrackerConfig, request: MonthRequest) -> Report:
    """The report model of the month at the cutoff: one read, then pure computation."""
    inputs = state.month_inputs(request.repo, str(request.window.month), request.window.end)
    snapshot = _snapshot(state, config, request, inputs)
    return build_report(snapshot, inputs.paths, config.themes_for(request.repo))


def snapshot_for(state: MonthState, config: TrackerConfig, request: MonthRequest) -> MonthSnapshot:
    window = request.window
    return _snapshot(state, config, request, state.month_inputs(request.repo, str(window.month), window.end))


def _snapshot(state: MonthState, config: TrackerConfig, request: MonthRequest, inputs: MonthInputs) -> MonthSnapshot:
    return build_snapshot(
        request.repo,
        request.window,
        inputs.timelines,
        inputs.versions,
        inputs.verdicts,
        config.rules_for(request.repo),
        inputs.unavailable,
        window_coverage_of(HistoryStore(state.engine), request.repo, request.window),
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
