"""Workers: idempotent processing, retries, failed deliveries, the sweep, and a SIGKILL mid-job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import pytest
from flask import Flask
from flask.testing import FlaskClient
from redis import Redis
from rq import Retry
from rq.registry import StartedJobRegistry
from sqlalchemy import Engine, text

from bench.fixtures import factory
from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import fixture_payload, post, run_jobs
from tests.support.clock import at
from tracker import queue as delivery_queue_module
from tracker.queue import enqueue_deliveries
from tracker.reports.loading import load_snapshot, snapshot_json
from tracker.settings import Settings
from tracker.store.rebuild import rebuild
from tracker.web.context import services
from workers import drain
from workers.jobs import process_delivery
from workers.sweep import sweep


def stories() -> list[PullRequestStory]:
    return [
        PullRequestStory(1, at("2026-09-02T01:00:00Z")).opened().pushed(at("2026-09-03T01:00:00Z")),
        PullRequestStory(2, at("2026-09-04T01:00:00Z")).opened().merged(at("2026-09-06T01:00:00Z")),
        PullRequestStory(3, at("2026-09-05T01:00:00Z")).opened().closed(at("2026-09-07T01:00:00Z")),
        PullRequestStory(4, at("2026-08-30T01:00:00Z"))
        .opened()
        .labeled(at("2026-09-01T02:00:00Z"), "moe")
        .pushed(at("2026-09-08T01:00:00Z")),
    ]


EXPECTED_STATS = {"opened": 3, "merged": 1, "closed_unmerged": 1, "active_at_cutoff": 2}


def post_all(client: FlaskClient) -> int:
    count = 0
    for story in stories():
        for d in story.deliveries:
            assert post(client, d.body, d.event, d.delivery_id).status_code == 202
            count += 1
    return count


def september(app: Flask) -> str:
    with app.app_context():
        s = services()
        return snapshot_json(load_snapshot(s, "NVIDIA/Megatron-LM", "2026-09", "2026-09-13"))


@needs_shared
def test_processing_twice_changes_nothing(app: Flask, client: FlaskClient) -> None:
    post_all(client)
    run_jobs(app)
    before = september(app)
    with app.app_context():
        versions = services().state.month_versions("NVIDIA/Megatron-LM")
        ids = services().ledger.ids_with_status("processed")
    assert [process_delivery(i) for i in ids] == ["already processed"] * len(ids)
    assert september(app) == before
    with app.app_context():
        assert services().state.month_versions("NVIDIA/Megatron-LM") == versions
    assert json.loads(before)["stats"] == EXPECTED_STATS


def store_poison(app: Flask, payload: dict[str, object], delivery_id: str) -> None:
    """A body the worker cannot parse, in the ledger as a release with a looser door check stored it
    (the webhook refuses such bodies today), and queued as the webhook queues every delivery."""
    body = json.dumps(payload).encode()
    with app.app_context():
        s = services()
        assert s.ledger.store(factory.Delivery("pull_request", delivery_id, body).as_ledger_delivery())
        enqueue_deliveries(s.delivery_queue, [delivery_id])


@needs_shared
def test_a_delivery_that_keeps_failing_is_marked_failed_and_can_be_retried(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery_queue_module, "RETRY", Retry(max=2, interval=0))
    payload = fixture_payload("pull_request.labeled.json")
    payload["pull_request"]["labels"] = "not a list"
    store_poison(app, payload, "poison")
    run_jobs(app)  # first try and both retries
    status = client.get("/api/v1/status").json
    assert status["deliveries"] == {"received": 1, "processed": 0, "failed": 1, "pending": 0}
    [failure] = status["failed_deliveries"]
    assert failure["delivery_id"] == "poison"
    assert failure["attempts"] == 3
    assert "pull_request.labels" in failure["error"]

    answer = client.post("/api/v1/deliveries/retry-failed", headers={"Authorization": "Bearer test-admin-token"})
    assert answer.json == {"requeued": 1}
    assert client.get("/api/v1/status").json["deliveries"]["pending"] == 1
    run_jobs(app)
    again = client.get("/api/v1/status").json
    assert again["deliveries"]["failed"] == 1
    assert again["failed_deliveries"][0]["attempts"] == 6


@needs_shared
def test_a_failure_before_the_last_retry_stays_pending(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery_queue_module, "RETRY", Retry(max=3, interval=600))
    payload = fixture_payload("pull_request.labeled.json")
    payload["pull_request"]["labels"] = 7
    store_poison(app, payload, "poison-later")
    run_jobs(app)
    status = client.get("/api/v1/status").json
    assert status["deliveries"]["pending"] == 1
    assert status["queue"]["scheduled_retries"] == 1


@needs_shared
def test_the_sweep_recovers_a_lost_queue(app: Flask, client: FlaskClient) -> None:
    total = post_all(client)
    with app.app_context():
        s = services()
        s.redis.flushdb()  # Redis lost every queued job
        assert s.delivery_queue.count == 0
        assert sweep(s, grace_seconds=3600) == 0  # too young to be swept
        assert sweep(s, grace_seconds=0) == total
    run_jobs(app)
    assert client.get("/api/v1/status").json["deliveries"]["processed"] == total
    assert json.loads(september(app))["stats"] == EXPECTED_STATS


@contextmanager
def writes_blocked(engine: Engine) -> Iterator[None]:
    """Hold a lock that makes the worker's write transaction wait, so it can be killed mid-job."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("COMMIT")  # leave the transaction our begin hook opened
            conn.exec_driver_sql("BEGIN EXCLUSIVE")
        else:
            conn.execute(text("LOCK TABLE pr_facts IN ACCESS EXCLUSIVE MODE"))
        try:
            yield
        finally:
            conn.rollback()


def worker_process(settings: Settings, *args: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "TRACKER_DATA_DIR": str(settings.data_dir),
        "TRACKER_DATABASE_URL": settings.resolved_database_url,
        "REDIS_URL": str(settings.redis_url),
        "GITHUB_API_URL": settings.github_api_url,
    }
    # Its own process group: RQ runs the scheduler in a child process, and a crash takes both.
    return subprocess.Popen([sys.executable, "-m", "tracker", "worker", *args], env=env, start_new_session=True)


@pytest.mark.system
@needs_shared
def test_a_worker_killed_mid_job_loses_nothing(app: Flask, client: FlaskClient, settings: Settings) -> None:
    total = post_all(client)
    with app.app_context():
        s = services()
    started = StartedJobRegistry(queue=s.delivery_queue, connection=s.delivery_queue.connection)
    with writes_blocked(s.ledger.engine):
        worker = worker_process(settings)
        try:
            deadline = time.monotonic() + 30
            # A drain has begun, taken the drain lock, and now waits on the database's.
            while started.count == 0 or not s.delivery_queue.connection.exists(drain.LOCK_KEY):
                assert time.monotonic() < deadline, "the worker never started a drain"
                time.sleep(0.05)
            time.sleep(0.3)
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
    assert s.ledger.counts().processed == 0
    assert started.count == 1  # the job the worker died in

    # Its start-up sweep re-enqueues the pending ones, and its drain takes over the lock of the killed one (a
    # process of this machine that no longer runs) rather than wait for it to lapse.
    restarted = worker_process(settings, "--burst")
    assert restarted.wait(60) == 0
    counts = s.ledger.counts()
    assert (counts.processed, counts.failed, counts.pending) == (total, 0, 0)
    after_crash = september(app)
    assert json.loads(after_crash)["stats"] == EXPECTED_STATS

    with app.app_context():
        rebuild(s.ledger, s.state, s.config)  # the clean derivation of the same ledger
    assert september(app) == after_crash


def test_redis_connection_is_not_shared_between_tests(redis_url: str) -> None:
    assert Redis.from_url(redis_url).dbsize() == 0


@needs_shared
def test_the_sweep_queues_one_drain_however_many_are_pending(app: Flask, client: FlaskClient) -> None:
    total = post_all(client)
    with app.app_context():
        s = services()
        assert s.delivery_queue.count == 1  # the webhook's drain
        # The sweep counts deliveries received before the current millisecond: let the last one age past it.
        time.sleep(0.005)
        assert sweep(s, grace_seconds=0) == total  # pending past the grace: the ledger decides
        assert s.delivery_queue.count == 2  # one more drain, not a job per delivery
    run_jobs(app)
    assert client.get("/api/v1/status").json["deliveries"]["processed"] == total


# --- a worker that outlives Redis trouble, and its scheduler (issue 8) ---------------------------


@needs_shared
def test_a_worker_connection_keeps_the_timeout_its_blocking_dequeue_needs(settings: Settings) -> None:
    """RQ raises a lower socket timeout to `dequeue + 10` in the pool's settings only, so a worker
    whose pool already held short-timeout connections timed out every BLPOP: workers connect with
    the long timeout from the start, and RQ finds nothing to change."""
    import threading

    from tracker.queue import WEB_REDIS, WORKER_DEQUEUE_TIMEOUT, WORKER_REDIS, WORKER_TTL
    from tracker.services import Services
    from workers.runtime import MAINTENANCE_INTERVAL, Worker

    built = Services.from_settings(settings, redis_timeouts=WORKER_REDIS)
    try:
        options = dict(built.require_redis().connection_pool.connection_kwargs)
        worker = Worker(built, threading.Event())
        assert worker.worker_ttl == WORKER_TTL
        assert worker.dequeue_timeout == WORKER_DEQUEUE_TIMEOUT == WORKER_TTL - 15
        assert worker.maintenance_interval == MAINTENANCE_INTERVAL <= WORKER_DEQUEUE_TIMEOUT
        assert options["socket_timeout"] == WORKER_REDIS.socket >= worker.connection_timeout > worker.dequeue_timeout
        assert built.require_redis().connection_pool.connection_kwargs["socket_timeout"] == options["socket_timeout"]
        assert WEB_REDIS.socket < worker.dequeue_timeout  # the web's would not do
    finally:
        built.close()


@pytest.mark.system
def test_a_surviving_worker_takes_over_the_scheduler_of_a_killed_one() -> None:
    """Probe: SIGKILL the worker whose scheduler holds the lock (scheduler and all). Before: the other
    workers asked for the lock every 10 minutes, so retries and rate-limit waits stayed unscheduled for
    up to 11 minutes. Two `tracker worker` processes on a private Redis, no supervisor."""
    import tempfile
    from datetime import UTC, timedelta
    from pathlib import Path

    from rq import Queue
    from rq.job import Job, JobStatus

    from tests.support.processes import LOCK, TRACKER, alive, clean_env, scheduler_holding, wait_until
    from tracker.embedded_redis import EmbeddedRedis
    from tracker.queue import QUEUE_NAME, WORKER_DEQUEUE_TIMEOUT
    from workers.runtime import MAINTENANCE_INTERVAL

    with tempfile.TemporaryDirectory(prefix="trk-") as directory:
        server = EmbeddedRedis(Path(directory))
        server.start()
        env = clean_env(TRACKER_DATA_DIR=directory, REDIS_URL=server.url, GITHUB_API_URL="http://127.0.0.1:1")
        workers = [
            subprocess.Popen([*TRACKER, "worker"], env=env, start_new_session=True, stderr=subprocess.DEVNULL)
            for _ in range(2)
        ]
        redis = Redis(unix_socket_path=str(server.socket), socket_timeout=2)
        try:
            wait_until(lambda: scheduler_holding(redis) is not None, 30, "no scheduler took the lock")
            name, scheduler = scheduler_holding(redis) or ("", 0)
            holder = os.getpgid(scheduler)  # the scheduler is a fork of its worker, which leads the group
            os.killpg(holder, signal.SIGKILL)
            wait_until(lambda: not alive(scheduler), 5, "the scheduler outlived SIGKILL")
            assert 0 < redis.ttl(LOCK) <= 61  # nobody gives it back: it lapses within a minute
            redis.delete(LOCK)  # skip that minute: what follows is what happens once it lapsed
            took = wait_until(
                lambda: scheduler_holding(redis) is not None,
                MAINTENANCE_INTERVAL + WORKER_DEQUEUE_TIMEOUT + 10,
                "the surviving worker did not take the scheduler over",
            )
            assert took <= MAINTENANCE_INTERVAL + WORKER_DEQUEUE_TIMEOUT + 5
            new_name, new_scheduler = scheduler_holding(redis) or (name, 0)
            assert new_name != name
            survivor = next(w for w in workers if w.pid != holder)
            assert os.getpgid(new_scheduler) == survivor.pid

            job = Queue(QUEUE_NAME, connection=redis).enqueue_at(
                datetime.now(UTC) + timedelta(seconds=1), "builtins.len", [1, 2, 3]
            )
            wait_until(
                lambda: Job.fetch(job.id, connection=redis).get_status() == JobStatus.FINISHED,
                15,
                "the scheduled job did not run",
            )
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
            for worker in workers:
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(worker.pid, signal.SIGKILL)
            server.stop()
