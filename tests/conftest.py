"""Shared fixtures. Tests use a real Redis and real databases, isolated per test.

- Redis: TRACKER_TEST_REDIS_URL (a database number kept for tests, flushed around each test), or,
  when unset, the embedded server the product itself uses, started once for the session.
- Ledger: SQLite in the test's temporary directory always; PostgreSQL too when
  TRACKER_TEST_DATABASE_URL is set (tables dropped before each test).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from redis import Redis
from rq import SimpleWorker
from sqlalchemy import Engine, create_engine

from tests.paths import FIXTURES, MEGATRON, SHARED, WEBHOOKS, require_shared  # noqa: F401  (re-exported for tests)
from tracker.embedded_redis import EmbeddedRedis
from tracker.queue import connect_redis, github_queue
from tracker.reports.digests import forget_held
from tracker.settings import Settings, load_settings
from tracker.store.database import connect
from tracker.store.schema import metadata
from tracker.web.app import create_app
from tracker.web.context import services
from tracker.web.signature import sign
from workers import runtime

SECRET = "test-webhook-secret"

DATABASES = ["sqlite"] + (["postgresql"] if os.environ.get("TRACKER_TEST_DATABASE_URL") else [])


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
        from sqlalchemy.engine import make_url

        base = make_url(database)
        own = f"{base.database}_{worker}"
        engine = create_engine(base, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                if conn.exec_driver_sql("SELECT 1 FROM pg_database WHERE datname = %s", (own,)).first() is None:
                    conn.exec_driver_sql(f'CREATE DATABASE "{own}"')
        finally:
            engine.dispose()
        os.environ["TRACKER_TEST_DATABASE_URL"] = base.set(database=own).render_as_string(hide_password=False)


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
    from tests.fake_github import FakeGitHub

    server = FakeGitHub()
    try:
        yield server
    finally:
        server.close()


_ACTIVE_GITHUB: Any = None


@pytest.fixture
def github(github_server: Any) -> Iterator[Any]:
    """The fake GitHub, emptied; deliveries posted with `post` make their heads known to it."""
    global _ACTIVE_GITHUB
    github_server.reset()
    _ACTIVE_GITHUB = github_server
    try:
        yield github_server
    finally:
        _ACTIVE_GITHUB = None


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    url = os.environ["TRACKER_TEST_DATABASE_URL"]
    engine = create_engine(url)
    metadata.drop_all(engine)
    engine.dispose()
    return url


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


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    with running_app(settings) as app:
        yield app


@contextmanager
def running_app(settings: Settings) -> Iterator[Flask]:
    """The app, with the worker runtime installed for jobs run in this process."""
    app = create_app(settings)
    app.config["TESTING"] = True
    with app.app_context():
        built = services()
    runtime.install(built)  # the same services object the web app uses
    try:
        yield app
    finally:
        runtime.install(None)
        built.close()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def signed_headers(body: bytes, event: str, delivery_id: str, secret: str = SECRET) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id,
        "X-GitHub-Hook-ID": "4242",
        "X-Hub-Signature-256": sign(secret.encode(), body),
        "User-Agent": "GitHub-Hookshot/test",
    }


def post(client: FlaskClient, payload: dict[str, Any] | bytes, event: str, delivery_id: str) -> Any:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    if _ACTIVE_GITHUB is not None and event == "pull_request":
        show_head_to_github(body)
    return client.post("/webhook", data=body, headers=signed_headers(body, event, delivery_id))


def show_head_to_github(body: bytes) -> None:
    from urllib.parse import parse_qs

    try:
        try:
            document = json.loads(body)
        except ValueError:
            document = json.loads(parse_qs(body.decode())["payload"][0])
        pr = document["pull_request"]
        _ACTIVE_GITHUB.saw_head(document["repository"]["full_name"], pr["number"], pr["head"]["sha"], pr["updated_at"])
    except (ValueError, KeyError, TypeError):
        pass  # a malformed body: the webhook refuses it anyway


def stored_count(app: Flask) -> int:
    """Deliveries stored, in the ledger or (SQLite) the webhook's inbox, which the drain has yet to move."""
    with app.app_context():
        return len(services().ledger.accepted_ids())


class BurstWorker(SimpleWorker):
    """RQ's SimpleWorker without its pub/sub thread, as the tracker's own worker (workers.runtime): that
    thread serves `rq` command-line requests no test sends, and with redis-py 8.2 a burst worker's
    teardown sometimes waited for it for minutes (`PubSubWorkerThread.stop` joining a thread blocked in
    `get_message`)."""

    def subscribe(self) -> None:
        pass

    def unsubscribe(self) -> None:
        pass


def run_jobs(app: Flask) -> None:
    """Run every queued job in this process, deliveries first (RQ's own tests do the same)."""
    with app.app_context():
        s = services()
        queues = [s.delivery_queue, s.records_queue, github_queue(s.redis)]
        while any(q.count for q in queues):
            BurstWorker(queues, connection=s.redis).work(burst=True, with_scheduler=False)


def release_due_jobs(app: Flask, at: float | None = None) -> int:
    """Move re-scheduled jobs whose time has come (by `at`, epoch seconds, default now) back onto their
    queue (a worker's scheduler does this every second in production)."""
    from rq.registry import ScheduledJobRegistry

    released = 0
    with app.app_context():
        s = services()
        for queue in (s.delivery_queue, s.records_queue, github_queue(s.redis)):
            registry = ScheduledJobRegistry(queue=queue, connection=s.redis)  # type: ignore[no-untyped-call]
            for job_id in registry.get_jobs_to_schedule(int(time.time() if at is None else at)):
                job = queue.fetch_job(job_id)
                registry.remove(job_id)
                if job is not None:
                    queue.enqueue_job(job)
                    released += 1
    return released


def fixture_payload(name: str) -> dict[str, Any]:
    require_shared()  # GitHub's example payloads: skipped in a clone without ../shared
    payload: dict[str, Any] = json.loads((WEBHOOKS / name).read_text())
    return payload
