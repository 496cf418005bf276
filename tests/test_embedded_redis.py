"""`tracker/embedded_redis.py`: the Redis server under the data directory, and keeping it alive."""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from rq import Queue

from tests.support.watchdog import finishes
from tracker.embedded_redis import EVICTION, MAXMEMORY, EmbeddedRedis

pytestmark = pytest.mark.system


@pytest.fixture
def server() -> Iterator[EmbeddedRedis]:
    # A short directory: unix socket paths are capped at 108 bytes.
    with tempfile.TemporaryDirectory(prefix="trk-") as directory:
        embedded = EmbeddedRedis(Path(directory))
        embedded.start()
        try:
            yield embedded
        finally:
            embedded.stop()


def client(server: EmbeddedRedis) -> redis.Redis:
    return redis.Redis(unix_socket_path=str(server.socket), socket_timeout=2)


def server_pid(server: EmbeddedRedis) -> int:
    """The pid of the process answering on the socket, as Redis reports it."""
    return int(client(server).info("server")["process_id"])


def test_start_answers_on_the_socket(server: EmbeddedRedis) -> None:
    assert server.is_running()
    assert server.url == f"unix://{server.socket}"
    assert server.pid == server_pid(server)


def test_the_server_caps_its_memory_and_evicts_only_keys_that_expire(server: EmbeddedRedis) -> None:
    connection = client(server)
    assert connection.config_get("maxmemory")["maxmemory"] == str(MAXMEMORY)
    assert connection.config_get("maxmemory-policy")["maxmemory-policy"] == EVICTION == "volatile-lru"
    # Full of cache entries (each with a time to live, as the tracker writes them), a queued job and its
    # queue stay and entries go; when nothing that expires is left, a write is refused instead.
    connection.config_set("maxmemory", 4 * 1024 * 1024)
    queue = Queue("deliveries", connection=connection)
    job = queue.enqueue("workers.jobs.process_delivery", "a delivery not processed yet")
    entry = b"x" * 64 * 1024
    for number in range(200):  # 12.5 MB
        connection.set(f"tracker:render:{number}", entry, ex=3600)
    assert int(connection.info("stats")["evicted_keys"]) > 0
    assert 0 < len(list(connection.scan_iter(match="tracker:render:*"))) < 200
    assert queue.get_job_ids() == [job.id] and connection.exists(job.key)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for number in range(200):
            connection.set(f"tracker:lasting:{number}", entry)
    assert queue.get_job_ids() == [job.id]
    assert queue.fetch_job(job.id) is not None


def test_keep_alive_leaves_a_running_server_alone(server: EmbeddedRedis) -> None:
    before = server.pid
    server.keep_alive()
    assert server.pid == before == server_pid(server)


def test_keep_alive_restarts_a_killed_server_with_its_data(
    server: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    client(server).set("tracker:test:kept", "yes")
    killed = server_pid(server)
    os.kill(killed, signal.SIGKILL)  # what the OOM killer does
    time.sleep(0.1)
    assert not server.is_running()
    with caplog.at_level(logging.INFO, logger="tracker.embedded_redis"):
        server.keep_alive()
    assert server.is_running()
    assert server.pid == server_pid(server) != killed
    assert client(server).get("tracker:test:kept") == b"yes"  # from the append-only file
    messages = [record.getMessage() for record in caplog.records]
    assert any("exited (code -9)" in message for message in messages), messages
    assert any("answers again" in message for message in messages), messages


def test_a_failed_restart_is_tried_again_later(server: EmbeddedRedis, caplog: pytest.LogCaptureFixture) -> None:
    os.kill(server_pid(server), signal.SIGKILL)
    time.sleep(0.1)
    aof = server.directory / "appendonly.aof"
    aof.write_text("this is not an append-only file\n")  # redis-server refuses to start on it
    with caplog.at_level(logging.INFO, logger="tracker.embedded_redis"):
        server.keep_alive()
        assert not server.is_running()
        assert any("did not start" in r.getMessage() and "again in 1 s" in r.getMessage() for r in caplog.records)
        server.keep_alive()  # too early: no second attempt yet
        assert sum("did not start" in r.getMessage() for r in caplog.records) == 1
        aof.unlink()  # someone repaired it
        time.sleep(1.1)
        server.keep_alive()
    assert server.is_running()


def test_keep_alive_after_stop_starts_nothing(server: EmbeddedRedis) -> None:
    server.stop()
    assert not server.is_running() and server.pid is None
    server.keep_alive()
    assert not server.is_running()


def test_keep_alive_leaves_a_server_someone_else_started(server: EmbeddedRedis) -> None:
    os.kill(server_pid(server), signal.SIGKILL)
    time.sleep(0.1)
    other = EmbeddedRedis(server.directory.parent)  # `tracker redis`, say
    other.start()
    try:
        theirs = other.pid
        server.keep_alive()
        assert server.pid is None
        assert server_pid(other) == theirs
        server.keep_alive()  # and it stays out of the way
        assert server_pid(other) == theirs
    finally:
        other.stop()


def test_a_hung_server_does_not_hang_is_running(server: EmbeddedRedis) -> None:
    pid = server_pid(server)
    os.kill(pid, signal.SIGSTOP)
    try:
        assert not finishes(server.is_running)  # its own timeout, not a wait for the stopped server
    finally:
        os.kill(pid, signal.SIGCONT)
    assert server.is_running()


def test_tracker_redis_restarts_its_server_too() -> None:
    import subprocess

    from tests.support.processes import TRACKER, clean_env

    with tempfile.TemporaryDirectory(prefix="trk-") as directory:
        embedded = EmbeddedRedis(Path(directory))
        process = subprocess.Popen(
            [*TRACKER, "redis"], env=clean_env(TRACKER_DATA_DIR=directory), stdout=subprocess.PIPE, text=True
        )
        try:
            # Its first start is over once it says so: killing the server while `start()` still waits
            # for it is a failed start (exit 1), not the death of a running server this test is about.
            assert process.stdout is not None
            assert process.stdout.readline().startswith("embedded Redis on "), "`tracker redis` did not start"
            assert embedded.is_running()
            client(embedded).set("tracker:test:kept", "yes")
            killed = server_pid(embedded)
            os.kill(killed, signal.SIGKILL)
            deadline = time.monotonic() + 30  # generous: a loaded 2-core machine restarts it slowly
            while not embedded.is_running():
                assert time.monotonic() < deadline, "`tracker redis` did not restart its server"
                time.sleep(0.1)
            assert server_pid(embedded) != killed
            assert client(embedded).get("tracker:test:kept") == b"yes"
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0
        assert not embedded.is_running()
