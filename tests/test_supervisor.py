"""`tracker run` keeps its parts alive: the embedded Redis, and the RQ scheduler of killed workers.

Real processes, as a user runs them: `tracker run` on the embedded defaults (SQLite ledger, the
embedded Redis on a unix socket under the data directory), in a directory of the test's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import SECRET, show_head_to_github
from tests.support.processes import (
    LOCK,
    TRACKER,
    alive,
    clean_env,
    free_port,
    scheduler_holding,
    wait_healthy,
    wait_until,
)
from tracker.queue import QUEUE_NAME, WORKER_DEQUEUE_TIMEOUT
from tracker.web.signature import sign
from workers.drain import take_lock
from workers.runtime import MAINTENANCE_INTERVAL

pytestmark = needs_shared


@dataclass
class Running:
    base: str
    data_dir: Path
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def redis(self) -> Redis:
        return Redis(unix_socket_path=str(self.data_dir / "redis" / "redis.sock"), socket_timeout=2)

    def redis_pid(self) -> int:
        return int(self.redis.info("server")["process_id"])


def start_run(data_dir: Path, github: Any, workers: int, **environment: str) -> Running:
    port = free_port()
    env = clean_env(
        TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), GITHUB_API_URL=github.url, **environment
    )
    log = data_dir / "run.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*TRACKER, "run", "--port", str(port), "--workers", str(workers), "--sweep-every", "600"],
            env=env,
            stderr=stderr,
        )
    running = Running(f"http://127.0.0.1:{port}", data_dir, process, log)
    wait_healthy(running.base)
    return running


@pytest.fixture
def one_worker(data_dir: Path, github: Any) -> Iterator[Running]:
    running = start_run(data_dir, github, workers=1)
    try:
        yield running
    finally:
        os.kill(running.process.pid, signal.SIGCONT)
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(30) == 0
        assert not (data_dir / "redis" / "redis.sock").exists(), "the embedded Redis was not stopped"


@pytest.fixture
def two_workers(data_dir: Path, github: Any) -> Iterator[Running]:
    running = start_run(data_dir, github, workers=2)
    try:
        yield running
    finally:
        running.process.send_signal(signal.SIGTERM)
        assert running.process.wait(30) == 0


def story_bodies(count: int) -> list[tuple[str, bytes]]:
    story = PullRequestStory(77, datetime(2026, 9, 2, 10, tzinfo=UTC)).opened()
    for day in range(3, 3 + count - 1):
        story.pushed(datetime(2026, 9, day, 10, tzinfo=UTC))
    for delivery in story.deliveries:
        show_head_to_github(delivery.body)
    return [(d.delivery_id, d.body) for d in story.deliveries]


def post(base: str, delivery_id: str, body: bytes) -> httpx.Response:
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": delivery_id,
        "X-Hub-Signature-256": sign(SECRET.encode(), body),
    }
    return httpx.post(f"{base}/webhook", content=body, headers=headers, timeout=30)


def processed(base: str) -> int:
    return int(httpx.get(f"{base}/api/v1/status", timeout=10).json()["deliveries"]["processed"])


def healthy(base: str) -> bool:
    return httpx.get(f"{base}/healthz", timeout=5).status_code == 200


# --- the embedded Redis ------------------------------------------------------------------------


def test_a_killed_embedded_redis_is_restarted_and_what_came_meanwhile_is_processed(
    one_worker: Running,
) -> None:
    """Probe: SIGKILL the embedded redis-server of a running `tracker run`. Before: /healthz stayed
    503 and the workers crash-looped until someone ran `tracker redis` by hand."""
    base = one_worker.base
    (first_id, first), (during_id, during), (after_id, after) = story_bodies(3)
    assert post(base, first_id, first).status_code == 202
    wait_until(lambda: processed(base) == 1, 30, "the first delivery was not processed")
    killed = one_worker.redis_pid()
    # Redis dies while a drain holds its lock (seen in CI): the lock comes back from the append-only
    # file, and the drains after the restart must not wait for it to lapse.
    assert take_lock(one_worker.redis) is not None

    # Hold the supervisor so that Redis stays dead long enough to look at the outage.
    os.kill(one_worker.process.pid, signal.SIGSTOP)
    try:
        os.kill(killed, signal.SIGKILL)
        wait_until(lambda: httpx.get(f"{base}/healthz", timeout=5).status_code == 503, 5, "/healthz stayed 200")
        answer = post(base, during_id, during)  # accepted into the ledger, not queued
        assert answer.status_code == 202
        time.sleep(3)  # the worker and the sweep notice and wait
    finally:
        os.kill(one_worker.process.pid, signal.SIGCONT)

    back = wait_until(lambda: healthy(base), 10, "/healthz did not come back to 200")
    assert one_worker.redis_pid() != killed
    # The worker sweeps as soon as Redis answers again: no minute of grace for what came meanwhile.
    wait_until(lambda: processed(base) == 2, 15, "the delivery accepted during the outage was not processed")
    assert post(base, after_id, after).status_code == 202
    wait_until(lambda: processed(base) == 3, 15, "a delivery after the restart was not processed")
    assert back < 5

    log = one_worker.log.read_text()
    assert log.count("the embedded Redis exited (code -9)") == 1, log
    assert log.count("the embedded Redis answers again") == 1, log
    assert "exited with code" not in log, log  # no part of `tracker run` crashed
    for who in ("worker", "sweep"):  # one line when the wait began, one when it ended
        assert log.count(f"{who}: Redis at unix://") <= 1, log


# --- the RQ scheduler --------------------------------------------------------------------------


def a_scheduled_job_runs(redis: Redis, timeout: float) -> None:
    """A job due in a second is moved to its queue by the scheduler and run by a worker."""
    job = Queue(QUEUE_NAME, connection=redis).enqueue_at(
        datetime.now(UTC) + timedelta(seconds=1), "builtins.len", [1, 2, 3]
    )
    wait_until(
        lambda: Job.fetch(job.id, connection=redis).get_status() == JobStatus.FINISHED,
        timeout,
        "the scheduled job did not run",
    )


def test_a_killed_worker_does_not_leave_the_scheduler_lock_behind(two_workers: Running) -> None:
    """Probe: kill the workers of `tracker run`. Before: no scheduler held the lock for up to
    11 minutes (the lock lapses after 61 s, and RQ's other workers asked for it every 10 minutes),
    so retries and rate-limit waits ran late."""
    redis = two_workers.redis
    holder = wait_until(lambda: scheduler_holding(redis) is not None, 20, "no scheduler took the lock")
    assert holder < 20
    name, scheduler = scheduler_holding(redis) or ("", 0)
    worker = os.getpgid(scheduler)  # the scheduler is a fork of its worker, which leads the group

    # SIGKILL the worker alone: its scheduler process lives on, orphaned, holding the lock. The
    # supervisor stops what is left of the worker's group, so the scheduler gives the lock back.
    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: (scheduler_holding(redis) or (name,))[0] != name, 15, "the orphaned scheduler kept the lock")
    assert not alive(scheduler)
    a_scheduled_job_runs(redis, timeout=15)

    # SIGKILL a worker with its scheduler: nobody gives the lock back, and it lapses after 61 s.
    name, scheduler = scheduler_holding(redis) or ("", 0)
    assert name
    os.killpg(os.getpgid(scheduler), signal.SIGKILL)
    assert 0 < redis.ttl(LOCK) <= 61
    redis.delete(LOCK)  # skip the minute's wait: what follows is what happens once it lapsed
    took = wait_until(
        lambda: scheduler_holding(redis) is not None, MAINTENANCE_INTERVAL + WORKER_DEQUEUE_TIMEOUT + 10, "no takeover"
    )
    assert (scheduler_holding(redis) or (name,))[0] != name
    assert took <= MAINTENANCE_INTERVAL + WORKER_DEQUEUE_TIMEOUT + 5
    a_scheduled_job_runs(redis, timeout=15)


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo.extend(children.get(found[-1], []))
    return found


def test_a_second_run_on_the_same_data_directory_is_refused_naming_the_first(one_worker: Running) -> None:
    """Probe: a second `tracker run` on the same data directory. Before: it started and shared the
    first one's Redis and ledger, with a second schedule and more workers."""
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(one_worker.data_dir))
    second = subprocess.run(
        [*TRACKER, "run", "--port", str(free_port())], env=env, capture_output=True, text=True, timeout=60
    )
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert lines == [
        f"Error: another `tracker run` (pid {one_worker.process.pid}) is using the data directory "
        f"{one_worker.data_dir}: stop it first, or give this one its own TRACKER_DATA_DIR"
    ], second.stderr
    assert healthy(one_worker.base)
    # The first one's start-up said where its ledger is.
    assert f"ledger: sqlite:///{one_worker.data_dir.resolve() / 'ledger.sqlite3'}" in one_worker.log.read_text()


def test_sigterm_to_every_process_at_once_leaves_a_clean_json_log(data_dir: Path, github: Any) -> None:
    """Probe: systemd stops a service by sending SIGTERM to all its processes at once, the embedded
    Redis among them. Before: RQ's scheduler, giving its locks back to a Redis already gone, wrote a
    traceback into the JSON log, partly as raw lines."""
    running = start_run(data_dir, github, workers=2, TRACKER_LOG_FORMAT="json")
    try:
        wait_until(lambda: scheduler_holding(running.redis) is not None, 20, "no scheduler took the lock")
        for pid in descendants(running.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        assert running.process.wait(30) == 0
    finally:
        if running.process.poll() is None:
            running.process.kill()
    lines = [line for line in running.log.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert any(r["message"] == "tracker stopped" for r in records)
    assert not [r for r in records if "Traceback" in r["message"] or "exc_info" in r], records
