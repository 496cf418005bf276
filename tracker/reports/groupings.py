"""Each section's themes, grouped and named, remembered by content in Redis and shared by every process.

Grouping a section's changes into themes (tracker.core.clusters) is the largest part of a cold report (about
a third of a second for 800 changes on a 2-core machine), and naming its themes and highlights
(tracker.core.report.named_themes: their terms, the taxonomy's or the code layout's area) the largest part
of a report built once the grouping is known. Both depend only on the section's items (each change's title,
labels, paths, references, taxonomy prior and whether it is upkeep, in order), on each change's taxonomy
choice with its names when the repository has a taxonomy, and on the core's code, so the named themes are
stored under a digest of all of them: whichever process themed a section first (a worker warming the month
after a batch of deliveries, tracker.reports.warm, or a request) spares every other process the work, at any
cutoff whose section holds the same changes, in every format and language. A delivery that changes a
section's items, or a taxonomy renamed, changes its key, so a stored entry is never stale; a delivery that
does not (a label on a PR of the other section, a close of an excluded PR) leaves it valid.

Entries expire after GROUPING_SECONDS (40 days: a month and its late deliveries) and hold a few kilobytes
each. A stored value that does not fit its items is computed again and overwritten; a Redis that fails costs
the computation, nothing more. The process's own memo of its last groupings (tracker.core.clusters) stays: it
serves the CLI and any process without Redis.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import orjson
from redis import Redis

from tracker.core import clusters
from tracker.core.report import NamedHighlight, NamedTheme, named_section
from tracker.core.themes import ThemeChoice
from tracker.reports.fingerprint import CODE

log = logging.getLogger(__name__)

GROUPING_SECONDS = 40 * 24 * 3600
PREFIX = "tracker:grouping:"


class SharedGroupings:
    """A `tracker.core.report.Themer`: `report.named_section`, through the Redis `cache` when there is one."""

    def __init__(self, cache: Redis | None) -> None:
        self.cache = cache

    def __call__(self, items: Sequence[clusters.Item], priors: Sequence[ThemeChoice]) -> tuple[NamedTheme, ...]:
        if self.cache is None or not items:
            return named_section(items, priors)
        key = grouping_key(items, priors)
        try:
            stored = self.cache.get(key)
        except Exception:  # a cache outage costs a computation, nothing more
            log.warning("grouping cache unavailable", exc_info=True)
            return named_section(items, priors)
        if stored is not None:
            found = _loaded(stored if isinstance(stored, bytes) else str(stored).encode(), items)
            if found is not None:
                return found
        themes = named_section(items, priors)
        try:
            self.cache.set(key, _dumped(themes), ex=GROUPING_SECONDS)
        except Exception:
            log.warning("grouping cache unavailable", exc_info=True)
        return themes


def grouping_key(items: Sequence[clusters.Item], priors: Sequence[ThemeChoice]) -> str:
    """The Redis key of a section's named themes: a digest of the code, of every item and of every prior (its
    ids and names), in order."""
    content = orjson.dumps(
        [
            [[item.title, item.labels, item.paths, item.references, item.prior, item.upkeep] for item in items],
            [[p.theme_id, p.theme_en, p.theme_zh, p.highlight_id, p.highlight_en, p.highlight_zh] for p in priors],
        ]
    )
    digest = hashlib.sha256(f"{CODE}|".encode() + content).hexdigest()
    return PREFIX + digest


def _dumped(themes: Sequence[NamedTheme]) -> bytes:
    return orjson.dumps(
        [
            [theme.id, theme.en, theme.zh, theme.terms, [[h.id, h.en, h.zh, h.members] for h in theme.highlights]]
            for theme in themes
        ]
    )


def _loaded(stored: bytes, items: Sequence[clusters.Item]) -> tuple[NamedTheme, ...] | None:
    """The named themes stored, or None for anything that is not themes of `items` (they are then computed
    again and overwritten): each item not upkeep in one highlight, none of the others."""
    try:
        document: Any = orjson.loads(stored)
        themes = tuple(
            NamedTheme(
                str(theme_id),
                str(en),
                str(zh),
                tuple(str(term) for term in terms),
                tuple(
                    NamedHighlight(str(h_id), str(h_en), str(h_zh), tuple(int(m) for m in members))
                    for h_id, h_en, h_zh, members in highlights
                ),
            )
            for theme_id, en, zh, terms, highlights in document
        )
    except (ValueError, TypeError):
        log.warning("a stored grouping could not be read: computing it again")
        return None
    members = sorted(m for theme in themes for h in theme.highlights for m in h.members)
    fits = members == [i for i, item in enumerate(items) if not item.upkeep] and all(
        theme.highlights and all(h.members for h in theme.highlights) for theme in themes
    )
    return themes if fits else None
