"""A month's report computed before anyone asks: what the workers do after they change a month.

The first request for a month after a new delivery would otherwise pay for everything: reading the month,
the snapshot, the report model and above all its themes, grouped and named (tracker.reports.groupings),
then the rendering. `warm_month` does that work in a worker, for the request most readers make (the month to
date: `current`, the month without a cutoff, or today's cutoff, which are one window), and keeps:
- the month's digest (tracker.reports.digests): its inputs at every cutoff, which any request of the
  month at any cutoff reads instead of the database until the month changes again;
- each section's themes, grouped and named, in Redis by content (40 days), which every other cutoff whose
  sections have the same content reads too, and any request after the next delivery whose sections did not
  change;
- the month's documents (JSON, its summary, Markdown and HTML in both languages, and, for a repository in a
  group, what its groups read of it: tracker.reports.render.MEMBER_DOCUMENT) in the render cache under the
  month's current version, so the month-to-date request is a cache hit until the next change (or until the
  entry expires or is evicted: tracker.reports.cache keeps an entry 6 hours at most, 128 in all);
- the named themes of each earlier cutoff of the month ("through the 13th"), computed from the digest in
  memory: whenever the month has come to rest (`rested`: a reader coming back to a past cutoff finds its
  themes kept), and under a stream that never rests at most once every EARLIER_EVERY seconds per month.
  A delivery changes the sections of the cutoffs after its instant only, so the themes of the earlier
  ones stay valid (they are kept by content) and a pass over a month that was passed over before reads
  Redis and neither clusters nor names anything: a few seconds of a worker's time for the largest months,
  against a third of a second of clustering and naming in the first request of any such cutoff.

A month whose final report is its record is served from the record, so nothing is warmed for it.

When (`ask_for_warm`, `warm_when_rested`: the warm job, `workers.jobs.warm_month`): after a batch of
deliveries or fetched heads, each month the batch changed notes when it last changed and queues a warm job
WARM_DELAY seconds later unless one waits already (a SET NX: until the job starts no other is queued for
the month). A burst of batches costs one warm, not a render after every batch. The job waits for the month to
rest: when the month changed less than WARM_DELAY seconds ago it schedules itself again for when it will have
rested that long, though at most WARM_LONGEST seconds after the change that asked for it (under a stream what a
warm keeps is out of date within milliseconds, and each web process reads again only what changed since:
tracker.reports.digests). The job deletes its key before it reads the month, so whatever changes the month
after that asks for the next warm; the key expires, in case a worker died holding the job. A month is warmed at
most once every WARM_EVERY seconds. Warm jobs run on the `records` queue.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from redis import Redis
from rq import Queue

from tracker.core.repository import repository_key
from tracker.core.window import WindowError, resolve_window
from tracker.queue import JOB_TIMEOUT, RESULT_TTL, WARM_FUNCTION
from tracker.records.finalize import served_record
from tracker.reports.cache import keep, render_key
from tracker.reports.collector import collector_paused
from tracker.reports.digests import KeptDigest, digest_key, keep_digest, kept_digest
from tracker.reports.loading import UnknownRepository, report_for, resolve
from tracker.reports.render import FULL, MEMBER_DOCUMENT, SUMMARY, Document, render_bytes
from tracker.reports.request import MonthRequest, ReportServices
from tracker.store.month_digest import MonthDigest

log = logging.getLogger(__name__)

EARLIER_EVERY = 900  # seconds: at most one pass over a month's earlier cutoffs in this time
WAITING_TTL = 900  # seconds: longer than WARM_LONGEST, and renewed each time the job waits again
WARM_DELAY = 10.0  # seconds the month must have rested before it is warmed
WARM_LONGEST = 600.0  # seconds after the change that asked: warmed then even if the month never rests
WARM_EVERY = 60.0  # seconds: at most one warm of a month starts in this time

# (format, language, detail) of every document a month-to-date request can ask for.
DOCUMENTS = (
    Document("json", "en", FULL),
    Document("json", "en", SUMMARY),
    Document("md", "en"),
    Document("md", "zh-CN"),
    Document("html", "en"),
    Document("html", "zh-CN"),
)


class WarmServices(ReportServices, Protocol):
    """What warming reads and where it keeps what it computed (tracker.services.Services has it)."""

    @property
    def redis(self) -> Redis | None: ...

    @property
    def records_queue(self) -> Queue: ...

    def require_redis(self) -> Redis: ...


@dataclass(frozen=True)
class Warmed:
    cutoff: str  # the day the month-to-date window ends
    rendered: int  # documents rendered now
    cached: int  # documents already in the cache for the month's current version
    earlier: int = 0  # earlier cutoffs whose themes were kept now (a pass at most every EARLIER_EVERY s)


def warm_month(services: WarmServices, full_name: str, month: str, *, rested: bool = False) -> Warmed | None:
    """Compute and keep what the month's month-to-date request reads. None when there is nothing to
    warm: no Redis, a repository or month the ledger cannot answer for, or a month served from its
    record. `rested`: the month stopped changing (`warm_when_rested`), so its earlier cutoffs are themed whenever
    the last pass over them was."""
    cache = services.redis
    if cache is None:
        return None
    try:
        request = resolve(services, full_name, month, None)
    except (UnknownRepository, WindowError) as exc:
        log.info("nothing to warm for %s of %s: %s", month, full_name, exc)
        return None
    if served_record(services.records, request) is not None:
        return None
    window = request.window
    with collector_paused():
        digest = None
        if not cache.exists(digest_key(services, request)):
            digest = keep_digest(services, cache, request)  # every cutoff reads it
        documents = (*DOCUMENTS, MEMBER_DOCUMENT) if services.config.in_a_group(request.repo) else DOCUMENTS
        keys = {document: render_key(services, request, document) for document in documents}
        missing = [document for document, key in keys.items() if not cache.exists(key)]
        if missing:
            report = report_for(services, request, cache=cache)  # reads or keeps each section's grouping
            for document in missing:
                keep(cache, keys[document], render_bytes(report, *document))
        earlier = 0
        if window.cutoff > window.month.first_day and (
            cache.set(earlier_key(request.repo, str(window.month)), 1, nx=not rested, ex=EARLIER_EVERY)
        ):
            earlier = _group_earlier_cutoffs(cache, services, request, digest)
    return Warmed(request.window.cutoff.isoformat(), len(missing), len(documents) - len(missing), earlier)


def earlier_key(full_name: str, month: str) -> str:
    """Set for EARLIER_EVERY seconds after a pass over the month's earlier cutoffs."""
    return f"tracker:warm:earlier:{repository_key(full_name)}:{month}"


def _group_earlier_cutoffs(
    cache: Redis, services: WarmServices, request: MonthRequest, digest: MonthDigest | KeptDigest | None
) -> int:
    """Keep the named themes of each cutoff before the month-to-date one (themes kept already, by content,
    cost a Redis read); the number of cutoffs passed over."""
    window = request.window
    month = str(window.month)
    if digest is None:
        digest = kept_digest(services, cache, request)
        if not cache.exists(digest.key):  # the month changed since its digest was kept: the next warm passes
            cache.delete(earlier_key(request.repo, month))
            return 0
    days = 0
    day = window.month.first_day
    while day < window.cutoff:
        earlier = MonthRequest(request.repo, resolve_window(month, day.isoformat(), window.timezone, window.cutoff))
        report_for(services, earlier, prose=False, cache=cache, digest=digest, evidence=False)
        day += timedelta(days=1)
        days += 1
    return days


# --- when: the warm job -----------------------------------------------------------------------------


def waiting_key(full_name: str, month: str) -> str:
    """Set while a warm job of the month waits to start, to when the change that queued it was (epoch s)."""
    return f"tracker:warm:waiting:{repository_key(full_name)}:{month}"


def changed_key(full_name: str, month: str) -> str:
    """When a batch last changed the month (epoch seconds)."""
    return f"tracker:warm:changed:{repository_key(full_name)}:{month}"


def last_key(full_name: str, month: str) -> str:
    """When the month's last warm job started (epoch seconds), for WARM_EVERY."""
    return f"tracker:warm:last:{repository_key(full_name)}:{month}"


def ask_for_warm(services: WarmServices, full_name: str, month: str) -> bool:
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


def _schedule(services: WarmServices, full_name: str, month: str, delay: float) -> None:
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


def warm_when_rested(services: WarmServices, full_name: str, month: str) -> str:
    """The warm job: `warm_month` once the month rests (or WARM_LONGEST after the change that asked)."""
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
    # keeps to EARLIER_EVERY for those.
    warmed = warm_month(services, full_name, month, rested=rested is None or rested >= WARM_DELAY)
    if warmed is None:
        return f"nothing to warm for {month} of {full_name}"
    return (
        f"{month} of {full_name} through {warmed.cutoff}: {warmed.earlier} earlier cutoffs grouped, "
        f"{warmed.rendered} rendered, {warmed.cached} cached"
    )
