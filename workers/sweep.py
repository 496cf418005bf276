"""The sweep: re-enqueue accepted deliveries that were never processed.

The web process enqueues after the ledger commit, so a crash between the two, a worker killed
mid-job, or a Redis that lost its queue leaves a delivery `pending` in the ledger with no job.
A delivery whose job is still waiting in the queue (or scheduled for a retry) is left alone; any
other pending one is enqueued again. Processing is idempotent, so the rare double costs a little
work and no harm.
"""

from __future__ import annotations

import logging
import threading

from redis.exceptions import RedisError

from tracker.core.repository import repository_key
from tracker.queue import enqueue_deliveries, enqueue_head_fetch, job_id, wait_for_redis, waiting_jobs
from tracker.services import Services
from tracker.store.ledger import PENDING, now_ms

log = logging.getLogger(__name__)

# Deliveries younger than this are most likely still in the queue.
DEFAULT_GRACE_SECONDS = 60


def sweep(services: Services, grace_seconds: float = DEFAULT_GRACE_SECONDS) -> int:
    """Enqueue every pending delivery received more than `grace_seconds` ago, and ask for the files
    of every head deliveries showed that has none yet (unless a fetch is already on its way).
    Returns how many deliveries were re-enqueued."""
    queue = services.delivery_queue
    pending = services.ledger.ids_with_status(PENDING, received_before=now_ms() - int(grace_seconds * 1000))
    ids = []
    for start in range(0, len(pending), 500):
        batch = pending[start : start + 500]
        waiting = waiting_jobs(queue, [job_id("delivery", delivery_id) for delivery_id in batch])
        lost = [delivery_id for delivery_id in batch if job_id("delivery", delivery_id) not in waiting]
        enqueue_deliveries(queue, lost)
        ids.extend(lost)
    if ids:
        log.info("sweep re-enqueued %d pending deliveries", len(ids))
    fetches = services.github_queue
    asked = sum(
        enqueue_head_fetch(
            fetches, head.full_name, repository_key(head.full_name), head.number, head.head_sha, head.base_sha
        )
        for head in services.heads.missing()
    )
    if asked:
        log.info("sweep asked for the files of %d heads", asked)
    return len(ids)


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
