"""Results of pure functions of PR text computed ahead, passed to a report as data.

Cleaning a title, finding a body's summary or judging a path costs microseconds, but a big month's report
does it for thousands of titles, bodies and paths, and a web process that never rendered the month has
none of them in its memos (`functools.lru_cache`): on the 1,419-PR month at its last day, about two thirds
of building the report. The worker that keeps the month's digest (tracker.store.month_digest) computes
them once, with this code, and the digest carries them: the report built from it receives them
(`build_report(..., known=...)`), which makes them `known` while it runs (`using`). Each memoised function
asks `known` before computing (the `KINDS` below name them).

Only the same code's results are passed: the digest's cache key holds the fingerprint of tracker.core's
sources (tracker.reports.digests). What is known is scoped to the call (a context variable), so two
reports built at once in two threads each see their own month's.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

# The memoised functions whose results a report can be given, by name: kind -> argument -> result.
KINDS = (
    "display_title",  # tracker.core.groups
    "clean_title",  # tracker.core.titles
    "normalise_title",  # tracker.core.groups
    "revert_facts",  # tracker.core.noise
    "upkeep_facts",  # tracker.core.noise
    "is_auxiliary",  # tracker.core.themes
    "summary_sentence",  # tracker.core.descriptions ("" for none)
    "body_references",  # tracker.core.groups
    # noise.maintenance_kind of a change of one PR (tracker.core.report), by (number, its version's instant):
    # the version's title, author and labels with the changed paths of its head
    "version_upkeep",
)
Known = Mapping[str, Mapping[Any, Any]]
NOTHING: Known = MappingProxyType({})
MISSING = object()
_known: ContextVar[Known] = ContextVar("tracker_known_results", default=NOTHING)


@contextmanager
def using(results: Known) -> Iterator[None]:
    """Make `results` (computed elsewhere by the same code) known to the memoised functions meanwhile."""
    token = _known.set(results)
    try:
        yield
    finally:
        _known.reset(token)


def known(kind: str, argument: Hashable) -> Any:
    """The given result of `kind` for `argument`, or MISSING."""
    return _known.get().get(kind, NOTHING).get(argument, MISSING)


def given(kind: str) -> Mapping[Any, Any]:
    """Every given result of `kind`, by argument: for a caller that asks of many arguments at once."""
    return _known.get().get(kind, NOTHING)
