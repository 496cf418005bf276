"""GitHub's answers kept for conditional requests (ETag / If-None-Match): a 304 costs no quota."""

from __future__ import annotations

from sqlalchemy import Engine, bindparam, select, update

from tracker.store.database import insert_ignoring_duplicates
from tracker.store.schema import http_cache

# Built once: building the statement anew cost more CPU than running it on SQLite.
_GET = select(http_cache.c.etag, http_cache.c.next_url, http_cache.c.body).where(http_cache.c.url == bindparam("key"))


class SqlResponseCache:
    """GitHub ETags and bodies in the ledger database, for conditional requests."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, url: str) -> tuple[str, str | None, bytes] | None:
        with self.engine.connect().execution_options(read_only=True) as conn:
            row = conn.execute(_GET, {"key": url[:1000]}).first()
        return (row.etag, row.next_url, bytes(row.body)) if row is not None else None

    def put(self, url: str, etag: str, next_url: str | None, body: bytes) -> None:
        with self.engine.begin() as conn:
            values = {"etag": etag, "next_url": next_url, "body": body}
            if not insert_ignoring_duplicates(conn, http_cache, [{"url": url[:1000], **values}]):
                conn.execute(update(http_cache).where(http_cache.c.url == url[:1000]).values(**values))
