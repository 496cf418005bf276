"""Reports at a cutoff, rendered and cached (the I/O edge around tracker.report and tracker.render).

A rendered report is cached in Redis under a key that holds the month's change counter and the
ledger's generation, so an unchanged month is served from the cache and a changed one never is.
"""

from __future__ import annotations

import hashlib
import logging

from redis import Redis

from tracker import __version__
from tracker.config import TrackerConfig
from tracker.months import MonthRequest, snapshot_for
from tracker.render import render
from tracker.report import Report, build_report
from tracker.state import MonthState

log = logging.getLogger(__name__)
CACHE_SECONDS = 24 * 3600


def load_report(state: MonthState, config: TrackerConfig, request: MonthRequest) -> Report:
    snapshot = snapshot_for(state, config, request)
    heads = {pr.status.number: pr.version.head_sha for pr in snapshot.pull_requests if pr.version}
    paths = state.head_paths(request.repo, str(request.window.month), heads)
    return build_report(snapshot, paths, config.themes_for(request.repo))


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
    text = render(load_report(state, config, request), fmt, lang)
    if cache is not None and key is not None:
        try:
            cache.set(key, text.encode("utf-8"), ex=CACHE_SECONDS)
        except Exception:
            log.warning("render cache unavailable", exc_info=True)
    return text
