"""The GitHub client against the local fake GitHub (GitHub's own example responses)."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.fake_github import FakeGitHub, Scripted  # noqa: E402
from tracker.github import client as client_module  # noqa: E402
from tracker.github.client import (  # noqa: E402
    FILES_PAGES,
    BadAnswer,
    GitHubClient,
    LimitExceeded,
    RateLimited,
    RequestRefused,
    Unavailable,
)

REPO = "NVIDIA/Megatron-LM"


class MemoryCache:
    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, str | None, bytes]] = {}

    def get(self, url: str) -> tuple[str, str | None, bytes] | None:
        return self.entries.get(url)

    def put(self, url: str, etag: str, next_url: str | None, body: bytes) -> None:
        self.entries[url] = (etag, next_url, body)


@pytest.fixture
def fake(github_server: FakeGitHub) -> FakeGitHub:
    github_server.reset()
    return github_server


def client_for(fake: FakeGitHub, **options: Any) -> GitHubClient:
    options.setdefault("max_backoff", 0.05)
    return GitHubClient(fake.url, "secret-token-123", **options)


def test_every_page_is_followed_through_link_headers(fake: FakeGitHub) -> None:
    fake.set_files(REPO, 7, "a" * 40, [f"megatron/core/file_{i}.py" for i in range(250)])
    with client_for(fake) as client:
        files = client.pull_request_files(REPO, 7)
    assert [f["filename"] for f in files] == [f"megatron/core/file_{i}.py" for i in range(250)]
    assert fake.count(r"/pulls/7/files") == 3
    assert fake.requests[1].endswith("page=2")  # the URL from the Link header, not built by hand


def test_the_requests_carry_githubs_headers(fake: FakeGitHub) -> None:
    fake.set_files(REPO, 7, "a" * 40, ["a.py"])
    with client_for(fake) as client:
        client.pull_request_files(REPO, 7)
    headers = {k.lower(): v for k, v in fake.last_headers.items()}
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["x-github-api-version"] == "2022-11-28"
    assert headers["user-agent"].startswith("monthly-activity-tracker/")
    assert headers["authorization"] == "Bearer secret-token-123"


def test_unchanged_answers_come_from_the_cache_with_a_304(fake: FakeGitHub) -> None:
    fake.set_files(REPO, 7, "a" * 40, [f"f{i}.py" for i in range(150)])
    cache = MemoryCache()
    seen: list[bool] = []
    with client_for(fake, cache=cache, on_response=lambda state, not_modified: seen.append(not_modified)) as client:
        first = client.pull_request_files(REPO, 7)
        remaining = fake.remaining
        second = client.pull_request_files(REPO, 7)
    assert first == second
    assert seen == [False, False, True, True]
    assert fake.remaining == remaining  # a 304 costs no quota


def test_a_primary_rate_limit_says_when_to_come_back(fake: FakeGitHub) -> None:
    reset = int(time.time()) + 120
    fake.script(
        r"/files",
        Scripted(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}, {"message": "API rate limit"}),
    )
    fake.set_files(REPO, 7, "a" * 40, ["a.py"])
    with client_for(fake) as client, pytest.raises(RateLimited) as raised:
        client.pull_request_files(REPO, 7)
    assert raised.value.kind == "primary"
    assert raised.value.retry_at == reset + 1
    assert fake.count(r"/files") == 1  # not retried while limited


def test_a_secondary_rate_limit_honours_retry_after(fake: FakeGitHub) -> None:
    fake.script(r"/files", Scripted(429, {"retry-after": "7"}, {"message": "secondary rate limit"}))
    fake.set_files(REPO, 7, "a" * 40, ["a.py"])
    with client_for(fake) as client, pytest.raises(RateLimited) as raised:
        client.pull_request_files(REPO, 7)
    assert raised.value.kind == "secondary"
    assert 6 <= raised.value.retry_at - time.time() <= 8


def test_a_secondary_rate_limit_without_headers_waits_a_minute(fake: FakeGitHub) -> None:
    fake.script(r"/files", Scripted(403, {}, {"message": "You have exceeded a secondary rate limit"}))
    fake.set_files(REPO, 7, "a" * 40, ["a.py"])
    with client_for(fake) as client, pytest.raises(RateLimited) as raised:
        client.pull_request_files(REPO, 7)
    assert 59 <= raised.value.retry_at - time.time() <= 61


def test_5xx_answers_are_retried_with_backoff(fake: FakeGitHub) -> None:
    fake.script(r"/files", Scripted(502), Scripted(503))
    fake.set_files(REPO, 7, "a" * 40, ["a.py"])
    with client_for(fake) as client:
        assert [f["filename"] for f in client.pull_request_files(REPO, 7)] == ["a.py"]
    assert fake.count(r"/files") == 3


def test_persistent_5xx_is_unavailable(fake: FakeGitHub) -> None:
    fake.script(r"/files", Scripted(502), Scripted(502), Scripted(502))
    fake.set_files(REPO, 7, "a" * 40, ["a.py"])
    with client_for(fake) as client, pytest.raises(Unavailable):
        client.pull_request_files(REPO, 7)


def test_timeouts_are_retried_then_unavailable(fake: FakeGitHub) -> None:
    fake.set_files(REPO, 7, "a" * 40, ["a.py"])
    fake.script(r"/files", Scripted(0, delay=0.6))
    with client_for(fake, timeout=0.2) as client:
        assert len(client.pull_request_files(REPO, 7)) == 1  # the second try answers in time
    fake.script(r"/files", *(Scripted(0, delay=0.6) for _ in range(3)))
    with client_for(fake, timeout=0.2) as client, pytest.raises(Unavailable, match="ReadTimeout"):
        client.pull_request_files(REPO, 7)


def test_connection_refused_is_unavailable() -> None:
    with GitHubClient("http://127.0.0.1:1", max_backoff=0.01) as client, pytest.raises(Unavailable):
        client.pull_request_files(REPO, 7)


def test_a_missing_pr_is_refused_without_the_token_in_the_message(fake: FakeGitHub) -> None:
    with client_for(fake) as client, pytest.raises(RequestRefused) as raised:
        client.pull_request_files(REPO, 404)
    assert raised.value.status == 404
    assert "secret-token-123" not in str(raised.value)


def test_compare_and_pull_request(fake: FakeGitHub) -> None:
    fake.set_files(REPO, 7, "a" * 40, ["tests/a.py"])
    fake.set_files(REPO, 7, "b" * 40, ["megatron/b.py"])
    with client_for(fake) as client:
        assert client.pull_request(REPO, 7)["head"]["sha"] == "b" * 40
        compared = client.compare(REPO, "c" * 40, "a" * 40)
    assert [f["filename"] for f in compared["files"]] == ["tests/a.py"]


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("pull_request", ("x/../../user/repos", 1)),
        ("pull_request_files", ("evil/x) [a](b)", 1)),
        ("pull_request_files", ("octo-org/octo-repo", True)),
        ("pull_request", ("octo-org/octo-repo", 0)),
        ("compare", ("octo-org/octo-repo", "../../user", "a" * 40)),
        ("compare", ("octo-org/octo-repo", "a" * 40, "HEAD~1")),
    ],
)
def test_paths_are_built_from_validated_parts_only(github: FakeGitHub, call: str, args: tuple[object, ...]) -> None:
    with GitHubClient(github.url, None) as client:
        with pytest.raises(ValueError):
            getattr(client, call)(*args)
        assert client.requests == 0  # refused before anything was sent


def test_every_client_shares_the_process_tls_context() -> None:
    """Building a TLS context costs ~50 ms of CPU (certifi's bundle): a head fetch built one per job
    until the context was shared (tracker.tls)."""
    from tracker.tls import tls_context

    first, second = GitHubClient("https://api.github.com"), GitHubClient("https://ghe.example/api/v3")
    try:
        for client in (first, second):
            assert client._http._transport._pool._ssl_context is tls_context()  # type: ignore[attr-defined]
    finally:
        first.close()
        second.close()


# --- what a hostile or broken GitHub cannot do (issue 31) ----------------------------------------------


@pytest.fixture
def elsewhere() -> Iterator[FakeGitHub]:
    """A second server, on another origin: it must never hear from the client."""
    server = FakeGitHub()
    try:
        yield server
    finally:
        server.close()


def test_a_next_link_to_another_origin_is_refused_and_the_token_stays_home(
    fake: FakeGitHub, elsewhere: FakeGitHub
) -> None:
    port = fake.url.rsplit(":", 1)[1]
    for target in (
        f"{elsewhere.url}/repos/{REPO}/pulls/7/files?page=2",  # another port
        f"https://127.0.0.1:{port}/repos/{REPO}/pulls/7/files?page=2",  # another scheme
        f"{fake.url}@{elsewhere.url.removeprefix('http://')}/repos/{REPO}/pulls/7/files?page=2",  # a userinfo
    ):
        fake.script(r"/files", Scripted(200, {"Link": f'<{target}>; rel="next"'}, [{"filename": "a.py"}]))
        with client_for(fake) as client, pytest.raises(BadAnswer, match="another origin") as raised:
            client.pull_request_files(REPO, 7)
        assert "secret-token-123" not in str(raised.value)
    assert elsewhere.requests == [] and elsewhere.last_headers == {}
    assert fake.count(r"/files") == 3  # the first page each time, never retried


def test_a_redirect_is_followed_on_the_api_origin_only(fake: FakeGitHub, elsewhere: FakeGitHub) -> None:
    fake.set_files(REPO, 8, "b" * 40, ["b.py"])
    fake.script(r"/pulls/7$", Scripted(301, {"Location": f"{fake.url}/repos/{REPO}/pulls/8"}))
    with client_for(fake) as client:
        assert client.pull_request(REPO, 7)["head"]["sha"] == "b" * 40  # a renamed repository, say
    assert fake.last_headers["Authorization"] == "Bearer secret-token-123"
    for status in (301, 302, 307, 308):
        fake.script(r"/pulls/7$", Scripted(status, {"Location": f"{elsewhere.url}/repos/{REPO}/pulls/8"}))
        with client_for(fake) as client, pytest.raises(BadAnswer, match="another origin"):
            client.pull_request(REPO, 7)
    assert elsewhere.requests == []


def test_an_endless_listing_stops_at_its_page_limit(fake: FakeGitHub) -> None:
    link = {"Link": f'<{fake.url}/repos/{REPO}/pulls/7/files?per_page=100&page=2>; rel="next"'}
    fake.script(r"/files", *(Scripted(200, link, [{"filename": f"f{i}.py"}]) for i in range(FILES_PAGES + 1)))
    with client_for(fake) as client, pytest.raises(LimitExceeded, match=f"past {FILES_PAGES} pages, the page limit"):
        client.pull_request_files(REPO, 7)
    assert fake.count(r"/files") == FILES_PAGES


def test_a_page_holds_at_most_100_items(fake: FakeGitHub) -> None:
    fake.script(r"/files", Scripted(200, {}, [{"filename": f"f{i}.py"} for i in range(101)]))
    with client_for(fake) as client, pytest.raises(LimitExceeded, match="101 items on one page"):
        client.pull_request_files(REPO, 7)


def test_a_trickling_answer_stops_at_the_time_limit(fake: FakeGitHub) -> None:
    body = json.dumps([{"filename": "a.py"}] * 20).encode()  # a byte every 50 ms: seconds in all
    fake.script(r"/files", Scripted(200, raw=body, trickle=0.05))
    with client_for(fake, deadline=0.5) as client, pytest.raises(LimitExceeded, match="time limit of an answer"):
        client.pull_request_files(REPO, 7)
    assert fake.count(r"/files") == 1  # not retried in place


class SlowServer:
    """An HTTP server on a raw socket: the fake GitHub (WSGI) sends an answer's status line and headers
    at once, and these tests need them to trickle, or never to come. Each connection gets `first` at
    once, then `trickle` a byte every `every` seconds, then nothing, until the client goes away."""

    def __init__(self, first: bytes = b"", trickle: bytes = b"", every: float = 0.3) -> None:
        self.first, self.trickle, self.every = first, trickle, every
        self.connections = 0
        self.requests: list[str] = []  # the request line of each connection
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                request += chunk
            self.requests.append(request.split(b"\r\n", 1)[0].decode())
            try:
                connection.sendall(self.first)
                for index in range(len(self.trickle)):
                    time.sleep(self.every)
                    connection.sendall(self.trickle[index : index + 1])
                connection.settimeout(30)  # a bound for a client that never gives up
                while connection.recv(65536):
                    pass
            except OSError:  # the client gave up
                return


@pytest.fixture
def slow_server() -> Iterator[Callable[..., SlowServer]]:
    servers: list[SlowServer] = []

    def start(**answer: Any) -> SlowServer:
        servers.append(SlowServer(**answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(
    "answer",
    [
        # Headers a byte every 0.3 s: each read is in time, and httpcore takes 100 KB of them (8 hours).
        # (About 17 s of them here, then nothing: a client without the deadline fails, not hangs.)
        {"trickle": HEADERS + b"X-Slow: a"},
        # Never a byte: ends at the deadline, before the read timeout.
        {},
        # Half a body, then nothing: the read waits until the deadline, not the read timeout.
        {"first": HEADERS + b"Content-Length: 100\r\n\r\n[{"},
    ],
    ids=["trickled headers", "no answer", "stalled body"],
)
def test_an_answer_stalled_or_trickled_anywhere_stops_at_the_time_limit(
    slow_server: Callable[..., SlowServer], answer: dict[str, bytes]
) -> None:
    server = slow_server(**answer)
    client = GitHubClient(server.url, "secret-token-123", deadline=1.0, timeout=3.0, attempts=2, max_backoff=0.05)
    started = time.monotonic()
    with client, pytest.raises(LimitExceeded, match="longer than 1 s, the time limit of an answer"):
        client.pull_request_files(REPO, 7)
    assert time.monotonic() - started < 2.0  # the deadline, then closing; the read timeout is 3 s
    assert server.connections == 1  # not retried in place


def test_a_tls_handshake_never_answered_stops_at_the_time_limit(slow_server: Callable[..., SlowServer]) -> None:
    server = slow_server()  # takes the connection, never answers the client's hello
    url = server.url.replace("http://", "https://")
    client = GitHubClient(url, "secret-token-123", deadline=1.0, timeout=3.0, attempts=2, max_backoff=0.05)
    started = time.monotonic()
    with client, pytest.raises(LimitExceeded, match="time limit of an answer"):
        client.pull_request_files(REPO, 7)
    assert time.monotonic() - started < 2.0  # the deadline, then closing; the read timeout is 3 s
    assert server.connections == 1


def test_the_environments_proxies_are_used_within_the_time_limit(
    fake: FakeGitHub, slow_server: Callable[..., SlowServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given its own transport, httpx leaves HTTP_PROXY and NO_PROXY alone: the client reads them itself,
    and a proxy that trickles is cut at the deadline like a server."""
    proxy = slow_server(trickle=HEADERS + b"X-Slow: a")
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("http_proxy", proxy.url)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setattr(client_module, "_shared", {})  # a process's clients read the environment once
    fake.set_files(REPO, 7, "a" * 40, ["a.py"])
    with client_for(fake) as client:  # on NO_PROXY's list: straight to it
        assert len(client.pull_request_files(REPO, 7)) == 1
    assert proxy.requests == []
    remote = GitHubClient("http://api.github.invalid", "secret-token-123", deadline=1.0, timeout=3.0, attempts=1)
    started = time.monotonic()
    with remote, pytest.raises(LimitExceeded, match="time limit of an answer"):
        remote.pull_request_files(REPO, 7)
    assert time.monotonic() - started < 2.0  # the deadline, then closing; the read timeout is 3 s
    assert proxy.requests == [f"GET http://api.github.invalid/repos/{REPO}/pulls/7/files?per_page=100 HTTP/1.1"]


def test_an_oversized_answer_stops_at_the_size_limit(fake: FakeGitHub) -> None:
    fake.set_files(REPO, 7, "a" * 40, [f"megatron/core/file_{i}.py" for i in range(100)])  # ~150 KB
    with client_for(fake, max_bytes=20_000) as client, pytest.raises(LimitExceeded, match="size limit of an answer"):
        client.pull_request_files(REPO, 7)
    # Compressed, its declared length is small: the limit counts the bytes as they are decompressed.
    bomb = gzip.compress(b"[" + b" " * 1_000_000 + b"]")
    fake.script(r"/files", Scripted(200, {"Content-Encoding": "gzip"}, raw=bomb))
    with client_for(fake, max_bytes=20_000) as client, pytest.raises(LimitExceeded, match="20000 bytes"):
        client.pull_request_files(REPO, 7)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (Scripted(200, raw=b'{"number": 7, '), "is not JSON"),
        (Scripted(200, raw=b"[" * 100_000 + b"]" * 100_000), "is not JSON"),  # deeper than the parser goes
        (Scripted(200, body=[1, 2]), "answered a list where its API documents an object"),
        (Scripted(200, body="7"), "answered a string where its API documents an object"),
    ],
)
def test_an_object_that_is_not_one_is_a_bad_answer(fake: FakeGitHub, answer: Scripted, message: str) -> None:
    fake.script(r"/pulls/7$", answer)
    with client_for(fake) as client, pytest.raises(BadAnswer, match=message):
        client.pull_request(REPO, 7)
    assert fake.count(r"/pulls/7$") == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"message": "a listing?"}, "answered an object where its API documents a list of objects"),
        ([{"filename": "a.py"}, "b.py"], "answered a list holding a string where its API documents objects"),
    ],
)
def test_a_listing_that_is_not_one_is_a_bad_answer(fake: FakeGitHub, body: Any, message: str) -> None:
    fake.script(r"/files", Scripted(200, body=body))
    with client_for(fake) as client, pytest.raises(BadAnswer, match=message):
        client.pull_request_files(REPO, 7)


def test_a_malformed_answer_is_not_kept_in_the_response_cache(fake: FakeGitHub) -> None:
    fake.script(r"/pulls/7$", Scripted(200, {"ETag": '"broken"'}, raw=b"{"))
    cache = MemoryCache()
    with client_for(fake, cache=cache) as client, pytest.raises(BadAnswer):
        client.pull_request(REPO, 7)
    assert cache.entries == {}
