"""Issue 8, item 2: slow clients must not stop the webhook.

GitHub counts a delivery as failed when it is not answered within 10 seconds and never retries by
itself, so sockets that trickle a request one byte at a time must neither hold the server's
workers nor stay open for ever. Each probe runs the real `tracker web` (2 processes, as `tracker run`
starts it) on a free loopback port, against the test Redis and a SQLite ledger in the test's directory.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import SECRET, signed_headers
from tests.support.processes import TRACKER, clean_env, free_port, wait_healthy
from tracker.web.server import RECEIVE_SECONDS

pytestmark = needs_shared

# Well inside GitHub's 10 seconds: a delivery waits for nothing but its own work.
ANSWER_LIMIT = 3.0
PROCESSES = 2
# Of each kind: far more than 2 sync workers (2 sockets stopped them) or a small thread pool per
# process could hold while requests arrive.
SLOW_SOCKETS = 16
DRIP_SECONDS = 1.0


class SlowSocket:
    """A connection that sends the start of a request, then one more byte every DRIP_SECONDS."""

    def __init__(self, port: int, start: bytes, trickles: bool = True) -> None:
        self.trickles = trickles
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.opened = time.monotonic()
        self.closed_after: float | None = None  # seconds until the server closed it
        if start:
            self.sock.sendall(start)
        self.sock.setblocking(False)

    def drip(self) -> None:
        """Note whether the server has closed the connection; if not, send one more byte."""
        if self.closed_after is not None:
            return
        try:
            if self.sock.recv(65536) == b"":
                self._closed()
                return
        except BlockingIOError:
            pass  # nothing from the server: still open
        except OSError:
            self._closed()
            return
        if self.trickles:
            try:
                self.sock.send(b"x")
            except OSError:
                self._closed()

    def _closed(self) -> None:
        self.closed_after = time.monotonic() - self.opened

    def close(self) -> None:
        self.sock.close()


def slow_body(port: int, index: int) -> SlowSocket:
    """Complete headers announcing a 100,000-byte body (issue 8's probe), then the body byte by byte."""
    head = (
        "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: slow-{index}\r\n"
        f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: 100000\r\n\r\n"
    )
    return SlowSocket(port, head.encode())


def slow_headers(port: int) -> SlowSocket:
    """The request line, then a header that never ends."""
    return SlowSocket(port, b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")


def silent(port: int) -> SlowSocket:
    """A connection that sends nothing at all."""
    return SlowSocket(port, b"", trickles=False)


class Attack:
    """Slow sockets dripping in a background thread for as long as the `with` block lasts."""

    def __init__(self, sockets: list[SlowSocket]) -> None:
        self.sockets = sockets
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(DRIP_SECONDS):
            for sock in self.sockets:
                sock.drip()

    def __enter__(self) -> Attack:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def web(tmp_path: Path, redis_url: str) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`tracker web` with 2 processes; stopped with SIGTERM at the end, which must succeed."""
    port = free_port()
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(tmp_path / "var"))
    env["REDIS_URL"] = redis_url
    process = subprocess.Popen(
        [*TRACKER, "web", "--host", "127.0.0.1", "--port", str(port), "--processes", str(PROCESSES)], env=env
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}")
        yield port, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        assert process.wait(RECEIVE_SECONDS + 10) == 0


def deliveries(count: int) -> list[bytes]:
    """`count` distinct real pull_request bodies (the webhook refuses a body it already stored)."""
    created = datetime(2026, 9, 2, tzinfo=UTC)
    story = PullRequestStory(7, created).opened()
    for hour in range(1, count):
        story.pushed(created + timedelta(hours=hour))
    return [d.body for d in story.deliveries]


def deliver(port: int, body: bytes, delivery_id: str) -> tuple[int, float]:
    started = time.monotonic()
    answer = httpx.post(
        f"http://127.0.0.1:{port}/webhook",
        content=body,
        headers=signed_headers(body, "pull_request", delivery_id),
        timeout=10.0,  # GitHub's limit
    )
    return answer.status_code, time.monotonic() - started


def test_deliveries_are_answered_while_slow_sockets_trickle(
    web: tuple[int, subprocess.Popen[bytes]],
) -> None:
    port, process = web
    sockets = [slow_body(port, i) for i in range(SLOW_SOCKETS)]
    sockets += [slow_headers(port) for _ in range(SLOW_SOCKETS)]
    with Attack(sockets):
        time.sleep(2 * DRIP_SECONDS)  # every slow socket has been accepted and is mid-request
        answers = []
        for index, body in enumerate(deliveries(6)):
            answers.append(deliver(port, body, f"real-{index}"))
            time.sleep(0.3)
        assert [status for status, _ in answers] == [202] * 6
        assert max(seconds for _, seconds in answers) < ANSWER_LIMIT, answers
        assert all(s.closed_after is None for s in sockets), "a slow socket was dropped before its deadline"
        received = httpx.get(f"http://127.0.0.1:{port}/api/v1/status", timeout=5).json()["deliveries"]["received"]
        assert received == 6

        # A stop does not wait for requests that are still trickling in: waiting for them would take their whole
        # receive time (RECEIVE_SECONDS); the stop itself takes a second or two, up to six on a loaded machine.
        stopping = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(RECEIVE_SECONDS) == 0
        assert time.monotonic() - stopping < RECEIVE_SECONDS - 2


def test_slow_and_silent_sockets_are_dropped(web: tuple[int, subprocess.Popen[bytes]]) -> None:
    port, _ = web
    sockets = [slow_body(port, 0), slow_headers(port), silent(port)]
    with Attack(sockets):
        deadline = time.monotonic() + RECEIVE_SECONDS + 8
        while time.monotonic() < deadline and any(s.closed_after is None for s in sockets):
            time.sleep(0.2)
        lifetimes = [s.closed_after for s in sockets]
    # Dropped once the request has not arrived within RECEIVE_SECONDS (checked every second), not before.
    assert all(t is not None and RECEIVE_SECONDS - 1 <= t <= RECEIVE_SECONDS + 5 for t in lifetimes), lifetimes
    status, seconds = deliver(port, deliveries(1)[0], "after-the-attack")
    assert status == 202 and seconds < ANSWER_LIMIT
