"""Month digests in Redis: a month's snapshot at every cutoff, folded per PR (tracker.store.month_digest),
computed by a worker after the month changes (tracker.reports.warm) so that a request at any cutoff reads
one key instead of the database and folds nothing (for a month of 1,400 PRs: about 15 ms to parse and
10 to pick a cutoff's snapshot, against 250–350 ms of SQL and 30 of folding).

A digest is kept under the month's version and the ledger's generation (which every change to the month,
a head's verdict included, moves on), its time zone (which sets the window ends), the repository's
classification rules and the code that reads and folds it: a request finds it only when it is exactly
what the database would give. When the month changed since the last warm, the request takes the month's
latest digest (named, with its version, under a key without the version) and reads again only the PRs the
versions since changed (tracker.store.changes), which it folds in place of theirs. The process then holds
that window (`cached_fold`): its next request of the window reads again only the PRs changed since, so a
page polled under a stream costs a few PRs' reads a poll. Otherwise (no worker has warmed the month yet,
most of it changed since, a change not recorded) the window is read whole and held; with Redis away the
request reads the database as before. Nothing waits for a digest.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
from collections import OrderedDict
from datetime import timedelta
from typing import Any, cast

import orjson
from redis import Redis

from tracker.config import TrackerConfig
from tracker.core.coverage import Coverage
from tracker.core.window import Month, Window, month_window
from tracker.reports.fingerprint import CODE
from tracker.reports.request import MonthRequest, ReportServices
from tracker.store.month_digest import (
    AUXILIARY,
    EVIDENCE,
    FORMAT,
    PATHS,
    Folded,
    MonthDigest,
    WindowDigest,
    cutoff_index,
    encode,
    fold_encoded,
    read_changed,
    read_digest,
    read_window,
    window_of_cutoff,
    window_of_digest,
)
from tracker.store.month_state import MonthState

log = logging.getLogger(__name__)

DIGEST_SECONDS = 24 * 3600  # an old version's digest is deleted when the next is kept; this bounds the rest


def month_windows(month: str, timezone: str) -> tuple[Window, ...]:
    """The window of each cutoff day of `month` in `timezone`, by ascending end."""
    parsed = Month.parse(month)
    days = (parsed.last_day - parsed.first_day).days + 1
    return tuple(month_window(parsed, parsed.first_day + timedelta(days=offset), timezone) for offset in range(days))


def month_ends(month: str, timezone: str) -> tuple[int, ...]:
    """The window end of each cutoff day of `month` in `timezone`, ascending."""
    return tuple(window.end for window in month_windows(month, timezone))


def digest_key(services: ReportServices, request: MonthRequest) -> str:
    """Where the digest of the requested month as it is now is kept."""
    month = str(request.window.month)
    version, generation = services.state.month_version(request.repo, month)
    return _digest_key(services.config, request.repo, month, request.window.timezone, version, generation)


def _digest_key(config: TrackerConfig, full_name: str, month: str, timezone: str, version: int, generation: str) -> str:
    fingerprint = _fingerprint(config, full_name, month, timezone, generation, str(version))
    return f"tracker:digest:{full_name.lower()}:{month}:{fingerprint}"


def _base_key(config: TrackerConfig, full_name: str, month: str, timezone: str, generation: str) -> str:
    """Where the month's latest digest is named, with its version: a digest of any version of the month
    under the same generation, time zone, rules and code (tracker.store.changes brings it up to date)."""
    fingerprint = _fingerprint(config, full_name, month, timezone, generation)
    return f"tracker:digest-base:{full_name.lower()}:{month}:{fingerprint}"


def _fingerprint(config: TrackerConfig, full_name: str, month: str, timezone: str, *parts: str) -> str:
    return hashlib.sha256(
        "|".join(
            [
                CODE,
                str(FORMAT),
                full_name.lower(),
                month,
                timezone,
                repr(config.rules_for(full_name)),
                *parts,
            ]
        ).encode()
    ).hexdigest()


def keep_digest(services: ReportServices, cache: Redis, request: MonthRequest) -> MonthDigest:
    """Read the requested month's digest from the database and keep it for the month's current version (the
    version is read first: a change while reading makes the kept digest a key nobody asks for), as a hash
    of one field per cutoff (tracker.store.month_digest.encode)."""
    state, config, full_name = services.state, services.config, request.repo
    month, timezone = str(request.window.month), request.window.timezone
    version, generation = state.month_version(full_name, month)
    key = _digest_key(config, full_name, month, timezone, version, generation)
    digest = read_digest(state, full_name, month, month_windows(month, timezone), config.rules_for(full_name))
    prefix = f"tracker:digest:{full_name.lower()}:{month}:"
    stale = [old for old in cache.scan_iter(match=prefix + "*", count=100) if old.decode() != key]
    pipe = cache.pipeline(transaction=True)  # all of its fields or none
    pipe.delete(key, *stale)
    pipe.hset(key, mapping=encode(digest))  # type: ignore[arg-type]
    pipe.expire(key, DIGEST_SECONDS)
    # The base of later requests, with the versions it was read between: under a stream the month moves on
    # while a big month is read, so the digest holds each PR as some version from `version` to `through`
    # had it. A request at a version from `through` on reads again every PR changed after `version`.
    through, now = state.month_version(full_name, month)
    if now == generation:
        base = orjson.dumps({"key": key, "version": version, "through": through})
        pipe.set(_base_key(config, full_name, month, timezone, generation), base, ex=DIGEST_SECONDS)
    pipe.execute()
    return digest


class KeptDigest:
    """A month's digest in Redis, read one cutoff at a time (the fields of that cutoff, in one HMGET)."""

    def __init__(self, cache: Redis, key: str) -> None:
        self.cache, self.key = cache, key

    def fold_at(
        self, repo: str, window: Window, coverage: Coverage | None = None, *, evidence: bool = True
    ) -> Folded | None:
        """`MonthDigest.fold_at`, or None when the digest does not hold the window (any more)."""
        values = cutoff_fields(self.cache, self.key, window, evidence)
        return fold_encoded(
            values[0],
            values[1],
            values[2],
            values[3] if evidence else None,
            repo,
            window,
            coverage,
            with_evidence=evidence,
        )


def cutoff_fields(cache: Redis, key: str, window: Window, evidence: bool) -> list[bytes | None]:
    """The fields of the digest at `key` that the window's cutoff reads (`fold_encoded`'s, in its order),
    in one HMGET: its slice, the month's tables, the auxiliary paths, and the month's evidence when
    wanted."""
    wanted = [str(cutoff_index(window)), PATHS, AUXILIARY, *([EVIDENCE] if evidence else [])]
    return cast(list[bytes | None], cache.hmget(key, wanted))  # a client of bytes


def _window_of(values: list[bytes | None], window: Window, evidence: bool) -> WindowDigest | None:
    """The window's digest from the fields `cutoff_fields` read, or None (a field missing)."""
    return window_of_cutoff(
        values[0], values[1], values[2], values[3] if evidence else None, window, with_evidence=evidence
    )


def kept_digest(services: ReportServices, cache: Redis, request: MonthRequest) -> KeptDigest:
    """The digest of the requested month as it is now, where a worker keeps it (it may hold nothing: each
    read says)."""
    return KeptDigest(cache, digest_key(services, request))


def cached_fold(
    services: ReportServices,
    cache: Redis | None,
    request: MonthRequest,
    coverage: Coverage | None = None,
    *,
    evidence: bool = True,
) -> Folded | None:
    """The month's snapshot at `window` and each PR's changed paths then, from its digest in Redis when a
    worker kept it for the month as it is now, else from the window this process holds or the month's
    latest digest, each patched with the PRs changed since; else the window read whole from the database
    (`read_window`). None when Redis is away or the month changed while it was read (the caller reads the
    database). `evidence`: see `MonthDigest.fold_at`.

    The window's digest, once read (or patched), is held by this process (`_held`), and a later request
    at a newer version of the month patches it with the PRs changed since (tracker.store.changes): under a
    stream each request reads again the few PRs changed since the request before, not all of those changed
    since the last warm (most of a busy month a minute after it)."""
    if cache is None:
        return None
    state, config, full_name, window = services.state, services.config, request.repo, request.window
    month, timezone = str(window.month), window.timezone
    try:
        version, generation = state.month_version(full_name, month)
        key = _held_key(config, full_name, window, generation, evidence)
        digest = _held_as_of(state, key, version)  # this process answered the window as it is: nothing to read
        if digest is None:
            values = cutoff_fields(
                cache, _digest_key(config, full_name, month, timezone, version, generation), window, evidence
            )
            digest = _window_of(values, window, evidence)
            if digest is not None:
                _hold(state, key, version, digest)
            else:
                digest = _brought_up_to_date(state, config, full_name, window, key, version)
        if digest is None:
            found = _patched_window(cache, state, config, full_name, window, version, generation, evidence)
            if found is None:  # no digest, or most of the month changed since: the window read whole
                read = read_window(state, full_name, month, window, config.rules_for(full_name))
                found = (read[0], window_of_digest(read[1], evidence)) if read is not None else None
            if found is not None:
                _hold(state, key, *found)
                digest = found[1]
        return digest.fold(full_name, window, coverage) if digest is not None else None
    except Exception:  # a cache: Redis away costs the database read, not the request
        log.warning("month digest cache unavailable", exc_info=True)
        return None


# The windows this process holds (`cached_fold`), by ledger (a test's ledger is not another's): the last
# HELD_WINDOWS asked for, each with the month's version it is as of.
HELD_WINDOWS = 8
_held: weakref.WeakKeyDictionary[MonthState, OrderedDict[tuple[Any, ...], tuple[int, WindowDigest]]] = (
    weakref.WeakKeyDictionary()
)
_held_lock = threading.Lock()


def _held_key(
    config: TrackerConfig, full_name: str, window: Window, generation: str, evidence: bool
) -> tuple[Any, ...]:
    """Everything a held window depends on besides the month's version (the code is this process's)."""
    return (
        full_name.lower(),
        str(window.month),
        window.timezone,
        window.end,
        generation,
        repr(config.rules_for(full_name)),
        evidence,
    )


def _hold(state: MonthState, key: tuple[Any, ...], version: int, digest: WindowDigest) -> None:
    """Hold `digest` as the window at `version`, unless a newer one is held already."""
    with _held_lock:
        windows = _held.setdefault(state, OrderedDict())
        found = windows.get(key)
        if found is not None and found[0] > version:
            return
        windows[key] = (version, digest)
        windows.move_to_end(key)
        while len(windows) > HELD_WINDOWS:
            windows.popitem(last=False)


def _held_as_of(state: MonthState, key: tuple[Any, ...], version: int) -> WindowDigest | None:
    """The window this process holds when it is as of `version` or later, else None."""
    with _held_lock:
        windows = _held.get(state)
        found = windows.get(key) if windows is not None else None
        if found is None or found[0] < version:
            return None
        windows.move_to_end(key)  # type: ignore[union-attr]
        return found[1]


def _brought_up_to_date(
    state: MonthState, config: TrackerConfig, full_name: str, window: Window, key: tuple[Any, ...], version: int
) -> WindowDigest | None:
    """The window this process holds, patched with the PRs changed since the version it is as of (and held
    as the newer one); None when it holds none, or the changes since are not all known."""
    with _held_lock:
        windows = _held.get(state)
        found = windows.get(key) if windows is not None else None
    if found is None:
        return None
    since, digest = found
    if since >= version:  # the month as of this request's version, or a later one (held by another request)
        return digest
    changed = read_changed(state, full_name, str(window.month), window, config.rules_for(full_name), since)
    if changed is None:
        return None
    read, numbers, partial = changed
    digest = digest.patched(numbers, partial)
    _hold(state, key, read, digest)
    return digest


def forget_held() -> None:
    """Forget the windows this process holds (a test or a benchmark acting as a process that never read the
    month)."""
    with _held_lock:
        _held.clear()


def _patched_window(
    cache: Redis,
    state: MonthState,
    config: TrackerConfig,
    full_name: str,
    window: Window,
    version: int,
    generation: str,
    evidence: bool,
) -> tuple[int, WindowDigest] | None:
    """The month's latest digest (kept at an older version) at the window, with the PRs changed since read
    again (tracker.store.changes), and the month's version it is as of: under a stream of deliveries the
    month changes every few hundred milliseconds while a worker keeps its digest once a minute
    (tracker.reports.warm). None when there is no such digest, or the changes since are not all known."""
    month, timezone = str(window.month), window.timezone
    base = cast(bytes | None, cache.get(_base_key(config, full_name, month, timezone, generation)))
    if base is None:
        return None
    named = orjson.loads(base)
    if named["version"] >= version or named["through"] > version:
        return None  # not older than the month, or read (in part) after this request's version
    changed = read_changed(state, full_name, month, window, config.rules_for(full_name), named["version"])
    if changed is None:
        return None
    values = cutoff_fields(cache, named["key"], window, evidence)
    digest = _window_of(values, window, evidence)
    if digest is None:
        return None
    read, numbers, partial = changed
    return read, digest.patched(numbers, partial)
