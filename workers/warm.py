"""The warm job: a month's month-to-date report computed by a worker after its deliveries change it, so
that the next request reads precomputed work (tracker.reports.warm).

`ask_for_warm` is called after a batch of deliveries for each month the batch changed. The job starts
WARM_DELAY seconds after the first change that asks for it, and until it starts no other is queued for
the month (a SET NX: one Redis command when a job already waits): a burst of batches costs one warm,
and a sustained load one warm every WARM_DELAY seconds, not a render after every batch (a render of a
busy month is a good part of a second of CPU that the deliveries need). The job deletes the key before
it reads the month, so whatever changes the month after that asks for the next warm. The key expires,
in case a worker died holding the job. Warm jobs run on the `records` queue.

A month that keeps changing is warmed at most once every WARM_EVERY seconds: the job notes when it
started, and the next one waits until WARM_EVERY after that. Under a stream of deliveries what a warm
keeps is out of date within milliseconds (every request reads the database until the stream stops), while
reading and folding the digest costs a worker a second or more of a big month; once the month is quiet,
the last warm comes at most WARM_EVERY after the one before.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from tracker.core.repository import repository_key
from tracker.queue import JOB_TIMEOUT, RESULT_TTL
from tracker.reports import warm
from tracker.services import Services
from workers.runtime import current

log = logging.getLogger(__name__)

WARM_FUNCTION = "workers.warm.warm_month"  # stored in Redis by name: it never moves
WAITING_TTL = 600  # seconds
WARM_DELAY = 10.0  # seconds
WARM_EVERY = 60.0  # seconds: at most one warm of a month starts in this time


def waiting_key(full_name: str, month: str) -> str:
    """Set while a warm job of the month waits to start."""
    return f"tracker:warm:waiting:{repository_key(full_name)}:{month}"


def last_key(full_name: str, month: str) -> str:
    """When the month's last warm job started (epoch seconds), for WARM_EVERY."""
    return f"tracker:warm:last:{repository_key(full_name)}:{month}"


def ask_for_warm(services: Services, full_name: str, month: str) -> bool:
    """Queue a warm job for the month unless one waits to start already; True when this call queued one.
    Nothing without Redis."""
    connection = services.redis
    if connection is None:
        return False
    key = waiting_key(full_name, month)
    if not connection.set(key, 1, nx=True, ex=WAITING_TTL):
        return False
    delay = WARM_DELAY
    last = connection.get(last_key(full_name, month))
    if last is not None:
        delay = max(WARM_DELAY, float(last) + WARM_EVERY - time.time())
    try:
        services.records_queue.enqueue_in(
            timedelta(seconds=delay),
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
    connection = services.require_redis()
    pipe = connection.pipeline(transaction=False)
    pipe.delete(waiting_key(full_name, month))  # a change from now on asks again
    pipe.set(last_key(full_name, month), time.time(), ex=int(2 * WARM_EVERY))
    pipe.execute()
    warmed = warm.warm_month(services, full_name, month)
    if warmed is None:
        return f"nothing to warm for {month} of {full_name}"
    return (
        f"{month} of {full_name} through {warmed.cutoff}: {warmed.earlier} earlier cutoffs grouped, "
        f"{warmed.rendered} rendered, {warmed.cached} cached"
    )
