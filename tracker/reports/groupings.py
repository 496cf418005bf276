"""The theme grouping of a report's sections, remembered by content in Redis and shared by every process.

Grouping a section's changes into themes (tracker.core.clusters) is the largest part of a cold report (about
a third of a second for 800 changes on a 2-core machine). Its answer depends only on the section's items
(each change's title, labels, paths, references and taxonomy prior, in order) and on the core's code, so it
is stored under a digest of both: whichever process grouped a section first (a worker warming the month
after a batch of deliveries, tracker.reports.warm, or a request) spares every other process the work, at
any cutoff whose section holds the same changes, in every format and language. A delivery that changes a
section's items changes its key, so a stored grouping is never stale; one that does not (a label on a PR
of the other section, a close of an excluded PR) leaves it valid.

Entries expire after GROUPING_SECONDS (40 days: a month and its late deliveries) and hold a few kilobytes
each. A stored value that does not fit its items is grouped again and overwritten; a Redis that fails
costs a grouping, nothing more. The process's own memo of its last groupings (tracker.core.clusters)
stays: it serves the CLI and any process without Redis.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import orjson
from redis import Redis

from tracker.core import clusters
from tracker.reports.fingerprint import CODE

log = logging.getLogger(__name__)

GROUPING_SECONDS = 40 * 24 * 3600
PREFIX = "tracker:grouping:"


class SharedGroupings:
    """A `tracker.core.report.Grouper`: `clusters.group`, through the Redis `cache` when there is one."""

    def __init__(self, cache: Redis | None) -> None:
        self.cache = cache

    def __call__(self, items: Sequence[clusters.Item]) -> tuple[clusters.Group, ...]:
        if self.cache is None or not items:
            return clusters.group(items)
        key = grouping_key(items)
        try:
            stored = self.cache.get(key)
        except Exception:  # a cache outage costs a grouping, nothing more
            log.warning("grouping cache unavailable", exc_info=True)
            return clusters.group(items)
        if stored is not None:
            found = _loaded(stored if isinstance(stored, bytes) else str(stored).encode(), len(items))
            if found is not None:
                return found
        groups = clusters.group(items)
        try:
            self.cache.set(key, _dumped(groups), ex=GROUPING_SECONDS)
        except Exception:
            log.warning("grouping cache unavailable", exc_info=True)
        return groups


def grouping_key(items: Sequence[clusters.Item]) -> str:
    """The Redis key of a section's grouping: a digest of the code and of every item, in order."""
    content = orjson.dumps(
        [[item.title, item.labels, item.paths, item.references, item.prior] for item in items],
    )
    digest = hashlib.sha256(f"{CODE}|".encode() + content).hexdigest()
    return PREFIX + digest


def _dumped(groups: Sequence[clusters.Group]) -> bytes:
    return orjson.dumps(
        [
            {
                "members": group.members,
                "terms": group.terms,
                "topics": [{"members": t.members, "terms": t.terms, "share": t.share} for t in group.topics],
                "other": group.other,
            }
            for group in groups
        ]
    )


def _loaded(stored: bytes, size: int) -> tuple[clusters.Group, ...] | None:
    """The grouping stored, or None for anything that is not one of `size` items (it is then grouped
    again and overwritten)."""
    try:
        document: Any = orjson.loads(stored)
        groups = tuple(
            clusters.Group(
                members=tuple(int(m) for m in group["members"]),
                terms=tuple(str(term) for term in group["terms"]),
                topics=tuple(
                    clusters.Topic(
                        tuple(int(m) for m in topic["members"]),
                        tuple(str(term) for term in topic["terms"]),
                        float(topic["share"]),
                    )
                    for topic in group["topics"]
                ),
                other=bool(group["other"]),
            )
            for group in document
        )
    except (ValueError, TypeError, KeyError):
        log.warning("a stored grouping could not be read: grouping again")
        return None
    members = sorted(m for group in groups for m in group.members)
    return groups if members == list(range(size)) else None
