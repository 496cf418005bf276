"""A month's report computed before anyone asks: what the workers do after they change a month.

The first request for a month after a new delivery would otherwise pay for everything: reading the month,
the snapshot, the report model and above all its grouping into themes (tracker.reports.groupings), then
the rendering. `warm_month` does that work in a worker, for the request most readers make (the month to
date: `current`, the month without a cutoff, or today's cutoff, which are one window), and keeps:
- the month's digest (tracker.reports.digests): its inputs at every cutoff, which any request of the
  month at any cutoff reads instead of the database until the month changes again;
- each section's grouping in Redis by content (40 days), which every other cutoff whose sections have the
  same content reads too, and any request after the next delivery whose sections did not change;
- the month's documents (JSON, its summary, Markdown and HTML in both languages) in the render cache under
  the month's current version, so the month-to-date request is a cache hit until the next change;
- the grouping of each earlier cutoff of the month ("through the 13th"), computed from the digest in
  memory: whenever the month has come to rest (`rested`: a reader coming back to a past cutoff finds its
  grouping kept), and under a stream that never rests at most once every EARLIER_EVERY seconds per month.
  A delivery changes the sections of the cutoffs after its instant only, so the groupings of the earlier
  ones stay valid (they are kept by content) and a pass over a month that was passed over before reads
  Redis and clusters nothing: a few seconds of a worker's time for the largest months, against a third of
  a second of clustering in the first request of any such cutoff.

A month whose final report is its record is served from the record, so nothing is warmed for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from redis import Redis

from tracker.core.repository import repository_key
from tracker.core.window import WindowError, resolve_window
from tracker.reports.cache import keep, render_key
from tracker.reports.collector import collector_paused
from tracker.reports.digests import KeptDigest, digest_key, keep_digest, kept_digest
from tracker.reports.loading import UnknownRepository, report_for, resolve
from tracker.reports.records import served_record
from tracker.reports.render import FULL, SUMMARY, Document, render_bytes
from tracker.reports.request import MonthRequest, ReportServices
from tracker.store.month_digest import MonthDigest

log = logging.getLogger(__name__)

EARLIER_EVERY = 900  # seconds: at most one pass over a month's earlier cutoffs in this time

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


@dataclass(frozen=True)
class Warmed:
    cutoff: str  # the day the month-to-date window ends
    rendered: int  # documents rendered now
    cached: int  # documents already in the cache for the month's current version
    earlier: int = 0  # earlier cutoffs whose groupings were kept now (a pass at most every EARLIER_EVERY s)


def warm_month(services: WarmServices, full_name: str, month: str, *, rested: bool = False) -> Warmed | None:
    """Compute and keep what the month's month-to-date request reads. None when there is nothing to
    warm: no Redis, a repository or month the ledger cannot answer for, or a month served from its
    record. `rested`: the month stopped changing (workers.warm), so its earlier cutoffs are grouped whenever
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
        keys = {document: render_key(services, request, document) for document in DOCUMENTS}
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
    return Warmed(request.window.cutoff.isoformat(), len(missing), len(DOCUMENTS) - len(missing), earlier)


def earlier_key(full_name: str, month: str) -> str:
    """Set for EARLIER_EVERY seconds after a pass over the month's earlier cutoffs."""
    return f"tracker:warm:earlier:{repository_key(full_name)}:{month}"


def _group_earlier_cutoffs(
    cache: Redis, services: WarmServices, request: MonthRequest, digest: MonthDigest | KeptDigest | None
) -> int:
    """Keep the grouping of each cutoff before the month-to-date one (a grouping kept already, by content,
    costs a Redis read); the number of cutoffs passed over."""
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
