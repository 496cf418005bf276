"""Results of pure functions of PR text that another process computed, offered to this one.

Cleaning a title or judging a path costs microseconds, but a big month's report does it for thousands of
titles and paths, and a web process that never rendered the month has none of them in its memos
(`functools.lru_cache`): measured on the 1,419-PR month at its last day, about a quarter of a request
that reads the month's digest. The worker that keeps the digest (tracker.store.month_digest) computed them
all already, so the digest carries them and `offer` makes them known here; each memoised function asks
`known` before computing (`clean_title`, `display_title`, `is_auxiliary`).

Only the same code's results are offered: the digest's cache key holds the fingerprint of tracker.core's
sources (tracker.reports.digests). What is offered replaces what was (one month's texts at a time, so it
stays bounded); two requests of different months at once only make one of them compute its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MISSING = object()
_offered: dict[str, Mapping[str, Any]] = {}


def offer(kind: str, results: Mapping[str, Any]) -> None:
    """`results` of the function `kind` by argument, computed elsewhere by the same code."""
    _offered[kind] = results


def known(kind: str, argument: str) -> Any:
    """The offered result of `kind` for `argument`, or MISSING."""
    return _offered.get(kind, {}).get(argument, MISSING)


def forget() -> None:
    _offered.clear()
