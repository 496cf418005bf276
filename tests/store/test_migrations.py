"""Schema migrations (`tracker.store.migrations`, `tracker.store.database.migrate`/`ensure_schema`) on
SQLite and PostgreSQL: an empty database gets the newest schema, a ledger of the release before
migrations (tables made by `create_all`, no `alembic_version`) is adopted with every row intact, and
the revisions make exactly `tracker.store.schema.metadata`, so a schema change without a revision fails here."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import (
    BigInteger,
    Boolean,
    Engine,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    create_engine,
    inspect,
    select,
    text,
)

from tests.store import previous_schema
from tracker.store import migrations
from tracker.store.database import (
    SchemaError,
    connect,
    derived_schema_outdated,
    ensure_schema,
    migrate,
    open_engine,
)
from tracker.store.ledger import Ledger
from tracker.store.schema import DERIVED_SCHEMA, metadata

ROWS = 4  # of every table


# --- a ledger of the release before migrations, with data ---------------------------------------------


def _value(table: Table, name: str, kind: Any, i: int) -> Any:
    if isinstance(kind, Boolean):
        return i % 2 == 0
    if isinstance(kind, BigInteger):
        return 1_780_000_000_000 + i * 1_000 + len(name)
    if isinstance(kind, Integer):
        return i + 1
    if isinstance(kind, LargeBinary):
        return f"{table.name}.{name} #{i} \x00\xff".encode("latin-1")
    text_value = f"{table.name}.{name} #{i} — ünïcode"
    return text_value[: kind.length] if isinstance(kind, String) and kind.length else text_value


def previous_release_rows() -> dict[str, list[dict[str, Any]]]:
    """ROWS rows for every table of the previous release, every column filled (NULL in the first row of
    each nullable column), and the marks that release kept in `ledger_meta`."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for table in previous_schema.metadata.sorted_tables:
        rows[table.name] = [
            {
                column.name: None
                if column.nullable and not column.primary_key and i == 0
                else _value(table, column.name, column.type, i)
                for column in table.columns
            }
            for i in range(ROWS)
        ]
    rows["ledger_meta"][:2] = [
        {"key": "derived_schema", "value": DERIVED_SCHEMA},
        {"key": "generation", "value": "a" * 32},
    ]
    for delivery, status in zip(rows["deliveries"], ("processed", "pending", "failed", "processed"), strict=True):
        delivery.update(event="pull_request", status=status, headers="{}", body=b"{}", content_type="application/json")
    return rows


def make_previous_release_ledger(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """The previous release's ledger at `url`: its `create_all` and data in every table. Returns the rows."""
    engine = create_engine(url)
    try:
        previous_schema.metadata.create_all(engine)
        with engine.begin() as conn:
            for name, rows in previous_release_rows().items():
                conn.execute(previous_schema.metadata.tables[name].insert(), rows)
        return contents(engine)
    finally:
        engine.dispose()


def contents(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the previous release (its columns only), in primary-key order."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in previous_schema.metadata.sorted_tables:
            query = select(*[text(f'"{c.name}"') for c in table.columns]).select_from(text(f'"{table.name}"'))
            query = query.order_by(*[text(f'"{c.name}"') for c in table.primary_key.columns])
            found[table.name] = [
                tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in conn.execute(query)
            ]
    return found


@pytest.fixture
def empty_url(database_url: str) -> Iterator[str]:
    """`database_url` with nothing in it: no table of the tracker, no `alembic_version`."""
    wipe(database_url)
    yield database_url
    wipe(database_url)


def wipe(url: str) -> None:
    engine = create_engine(url)
    try:
        metadata.drop_all(engine)
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    finally:
        engine.dispose()


def revision_rows(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())


# --- an empty database ---------------------------------------------------------------------------------


def test_an_empty_database_gets_the_newest_schema_at_start_up(empty_url: str) -> None:
    engine = connect(empty_url)
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert set(inspect(engine).get_table_names()) == set(metadata.tables) | {"alembic_version"}
        assert derived_schema_outdated(engine) is False  # made by this release: no rebuild
        assert migrate(engine) == migrate(engine)  # nothing more to do, and again
        assert migrate(engine).before == migrations.head()
    finally:
        engine.dispose()


def test_the_revisions_make_exactly_the_tables_of_schema_py(empty_url: str) -> None:
    """Alembic's autogenerate finds nothing to change: a change to tracker/store/schema.py without a
    revision in tracker/store/migrations/versions/ fails here, on either database."""
    engine = open_engine(empty_url)
    try:
        assert migrate(engine).created
        with engine.connect() as conn:
            differences = compare_metadata(MigrationContext.configure(conn), metadata)
        assert differences == []
    finally:
        engine.dispose()


def test_the_first_revision_makes_what_the_previous_release_made(empty_url: str) -> None:
    engine = create_engine(empty_url)
    try:
        with engine.begin() as conn:
            command.upgrade(migrations.alembic_config(conn), migrations.BASELINE)
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), previous_schema.metadata) == []
    finally:
        engine.dispose()


def test_every_revision_can_be_undone_down_to_nothing(empty_url: str) -> None:
    engine = open_engine(empty_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            command.downgrade(migrations.alembic_config(conn), "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        assert migrate(engine).after == migrations.head()  # and up again
    finally:
        engine.dispose()


def test_a_database_whose_tables_were_dropped_counts_as_empty(empty_url: str) -> None:
    """A revision left behind in `alembic_version` after every table was dropped does not stop a fresh start."""
    connect(empty_url).dispose()
    engine = create_engine(empty_url)
    metadata.drop_all(engine)
    engine.dispose()
    engine = connect(empty_url)
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert set(metadata.tables) <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


# --- a ledger of the release before migrations -----------------------------------------------------------


def test_a_previous_release_ledger_is_adopted_with_every_row_intact(empty_url: str) -> None:
    before = make_previous_release_ledger(empty_url)
    assert all(len(rows) == ROWS for rows in before.values())
    engine = open_engine(empty_url)
    try:
        started = time.time_ns() // 1_000_000
        done = migrate(engine)
        assert (done.before, done.after, done.adopted, done.created) == (None, migrations.head(), True, False)
        assert revision_rows(engine) == [migrations.head()]
        assert contents(engine) == before  # nothing lost, nothing changed, nothing recreated
        with engine.connect() as conn:
            used = list(conn.execute(text("SELECT used_at FROM http_cache")).scalars())
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
        assert len(used) == ROWS and all(at >= started for at in used)  # old answers live their full retention
        assert derived_schema_outdated(engine) is False  # the previous release's derived tables stay
        assert migrate(engine).before == migrations.head()  # idempotent
        assert contents(engine) == before
    finally:
        engine.dispose()
    engine = connect(empty_url)  # what every process opens: no further change
    try:
        counts = Ledger(engine).counts()
        assert (counts.received, counts.processed, counts.pending, counts.failed) == (ROWS, 2, 1, 1)
        assert contents(engine) == before
    finally:
        engine.dispose()


def test_sqlite_is_upgraded_at_start_up_and_postgresql_waits_for_tracker_migrate(empty_url: str) -> None:
    before = make_previous_release_ledger(empty_url)
    if empty_url.startswith("sqlite"):
        connect(empty_url).dispose()
    else:
        with pytest.raises(SchemaError) as refused:
            connect(empty_url)
        message = str(refused.value)
        assert "\n" not in message and "run `tracker migrate`" in message
        assert "schema revision none (made by the release before migrations)" in message
        assert migrations.head() in message
        engine = create_engine(empty_url)
        assert not inspect(engine).has_table("alembic_version")  # refused before anything changed
        engine.dispose()
        migrate(open_engine(empty_url))
    engine = connect(empty_url)
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert contents(engine) == before
    finally:
        engine.dispose()


def test_a_ledger_that_is_not_the_previous_release_is_refused_and_left_alone(empty_url: str) -> None:
    before = make_previous_release_ledger(empty_url)
    engine = create_engine(empty_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE narration_spend"))
        conn.execute(text("ALTER TABLE hooks ADD COLUMN colour VARCHAR(10)"))
    engine.dispose()
    engine = open_engine(empty_url)
    try:
        with pytest.raises(SchemaError) as refused:
            migrate(engine)
        message = str(refused.value)
        assert "\n" not in message
        assert "table narration_spend is missing" in message
        assert "column hooks.colour is not the first revision's" in message
        assert not inspect(engine).has_table("alembic_version")  # not stamped, not upgraded
        with engine.connect() as conn:
            for name in before.keys() - {"narration_spend"}:
                assert conn.execute(text(f'SELECT count(*) FROM "{name}"')).scalar_one() == ROWS
    finally:
        engine.dispose()


def test_a_column_of_another_type_is_named(empty_url: str) -> None:
    lengths = MetaData()
    for table in previous_schema.metadata.sorted_tables:
        copy = table.to_metadata(lengths)
        if table.name == "hooks":
            copy.c.target.type = String(100)
    engine = create_engine(empty_url)
    lengths.create_all(engine)
    try:
        with engine.connect() as conn:
            differences = migrations.baseline_differences(conn)
        assert differences == ["column hooks.target is String(100), not String(255)"]
    finally:
        engine.dispose()


def test_a_database_migrated_by_a_newer_release_is_refused(empty_url: str) -> None:
    engine = connect(empty_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    engine.dispose()
    for attempt in (connect, lambda url: migrate(open_engine(url))):
        with pytest.raises(SchemaError, match="revision 9999_from_the_future, which this release does not know"):
            attempt(empty_url)


def test_an_older_revision_is_upgraded_keeping_its_rows(empty_url: str) -> None:
    """From the first revision to the newest: the http_cache rows stay and get `used_at`."""
    engine = open_engine(empty_url)
    try:
        with engine.begin() as conn:
            command.upgrade(migrations.alembic_config(conn), migrations.BASELINE)
            conn.execute(
                text("INSERT INTO http_cache (url, etag, next_url, body) VALUES ('u', 'e', NULL, :b)"), {"b": b"{}"}
            )
        if empty_url.startswith("postgresql"):
            with pytest.raises(SchemaError, match=f"revision {migrations.BASELINE}, and this release needs"):
                ensure_schema(engine)
        done = migrate(engine)
        assert (done.before, done.after, done.adopted) == (migrations.BASELINE, migrations.head(), False)
        with engine.connect() as conn:
            row = conn.execute(text("SELECT url, etag, body, used_at FROM http_cache")).one()
        assert (row.url, row.etag, bytes(row.body)) == ("u", "e", b"{}") and row.used_at > 0
    finally:
        engine.dispose()


# --- several processes starting at once ---------------------------------------------------------------

RACE = """
import sys, time
from tracker.store.database import connect, migrate, open_engine
url, how, at = sys.argv[1], sys.argv[2], float(sys.argv[3])
time.sleep(max(0.0, at - time.time()))
if how == "connect":
    connect(url).dispose()
else:
    done = migrate(open_engine(url))
    print(done.before, done.after, done.adopted)
"""


def race(url: str, how: str, processes: int = 6) -> list[str]:
    """`processes` processes opening the database at the same instant; their outputs."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    at = time.time() + 3  # past every interpreter's start
    started = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, url, how, str(at)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(processes)
    ]
    outputs = []
    for process in started:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
        outputs.append(out.decode().strip())
    return outputs


def test_processes_starting_together_on_an_empty_database_create_it_once(empty_url: str) -> None:
    race(empty_url, "connect")
    engine = open_engine(empty_url)
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert derived_schema_outdated(engine) is False
    finally:
        engine.dispose()


def test_processes_migrating_a_previous_release_ledger_together_adopt_it_once(empty_url: str) -> None:
    before = make_previous_release_ledger(empty_url)
    outputs = race(empty_url, "migrate")
    head = migrations.head()
    assert sorted(outputs) == sorted([f"None {head} True"] + [f"{head} {head} False"] * 5)  # one did the work
    engine = open_engine(empty_url)
    try:
        assert revision_rows(engine) == [head]
        assert contents(engine) == before
    finally:
        engine.dispose()


def test_sqlite_processes_starting_together_on_a_previous_release_ledger_adopt_it_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    before = make_previous_release_ledger(url)
    race(url, "connect")
    engine = open_engine(url)
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert contents(engine) == before
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
    finally:
        engine.dispose()


def test_the_revisions_ship_inside_the_package() -> None:
    """`pip install .` (not editable) installs them: they sit in the package, named in its package data."""
    import tomllib

    folder = Path(migrations.__file__).parent
    assert (folder / "env.py").is_file()
    shipped = {path.name for path in (folder / "versions").glob("*.py")}
    assert {"0001_initial.py", "0002_http_cache_used_at.py", "0003_month_changes.py"} <= shipped
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]["tracker.store.migrations"]
    assert "versions/*.py" in data
