"""GitHub's answers kept for conditional requests (ETag / If-None-Match): a 304 costs no quota."""

from __future__ import annotations

from sqlalchemy import Engine, bindparam, delete, select, update

from tracker.store.database import insert_ignoring_duplicates
from tracker.store.ledger import now_ms
from tracker.store.schema import http_cache

# Built once: building the statement anew cost more CPU than running it on SQLite.
_GET = select(http_cache.c.etag, http_cache.c.next_url, http_cache.c.body, http_cache.c.used_at).where(
    http_cache.c.url == bindparam("key")
)
# An entry's `used_at` moves at most once a day: a write for every 304 would cost more than it tells.
_TOUCH_EVERY_MS = 86_400_000


class SqlResponseCache:
    """GitHub ETags and bodies in the ledger database, for conditional requests."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, url: str) -> tuple[str, str | None, bytes] | None:
        key = url[:1000]
        with self.engine.connect().execution_options(read_only=True) as conn:
            row = conn.execute(_GET, {"key": key}).first()
        if row is None:
            return None
        now = now_ms()
        if row.used_at < now - _TOUCH_EVERY_MS:  # the entry is asked for again: it stays
            with self.engine.begin() as conn:
                conn.execute(update(http_cache).where(http_cache.c.url == key).values(used_at=now))
        return row.etag, row.next_url, bytes(row.body)

    def put(self, url: str, etag: str, next_url: str | None, body: bytes) -> None:
        with self.engine.begin() as conn:
            values = {"etag": etag, "next_url": next_url, "body": body, "used_at": now_ms()}
            if not insert_ignoring_duplicates(conn, http_cache, [{"url": url[:1000], **values}]):
                conn.execute(update(http_cache).where(http_cache.c.url == url[:1000]).values(**values))

    def prune(self, unused_since_ms: int) -> int:
        """Drop the entries neither stored nor used since `unused_since_ms`; how many were dropped.
        Losing one costs a single plain request the next time its URL is read."""
        with self.engine.begin() as conn:
            return int(conn.execute(delete(http_cache).where(http_cache.c.used_at < unused_since_ms)).rowcount)
