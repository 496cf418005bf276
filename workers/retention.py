"""Retention: what grows without end and is not the ledger is dropped once it is old enough.

Applied by the schedule's due work (`workers.jobs.due_work`, every few minutes): each pass deletes only
what has aged past its limit since the last, so a pass is small. Two tables grow with every hour the
service runs: `http_cache` (GitHub's answers kept for conditional requests: every URL ever read) and
`history_runs` with their `history_done` checkpoints (a reconciliation run per repository per hour).
The sources of truth, deliveries and observations, and what is derived from them are never pruned.
"""

from __future__ import annotations

import logging

from tracker.services import Services
from tracker.store.ledger import now_ms

log = logging.getLogger(__name__)

_DAY_MS = 86_400_000


def apply_retention(services: Services, now: int | None = None) -> str:
    """Drop the cached GitHub answers unused for TRACKER_HTTP_CACHE_RETENTION_DAYS and the runs finished
    TRACKER_RUN_RETENTION_DAYS ago (0: keep); `now` in epoch milliseconds. What it dropped, or ""."""
    settings = services.settings
    at = now if now is not None else now_ms()
    dropped: list[str] = []
    if settings.http_cache_retention_days:
        answers = services.response_cache.prune(at - settings.http_cache_retention_days * _DAY_MS)
        if answers:
            dropped.append(f"{answers} cached GitHub answers")
    if settings.run_retention_days:
        runs = services.history.prune_runs(at - settings.run_retention_days * _DAY_MS)
        if runs:
            dropped.append(f"{runs} finished history runs")
    if dropped:
        log.info("retention dropped %s", " and ".join(dropped))
    return " and ".join(dropped)
