"""Engines for the ledger: SQLite (WAL) under the data directory by default, PostgreSQL by URL; and
its schema, brought to this release's by the Alembic revisions of `tracker.store.migrations`."""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import (
    ARRAY,
    Connection,
    Engine,
    Integer,
    Select,
    String,
    Table,
    bindparam,
    create_engine,
    event,
    func,
    inspect,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from tracker.settings import SettingsError
from tracker.store import migrations, wal
from tracker.store.migrations import carry_over
from tracker.store.schema import DERIVED_SCHEMA, ledger_meta, metadata

log = logging.getLogger(__name__)

_DERIVED_SCHEMA_KEY = "derived_schema"

# Writers on SQLite wait this long for the lock instead of failing at once.
_SQLITE_BUSY_TIMEOUT_MS = 30_000


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def connect(url: str) -> Engine:
    """An engine for `url`, its schema this release's (`ensure_schema`: created when the database is
    empty, upgraded on SQLite, refused with what to do on PostgreSQL)."""
    engine = open_engine(url)
    try:
        ensure_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def open_engine(url: str) -> Engine:
    """An engine for `url`, its schema left as it is (`tracker migrate` opens this one)."""
    if make_url(url).get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    # A host that drops packets must not hang a command: libpq waits for ever without a timeout.
    engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5, connect_args={"connect_timeout": 5})
    event.listen(engine, "connect", _plan_each_execution)
    return engine


def _plan_each_execution(dbapi_connection: Any, _record: Any) -> None:
    """PostgreSQL plans every execution for its parameters (`plan_cache_mode`).

    psycopg prepares a statement on the server from its fifth execution on a connection, and from then on
    PostgreSQL may settle on a generic plan, made without the parameters' values. A month's reads bind
    their PRs and heads as arrays (`listed`), and a generic plan cannot know an array's length: the
    verdicts of a 1,400-PR month's heads went from 11 ms to 790 ms at their eleventh execution
    (`bench/snapshot.py --database-url postgresql...`). Planning these reads costs well under a
    millisecond. (PostgreSQL before 12 has no such setting, and keeps its own choice.)"""
    info = getattr(dbapi_connection, "info", None)  # psycopg 3; psycopg2 has the version on the connection
    version = getattr(info, "server_version", None) or getattr(dbapi_connection, "server_version", None) or 0
    if int(version) < 120000:
        return
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_custom_plan")
    dbapi_connection.commit()


_SQLITE_AUTOCHECKPOINT_PAGES = 10_000


def checkpoint(engine: Engine) -> None:
    """Copy what SQLite's write-ahead log holds into the database now, as this process's checkpointer
    does after its commits (tracker.store.wal); nothing on PostgreSQL."""
    if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        wal.checkpointer(str(engine.url.database)).checkpoint()


def _sqlite_engine(url: str) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_MS / 1000, "factory": WriterConnection})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event, not the driver, open transactions.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")
        # In WAL mode NORMAL survives any process crash; only a power loss can drop the last commits.
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Debian's SQLite zeroes what a DELETE or UPDATE frees, overflow pages included: forgetting a
        # batch of 250 moved deliveries from the inbox wrote 6 MB and held its writers' lock 30 ms
        # (3 ms with FAST), and marking a delivery processed rewrote its 24 KB body twice. FAST still
        # zeroes what is freed inside a page; freed overflow pages keep their bytes until reused.
        cursor.execute("PRAGMA secure_delete=FAST")
        # A checkpoint copies the WAL into the database and waits for the disk (fsync). Each writing
        # process makes them from a thread of its own after its commits (tracker.store.wal); SQLite's
        # own, made inside the commit that finds the WAL past this many pages (and so behind the
        # writers' lock), is only the backstop.
        cursor.execute(f"PRAGMA wal_autocheckpoint={_SQLITE_AUTOCHECKPOINT_PAGES}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # Take the write lock up front: a deferred transaction that reads, then writes, can fail
        # with "database is locked" when another process committed in between, and no timeout helps.
        if connection.get_execution_options().get("read_only"):
            connection.exec_driver_sql("BEGIN")
            return
        try:
            begin_write(connection.connection.dbapi_connection, lambda: connection.exec_driver_sql("BEGIN IMMEDIATE"))
        except sqlite3.OperationalError as exc:  # the writers' lock: as SQLAlchemy reports SQLite's own
            raise DBAPIError.instance("BEGIN IMMEDIATE", None, exc, sqlite3.Error) from None

    return engine


# A writer waiting for another polls the writers' lock this often at first, then at most every
# _WRITER_POLL_MAX seconds, for at most _SQLITE_BUSY_TIMEOUT_MS.
_WRITER_POLL_FIRST = 0.0001
_WRITER_POLL_MAX = 0.001


class WriterConnection(sqlite3.Connection):
    """A SQLite connection whose write transactions take the database's writers' lock first: a lock
    file beside the database (`<database>.writers`), locked with flock(2) from BEGIN IMMEDIATE to the
    COMMIT or ROLLBACK.

    SQLite itself makes a writer that finds the database locked sleep and try again, 1, 2, 5, 10, 15,
    20, 25 ... ms apart: behind a drain's 5 ms transaction the webhook's 0.3 ms insert slept 8 ms,
    and while the workers wrote, the web processes spent a third of their time asleep in BEGIN
    IMMEDIATE, not waiting for anyone. Writers that go through this lock wait for the one before them
    and start within a millisecond of its end; SQLite then finds its own lock free. (The busy timeout
    stays for anything else, and the wait for this lock is bounded by it too: then "database is
    locked", as from SQLite.)"""

    def __init__(self, database: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        name = str(database)
        memory = name in ("", ":memory:") or name.startswith("file:") or kwargs.get("uri")
        self._database = name
        self._lock_path = None if memory else f"{name}.writers"
        self._lock_fd: int | None = None
        self._lock_pid = 0
        self._locked = False

    def commit(self) -> None:
        wrote = self._locked
        self._end(super().commit)
        if wrote and self._lock_path is not None:
            wal.after_commit(self._database)  # the WAL's checkpoint, off this writer's path

    def rollback(self) -> None:
        self._end(super().rollback)

    def _end(self, end: Callable[[], None]) -> None:
        try:
            end()
        finally:
            if not self.in_transaction:
                self.release_lock()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.release_lock()
            if self._lock_fd is not None and self._lock_pid == os.getpid():
                os.close(self._lock_fd)
            self._lock_fd = None

    def take_lock(self) -> None:
        """Wait for the writers' lock; past the busy timeout, "database is locked"."""
        if self._lock_path is None or self._locked:
            return
        if self._lock_fd is None or self._lock_pid != os.getpid():  # not a descriptor shared with a parent
            self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._lock_pid = os.getpid()
        deadline = time.monotonic() + _SQLITE_BUSY_TIMEOUT_MS / 1000
        pause = _WRITER_POLL_FIRST
        while True:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise sqlite3.OperationalError("database is locked") from None
                time.sleep(pause)
                pause = min(pause * 2, _WRITER_POLL_MAX)
        self._locked = True

    def release_lock(self) -> None:
        if self._locked and self._lock_fd is not None:
            self._locked = False
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)


def begin_write(dbapi_connection: Any, begin: Callable[[], object] | None = None) -> None:
    """BEGIN IMMEDIATE on a DBAPI connection of a SQLite engine of `open_engine`, behind the writers'
    lock (`WriterConnection`); `begin`: what issues it, when not the connection itself."""
    if begin is None:
        begin = partial(dbapi_connection.execute, "BEGIN IMMEDIATE")
    if not isinstance(dbapi_connection, WriterConnection):
        begin()
        return
    dbapi_connection.take_lock()
    try:
        begin()
    except BaseException:
        dbapi_connection.release_lock()
        raise


def raw_write(engine: Engine, work: Callable[[Any], bool]) -> bool:
    """Run `work(cursor)` in one write transaction on a pooled DBAPI connection (on SQLite behind the
    writers' lock: `begin_write`): committed when it answers True, rolled back when it answers False or
    raises. For the short prepared writes of the ledger and its inbox, without SQLAlchemy's overhead."""
    raw = engine.raw_connection()
    try:
        if engine.dialect.name == "sqlite":
            begin_write(raw.dbapi_connection)  # the driver autocommits otherwise
        cursor = raw.cursor()
        keep = work(cursor)
        cursor.close()
        if keep:
            raw.commit()
        else:
            raw.rollback()
    except BaseException:
        raw.rollback()
        raise
    finally:
        raw.close()
    return keep


class SchemaError(SettingsError):
    """The database's schema is not this release's and cannot be made so here; the message says what to do."""


@dataclass(frozen=True)
class Migration:
    """What `migrate` did: the revision before (None: no revision) and after, and whether the tables were
    created (an empty database) or adopted (made by the release before migrations, checked, stamped)."""

    before: str | None
    after: str
    created: bool
    adopted: bool
    # An older ledger's rows carried over into this release's tables (its derived tables are rebuilt
    # next), and on SQLite where the file was copied first.
    carried: carry_over.CarriedOver | None = None
    backup: Path | None = None


# SQLite is the embedded ledger of one machine, whose processes `tracker run` starts together: the first
# upgrades it, behind the locks. PostgreSQL serves several machines, where processes of the previous
# release may still be running: an upgrade there waits for `tracker migrate`, run once when the operator
# chooses (an empty database is still set up by whichever process comes first).
_REFUSED = (
    "the database at {url} has schema revision {before}, and this release needs {head}: stop the tracker's "
    "processes and run `tracker migrate` (once, from one machine), then start them again"
)
# Any number will do, as long as nothing else in the database takes the same advisory lock.
_PG_SCHEMA_LOCK = 727274


def ensure_schema(engine: Engine) -> None:
    """Bring the database to this release's schema, or say why not (SchemaError). The usual case, a
    database already at the newest revision, costs one read and no write transaction."""
    with engine.connect().execution_options(read_only=True) as conn:
        before = migrations.current(conn)
        tables = set(inspect(conn).get_table_names())
    if before == migrations.head() and tables.issuperset(metadata.tables):
        return
    if is_sqlite(engine) or not tables.intersection(metadata.tables):
        done = migrate(engine)
        if done.created:
            log.debug("schema created at revision %s", done.after)
        elif done.carried is not None:
            log.info("%s", upgraded(engine, done, "the derived tables are rebuilt from them next"))
        elif done.before != done.after:
            log.info("schema upgraded from revision %s to %s", done.before or "none", done.after)
        return
    # The two reads above are two snapshots: a process creating the schema at the same moment commits its
    # tables and its revision together, between them, and this one saw tables without a revision. Look
    # again holding the lock `migrate` holds, after any such process committed.
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_SCHEMA_LOCK})
        before = migrations.current(conn)
        tables = set(inspect(conn).get_table_names())
    if before == migrations.head() and tables.issuperset(metadata.tables):
        return
    _check_known(engine, before)
    raise SchemaError(_REFUSED.format(url=_shown(engine), before=_revision(before), head=migrations.head()))


def migrate(engine: Engine) -> Migration:
    """Upgrade the database to the newest revision, one process at a time (a file lock and SQLite's write
    lock; PostgreSQL's advisory lock), in one transaction: all of it or nothing. An empty database gets
    every table; one made by the release before migrations (tables, no revision) is checked against the
    first revision and stamped with it, never recreated; one of an earlier release (other tables, no
    revision) has its sources carried over into this release's tables (`carry_over`: on SQLite after a
    copy of the file), its derived tables left to be rebuilt (`derived_schema_outdated`). Idempotent."""
    with _schema_lock(engine):
        if is_sqlite(engine):
            _use_wal(engine)
        with engine.begin() as conn:  # on SQLite, BEGIN IMMEDIATE: the write lock until the commit
            if not is_sqlite(engine):
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_SCHEMA_LOCK})
            before = migrations.current(conn)
            created = not set(inspect(conn).get_table_names()).intersection(metadata.tables)
            if created and before is not None:
                # No table of the tracker is left (dropped by hand, or by a test's clean-up): the database is
                # empty, whatever revision it still records.
                migrations.forget(conn)
                before = None
            _check_known(engine, before)
            adopted = before is None and not created
            carried = backup = None
            if adopted:
                differences = migrations.baseline_differences(conn)
                if not differences:
                    migrations.stamp(conn, migrations.BASELINE)
                elif carry_over.is_ledger(conn):  # an older release's: its sources kept, the rest rebuilt
                    backup = _backup(engine)
                    carried = carry_over.carry_over(conn, migrations.upgrade)
                else:
                    raise SchemaError(
                        f"the database at {_shown(engine)} has tables of the tracker but no deliveries table "
                        f"({'; '.join(differences[:5])}"
                        f"{f'; {len(differences) - 5} more' if len(differences) > 5 else ''}): it was left as it "
                        "is; point the tracker at the database that holds its deliveries"
                    )
            migrations.upgrade(conn)
            missing = sorted(set(metadata.tables) - set(inspect(conn).get_table_names()))
            if missing:  # a revision says they are there, and they are not: dropped by hand
                raise SchemaError(
                    f"the database at {_shown(engine)} is at schema revision {migrations.current(conn)} but lacks "
                    f"the tables {', '.join(missing)}: restore them from a backup, or start from an empty database"
                )
            if created:
                mark_derived_schema(conn)
            after = migrations.current(conn)
    assert after is not None
    return Migration(before, after, created, adopted, carried, backup)


def _backup(engine: Engine) -> Path | None:
    """On SQLite, a copy of the database file beside it before its tables are carried over (SQLite's
    online backup: a consistent copy while this connection holds the write lock); None on PostgreSQL,
    whose carry-over is one transaction."""
    database = engine.url.database
    if not is_sqlite(engine) or not database or database == ":memory:":
        return None
    path = Path(database)
    target = path.with_name(f"{path.name}.before-upgrade-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    source, copy = sqlite3.connect(path), sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    return target


def upgraded(engine: Engine, done: Migration, derived: str) -> str:
    """The one line of a carry-over: "upgraded the ledger at … from an unversioned schema (its last delivery
    2026-11-30) to revision …: kept 11,894 deliveries and 0 observations, {derived}; the old file is kept at …"."""
    assert done.carried is not None
    carried = done.carried
    last = carried.last_received_at
    since = f" (its last delivery {time.strftime('%Y-%m-%d', time.gmtime(last / 1000))})" if last is not None else ""
    kept = f"; the old file is kept at {done.backup}" if done.backup is not None else ""
    return (
        f"upgraded the ledger at {_shown(engine)} from an unversioned schema{since} to revision {done.after}: "
        f"kept {carried.deliveries:,} deliveries and {carried.observations:,} observations, {derived}{kept}"
    )


def _check_known(engine: Engine, revision: str | None) -> None:
    if revision is not None and not migrations.known(revision):
        raise SchemaError(
            f"the database at {_shown(engine)} has schema revision {revision}, which this release does not know "
            f"(its newest is {migrations.head()}): a newer release migrated it; run that release or a newer one"
        )


def _revision(revision: str | None) -> str:
    return revision if revision is not None else "none (made by a release before migrations)"


def _shown(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def _use_wal(engine: Engine) -> None:
    # WAL is a property of the database file: set once, at creation, not per connection; outside any
    # transaction, where SQLite allows the change.
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()
    finally:
        raw.close()


@contextmanager
def _schema_lock(engine: Engine) -> Iterator[None]:
    """One process at a time migrates the schema (two fresh workers raced on WAL setup otherwise)."""
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


def mark_derived_schema(conn: Connection) -> None:
    """The derived tables now have this release's shape (just created, or rebuilt)."""
    row = {"key": _DERIVED_SCHEMA_KEY, "value": DERIVED_SCHEMA}
    if not insert_ignoring_duplicates(conn, ledger_meta, [row]):
        conn.execute(ledger_meta.update().where(ledger_meta.c.key == _DERIVED_SCHEMA_KEY).values(value=DERIVED_SCHEMA))


def clear_derived_schema(conn: Connection) -> None:
    """The derived tables are being rebuilt: until `mark_derived_schema`, they count as outdated."""
    conn.execute(ledger_meta.delete().where(ledger_meta.c.key == _DERIVED_SCHEMA_KEY))


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
    return len(inserted_keys(conn, table, rows))


def inserted_keys(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """INSERT ... ON CONFLICT DO NOTHING; the primary keys of the rows that were new."""
    if not rows:
        return set()
    statement = _insert_ignoring(conn.dialect.name == "sqlite", table)
    return {tuple(row) for row in conn.execute(statement, rows[0] if len(rows) == 1 else list(rows))}


@functools.cache
def _insert_ignoring(on_sqlite: bool, table: Table) -> Any:
    """The statement of `insert_ignoring_duplicates`, built once per table and dialect: building it (and
    its cache key) anew cost more CPU than running it on SQLite, on every write of the workers."""
    dialect = sqlite if on_sqlite else postgresql
    return dialect.insert(table).on_conflict_do_nothing().returning(*table.primary_key.columns)


def listed(conn: Connection, *columns: Sequence[Any]) -> Select[Any]:
    """A SELECT of the given values as rows (one column per sequence, all of one length), bound as one
    parameter per column: `column.in_(listed(conn, numbers))`, `tuple_(a, b).in_(listed(conn, numbers,
    shas))`.

    An `IN` of a Python list is expanded into one parameter per value, and SQLAlchemy renders that SQL
    again at every execution: for a big month's 1,400 PRs and their heads it cost more than the
    database's own work (month_inputs: 190 ms, of which about 40 ms rendering INs). SQLite reads the
    values from a JSON array (`json_each`), PostgreSQL from arrays (`unnest`, several in step)."""
    if conn.dialect.name == "postgresql":
        return select(
            *(
                func.unnest(bindparam(None, list(values), type_=ARRAY(_array_type(values)), expanding=False))
                for values in columns
            )
        )
    if len(columns) == 1:
        return select(literal_column("value")).select_from(func.json_each(bindparam(None, _json_list(columns[0]))))
    rows = _json_list(list(zip(*columns, strict=True)))
    return select(
        *(func.json_extract(literal_column("value"), f"$[{index}]") for index in range(len(columns)))
    ).select_from(func.json_each(bindparam(None, rows)))


def _json_list(values: Sequence[Any]) -> str:
    return orjson.dumps(list(values)).decode()


def _array_type(values: Sequence[Any]) -> type[Integer] | type[String]:
    return String if values and isinstance(values[0], str) else Integer
