"""Reports at a cutoff, rendered and cached.

A rendered report is cached in Redis under a key that holds the month's change counter and the
ledger's generation, so an unchanged month is served from the cache and a changed one never is.

Anyone can ask for any cutoff of any month in two languages, and the queue shares this Redis, so
the cache is bounded by construction rather than by Redis eviction alone: every entry expires, an entry
larger than MAX_ENTRY_BYTES is not kept, and an index of entries by last use keeps at most MAX_ENTRIES,
dropping the least recently used. Every key here has a time to live (the index too), so that a Redis
evicting only such keys (the embedded server's `volatile-lru`, tracker.embedded_redis) may drop them
and never a queued job.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from datetime import date

from redis import Redis

from tracker.reports.collector import collector_paused
from tracker.reports.fingerprint import CODE
from tracker.reports.loading import report_for, since_for
from tracker.reports.render import FULL, Document, render_bytes
from tracker.reports.request import MonthRequest, ReportServices

log = logging.getLogger(__name__)
CACHE_SECONDS = 6 * 3600
MAX_ENTRIES = 128
MAX_ENTRY_BYTES = 4 * 1024 * 1024  # a 1,400-PR month's JSON is about 2 MB; at most 512 MB in all
INDEX = "tracker:render-index"  # sorted set: entry key -> last use (epoch seconds)


def rendered(
    services: ReportServices,
    request: MonthRequest,
    document: Document,
    cache: Redis | None = None,
    since: date | None = None,
) -> str:
    """The report as `document`, from the cache when the month has not changed since; with `since` (a day of
    the month not after the cutoff), with its Since section (`since_for`)."""
    return rendered_bytes(services, request, document, cache, since).decode("utf-8")


def rendered_bytes(
    services: ReportServices,
    request: MonthRequest,
    document: Document,
    cache: Redis | None = None,
    since: date | None = None,
) -> bytes:
    """`rendered` as the UTF-8 bytes an answer sends (a cached 2 MB JSON is sent as Redis gave it)."""

    def render() -> bytes:
        with collector_paused():
            # The Markdown and the HTML show no PR's evidence: a snapshot from the month's digest leaves it out.
            evidence = document.fmt == "json" and document.detail == FULL
            report = report_for(services, request, cache=cache, evidence=evidence)
            changed = since_for(services, request, since, report, cache) if since is not None else None
            data = render_bytes(report, *document, since=changed)
            del report, changed  # freed inside the pause
        return data

    key = render_key(services, request, document, since) if cache is not None else None
    return kept_or_made(cache, key, render)


def kept_or_made(cache: Redis | None, key: str | None, make: Callable[[], bytes]) -> bytes:
    """What the cache keeps under `key`, else `make()`, then kept there. A cache outage costs a render,
    nothing more; no cache or no key: `make()`."""
    if cache is None or key is None:
        return make()
    try:
        hit = cache.get(key)
        if hit is not None:
            cache.zadd(INDEX, {key: time.time()})
            return hit if isinstance(hit, bytes) else str(hit).encode("utf-8")
    except Exception:
        log.warning("render cache unavailable", exc_info=True)
        return make()
    data = make()
    try:
        keep(cache, key, data)
    except Exception:
        log.warning("render cache unavailable", exc_info=True)
    return data


def render_key(services: ReportServices, request: MonthRequest, document: Document, since: date | None = None) -> str:
    """The cache key of a rendered report: everything that can change its bytes (`since`, when given: the
    earlier cutoff of its Since section, read from the same month at the same version)."""
    version, generation = services.state.month_version(request.repo, str(request.window.month))
    fmt, lang, detail = document
    fingerprint = hashlib.sha256(
        "|".join(
            [
                CODE,
                request.repo.lower(),
                str(request.window.month),
                request.window.cutoff.isoformat(),
                "ended" if request.window.ended else "running",  # the last day turns final at its end
                request.window.timezone,
                fmt if fmt != "json" or detail == FULL else f"{fmt}-{detail}",
                lang if fmt != "json" else "",  # the JSON document is the same in every language
                str(version),
                generation,
                services.config.model_dump_json(),
                *([f"since={since.isoformat()}"] if since is not None else []),
            ]
        ).encode()
    ).hexdigest()
    return f"tracker:render:{fingerprint}"


def keep(cache: Redis, key: str, value: bytes) -> None:
    """Store a rendered report under `key` (its `render_key`), within the cache's bounds."""
    if len(value) > MAX_ENTRY_BYTES:
        return
    now = time.time()
    pipe = cache.pipeline(transaction=False)
    pipe.set(key, value, ex=CACHE_SECONDS)
    pipe.zadd(INDEX, {key: now})
    pipe.expire(INDEX, CACHE_SECONDS)  # outlives its entries, which all expire within CACHE_SECONDS
    pipe.zremrangebyscore(INDEX, "-inf", now - CACHE_SECONDS)  # entries that expired by themselves
    pipe.zcard(INDEX)
    size = pipe.execute()[-1]
    if size > MAX_ENTRIES:
        popped: list[tuple[bytes, float]] = cache.zpopmin(INDEX, size - MAX_ENTRIES)  # type: ignore[assignment]
        evicted = [entry[0] for entry in popped]
        if evicted:
            cache.delete(*evicted)
