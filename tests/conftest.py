"""Shared fixtures. Tests use a real Redis and real databases, isolated per test.

- Tiers: a test that starts a process carries the `system` marker; `pytest -m "not system"` is the
  quick tier; a test without the marker that starts a process fails (tests/support/tiers.py).

- Redis: TRACKER_TEST_REDIS_URL (a database number kept for tests, flushed around each test), or,
  when unset, the embedded server the product itself uses, started once for the session.
- Ledger: SQLite in the test's temporary directory always; PostgreSQL too when
  TRACKER_TEST_DATABASE_URL is set (tables dropped before each test).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from redis import Redis
from sqlalchemy import Engine, create_engine, inspect

from tests.support.app import ACTIVE_GITHUB, SECRET, running_app
from tests.support.months import Months
from tests.support.tiers import mark_system, refuse_processes
from tracker.embedded_redis import EmbeddedRedis
from tracker.queue import connect_redis
from tracker.reports.digests import forget_held
from tracker.settings import Settings, load_settings
from tracker.store import migrations
from tracker.store.database import connect
from tracker.store.schema import metadata

DATABASES = ["sqlite"] + (["postgresql"] if os.environ.get("TRACKER_TEST_DATABASE_URL") else [])
# As named, before `pytest_configure` gives each pytest-xdist worker a database of its own: beside it are
# what the workers share (tests/support/months.py).
SESSION_DATABASE_URL = os.environ.get("TRACKER_TEST_DATABASE_URL")


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker process gets services of its own: the Redis database below the
    one named (gw0 the one named, gw1 the one below, ...) and a PostgreSQL database of its own next
    to the one named (`test_gw1`, created when missing), so that tests flushing and dropping
    everything around them never meet another worker's. Everything reads the two variables, so they
    are rewritten here, in the worker, before any test reads them."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or worker == "gw0":
        return
    number = int(worker.removeprefix("gw"))
    redis = os.environ.get("TRACKER_TEST_REDIS_URL")
    if redis:
        from urllib.parse import urlsplit

        parts = urlsplit(redis)
        db = int(parts.path.strip("/") or 0) - number
        if db < 0:
            pytest.exit(f"TRACKER_TEST_REDIS_URL leaves no Redis database for xdist worker {worker}", returncode=3)
        os.environ["TRACKER_TEST_REDIS_URL"] = parts._replace(path=f"/{db}").geturl()
    database = os.environ.get("TRACKER_TEST_DATABASE_URL")
    if database:
        os.environ["TRACKER_TEST_DATABASE_URL"] = postgresql_database(database, worker)


def postgresql_database(url: str, suffix: str) -> str:
    """The URL of the PostgreSQL database named as `url`'s plus `_suffix`, created when missing."""
    from sqlalchemy.engine import make_url

    base = make_url(url)
    own = f"{base.database}_{suffix}"
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            if conn.exec_driver_sql("SELECT 1 FROM pg_database WHERE datname = %s", (own,)).first() is None:
                conn.exec_driver_sql(f'CREATE DATABASE "{own}"')
    finally:
        engine.dispose()
    return base.set(database=own).render_as_string(hide_password=False)


def pytest_sessionstart(session: pytest.Session) -> None:
    """With TRACKER_TEST_REQUIRE_SERVICES (set by .ci/run), PostgreSQL and Redis must be named and
    answer: the run stops at once instead of quietly testing SQLite and the embedded Redis only."""
    if not os.environ.get("TRACKER_TEST_REQUIRE_SERVICES"):
        return
    problems = []
    database, redis = os.environ.get("TRACKER_TEST_DATABASE_URL"), os.environ.get("TRACKER_TEST_REDIS_URL")
    if not database or not database.startswith("postgresql"):
        problems.append("TRACKER_TEST_DATABASE_URL does not name a PostgreSQL database")
    else:
        try:
            engine = create_engine(database)
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            engine.dispose()
        except Exception as exc:
            problems.append(f"PostgreSQL at {database} does not answer ({type(exc).__name__})")
    if not redis:
        problems.append("TRACKER_TEST_REDIS_URL is not set")
    else:
        try:
            Redis.from_url(redis, socket_connect_timeout=2).ping()
        except Exception as exc:
            problems.append(f"Redis at {redis} does not answer ({type(exc).__name__})")
    if problems:
        pytest.exit("; ".join(problems), returncode=3)


# Every variable Settings reads.
TRACKER_ENVIRONMENT = (
    "TRACKER_WEBHOOK_SECRET",
    "TRACKER_ADMIN_TOKEN",
    "TRACKER_LINK_SECRET",
    "TRACKER_DATA_DIR",
    "TRACKER_DATABASE_URL",
    "REDIS_URL",
    "GITHUB_TOKEN",
    "GITHUB_API_URL",
    "TRACKER_TIMEZONE",
    "TRACKER_CONFIG",
    "TRACKER_FINALIZE_GRACE",
    "TRACKER_FINALIZE_WAIT",
    "TRACKER_SCHEDULE_EVERY",
    "TRACKER_RECONCILE_EVERY",
    "TRACKER_RECONCILE_LOOKBACK",
    "TRACKER_GITHUB_APP_ID",
    "TRACKER_GITHUB_APP_PRIVATE_KEY",
    "TRACKER_GITHUB_APP_PRIVATE_KEY_FILE",
    "TRACKER_LLM_BASE_URL",
    "TRACKER_LLM_API_KEY",
    "TRACKER_LLM_MODEL",
    "TRACKER_LLM_TIMEOUT",
    "TRACKER_LLM_INPUT_PRICE",
    "TRACKER_LLM_OUTPUT_PRICE",
    "TRACKER_LLM_TEMPERATURE",
    "TRACKER_LLM_PROMPT_BUDGET",
    "TRACKER_METRICS_TOKEN",
    "TRACKER_HTTP_CACHE_RETENTION_DAYS",
    "TRACKER_RUN_RETENTION_DAYS",
    "TRACKER_LOG_FORMAT",
    "TRACKER_INBOX",
    "PROMETHEUS_MULTIPROC_DIR",  # prometheus-client's own: a developer's must not reach the tests
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_system(items)


@pytest.fixture(autouse=True)
def no_processes_outside_system(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A test without the `system` marker may not start a process (tests/support/tiers.py). Session
    fixtures, such as the embedded Redis started when TRACKER_TEST_REDIS_URL is unset, are set up
    before this one and are not affected. Yields the attempts (tests/test_tiers.py reads them)."""
    if request.node.get_closest_marker("system") is not None:
        yield []
        return
    started = refuse_processes(monkeypatch, request.node.nodeid)
    yield started
    # A process started from another thread raised there, where the test may not have seen it.
    if started and not request.node.stash.get(CALL_FAILED, False):
        pytest.fail(f"started a process without the `system` marker: {started}")


CALL_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Remember a failed test, so that `no_processes_outside_system` does not report it twice."""
    report = yield
    if report.when == "call" and report.failed:
        item.stash[CALL_FAILED] = True
    return report


@pytest.fixture(autouse=True)
def no_held_windows() -> None:
    """Each test starts as a process that never read a month's window (tracker.reports.digests holds them,
    by engine: a test's ledger is never another's anyway)."""
    forget_held()


@pytest.fixture
def no_tracker_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """None of the tracker's variables set, and no stray .env file in the working directory."""
    for name in TRACKER_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def redis_server_url() -> Iterator[str]:
    configured = os.environ.get("TRACKER_TEST_REDIS_URL")
    if configured:
        yield configured
        return
    # A short directory: unix socket paths are capped at 108 bytes.
    directory = Path(tempfile.mkdtemp(prefix="trk-redis-"))
    server = EmbeddedRedis(directory)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def redis_url(redis_server_url: str) -> Iterator[str]:
    connection = Redis.from_url(redis_server_url)
    connection.flushdb()
    try:
        yield redis_server_url
    finally:
        connection.flushdb()
        connection.close()


@pytest.fixture(scope="session")
def github_server() -> Iterator[Any]:
    from bench.fixtures.fake_github import FakeGitHub

    server = FakeGitHub()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def github(github_server: Any) -> Iterator[Any]:
    """The fake GitHub, emptied; deliveries posted with `post` make their heads known to it."""
    github_server.reset()
    ACTIVE_GITHUB.append(github_server)
    try:
        yield github_server
    finally:
        ACTIVE_GITHUB.clear()


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A short temporary directory for a `tracker` process: the embedded Redis listens on a unix socket
    in it (paths are capped at 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="trk-") as directory:
        yield Path(directory)


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    url = os.environ["TRACKER_TEST_DATABASE_URL"]
    empty_postgresql(url)
    return url


def empty_postgresql(url: str) -> None:
    """The tracker's tables as a fresh ledger has them: emptied (DELETE, sequences restarted, then the
    rows a new schema starts with), a few milliseconds, when they are this release's schema at the
    newest revision, as the test before left them; else dropped, for `connect` to create them again (a
    few hundred milliseconds), after a test that changed the schema. DELETE, not TRUNCATE: a test leaves
    a few rows, and TRUNCATE gives each of the 25 tables new files, which cost 100 to 150 ms a test."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            current = migrations.current(conn)
            tables = set(inspect(conn).get_table_names())
        if current == migrations.head() and tables.issuperset(metadata.tables):
            with engine.begin() as conn:
                for table in reversed(metadata.sorted_tables):  # rows that refer to others first
                    conn.execute(table.delete())
                conn.exec_driver_sql(
                    "SELECT setval((quote_ident(schemaname) || '.' || quote_ident(sequencename))::regclass,"
                    " start_value, false) FROM pg_sequences WHERE schemaname = current_schema()"
                )
                for table, rows in fresh_rows().items():
                    conn.execute(metadata.tables[table].insert(), rows)
        else:
            metadata.drop_all(engine)
    finally:
        engine.dispose()


@cache
def fresh_rows() -> dict[str, list[dict[str, Any]]]:
    """The rows a newly created schema holds (the derived schema's version in `ledger_meta`), read from
    a new SQLite ledger."""
    with tempfile.TemporaryDirectory() as directory:
        engine = connect(f"sqlite:///{directory}/fresh.sqlite3")
        try:
            with engine.connect() as conn:
                found = {
                    table.name: [dict(row._mapping) for row in conn.execute(table.select())]
                    for table in metadata.sorted_tables
                }
        finally:
            engine.dispose()
    return {name: rows for name, rows in found.items() if rows}


@pytest.fixture
def redis(redis_url: str) -> Iterator[Redis]:
    """A client of the test Redis (the web's short timeouts), closed afterwards."""
    connection = connect_redis(redis_url)
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """A ledger engine (schema created) on each test database, disposed afterwards."""
    engine = connect(database_url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def settings(tmp_path: Path, database_url: str, redis_url: str, github: Any) -> Settings:
    return load_settings(
        github_api_url=github.url,
        webhook_secret=SECRET,
        admin_token="test-admin-token",
        data_dir=tmp_path / "var",
        database_url=database_url,
        redis_url=redis_url,
        timezone="Asia/Shanghai",
    )


@pytest.fixture(scope="module", params=DATABASES)
def module_database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A database for what one module's tests build once and share (a month delivered through the
    webhook): SQLite in a directory of the module's, or a PostgreSQL database of its own next to the
    test database (`..._module`), emptied first. The per-test `database_url` never touches it."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('module') / 'ledger.sqlite3'}"
    url = postgresql_database(os.environ["TRACKER_TEST_DATABASE_URL"], "module")
    empty_postgresql(url)
    return url


@pytest.fixture(scope="module")
def module_settings(
    tmp_path_factory: pytest.TempPathFactory, module_database_url: str, redis_server_url: str, github_server: Any
) -> Settings:
    """`settings` for a module's shared state (`module_database_url`). The test Redis is flushed around
    every test: what a module shares must be in its database (jobs run to the end before it is shared)."""
    return load_settings(
        github_api_url=github_server.url,
        webhook_secret=SECRET,
        admin_token="test-admin-token",
        data_dir=tmp_path_factory.mktemp("var"),
        database_url=module_database_url,
        redis_url=redis_server_url,
        timezone="Asia/Shanghai",
    )


@pytest.fixture(scope="session")
def months(tmp_path_factory: pytest.TempPathFactory) -> Months:
    """Months tests start from a copy of, each delivered once in the session (tests/support/months.py), by
    whichever pytest-xdist worker asks first: in the session's temporary directory, which its workers share."""
    session = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        session = session.parent  # a worker's is `popen-gw<n>` in the session's
    return Months(session / "months", SESSION_DATABASE_URL)


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    with running_app(settings) as app:
        yield app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()
