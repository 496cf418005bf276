"""Engines for the ledger: SQLite (WAL) under the data directory by default, PostgreSQL by URL."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event, inspect, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url

from tracker.store.schema import DERIVED_SCHEMA, ledger_meta, metadata

_DERIVED_SCHEMA_KEY = "derived_schema"

# Writers on SQLite wait this long for the lock instead of failing at once.
_SQLITE_BUSY_TIMEOUT_MS = 30_000


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def connect(url: str) -> Engine:
    """An engine for `url`, with the schema created if it is missing."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = _sqlite_engine(url)
    else:
        # A host that drops packets must not hang a command: libpq waits for ever without a timeout.
        engine = create_engine(
            url, pool_pre_ping=True, pool_size=5, max_overflow=5, connect_args={"connect_timeout": 5}
        )
    create_schema(engine)
    return engine


_SQLITE_AUTOCHECKPOINT_PAGES = 10_000


def checkpoint(engine: Engine) -> None:
    """Copy what SQLite's write-ahead log holds into the database, as far as no reader still needs it
    (PASSIVE: it waits for no one); nothing on PostgreSQL."""
    if engine.dialect.name != "sqlite":
        return
    raw = engine.raw_connection()  # outside any transaction: SQLite checkpoints only there
    try:
        cursor = raw.cursor()
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
        cursor.close()
    finally:
        raw.close()


def _sqlite_engine(url: str) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event, not the driver, open transactions.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")
        # In WAL mode NORMAL survives any process crash; only a power loss can drop the last commits.
        cursor.execute("PRAGMA synchronous=NORMAL")
        # A checkpoint copies the WAL into the database and waits for the disk (fsync): done by the
        # commit that finds the WAL past this many pages. The drain checkpoints after every batch
        # (`checkpoint`), so the webhook's commits, which would otherwise take that wait every few
        # hundred deliveries, only do it when no drain runs (40 MB of WAL, not 4).
        cursor.execute(f"PRAGMA wal_autocheckpoint={_SQLITE_AUTOCHECKPOINT_PAGES}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # Take the write lock up front: a deferred transaction that reads, then writes, can fail
        # with "database is locked" when another process committed in between, and no timeout helps.
        if connection.get_execution_options().get("read_only"):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@contextmanager
def _schema_lock(engine: Engine) -> Iterator[None]:
    """One process at a time creates the schema (two fresh workers raced on WAL setup otherwise)."""
    database = make_url(str(engine.url)).database if is_sqlite(engine) else None
    if not database or database == ":memory:":
        yield
        return
    with open(f"{database}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def create_schema(engine: Engine) -> None:
    with engine.connect().execution_options(read_only=True) as conn:
        existing = set(inspect(conn).get_table_names())
    if existing.issuperset(metadata.tables):
        return  # the usual case: no write transaction at start-up
    with _schema_lock(engine):
        if is_sqlite(engine):
            # WAL is a property of the database file: set it once, at creation, not per connection.
            raw = engine.raw_connection()
            try:
                cursor = raw.cursor()
                if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    cursor.execute("PRAGMA journal_mode=WAL")
                cursor.close()
            finally:
                raw.close()
        with engine.begin() as conn:
            if not is_sqlite(engine):
                conn.execute(text("SELECT pg_advisory_xact_lock(727274)"))
            fresh = not inspect(conn).has_table("pr_facts")
            metadata.create_all(conn, checkfirst=True)
            if fresh:
                mark_derived_schema(conn)


def mark_derived_schema(conn: Connection) -> None:
    """The derived tables now have this release's shape (just created, or rebuilt)."""
    row = {"key": _DERIVED_SCHEMA_KEY, "value": DERIVED_SCHEMA}
    if not insert_ignoring_duplicates(conn, ledger_meta, [row]):
        conn.execute(ledger_meta.update().where(ledger_meta.c.key == _DERIVED_SCHEMA_KEY).values(value=DERIVED_SCHEMA))


def derived_schema_outdated(engine: Engine) -> bool:
    """True when the derived tables were made by an older release and must be rebuilt before use."""
    with engine.connect().execution_options(read_only=True) as conn:
        value = conn.execute(
            ledger_meta.select().with_only_columns(ledger_meta.c.value).where(ledger_meta.c.key == _DERIVED_SCHEMA_KEY)
        ).scalar_one_or_none()
    return value != DERIVED_SCHEMA


def insert_ignoring_duplicates(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> int:
    """INSERT ... ON CONFLICT DO NOTHING; how many rows were new.

    Counted with RETURNING: the driver's rowcount is -1 for this statement on psycopg."""
    if not rows:
        return 0
    dialect = sqlite if conn.dialect.name == "sqlite" else postgresql
    key = list(table.primary_key.columns)[0]
    statement = dialect.insert(table).on_conflict_do_nothing().returning(key)
    return len(conn.execute(statement, rows[0] if len(rows) == 1 else list(rows)).all())
