"""The inbox: where the webhook writes a delivery on SQLite, a database file of its own beside the ledger.

On SQLite one writer at a time holds a database file. With the ledger alone, the webhook's 0.3 ms
insert waited behind the workers' transactions (a drain's batch, a fetch job's heads: 5 to 15 ms,
longer when the niced worker lost its core to the web processes meanwhile), and a web process whose
requests all waited for the lock was idle while the load waited. The inbox is written by the web
processes alone, so the webhook waits only for another webhook insert; the drain moves what it holds
into the ledger (`Ledger.take_inbox`: one transaction in the ledger, then one in the inbox to forget
it), and from there on the delivery is the ledger's, as before.

A delivery in the inbox is accepted and pending: `Ledger` counts it, lists it and finds it by id as
it does the pending deliveries of the ledger itself. A crash between the two transactions of a move
leaves the delivery in both; the next move finds it in the ledger and only forgets it.

Ordering, which the webhook's duplicate check relies on: a move commits a delivery in the ledger
before it deletes it from the inbox, behind the inbox's writers' lock; the webhook looks for an id
(and a body's digest) in the inbox, then in the ledger, holding that lock. So a redelivery finds its
first delivery in one or the other, whenever it comes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from tracker.store.database import open_engine, raw_write

# The columns a delivery has in the inbox: the ledger's own (tracker.store.schema.deliveries) that the
# webhook fills, and its body's digest under its repository's key (tracker.store.schema.delivery_digests).
COLUMNS = (
    "id",
    "event",
    "action",
    "repo",
    "hook_id",
    "content_type",
    "headers",
    "body",
    "received_at",
    "digest_repo",
    "digest",
)

# Bump when the table changes: an inbox of another version is moved by the release that wrote it, so a
# release refuses to write to one of another version (its `tracker run` drains it first: the README).
VERSION = 1

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS inbox ("
    " seq INTEGER PRIMARY KEY,"  # arrival order in the inbox (the rowid)
    " id TEXT NOT NULL UNIQUE,"
    " event TEXT NOT NULL, action TEXT, repo TEXT, hook_id TEXT,"
    " content_type TEXT NOT NULL, headers TEXT NOT NULL, body BLOB NOT NULL,"
    " received_at INTEGER NOT NULL,"
    " digest_repo TEXT, digest TEXT,"
    " UNIQUE (digest_repo, digest))"
)


def inbox_path(engine: Engine) -> Path | None:
    """Where the inbox of a SQLite ledger is (`ledger.sqlite3` -> `ledger.inbox.sqlite3`); None for
    PostgreSQL, whose row locks let the webhook write the ledger itself, and for a database in memory."""
    if engine.dialect.name != "sqlite":
        return None
    database = make_url(str(engine.url)).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = Path(database)
    return path.with_name(f"{path.stem}.inbox{path.suffix}")


class Inbox:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.engine = open_engine(f"sqlite:///{path}")
        marker = ", ".join("?" * len(COLUMNS))
        self._insert_sql = f"INSERT INTO inbox ({', '.join(COLUMNS)}) VALUES ({marker}) ON CONFLICT DO NOTHING"
        self._ready = False

    def _ensure(self, dbapi: Any) -> None:
        """The table, made by whichever process writes first (behind the writers' lock)."""
        if self._ready:
            return
        cursor = dbapi.cursor()
        found = cursor.execute("PRAGMA user_version").fetchone()[0]
        if found not in (0, VERSION):
            cursor.close()
            raise RuntimeError(
                f"the inbox {self.path} was written by a release whose inbox is version {found}, not {VERSION}: "
                "run that release until its deliveries are processed (`tracker status`), then this one"
            )
        if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(_SCHEMA)
        cursor.execute(f"PRAGMA user_version={VERSION}")
        cursor.close()
        self._ready = True

    def add(self, values: Sequence[Any], in_ledger: Callable[[], bool]) -> bool:
        """Store one delivery (`values` in COLUMNS order); False when the inbox has its id or its digest
        already, or `in_ledger()` (asked holding the inbox's lock) says the ledger has."""
        if not self._ready:
            raw = self.engine.raw_connection()
            try:
                dbapi: Any = raw.dbapi_connection  # a WriterConnection (open_engine)
                dbapi.take_lock()
                try:
                    self._ensure(dbapi)
                finally:
                    dbapi.release_lock()
            finally:
                raw.close()

        def insert(cursor: Any) -> bool:
            cursor.execute(self._insert_sql, tuple(values))
            return bool(cursor.rowcount == 1) and not in_ledger()

        return raw_write(self.engine, insert)

    def oldest(self, limit: int) -> list[tuple[Any, ...]]:
        """Up to `limit` deliveries in arrival order: (seq, *COLUMNS)."""
        return self._read(f"SELECT seq, {', '.join(COLUMNS)} FROM inbox ORDER BY seq LIMIT ?", (limit,))

    def forget(self, up_to: int) -> None:
        """Delete the deliveries up to `seq` (moved into the ledger)."""

        def delete(cursor: Any) -> bool:
            cursor.execute("DELETE FROM inbox WHERE seq <= ?", (up_to,))
            return True

        raw_write(self.engine, delete)

    def find(self, delivery_id: str) -> tuple[Any, ...] | None:
        rows = self._read(f"SELECT {', '.join(COLUMNS)} FROM inbox WHERE id = ?", (delivery_id,))
        return rows[0] if rows else None

    def ids(self, received_before: int | None = None) -> list[tuple[int, str]]:
        """(received_at, id) of every delivery, received before `received_before` if given."""
        if received_before is None:
            return self._read("SELECT received_at, id FROM inbox", ())
        return self._read("SELECT received_at, id FROM inbox WHERE received_at < ?", (received_before,))

    def count(self, repo_key: str | None = None, received_since: int | None = None) -> int:
        """How many deliveries it holds: of a repository (its key), received at or after an instant (ms)."""
        where: list[str] = []
        parameters: list[Any] = []
        if repo_key is not None:
            where.append("lower(repo) = ?")
            parameters.append(repo_key)
        if received_since is not None:
            where.append("received_at >= ?")
            parameters.append(received_since)
        sql = "SELECT count(*) FROM inbox" + (f" WHERE {' AND '.join(where)}" if where else "")
        rows = self._read(sql, tuple(parameters))
        return int(rows[0][0]) if rows else 0

    def _read(self, sql: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        if not self._ready and not self.path.exists():
            return []  # no delivery was ever written here
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            try:
                return list(cursor.execute(sql, parameters).fetchall())
            except Exception as exc:
                if "no such table" in str(exc):  # the file exists, its table not yet
                    return []
                raise
            finally:
                cursor.close()
        finally:
            raw.close()

    def dispose(self) -> None:
        self.engine.dispose()
