"""Schema migrations (`tracker.store.migrations`, `tracker.store.database.migrate`/`ensure_schema`) on
SQLite and PostgreSQL: an empty database gets the newest schema, a ledger of the release before
migrations (tables made by `create_all`, no `alembic_version`) is adopted with every row intact, a ledger
of an earlier release (tests/fixtures/ledgers) keeps its sources and is rebuilt to a fresh ledger's report,
and the revisions make exactly `tracker.store.schema.metadata`, so a schema change without a revision fails here."""

from __future__ import annotations

import gzip
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
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
from sqlalchemy.engine import make_url

from tests.store import previous_schema
from tests.support.app import SECRET, BurstWorker, running_app, signed_headers
from tracker.config import load_config
from tracker.core.classify import ChangedFile
from tracker.history.derive import derive_history
from tracker.history.store import HistoryStore
from tracker.reports.loading import report_for, resolve
from tracker.reports.render import render
from tracker.reports.request import ReportServices
from tracker.services import Services
from tracker.settings import load_settings
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
from tracker.store.migrations import carry_over
from tracker.store.rebuild import upgrade
from tracker.store.schema import DERIVED_SCHEMA, DERIVED_TABLES, metadata
from tracker.web.context import services

ROWS = 4  # of every table


# --- a ledger of the release before migrations, with data ---------------------------------------------


def _value(table: Table, name: str, kind: Any, i: int) -> Any:
    if (table.name, name) == ("hooks", "hook_id"):
        return str(1_000 + i)  # an id GitHub sends: revision 0004 forgets a hook of any other
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
        assert "schema revision none (made by a release before migrations)" in message
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


def test_a_ledger_of_an_earlier_release_has_its_sources_carried_over_and_its_derived_tables_emptied(
    empty_url: str,
) -> None:
    """Tables that are not the first revision's (one missing, a column of its own): not stamped, carried over."""
    before = make_previous_release_ledger(empty_url)
    engine = create_engine(empty_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE narration_spend"))
        conn.execute(text("ALTER TABLE hooks ADD COLUMN colour VARCHAR(10)"))
    engine.dispose()
    engine = open_engine(empty_url)
    try:
        done = migrate(engine)
        assert (done.before, done.after, done.adopted) == (None, migrations.head(), True)
        assert done.carried == carry_over.CarriedOver(ROWS, ROWS, max(row[8] for row in before["deliveries"]))
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
            for table in DERIVED_TABLES:
                assert conn.execute(text(f"SELECT count(*) FROM {table.name}")).scalar_one() == 0
        after = contents(engine)
        kept = {table.name for table in carry_over.KEPT} - {"narration_spend", "http_cache", "group_records"}
        assert {name: after[name] for name in kept} == {name: before[name] for name in kept}
        assert after["narration_spend"] == []
        with engine.connect() as conn:  # new since that release
            assert conn.execute(text("SELECT count(*) FROM group_records")).scalar_one() == 0
        assert [row[:4] for row in after["http_cache"]] == [row[:4] for row in before["http_cache"]]
        assert derived_schema_outdated(engine) is True  # rebuilt next, from the deliveries
        assert migrate(engine).before == migrations.head()
        with engine.begin() as conn:  # PostgreSQL's sequence of the new table starts after the rows kept
            new_id = conn.execute(
                text(
                    "INSERT INTO publications (repo, month, kind, edition, target, content_hash, at, result) "
                    "VALUES ('r', '2026-05', 'files', 'final', 't', 'h', 1, 'written') RETURNING id"
                )
            ).scalar_one()
        assert new_id == ROWS + 1
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


@pytest.mark.system
def test_processes_starting_together_on_an_empty_database_create_it_once(empty_url: str) -> None:
    race(empty_url, "connect")
    engine = open_engine(empty_url)
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert derived_schema_outdated(engine) is False
    finally:
        engine.dispose()


@pytest.mark.system
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


@pytest.mark.system
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
    assert {
        "0001_initial.py",
        "0002_http_cache_used_at.py",
        "0003_month_changes.py",
        "0005_group_records.py",
    } <= shipped
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]["tracker.store.migrations"]
    assert "versions/*.py" in data


# --- ledgers of earlier releases (tests/fixtures/ledgers, written by those commits' own code) -----------------

LEDGERS = Path(__file__).resolve().parents[1] / "fixtures" / "ledgers"
OLD_COMMITS = sorted(path.name.removesuffix(".sqlite3.gz") for path in LEDGERS.glob("*.sqlite3.gz"))
REPOSITORY, MONTH = "NVIDIA/Megatron-LM", "2026-05"  # the sample month tools/make_old_ledgers.py stored


def load_old_ledger(commit: str, url: str) -> None:
    """The ledger `commit` wrote, at `url` (an empty database): its SQLite file, or its pg_dump run."""
    if url.startswith("sqlite"):
        raw = gzip.decompress((LEDGERS / f"{commit}.sqlite3.gz").read_bytes())
        Path(url.removeprefix("sqlite:///")).write_bytes(raw)
        return
    dump = gzip.decompress((LEDGERS / f"{commit}.postgresql.sql.gz").read_bytes()).decode()
    # Recent pg_dump releases (15.14, 16.10, 17.6 on) fence the dump with psql's \restrict and \unrestrict:
    # meta-commands, not SQL.
    dump = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
    engine = create_engine(url)
    try:
        raw_connection = engine.raw_connection()
        try:
            raw_connection.cursor().execute(dump)  # no parameters: psycopg runs the statements one by one
            raw_connection.commit()
        finally:
            raw_connection.invalidate()  # the dump cleared its search_path: never back to the pool
    finally:
        engine.dispose()


def plain_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of `sql`, read with the bare drivers (no code of the tracker), BLOBs as bytes."""
    if url.startswith("sqlite"):
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            return [tuple(row) for row in conn.execute(sql)]
    with psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)) as conn:
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in conn.execute(sql)]


def kept_rows(url: str, tables: dict[str, list[str]]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of `tables` (name: the columns to read), in a stable order."""
    return {
        name: sorted(plain_rows(url, f"SELECT {', '.join(columns)} FROM {name}"), key=lambda row: repr(row))
        for name, columns in tables.items()
    }


def old_tables(url: str) -> dict[str, list[str]]:
    """The tables (and their columns) of the old ledger at `url` that are kept, not derived. A delivery's
    `processed_at` is not compared: the rebuild processes every delivery again, as `tracker rebuild` does."""
    engine = create_engine(url)
    try:
        inspector = inspect(engine)
        present = set(inspector.get_table_names())
        return {
            table.name: [
                column["name"]
                for column in inspector.get_columns(table.name)
                if (table.name, column["name"]) != ("deliveries", "processed_at")
            ]
            for table in carry_over.KEPT
            if table.name in present
        }
    finally:
        engine.dispose()


def fresh_ledger_report(folder: Path, redis_url: str, old_url: str) -> dict[str, str]:
    """The month's report (JSON, Markdown en and zh-CN) of a new ledger fed what the old ledger at `old_url`
    holds, each through the normal path: the heads' files as the fetch job stores them, the deliveries
    signed to the webhook and drained by the worker's job, the observations as a backfill records them."""
    folder.mkdir()
    settings = load_settings(
        github_api_url="http://127.0.0.1:9",  # nothing here asks GitHub: the heads are stored first
        webhook_secret=SECRET,
        data_dir=folder,
        database_url=f"sqlite:///{folder / 'fresh.sqlite3'}",
        redis_url=redis_url,
        timezone="Asia/Shanghai",
    )
    with running_app(settings) as app, app.app_context():
        built = services()
        rules = built.config.rules_for(REPOSITORY)
        files: dict[tuple[str, int, str], list[ChangedFile]] = {}
        for repo, number, sha, path, status, previous, additions, deletions, patch in plain_rows(
            old_url,
            "SELECT repo, number, head_sha, path, status, previous_path, additions, deletions, patch "
            "FROM head_files ORDER BY repo, number, head_sha, position",
        ):
            files.setdefault((repo, number, sha), []).append(
                ChangedFile(path, status, previous, additions, deletions, patch)
            )
        for repo, number, sha, truncated, source in plain_rows(
            old_url, "SELECT repo, number, head_sha, truncated, source FROM heads"
        ):
            built.heads.store(
                repo,
                number,
                sha,
                files.get((repo, number, sha), []),
                truncated=bool(truncated),
                source=source,
                rules=rules,
            )
        client = app.test_client()
        for delivery_id, event, body in plain_rows(
            old_url, "SELECT id, event, body FROM deliveries ORDER BY received_at, id"
        ):
            answer = client.post("/webhook", data=body, headers=signed_headers(body, event, delivery_id))
            assert answer.status_code == 202, answer.get_data(as_text=True)
        BurstWorker([built.delivery_queue], connection=built.redis).work(burst=True, with_scheduler=False)
        assert built.ledger.counts().pending == 0
        if "observations" in old_tables(old_url):
            for oid, source, number, document in plain_rows(
                old_url, "SELECT id, source, number, document FROM observations"
            ):
                history = derive_history(oid, document, built.config.timezone_for)
                assert HistoryStore(built.state.engine).record(oid, source, REPOSITORY, number, document, history)
        return month_report(built)


def month_report(services: ReportServices) -> dict[str, str]:
    """The sample month's report as `tracker render` renders it (its JSON and Markdown), from the ledger."""
    report = report_for(services, resolve(services, REPOSITORY, MONTH, None))
    return {f"{fmt}.{lang}": render(report, fmt, lang) for fmt, lang in (("json", "en"), ("md", "en"), ("md", "zh-CN"))}


@pytest.mark.parametrize("commit", OLD_COMMITS)
def test_an_older_ledger_keeps_its_sources_and_is_rebuilt_to_a_fresh_ledgers_report(
    commit: str, empty_url: str, redis_url: str, tmp_path: Path
) -> None:
    load_old_ledger(commit, empty_url)
    ids = plain_rows(empty_url, "SELECT id FROM deliveries ORDER BY id")
    tables = old_tables(empty_url)
    before = kept_rows(empty_url, tables)
    assert len(ids) == 372 and len(before["heads"]) > 100  # the whole sample month, its heads' files
    expected = fresh_ledger_report(tmp_path / "fresh", redis_url, empty_url)
    assert len(expected["json.en"]) > 50_000  # the month's themes and PRs, not an empty month

    engine = open_engine(empty_url)
    try:
        config = load_config(load_settings(data_dir=tmp_path / "var", timezone="Asia/Shanghai"))
        done = upgrade(engine, lambda: config)
        assert (done.before, done.after, done.adopted) == (None, migrations.head(), True)
        assert done.carried is not None
        assert done.carried.deliveries == len(ids)
        assert done.carried.observations == len(before.get("observations", []))
        assert (done.backup is not None) == empty_url.startswith("sqlite")
        assert plain_rows(empty_url, "SELECT id FROM deliveries ORDER BY id") == ids
        assert kept_rows(empty_url, tables) == before  # every row of every source, records included
        assert plain_rows(empty_url, "SELECT count(*) FROM http_cache WHERE used_at IS NULL") == [(0,)]
        assert derived_schema_outdated(engine) is False
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
        assert month_report(Services.over(engine, config)) == expected
        again = upgrade(engine, lambda: config)
        assert (again.before, again.after, again.carried) == (migrations.head(), migrations.head(), None)
    finally:
        engine.dispose()
    if done.backup is not None:  # the old file as it was, beside the ledger
        assert plain_rows(f"sqlite:///{done.backup}", "SELECT id FROM deliveries ORDER BY id") == ids
        assert "alembic_version" not in {
            row[0]
            for row in plain_rows(f"sqlite:///{done.backup}", "SELECT name FROM sqlite_master WHERE type = 'table'")
        }


def test_an_older_ledger_is_carried_over_at_start_up_on_sqlite_and_waits_for_tracker_migrate_on_postgresql(
    empty_url: str,
) -> None:
    load_old_ledger(OLD_COMMITS[0], empty_url)
    if empty_url.startswith("postgresql"):
        with pytest.raises(SchemaError, match="run `tracker migrate`"):
            connect(empty_url)
        assert plain_rows(
            empty_url, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'alembic_version'"
        ) == [(0,)]
        return
    engine = connect(empty_url)  # what every process opens first
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert derived_schema_outdated(engine) is True  # `tracker run` rebuilds them next
        assert Ledger(engine).counts().received == 372
    finally:
        engine.dispose()


def test_a_database_with_tables_of_the_tracker_but_no_deliveries_is_refused_and_left_alone(empty_url: str) -> None:
    make_previous_release_ledger(empty_url)
    engine = create_engine(empty_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE deliveries"))
        conn.execute(text("DROP TABLE narration_spend"))
    engine.dispose()
    engine = open_engine(empty_url)
    try:
        with pytest.raises(SchemaError, match="has tables of the tracker but no deliveries table"):
            migrate(engine)
        assert not inspect(engine).has_table("alembic_version")
        assert inspect(engine).has_table("hooks")
    finally:
        engine.dispose()


# --- hooks no GitHub could have sent (revision 0004) -------------------------------------------------------

# Ids of rows a replayed ping added when the hook was named by its unsigned header, next to real ones.
FORGED_HOOK_IDS = ["forged-hook", "0", "9" * 20, "<img src=x>", "12 34"]
REAL_HOOK_IDS = ["1", "12345678", str(2**63 - 1)]


def insert_hooks(url: str, hook_ids: list[str]) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for hook_id in hook_ids:
                conn.execute(
                    text(
                        "INSERT INTO hooks (hook_id, hook_type, events, target, first_ping_at, last_ping_at, pings) "
                        "VALUES (:id, 'Repository', '[\"pull_request\"]', NULL, 1, 2, 1)"
                    ),
                    {"id": hook_id},
                )
    finally:
        engine.dispose()


@pytest.mark.parametrize("start", ["revision 0003", "earlier release"])
def test_hooks_no_github_could_have_sent_are_forgotten_and_real_ones_kept(empty_url: str, start: str) -> None:
    if start == "revision 0003":
        engine = open_engine(empty_url)
        try:
            with engine.begin() as conn:
                command.upgrade(migrations.alembic_config(conn), "0003_month_changes")
        finally:
            engine.dispose()
    else:
        load_old_ledger(OLD_COMMITS[0], empty_url)
    insert_hooks(empty_url, FORGED_HOOK_IDS + REAL_HOOK_IDS)
    engine = open_engine(empty_url)
    try:
        done = migrate(engine)
        assert done.after == migrations.head()
        assert (done.carried is not None) == (start == "earlier release")
    finally:
        engine.dispose()
    assert sorted(plain_rows(empty_url, "SELECT hook_id, pings FROM hooks")) == sorted((i, 1) for i in REAL_HOOK_IDS)


# --- groups' records (revision 0005) ----------------------------------------------------------------------


def test_revision_0005_adds_the_groups_records_to_a_ledger_of_0004_keeping_its_records(empty_url: str) -> None:
    from tracker.records.store import DOCUMENTS, GroupRecord, RecordStore

    engine = open_engine(empty_url)
    try:
        with engine.begin() as conn:
            command.upgrade(migrations.alembic_config(conn), "0004_forged_hooks")
        assert "group_records" not in inspect(engine).get_table_names()
        row = {
            column.name: _value(month_records_table(), column.name, column.type, 0)
            for column in month_records_table().columns
        }
        with engine.begin() as conn:
            conn.execute(month_records_table().insert(), [row])
        if empty_url.startswith("postgresql"):
            with pytest.raises(SchemaError, match="revision 0004_forged_hooks, and this release needs"):
                ensure_schema(engine)
        done = migrate(engine)
        assert (done.before, done.after) == ("0004_forged_hooks", migrations.head())
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
            assert conn.execute(select(month_records_table())).one()._asdict() == row
        store = RecordStore(engine)
        record = GroupRecord(
            "Platform",
            "2026-05",
            0,
            "2026-05-31",
            1,
            "cli",
            False,
            ({"repo": "a/b", "revision": 1},),
            "c",
            "h",
            {},
            {key: f"{key}" for key in DOCUMENTS},
        )
        assert store.add_group(record, first_only=True) is not None
        assert store.recorded_group_months() == {("platform", "2026-05")}
        with engine.begin() as conn:
            command.downgrade(migrations.alembic_config(conn), "0004_forged_hooks")
        assert "group_records" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()


def month_records_table() -> Table:
    return metadata.tables["month_records"]
