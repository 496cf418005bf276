"""Jobs that read history from GitHub's REST API: a backfill asked for by an admin, and the periodic
reconciliation of each repository's recent history (tracker.github.history)."""

from __future__ import annotations

import logging
import time

from tracker.core.history import RECONCILIATION
from tracker.github.client import BadAnswer, RateLimited, RequestRefused, Unavailable
from tracker.github.history import DAILY, Target, read_history, redeliver_failed
from tracker.queue import enqueue_history
from tracker.services import Services
from tracker.store.history import WAITING
from workers.runtime import current

log = logging.getLogger(__name__)

# After this many re-scheduled attempts of a GitHub outage, the run fails (and is visible in status).
HISTORY_ATTEMPTS = 8


def target(services: Services, full_name: str, start: int, end: int, files: str = DAILY) -> Target:
    config = services.config
    return Target(full_name, start, end, config.timezone_for, config.rules_for(full_name), files)


def read_history_job(kind: str, full_name: str, start: int, end: int, attempt: int = 0, files: str = DAILY) -> str:
    """Run (or resume) one backfill or reconciliation; a rate limit re-schedules it for the moment
    GitHub gives, and it resumes where it stopped."""
    services = current()
    queue = services.github_queue if services.redis is not None else None
    quota = services.quota()

    def later(at: float, why: str) -> str:
        assert queue is not None
        services.history.open_run(kind, full_name, start, end, state=WAITING)
        enqueue_history(queue, kind, full_name, start, end, at=at, attempt=attempt + 1, files=files)
        return why

    blocked = quota.blocked_until() if quota is not None else 0.0
    if queue is not None and blocked > time.time():
        return later(blocked, "waiting for the rate limit")
    try:
        with services.github(full_name) as client:
            wanted = target(services, full_name, start, end, files)
            run = read_history(client, services.history, services.heads, wanted, kind)
            redelivered = _redeliver(services, client, full_name, start) if kind == RECONCILIATION else []
    except RateLimited as exc:
        if queue is None or quota is None:
            raise
        quota.block_until(exc.retry_at)
        return later(exc.retry_at, f"waiting for the {exc.kind} rate limit")
    except Unavailable as exc:
        if queue is None or attempt + 1 >= HISTORY_ATTEMPTS:
            raise
        # The run keeps its checkpoint: the next attempt resumes. 1 min, 2 min, 4 min, ... up to an hour.
        delay = min(3600.0, 2 * services.github_backoff * 2**attempt)
        log.warning(
            "%s of %s: %s; trying again in %.0f s", kind, full_name, exc, delay, extra={"repository": full_name}
        )
        return later(time.time() + delay, f"GitHub unavailable; trying again in {delay:.0f} s")
    summary = (
        f"{kind} of {full_name}: {run.done} of {run.total} PRs, {run.requests} requests "
        f"({run.not_modified} not modified)"
    )
    return summary + (f"; asked GitHub to redeliver {len(redelivered)} deliveries" if redelivered else "")


def _redeliver(services: Services, client: object, full_name: str, since: int) -> list[str]:
    from tracker.github.client import GitHubClient

    hook_id = services.config.hook_id_for(full_name)
    if hook_id is None or not isinstance(client, GitHubClient):
        return []
    try:
        return redeliver_failed(client, full_name, hook_id, since, lambda guid: services.ledger.get(guid) is not None)
    except (RequestRefused, Unavailable, BadAnswer) as exc:
        # A token without the right to administer hooks, or an answer that is not GitHub's shape:
        # reconciliation itself still did its work.
        log.warning(
            "could not redeliver the failed deliveries of %s: %s", full_name, exc, extra={"repository": full_name}
        )
        return []


def reconciliations_due(services: Services, now: float | None = None) -> int:
    """Queue a reconciliation of every known repository not reconciled for TRACKER_RECONCILE_EVERY
    seconds, from where its last one ended (or TRACKER_RECONCILE_LOOKBACK ago) to now."""
    every = services.settings.reconcile_every
    if every <= 0 or services.redis is None:
        return 0
    moment = int(now if now is not None else time.time())
    queued = 0
    for full_name in services.state.repository_names():
        if services.history.is_sample(full_name):
            continue  # `tracker demo`'s made-up month: its real history must not be read into it
        last = services.history.covered_until(full_name, RECONCILIATION)
        start = last if last is not None else moment - services.settings.reconcile_first_lookback
        if moment - start < every:
            continue
        if enqueue_history(services.github_queue, RECONCILIATION, full_name, start, moment):
            queued += 1
    return queued
