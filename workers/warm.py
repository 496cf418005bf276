"""The warm job: a month's month-to-date report computed by a worker after its deliveries change it, so
that the next request reads precomputed work (tracker.reports.warm).

`ask_for_warm` is called after a batch of deliveries for each month the batch changed. It notes when the
month last changed, and queues a warm job WARM_DELAY seconds later unless one waits already (a SET NX:
until the job starts no other is queued for the month). A burst of batches costs one warm, not a render
after every batch (a render of a busy month is a good part of a second of CPU that the deliveries need).

The job waits for the month to rest: when it finds the month changed less than WARM_DELAY seconds ago, it
schedules itself again for when the month will have rested that long, and so on, though at most WARM_LONGEST
seconds after the change that asked for it. Under a stream of deliveries what a warm keeps is out of date
within milliseconds, and a request does not need it: each web process holds the windows it answered and
reads again only what changed since (tracker.reports.digests), so a warm every minute only took a worker's
second or more of a big month from the deliveries. Once the month rests, or WARM_LONGEST after the stream
began, it is warmed.

The job deletes its key before it reads the month, so whatever changes the month after that asks for the
next warm; the key expires, in case a worker died holding the job. A month is warmed at most once every
WARM_EVERY seconds: the job notes when it started, and the next one waits until WARM_EVERY after that.
Warm jobs run on the `records` queue.
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
WAITING_TTL = 900  # seconds: longer than WARM_LONGEST, and renewed each time the job waits again
WARM_DELAY = 10.0  # seconds the month must have rested before it is warmed
WARM_LONGEST = 600.0  # seconds after the change that asked: warmed then even if the month never rests
WARM_EVERY = 60.0  # seconds: at most one warm of a month starts in this time


def waiting_key(full_name: str, month: str) -> str:
    """Set while a warm job of the month waits to start, to when the change that queued it was (epoch s)."""
    return f"tracker:warm:waiting:{repository_key(full_name)}:{month}"


def changed_key(full_name: str, month: str) -> str:
    """When a batch last changed the month (epoch seconds)."""
    return f"tracker:warm:changed:{repository_key(full_name)}:{month}"


def last_key(full_name: str, month: str) -> str:
    """When the month's last warm job started (epoch seconds), for WARM_EVERY."""
    return f"tracker:warm:last:{repository_key(full_name)}:{month}"


def ask_for_warm(services: Services, full_name: str, month: str) -> bool:
    """Note that the month changed now, and queue a warm job for it unless one waits to start already; True
    when this call queued one. Nothing without Redis."""
    connection = services.redis
    if connection is None:
        return False
    now = time.time()
    key = waiting_key(full_name, month)
    pipe = connection.pipeline(transaction=False)  # one round trip: a job waits already after most batches
    pipe.set(changed_key(full_name, month), now, ex=WAITING_TTL)
    pipe.set(key, now, nx=True, ex=WAITING_TTL)
    pipe.get(last_key(full_name, month))
    _, queued, last = pipe.execute()
    if not queued:
        return False
    delay = WARM_DELAY
    if last is not None:
        delay = max(WARM_DELAY, float(last) + WARM_EVERY - now)
    _schedule(services, full_name, month, delay)
    return True


def _schedule(services: Services, full_name: str, month: str, delay: float) -> None:
    """Queue the month's warm job `delay` seconds from now; when that fails, no job waits (the next change
    asks again)."""
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
        services.require_redis().delete(waiting_key(full_name, month))
        raise


def warm_month(full_name: str, month: str) -> str:
    """The job: compute and keep what the month's month-to-date request reads, once the month rests."""
    services = current()
    connection = services.require_redis()
    now = time.time()
    asked, changed = connection.mget(waiting_key(full_name, month), changed_key(full_name, month))
    rested = now - float(changed) if changed is not None else None
    waited = now - float(asked) if asked is not None else 0.0
    if rested is not None and rested < WARM_DELAY and waited < WARM_LONGEST:
        connection.expire(waiting_key(full_name, month), WAITING_TTL)
        _schedule(services, full_name, month, WARM_DELAY - rested)
        return f"{month} of {full_name} changed {rested:.1f} s ago: warmed once it rests {WARM_DELAY:g} s"
    pipe = connection.pipeline(transaction=False)
    pipe.delete(waiting_key(full_name, month))  # a change from now on asks again
    pipe.set(last_key(full_name, month), now, ex=int(2 * WARM_EVERY))
    pipe.execute()
    # A month that rested is passed over whole (its earlier cutoffs too); one warmed WARM_LONGEST into a stream
    # keeps to tracker.reports.warm.EARLIER_EVERY for those.
    warmed = warm.warm_month(services, full_name, month, rested=rested is None or rested >= WARM_DELAY)
    if warmed is None:
        return f"nothing to warm for {month} of {full_name}"
    return (
        f"{month} of {full_name} through {warmed.cutoff}: {warmed.earlier} earlier cutoffs grouped, "
        f"{warmed.rendered} rendered, {warmed.cached} cached"
    )
