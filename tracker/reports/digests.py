"""Month digests in Redis: a month's report inputs at every cutoff (tracker.store.month_digest), computed
by a worker after the month changes (tracker.reports.warm) so that a request at any cutoff reads one key
instead of the database (for a month of 1,400 PRs: about 30 ms to parse, 15 to pick a cutoff's inputs,
against 250–350 ms of SQL).

A digest is kept under the month's version and the ledger's generation (which every change to the month,
a head's verdict included, moves on), its time zone (which sets the window ends) and the code that reads
and folds it: a request finds it only when it is exactly what the database would give. Otherwise (the
month changed since the last warm, no worker has warmed it yet, Redis is away) the request reads the
database as before; nothing waits for a digest.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta

from redis import Redis

from tracker import __version__
from tracker.core.window import Month, month_window
from tracker.reports.fingerprint import code_fingerprint
from tracker.store.month_digest import FORMAT, MonthDigest, decode, encode, read_digest
from tracker.store.month_state import MonthInputs, MonthState

log = logging.getLogger(__name__)

DIGEST_SECONDS = 24 * 3600  # an old version's digest is deleted when the next is kept; this bounds the rest
CODE = code_fingerprint(("core", "*.py"), ("store", "*.py"))


def month_ends(month: str, timezone: str) -> tuple[int, ...]:
    """The window end of each cutoff day of `month` in `timezone`, ascending."""
    parsed = Month.parse(month)
    days = (parsed.last_day - parsed.first_day).days + 1
    return tuple(
        month_window(parsed, parsed.first_day + timedelta(days=offset), timezone).end for offset in range(days)
    )


def digest_key(state: MonthState, full_name: str, month: str, timezone: str) -> str:
    version, generation = state.month_version(full_name, month)
    fingerprint = hashlib.sha256(
        "|".join(
            [__version__, CODE, str(FORMAT), full_name.lower(), month, timezone, str(version), generation]
        ).encode()
    ).hexdigest()
    return f"tracker:digest:{full_name.lower()}:{month}:{fingerprint}"


def keep_digest(cache: Redis, state: MonthState, full_name: str, month: str, timezone: str) -> MonthDigest:
    """Read the month's digest from the database and keep it for the month's current version (the
    version is read first: a change while reading makes the kept digest a key nobody asks for)."""
    key = digest_key(state, full_name, month, timezone)
    digest = read_digest(state.engine, full_name, month, month_ends(month, timezone))
    prefix = f"tracker:digest:{full_name.lower()}:{month}:"
    stale = [old for old in cache.scan_iter(match=prefix + "*", count=100) if old.decode() != key]
    pipe = cache.pipeline(transaction=False)
    pipe.set(key, encode(digest), ex=DIGEST_SECONDS)
    if stale:
        pipe.delete(*stale)
    pipe.execute()
    return digest


def kept_digest(cache: Redis, state: MonthState, full_name: str, month: str, timezone: str) -> MonthDigest | None:
    """The digest kept for the month as it is now, or None."""
    data = cache.get(digest_key(state, full_name, month, timezone))
    if data is None:
        return None
    return decode(data if isinstance(data, bytes) else data.encode())


def cached_inputs(
    cache: Redis | None, state: MonthState, full_name: str, month: str, timezone: str, end: int
) -> MonthInputs | None:
    """The month's inputs at `end` from its digest in Redis, or None (no digest for the month as it is
    now: the caller reads the database)."""
    if cache is None:
        return None
    try:
        digest = kept_digest(cache, state, full_name, month, timezone)
    except Exception:  # a cache: Redis away costs the database read, not the request
        log.warning("month digest cache unavailable", exc_info=True)
        return None
    return digest.inputs_at(end) if digest is not None else None
