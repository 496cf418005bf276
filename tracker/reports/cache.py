"""Reports at a cutoff, rendered and cached.

A rendered report is cached in Redis under a key that holds the month's change counter and the
ledger's generation, so an unchanged month is served from the cache and a changed one never is.
"""

from __future__ import annotations

import hashlib
import logging

from redis import Redis

from tracker import __version__
from tracker.config import TrackerConfig
from tracker.reports.loading import MonthRequest, report_for
from tracker.reports.render import render
from tracker.store.month_state import MonthState

log = logging.getLogger(__name__)
CACHE_SECONDS = 24 * 3600


def rendered(
    state: MonthState,
    config: TrackerConfig,
    request: MonthRequest,
    fmt: str,
    lang: str,
    cache: Redis | None = None,
) -> str:
    """The report in `fmt` and `lang`, from the cache when the month has not changed since."""
    key = None
    if cache is not None:
        version, generation = state.month_version(request.repo, str(request.window.month))
        fingerprint = hashlib.sha256(
            "|".join(
                [
                    __version__,
                    request.repo.lower(),
                    str(request.window.month),
                    request.window.cutoff.isoformat(),
                    request.window.timezone,
                    fmt,
                    lang,
                    str(version),
                    generation,
                    config.model_dump_json(),
                ]
            ).encode()
        ).hexdigest()
        key = f"tracker:render:{fingerprint}"
        try:
            hit = cache.get(key)
            if hit is not None:
                return hit.decode("utf-8") if isinstance(hit, bytes) else str(hit)
        except Exception:  # a cache outage costs a render, nothing more
            log.warning("render cache unavailable", exc_info=True)
            key = None
    text = render(report_for(state, config, request), fmt, lang)
    if cache is not None and key is not None:
        try:
            cache.set(key, text.encode("utf-8"), ex=CACHE_SECONDS)
        except Exception:
            log.warning("render cache unavailable", exc_info=True)
    return text
