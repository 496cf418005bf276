"""The sweep: make sure every accepted delivery gets processed, whatever happened to Redis.

The web process asks for a drain after the ledger commit, so a crash between the two, a worker
killed mid-batch, or a Redis that lost its queue leaves deliveries `pending` in the ledger with no
job coming. The ledger decides: if any never-tried delivery is still pending past the grace, the
sweep queues a drain (workers.drain). A delivery retried on its own (it failed once in a batch)
whose job is no longer really waiting (queued and in its queue, or scheduled for a retry) gets its
job again. Processing is idempotent, so the rare double costs a little work and no harm. A head
still without files gets a fetch unless one is on its way; a fetch marker set before Redis last
restarted does not count (its job may be lost with the restart: tracker.queue.forget_markers_of_earlier_runs).
"""

from __future__ import annotations

import logging
import threading

from redis.exceptions import RedisError

from tracker.core.repository import repository_key
from tracker.queue import (
    ask_for_drain,
    enqueue_deliveries,
    enqueue_head_fetches,
    forget_markers_of_earlier_runs,
    job_id,
    wait_for_redis,
    waiting_jobs,
)
from tracker.services import Services
from tracker.store.ledger import PENDING, now_ms

log = logging.getLogger(__name__)

# Deliveries younger than this are most likely about to be processed.
DEFAULT_GRACE_SECONDS = 60


def sweep(services: Services, grace_seconds: float = DEFAULT_GRACE_SECONDS) -> int:
    """Queue a drain when never-tried deliveries received more than `grace_seconds` ago are still
    pending, re-enqueue retried ones whose job was lost, and ask for the files of every head
    deliveries showed that has none yet (unless a fetch is already on its way). Returns how many
    pending deliveries it found a job for."""
    queue = services.delivery_queue
    before = now_ms() - int(grace_seconds * 1000)
    fresh = services.ledger.ids_with_status(PENDING, received_before=before, tried=False)
    if fresh:
        ask_for_drain(queue, force=True)
        log.info("sweep queued a drain for %d pending deliveries", len(fresh))
    retried = services.ledger.ids_with_status(PENDING, received_before=before, tried=True)
    lost: list[str] = []
    for start in range(0, len(retried), 500):
        batch = retried[start : start + 500]
        waiting = waiting_jobs(queue, [job_id("delivery", delivery_id) for delivery_id in batch])
        lost.extend(delivery_id for delivery_id in batch if job_id("delivery", delivery_id) not in waiting)
    if lost:
        enqueue_deliveries(queue, lost)
        log.info("sweep re-enqueued %d deliveries being retried", len(lost))
    missing = [
        (head.full_name, repository_key(head.full_name), head.number, head.head_sha, head.base_sha)
        for head in services.heads.missing()
    ]
    forgotten = forget_markers_of_earlier_runs(queue.connection, [(repo, n, sha) for _f, repo, n, sha, _b in missing])
    if forgotten:
        log.info("sweep forgot %d fetch markers set before Redis restarted", forgotten)
    asked = enqueue_head_fetches(services.github_queue, missing)
    if asked:
        log.info("sweep asked for the files of %d heads", asked)
    return len(fresh) + len(lost)


def sweep_forever(services: Services, every_seconds: float, stop: threading.Event, grace_seconds: float) -> None:
    """Sweep every `every_seconds` until `stop`. While Redis is unreachable it waits for it (one line
    in the log when the wait starts, one when it ends) and sweeps as soon as it answers again."""
    connection = services.require_redis()
    while wait_for_redis(connection, stop, "sweep"):
        try:
            sweep(services, grace_seconds)
        except RedisError as exc:  # Redis went away mid-sweep, or refuses writes (a full disk)
            log.warning("sweep: Redis failed (%s: %s); trying again in %.0f s", type(exc).__name__, exc, every_seconds)
        except Exception:  # keep sweeping: a database outage is temporary
            log.exception("sweep failed; trying again in %.0f s", every_seconds)
        if stop.wait(every_seconds):
            return
