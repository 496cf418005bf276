"""Job functions. They take ids and plain values, and running one twice changes nothing."""

from __future__ import annotations

import logging
import random
import time

from rq import get_current_job

from tracker.core.derive import PULL_REQUEST, derive
from tracker.core.repository import repository_key
from tracker.github.client import RateLimited, RequestRefused, Unavailable
from tracker.github.fetch import fetch_and_store
from tracker.queue import enqueue_head_fetch, fetch_done
from tracker.store.heads import UNAVAILABLE
from workers.runtime import current

log = logging.getLogger(__name__)

# After this many re-scheduled attempts of a GitHub outage, the fetch job fails (and is visible).
FETCH_ATTEMPTS = 8


def process_delivery(delivery_id: str) -> str:
    """Derive a stored delivery's facts and attribute versions into the per-month state, and ask
    for the files of a head not seen before."""
    services = current()
    delivery = services.ledger.get(delivery_id)
    if delivery is None:
        return "unknown delivery"
    try:
        derivation = None
        if delivery.event == PULL_REQUEST:
            derivation = derive(delivery.id, delivery.content_type, delivery.body, services.config.timezone_for)
        applied = services.state.apply(delivery.id, derivation)
    except Exception as exc:
        job = get_current_job()
        final = job is None or not job.retries_left
        try:
            services.ledger.record_attempt_failed(delivery_id, f"{type(exc).__name__}: {exc}", final=final)
        except Exception:  # the ledger itself may be what failed; RQ still retries the job
            log.exception("could not record the failure of delivery %s", delivery_id)
        raise
    if derivation is not None and derivation.wanted_head is not None and services.redis is not None:
        head_sha, base_sha = derivation.wanted_head
        if not services.heads.known(derivation.repo, derivation.number, head_sha):
            enqueue_head_fetch(
                services.github_queue,
                derivation.full_name,
                derivation.repo,
                derivation.number,
                head_sha,
                base_sha,
            )
    return "processed" if applied else "already processed"


def fetch_head_files(full_name: str, number: int, head_sha: str, base_sha: str, attempt: int = 0) -> str:
    """Fetch and classify one head's files. Waiting (rate limits, outages) re-schedules the job."""
    services = current()
    repo = repository_key(full_name)
    store = services.heads
    queue = services.github_queue if services.redis is not None else None
    if store.known(repo, number, head_sha):
        if queue is not None:
            fetch_done(queue, repo, number, head_sha)
        return "already known"
    quota = services.quota()

    def again(at: float, next_attempt: int) -> None:
        assert queue is not None
        enqueue_head_fetch(
            queue, full_name, repo, number, head_sha, base_sha, at=at, attempt=next_attempt, reschedule=True
        )

    blocked = quota.blocked_until() if quota is not None else 0.0
    if queue is not None and blocked > time.time():
        again(blocked, attempt)
        return "waiting for the rate limit"
    try:
        with services.github() as client:
            outcome = fetch_and_store(
                client, store, full_name, number, head_sha, base_sha, services.config.rules_for(full_name)
            )
    except RateLimited as exc:
        if queue is None or quota is None:
            raise
        quota.block_until(exc.retry_at)
        again(exc.retry_at, attempt)
        return f"waiting for the {exc.kind} rate limit"
    except Unavailable:
        if queue is None or attempt + 1 >= FETCH_ATTEMPTS:
            raise
        # Exponential backoff with jitter: 30 s, 1 min, 2 min, ... up to an hour.
        delay = min(3600.0, services.github_backoff * 2**attempt) * random.uniform(0.75, 1.25)
        again(time.time() + delay, attempt + 1)
        return f"GitHub unavailable; trying again in {delay:.0f} s"
    except RequestRefused as exc:
        if exc.status not in (404, 410, 422):
            raise
        # The PR or commit is gone (deleted fork, force-pushed away): nothing to wait for.
        store.store(
            repo, number, head_sha, [], truncated=False, source=UNAVAILABLE, rules=services.config.rules_for(full_name)
        )
        outcome = f"files unavailable: {exc}"
    if queue is not None:
        fetch_done(queue, repo, number, head_sha)
    return outcome
