"""The warm job: a month's month-to-date report computed by a worker after its deliveries change it, so
that the next request reads precomputed work (tracker.reports.warm).

`ask_for_warm` is called after a batch of deliveries for each month the batch changed. A burst of batches
queues at most one warm job per month while one waits to start: the request sets a key with SET NX (one
Redis command when a job already waits), and the job deletes it before it reads the month, so whatever
changes the month after that asks for the next warm. The key expires, in case a worker died holding the
job. Warm jobs run on the `records` queue, which workers take after the deliveries: a backlog of deliveries
is processed first, and the month is warmed once the backlog is done rather than after every batch.
"""

from __future__ import annotations

import logging

from tracker.core.repository import repository_key
from tracker.queue import JOB_TIMEOUT, RESULT_TTL
from tracker.reports import warm
from tracker.services import Services
from workers.runtime import current

log = logging.getLogger(__name__)

WARM_FUNCTION = "workers.warm.warm_month"  # stored in Redis by name: it never moves
WAITING_TTL = 600  # seconds


def waiting_key(full_name: str, month: str) -> str:
    """Set while a warm job of the month waits to start."""
    return f"tracker:warm:waiting:{repository_key(full_name)}:{month}"


def ask_for_warm(services: Services, full_name: str, month: str) -> bool:
    """Queue a warm job for the month unless one waits to start already; True when this call queued one.
    Nothing without Redis."""
    connection = services.redis
    if connection is None:
        return False
    key = waiting_key(full_name, month)
    if not connection.set(key, 1, nx=True, ex=WAITING_TTL):
        return False
    try:
        services.records_queue.enqueue(
            WARM_FUNCTION,
            full_name,
            month,
            job_timeout=JOB_TIMEOUT,
            result_ttl=RESULT_TTL,  # not 0: RQ 2 fails to clean up a job it deleted at once
            description=f"warm {month} of {full_name}",
        )
    except BaseException:
        connection.delete(key)  # no job waits: the next batch asks again
        raise
    return True


def warm_month(full_name: str, month: str) -> str:
    """The job: compute and keep what the month's month-to-date request reads."""
    services = current()
    services.require_redis().delete(waiting_key(full_name, month))  # a change from now on asks again
    warmed = warm.warm_month(services, full_name, month)
    if warmed is None:
        return f"nothing to warm for {month} of {full_name}"
    return f"{month} of {full_name} through {warmed.cutoff}: {warmed.rendered} rendered, {warmed.cached} cached"
