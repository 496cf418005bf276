"""The production web server (tracker/web/server.py) beyond what tests/security/test_slow_clients.py
checks: what the WSGI layers around the app do, and that a request's receive time is one budget for
its headers and its body together, not one for each."""

from __future__ import annotations

import io
import logging
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.app import SECRET
from tests.support.processes import TRACKER, clean_env, free_port, wait_healthy
from tracker.web.server import RECEIVE_SECONDS, answered, plain_input


def call(app: Callable[..., Iterable[bytes]], **environ: Any) -> tuple[str, bytes]:
    status: list[str] = []

    def start_response(line: str, headers: Any, exc_info: Any = None) -> None:
        status.append(line)

    base = {"REQUEST_METHOD": "GET", "PATH_INFO": "/x", "wsgi.input": io.BytesIO(b""), "REMOTE_ADDR": "10.0.0.1"}
    body = b"".join(app({**base, **environ}, start_response))
    return status[-1], body


def test_an_app_that_raises_is_answered_500_and_logged_without_its_secrets(caplog: pytest.LogCaptureFixture) -> None:
    closed = []

    class Answer:
        def __iter__(self) -> Iterator[bytes]:
            raise RuntimeError("boom")

        def close(self) -> None:
            closed.append(True)

    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        start_response("200 OK", [])
        return Answer()

    log = logging.getLogger("test.server")
    with caplog.at_level(logging.ERROR, logger="test.server"):
        status, body = call(answered(app, log), QUERY_STRING="token=s3cret&month=2026-09")
    assert status.startswith("500") and body == b"Internal Server Error\n"
    assert closed == [True]
    assert "/x?token=redacted&month=2026-09" in caplog.text and "s3cret" not in caplog.text


def test_the_body_is_read_to_its_end_and_only_a_local_proxy_sets_the_scheme() -> None:
    def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        start_response("200 OK", [])
        assert environ["wsgi.input_terminated"] is True  # a chunked body has no Content-Length
        return [environ["wsgi.url_scheme"].encode(), b" ", environ["wsgi.input"].read()]

    wrapped = plain_input(app)

    def forwarded(by: str) -> dict[str, Any]:
        return {
            "REMOTE_ADDR": by,
            "HTTP_X_FORWARDED_PROTO": "https",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(b"body"),
        }

    assert call(wrapped, **forwarded("127.0.0.1"))[1] == b"https body"
    assert call(wrapped, **forwarded("10.0.0.1"))[1] == b"http body"


@pytest.mark.system
def test_headers_and_body_share_one_receive_time(tmp_path: Path, redis_url: str) -> None:
    """A client that sends its headers slowly, then its body slowly, each within RECEIVE_SECONDS, is
    still dropped RECEIVE_SECONDS after it connected; a silent one too."""
    port = free_port()
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(tmp_path / "var"))
    env["REDIS_URL"] = redis_url
    process = subprocess.Popen(
        [*TRACKER, "web", "--host", "127.0.0.1", "--port", str(port), "--processes", "1"], env=env
    )
    try:
        wait_healthy(f"http://127.0.0.1:{port}")
        slow = socket.create_connection(("127.0.0.1", port), timeout=RECEIVE_SECONDS * 3)
        silent = socket.create_connection(("127.0.0.1", port), timeout=RECEIVE_SECONDS * 3)
        opened = time.monotonic()
        head = b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n"
        for byte in head:  # the headers take about 0.6 × RECEIVE_SECONDS
            slow.sendall(bytes([byte]))
            time.sleep(0.6 * RECEIVE_SECONDS / len(head))
        slow.sendall(b"\r\n")
        closed_after = None
        while time.monotonic() - opened < 2 * RECEIVE_SECONDS:
            try:
                slow.sendall(b"x")  # the body, a byte every 0.2 s
            except OSError:
                closed_after = time.monotonic() - opened
                break
            time.sleep(0.2)
        assert closed_after is not None and closed_after < RECEIVE_SECONDS + 3, closed_after
        assert silent.recv(1) == b""  # closed without an answer
        assert time.monotonic() - opened < RECEIVE_SECONDS + 3
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(RECEIVE_SECONDS + 10) == 0
