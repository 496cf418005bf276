"""The drain (workers.drain): deliveries processed in batches, one job per burst, the ledger deciding
what is pending; a poisoned delivery set aside without holding up its batch; duplicates inside a
batch counted once; the sweep finding a job a killed worker had popped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from rq import Retry
from sqlalchemy import update

from bench.fixtures import factory
from bench.fixtures.paths import needs_shared
from tests.support.app import fixture_payload, post, run_jobs
from tests.workers.test_jobs import EXPECTED_STATS, post_all, september, stories, worker_process
from tracker import queue as queue_module
from tracker.cli import WORKER_QUEUES
from tracker.queue import DRAIN_FUNCTION, ask_for_drain, enqueue_deliveries, job_id, redis_run
from tracker.settings import Settings
from tracker.store import wal
from tracker.store.rebuild import rebuild
from tracker.store.schema import deliveries
from tracker.supervisor import parts
from tracker.web.context import services
from workers import drain
from workers.runtime import AUTOGROUP, QUEUES
from workers.sweep import sweep


def drain_jobs(app: Flask) -> int:
    with app.app_context():
        return sum(job.func_name == DRAIN_FUNCTION for job in services().delivery_queue.get_jobs())


@needs_shared
def test_a_burst_of_deliveries_is_one_drain_job(app: Flask, client: FlaskClient) -> None:
    total = post_all(client)
    with app.app_context():
        assert services().delivery_queue.count == 1
    assert drain_jobs(app) == 1
    run_jobs(app)
    with app.app_context():
        assert services().ledger.counts().processed == total
    assert json.loads(september(app))["stats"] == EXPECTED_STATS
    again = stories()[0].deliveries[0]  # a redelivery: refused at the door, nothing to drain
    assert post(client, again.body, again.event, again.delivery_id).status_code == 200
    assert drain_jobs(app) == 0


@needs_shared
def test_small_batches_and_a_spent_budget_give_the_same_state(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drain, "BATCH", 2)
    monkeypatch.setattr(drain, "BUDGET_SECONDS", 0.0)  # every job ends after one batch and asks for the next
    total = post_all(client)
    with app.app_context():
        s = services()
        assert drain.drain_deliveries().startswith("processed 2 deliveries in 1 batches (")
        assert s.ledger.counts().processed == 2
        assert drain_jobs(app) == 2  # the webhook's, and the next one the spent budget asked for
    run_jobs(app)
    with app.app_context():
        assert services().ledger.counts().processed == total
    assert json.loads(september(app))["stats"] == EXPECTED_STATS


def store(app: Flask, body: bytes, delivery_id: str) -> None:
    """Into the ledger as the webhook stores a delivery, and a drain asked for as the webhook asks."""
    with app.app_context():
        s = services()
        assert s.ledger.store(factory.Delivery("pull_request", delivery_id, body).as_ledger_delivery())
        ask_for_drain(s.delivery_queue)


@needs_shared
def test_a_poisoned_delivery_is_set_aside_and_its_batch_goes_through(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "RETRY", Retry(max=2, interval=0))
    total = post_all(client)
    payload = fixture_payload("pull_request.labeled.json")
    payload["pull_request"]["labels"] = "not a list"  # a body an older, looser door let in
    store(app, json.dumps(payload).encode(), "poison")
    run_jobs(app)  # the drain, then the poison's own job and its two retries
    status = client.get("/api/v1/status").json
    assert status["deliveries"] == {"received": total + 1, "processed": total, "failed": 1, "pending": 0}
    [failure] = status["failed_deliveries"]
    assert failure["delivery_id"] == "poison"
    assert failure["attempts"] == 4  # once in the batch, then a first try and two retries on its own
    assert "pull_request.labels" in failure["error"]
    assert json.loads(september(app))["stats"] == EXPECTED_STATS


@needs_shared
def test_a_batch_the_database_refuses_is_applied_one_by_one(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    total = post_all(client)
    with app.app_context():
        s = services()
        state_type = type(s.state)
        original = state_type.apply

        def refuses_one(self: object, delivery_id: str, derivation: object) -> bool:
            if delivery_id == first:
                raise RuntimeError("the database refused this one")
            return original(self, delivery_id, derivation)  # type: ignore[arg-type]

        def refuses_batches(self: object, items: object) -> list[str]:
            raise RuntimeError("the database refused the batch")

        first = s.ledger.ids_with_status("pending")[0]
        monkeypatch.setattr(state_type, "apply_batch", refuses_batches)
        monkeypatch.setattr(state_type, "apply", refuses_one)
        assert drain.drain_deliveries().startswith(f"processed {total - 1} deliveries in 1 batches (")
        assert s.ledger.status_of(first) == "pending"
        assert s.ledger.fresh_pending(10) == []  # tried once: no drain takes it again
        assert job_id("delivery", first) in {job.id for job in s.delivery_queue.get_jobs()}  # its own job
        monkeypatch.undo()
    run_jobs(app)
    assert client.get("/api/v1/status").json["deliveries"]["processed"] == total
    assert json.loads(september(app))["stats"] == EXPECTED_STATS


@needs_shared
def test_duplicates_inside_one_batch_count_once(app: Flask, client: FlaskClient) -> None:
    total = post_all(client)
    with app.app_context():
        s = services()
        assert s.ledger.take_inbox(1000) in (0, total)  # SQLite: what the webhook wrote, into the ledger
        for delivery_id in s.ledger.ids_with_status("pending"):
            original = s.ledger.get(delivery_id)
            assert original is not None
            for copy in ("a", "b"):  # the same events again under other ids, past the door's digest check
                assert s.ledger.store(replace(original, id=f"{delivery_id}-{copy}"))
        assert len(s.ledger.fresh_pending(1000)) == 3 * total
        assert drain.drain_deliveries().startswith(f"processed {3 * total} deliveries in 1 batches (")
    run_jobs(app)  # the heads' files
    batched = september(app)
    assert json.loads(batched)["stats"] == EXPECTED_STATS
    with app.app_context():
        s = services()
        rebuild(s.ledger, s.state, s.config)  # the same ledger derived apart, not in one batch
    assert september(app) == batched


@needs_shared
def test_the_sweep_re_enqueues_a_retry_whose_job_a_killed_worker_had_popped(app: Flask, client: FlaskClient) -> None:
    post_all(client)
    run_jobs(app)
    with app.app_context():
        s = services()
        [retried] = s.ledger.ids_with_status("processed")[:1]
        with s.ledger.engine.begin() as conn:  # one delivery being retried on its own, as a batch leaves it
            conn.execute(update(deliveries).where(deliveries.c.id == retried).values(status="pending", attempts=1))
        enqueue_deliveries(s.delivery_queue, [retried])
        assert sweep(s, grace_seconds=0) == 0  # its job waits in the queue
        identifier = job_id("delivery", retried)
        s.redis.lrem(s.delivery_queue.key, 0, identifier)  # a worker popped it (BLPOP) and was killed
        assert s.redis.hget(f"rq:job:{identifier}", "status") == b"queued"  # the hash still says queued
        assert sweep(s, grace_seconds=0) == 1
        assert identifier in s.delivery_queue.get_job_ids()
    run_jobs(app)
    with app.app_context():
        assert services().ledger.status_of(retried) == "processed"


@pytest.mark.system
@needs_shared
def test_three_worker_processes_drain_a_backlog_once(
    app: Flask, client: FlaskClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACKER_DRAIN_BATCH", "3")  # several batches, several drain jobs
    total = post_all(client)
    with app.app_context():
        s = services()
        for _ in range(4):  # drains queued while others wait: the lock keeps them from doing the same work
            ask_for_drain(s.delivery_queue, force=True)
    workers = [worker_process(settings, "--burst") for _ in range(3)]
    try:
        for worker in workers:
            assert worker.wait(90) == 0
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
    counts = s.ledger.counts()
    assert (counts.processed, counts.failed, counts.pending) == (total, 0, 0)
    run_jobs(app)
    concurrent = september(app)
    assert json.loads(concurrent)["stats"] == EXPECTED_STATS
    with app.app_context():
        rebuild(s.ledger, s.state, s.config)
    assert september(app) == concurrent


def another_delivery(number: int) -> bytes:
    """A delivery the stories do not hold (its own PR number), as bytes."""
    payload = fixture_payload("pull_request.opened.json")
    payload["number"] = payload["pull_request"]["number"] = number
    return json.dumps(payload).encode()


@needs_shared
def test_deliveries_stored_while_a_drain_works_queue_no_job_and_are_drained(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drain, "BATCH", 3)
    monkeypatch.setattr(drain, "LINGER", 0.0)
    total = post_all(client)
    original = drain.process_batch
    during: list[str] = []

    def and_one_more(s: object, batch: list[object]) -> int:
        if len(during) < 2:  # the webhook at work while the drain is
            during.append(f"during-{len(during)}")
            store(app, another_delivery(9000 + len(during)), during[-1])
        return original(s, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(drain, "process_batch", and_one_more)
    with app.app_context():
        s = services()
        assert drain_jobs(app) == 1
        s.delivery_queue.empty()  # the webhook's job, run here by hand
        assert drain.drain_deliveries().startswith(f"processed {total + 2} deliveries in ")
        assert s.delivery_queue.count == 0  # the two stored meanwhile asked for no job of their own
        assert not s.redis.exists(queue_module.DRAIN_WAITING_KEY)  # the next delivery asks for a drain
        assert [s.ledger.status_of(delivery_id) for delivery_id in during] == ["processed", "processed"]
    store(app, another_delivery(9100), "after")
    assert drain_jobs(app) == 1


@needs_shared
def test_a_delivery_stored_as_the_drain_ends_is_seen_by_its_last_look(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    total = post_all(client)
    with app.app_context():
        s = services()
        s.delivery_queue.empty()
        ledger_type = type(s.ledger)
        original = ledger_type.fresh_pending
        raced: list[bool] = []

        def racing(self: object, limit: int, received_before: int | None = None) -> list[object]:
            found = original(self, limit, received_before)  # type: ignore[arg-type]
            if not found and not raced:
                # Stored and asked for a drain after the drain's first empty look, before its DEL: the
                # key still says a drain is at work, so the webhook queues nothing.
                raced.append(True)
                late = factory.Delivery("pull_request", "late", another_delivery(9200))
                assert s.ledger.store(late.as_ledger_delivery())
                assert ask_for_drain(s.delivery_queue) is False
            return found  # type: ignore[return-value]

        monkeypatch.setattr(ledger_type, "fresh_pending", racing)
        assert drain.drain_deliveries().startswith(f"processed {total + 1} deliveries in 2 batches (")
        assert s.ledger.status_of("late") == "processed"
        assert s.delivery_queue.count == 0


@needs_shared
def test_a_drain_that_fails_lets_the_next_delivery_ask_for_a_drain(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    total = post_all(client)

    def fails(s: object, batch: object) -> int:
        raise RuntimeError("the worker's database connection broke")

    monkeypatch.setattr(drain, "process_batch", fails)
    with app.app_context():
        s = services()
        s.delivery_queue.empty()
        with pytest.raises(RuntimeError):
            drain.drain_deliveries()
        assert not s.redis.exists(queue_module.DRAIN_WAITING_KEY)
    monkeypatch.undo()
    store(app, another_delivery(9300), "next")
    assert drain_jobs(app) == 1
    run_jobs(app)
    with app.app_context():
        assert services().ledger.counts().processed == total + 1


def burst_worker(settings: Settings, *args: str) -> subprocess.Popen[bytes]:
    """`tracker worker --burst *args`, run to its end."""
    worker = worker_process(settings, "--burst", *args)
    try:
        assert worker.wait(60) == 0
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
    return worker


@pytest.mark.system
def test_a_niced_worker_runs_its_jobs_below_the_web_and_tracker_run_nices_its_workers(
    app: Flask, settings: Settings
) -> None:
    with app.app_context():
        job = services().records_queue.enqueue(os.nice, 0)  # the job answers its process's niceness
        # Under autogroup scheduling a nice counts only within its session: the worker, leading its own
        # session (as `tracker run` starts it), lowers the session's too (workers.runtime.lower_cpu_priority).
        autogroup = services().records_queue.enqueue(Path(AUTOGROUP).read_text) if Path(AUTOGROUP).exists() else None
    burst_worker(settings, "--nice", "7")
    result = job.latest_result()
    assert result is not None
    assert result.return_value == os.nice(0) + 7
    if autogroup is not None:
        said = autogroup.latest_result()
        assert said is not None and said.return_value.split()[-2:] == ["nice", "7"], said
        assert Path(AUTOGROUP).read_text() != said.return_value  # another session's, not the test's
    started = [child.args for child in parts("127.0.0.1", 8000, 2, 2, 60.0, 10) if child.name.startswith("worker")]
    assert [args[-3:] for args in started] == [["worker", "--nice", "10"]] * 2


@pytest.mark.system
@pytest.mark.skipif(not Path(AUTOGROUP).exists(), reason="this kernel schedules without autogroups")
def test_lowering_priority_touches_the_autogroup_of_a_session_it_leads_only() -> None:
    said = "from pathlib import Path; from workers.runtime import AUTOGROUP, lower_cpu_priority as lower; "
    said += "print(lower(5)); print(Path(AUTOGROUP).read_text(), end='')"
    # A process whose session never left the root autogroup (a container's, CI's) reads an empty file.
    mine = Path(AUTOGROUP).read_text()
    led = subprocess.run([sys.executable, "-c", said], capture_output=True, text=True, start_new_session=True)
    lowered, group = led.stdout.split("\n", 1)
    assert lowered == "True" and group.split()[-2:] == ["nice", "5"], led
    joined = subprocess.run([sys.executable, "-c", said], capture_output=True, text=True)
    assert joined.stdout == f"False\n{mine}", joined  # the shell's session is left alone
    assert Path(AUTOGROUP).read_text() == mine


@pytest.mark.system
def test_a_worker_told_its_queues_takes_jobs_from_those_only(app: Flask, settings: Settings) -> None:
    with app.app_context():
        records = services().records_queue.enqueue(os.getpid)
        fetch = services().github_queue.enqueue(os.getpid)
    worker = burst_worker(settings, "--queue", "records")
    result = records.latest_result()
    assert result is not None and result.return_value == worker.pid
    assert fetch.get_status(refresh=True) == "queued"  # left for a worker of the GitHub queue
    assert fetch.latest_result() is None
    assert WORKER_QUEUES == QUEUES  # the CLI's choices are the worker's queues


@needs_shared
def test_a_drain_waits_for_more_after_a_batch_of_several_but_not_after_one(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    sleep = time.sleep

    def drain_sleep(seconds: float) -> None:  # the drain's own pauses (it runs here, in the main thread)
        if threading.current_thread() is threading.main_thread():
            slept.append(seconds)
        else:  # another thread's, such as the WAL checkpointer's (tracker.store.wal)
            sleep(seconds)

    monkeypatch.setattr(drain.time, "sleep", drain_sleep)
    store(app, another_delivery(9400), "alone")
    with app.app_context():
        assert drain.drain_deliveries().startswith("processed 1 deliveries in 1 batches (")
        assert slept == []  # one at a time is no stream: the drain ends at once
        total = post_all(client)
        assert drain.drain_deliveries().startswith(f"processed {total} deliveries in 1 batches (")
        assert slept == [drain.LINGER]  # then it looked again, found nothing, and ended


@needs_shared
def test_each_batch_of_the_drain_asks_its_process_for_a_checkpoint(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite each batch's commit wakes the process's checkpointer (tracker.store.wal), which copies
    the log into the database off the writers' lock; on PostgreSQL nothing asks."""
    monkeypatch.setattr(drain, "BATCH", 3)
    total = post_all(client)
    asked: list[str] = []
    monkeypatch.setattr(wal, "after_commit", asked.append)
    with app.app_context():
        engine = services().ledger.engine
        result = drain.drain_deliveries()
        batches = int(result.split(" in ")[1].split(" ")[0])
        assert batches == -(-total // 3)
        if engine.dialect.name == "sqlite":
            assert asked.count(str(engine.url.database)) >= batches
        else:
            assert asked == []


def test_a_lock_taken_before_redis_restarted_is_taken_over_and_one_of_this_run_is_not(app: Flask) -> None:
    """A drain at work when Redis restarted (from its append-only file) left the lock behind; the next
    drain must not wait LOCK_TIMEOUT for it. A lock of this Redis run is another drain at work."""
    with app.app_context():
        connection = services().require_redis()
        connection.set(drain.LOCK_KEY, b"a-run-before-the-restart:0123", ex=drain.LOCK_TIMEOUT)
        taken = drain.take_lock(connection)
        assert taken is not None
        assert taken.owned()
        assert drain.take_lock(connection) is None  # this run's lock: another drain at work
        assert connection.get(drain.LOCK_KEY) == taken.local.token
        taken.release()


def test_a_lock_of_a_process_of_this_machine_that_is_gone_is_taken_over_and_others_are_not(app: Flask) -> None:
    """A worker killed mid-drain left the lock behind: a drain on the same machine sees that its process is
    gone and takes the lock at once. A lock of a live process, or of another machine, is a drain at work."""
    import os
    import socket

    def running(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    gone = next(pid for pid in range(4_000_000, 4_100_000) if not running(pid))  # no process has this id
    with app.app_context():
        connection = services().require_redis()
        run = redis_run(connection)
        here = socket.gethostname()
        for holder, free in (
            (f"{run}:{here}:{gone}:0123", True),
            (f"{run}:{here}:{os.getpid()}:0123", False),  # alive
            (f"{run}:another-machine:{gone}:0123", False),
        ):
            connection.set(drain.LOCK_KEY, holder, ex=drain.LOCK_TIMEOUT)
            taken = drain.take_lock(connection)
            assert (taken is not None) is free, holder
            if taken is not None:
                taken.release()
