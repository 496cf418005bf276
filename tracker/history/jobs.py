"""Jobs that read history from GitHub's REST API: a backfill asked for by an admin, and the periodic
reconciliation of each repository's recent history (tracker.history.github)."""

from __future__ import annotations

import logging
import time

from tracker.github.client import BadAnswer, RateLimited, RequestRefused, Unavailable
from tracker.github.retry import held_back, next_run
from tracker.history.derive import RECONCILIATION
from tracker.history.github import DAILY, Target, read_history, redeliver_failed
from tracker.history.store import WAITING
from tracker.queue import enqueue_history
from tracker.services import Services

log = logging.getLogger(__name__)


def target(services: Services, full_name: str, start: int, end: int, files: str = DAILY) -> Target:
    config = services.config
    return Target(full_name, start, end, config.timezone_for, config.rules_for(full_name), files)


def read_history_job(
    services: Services,
    kind: str,
    full_name: str,
    start: int,
    end: int,
    attempt: int = 0,
    files: str = DAILY,
    outages: int = 0,
) -> str:
    """Run (or resume) one backfill or reconciliation; a rate limit or an outage re-schedules it
    (tracker.github.retry: `attempt` numbers its runs, `outages` counts the GitHub outages in a row
    before this one), and it resumes where it stopped."""
    queue = services.github_queue if services.redis is not None else None
    quota = services.quota()

    def later(at: float, next_outages: int, why: str) -> str:
        assert queue is not None
        services.history.open_run(kind, full_name, start, end, state=WAITING)
        enqueue_history(
            queue, kind, full_name, start, end, at=at, attempt=attempt + 1, files=files, outages=next_outages
        )
        return why

    blocked = held_back(quota)
    if queue is not None and blocked:
        return later(blocked, outages, "waiting for the rate limit")
    try:
        with services.github(full_name) as client:
            wanted = target(services, full_name, start, end, files)
            run = read_history(client, services.history, services.heads, wanted, kind)
            redelivered = _redeliver(services, client, full_name, start) if kind == RECONCILIATION else []
    except (RateLimited, Unavailable) as exc:
        # The run keeps its checkpoint: the next run resumes from it. Its waits after an outage are
        # twice a fetch's: 1 min, 2 min, 4 min, ... up to an hour.
        then = next_run(exc, outages, 2 * services.github_backoff, quota)
        if then.at is None:
            raise
        if isinstance(exc, Unavailable):  # a rate limit is in the run's detail (tracker.history.github)
            log.warning("%s of %s: %s", kind, full_name, then.reason, extra={"repository": full_name})
        return later(then.at, then.outages, then.said)
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
