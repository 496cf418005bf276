"""A small GitHub REST client: pagination, rate limits, conditional requests, transient retries.

It never sleeps for a rate limit: it raises `RateLimited` with the moment GitHub allows the next
request, and the job re-schedules itself for then (GitHub: "you should not retry your request until
after the time specified by the `x-ratelimit-reset` header"). Connection errors, timeouts and 5xx
answers are retried a few times with exponential backoff and jitter, then raised as `Unavailable`.

Writes (`post`, `patch`) share that machinery, with two differences. They are spaced at least a
second apart (GitHub's REST best practices: "wait at least one second between each" mutative
request, to stay under the secondary rate limits). And a POST is never retried in place: a create
that timed out or answered 5xx may still have happened on GitHub's side, so a blind retry could make
a second issue; the caller looks again before creating (see `tracker.github.issues`).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.client import HTTPResponse
from http.cookiejar import CookieJar
from typing import Any, Protocol
from urllib.parse import urlencode
from urllib.request import Request

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from tracker import __version__, metrics
from tracker.core.repository import check_full_name
from tracker.tls import tls_context

API_VERSION = "2022-11-28"
PER_PAGE = 100
# GitHub asks for at least a minute between retries of a secondary rate limit without retry-after.
SECONDARY_DEFAULT_WAIT = 60.0
# GitHub's REST best practices: "If you are making a large number of POST, PATCH, PUT, or DELETE
# requests for a single user or client ID, wait at least one second between each request."
WRITE_INTERVAL = 1.0


class GitHubError(Exception):
    pass


class RateLimited(GitHubError):
    def __init__(self, retry_at: float, kind: str) -> None:
        super().__init__(f"GitHub {kind} rate limit: retry after {time.strftime('%H:%M:%SZ', time.gmtime(retry_at))}")
        self.retry_at = retry_at
        self.kind = kind


class Unavailable(GitHubError):
    """A timeout, a connection error or a 5xx answer, after the in-place retries."""


class RequestRefused(GitHubError):
    """A 4xx answer that waiting will not fix (404, 401, 422, ...)."""

    def __init__(self, status: int, url: str, message: str) -> None:
        super().__init__(f"GitHub answered {status} for {url}: {message}")
        self.status = status


@dataclass(frozen=True)
class RateLimitState:
    limit: int | None
    remaining: int | None
    reset: int | None
    resource: str | None


class ResponseCache(Protocol):
    """ETag, next-page URL and body of the last 200 answer for a URL."""

    def get(self, url: str) -> tuple[str, str | None, bytes] | None: ...

    def put(self, url: str, etag: str, next_url: str | None, body: bytes) -> None: ...


@dataclass(frozen=True)
class Page:
    data: Any
    next_url: str | None
    from_cache: bool


_HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": API_VERSION,
    "User-Agent": f"monthly-activity-tracker/{__version__}",
}


class _NoCookies(CookieJar):
    """A cookie jar that keeps nothing: GitHub's REST API needs no cookies, and the shared client
    (`_shared_http`) must carry nothing from one job to the next. Reading every answer's headers for
    cookies to keep was about a sixth of httpx's CPU per request."""

    def extract_cookies(self, response: HTTPResponse, request: Request) -> None:
        """Nothing to keep."""


_shared: dict[tuple[int, float], httpx.Client] = {}
_shared_lock = threading.Lock()


def _shared_http(timeout: float) -> httpx.Client:
    """The process's HTTP client (connection pool) for GitHub clients with this timeout.

    A GitHubClient lives for one job. When each built its own httpx client, every head fetch paid
    for the client (about a millisecond of CPU: proxy settings read from the environment, the
    transport), a new TCP connection and, against api.github.com, a TLS handshake; a shared one
    keeps its connections alive from job to job. It holds no credentials (each request carries its
    own `Authorization`) and keeps no cookies, so nothing of one job reaches the next. Keyed by
    process id: a forked child must not write to its parent's sockets."""
    key = (os.getpid(), timeout)
    with _shared_lock:
        client = _shared.get(key)
        if client is None:
            client = httpx.Client(
                headers=_HEADERS,
                timeout=timeout,
                follow_redirects=True,
                verify=tls_context(),
                cookies=_NoCookies(),
            )
            _shared[key] = client
    return client


class GitHubClient:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        auth: Callable[[], str | None] | None = None,
        cache: ResponseCache | None = None,
        on_response: Callable[[RateLimitState, bool], None] | None = None,
        timeout: float = 10.0,
        attempts: int = 3,
        max_backoff: float = 4.0,
        write_interval: float = WRITE_INTERVAL,
    ) -> None:
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        # `auth`, when given, is asked for the bearer token before every request (a GitHub App's
        # installation tokens expire within the hour; tracker.github.app caches and renews them).
        self._auth = auth
        self.base_url = base_url.rstrip("/")
        self._http = _shared_http(timeout)
        self._cache = cache
        self._on_response = on_response
        self._retrying = Retrying(
            retry=retry_if_exception_type(Unavailable),
            stop=stop_after_attempt(attempts),
            wait=wait_exponential_jitter(multiplier=0.25, max=max_backoff, jitter=0.25),
            reraise=True,
        )
        self.requests = 0  # answered requests, 304s included
        self.not_modified = 0  # of which 304s (answered from the response cache)
        self._write_interval = write_interval
        self._last_write: float | None = None  # time.monotonic() when the last write was sent

    def close(self) -> None:
        """Nothing to release: the connections belong to the process (`_shared_http`)."""

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- endpoints ------------------------------------------------------------------------------

    # Paths are built from validated parts only: a repository name, a number or a sha from a webhook
    # body must never reach another endpoint (`x/../../user/repos` would become `/user/repos/...`).

    def pull_request(self, repo: str, number: int) -> dict[str, Any]:
        page = self.get(f"{_repository_path(repo)}/pulls/{_number(number)}")
        return dict(page.data)

    def pull_request_files(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Every page of `GET /repos/{repo}/pulls/{number}/files` (at most 3,000 files)."""
        files: list[dict[str, Any]] = []
        path = f"{_repository_path(repo)}/pulls/{_number(number)}/files"
        for page in self.pages(path, {"per_page": PER_PAGE}):
            files.extend(page)
        return files

    def pull_request_commits(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Every page of `GET /repos/{repo}/pulls/{number}/commits`, oldest first (GitHub lists at most
        250 commits of a pull request)."""
        commits: list[dict[str, Any]] = []
        for page in self.pages(f"{_repository_path(repo)}/pulls/{_number(number)}/commits", {"per_page": PER_PAGE}):
            commits.extend(item for item in page if isinstance(item, dict))
        return commits

    def compare(self, repo: str, base: str, head: str) -> dict[str, Any]:
        """`GET /repos/{repo}/compare/{base}...{head}`, never through the response cache: a comparison
        of two commits never changes and the caller stores its files at once, so its ETag would
        never be sent again, and keeping its body (tens of KB) cost a database write per head."""
        path = f"{_repository_path(repo)}/compare/{_sha(base)}...{_sha(head)}"
        page = self.get(path, {"per_page": PER_PAGE}, cached=False)
        return dict(page.data)

    # Issues. GitHub's "Issues" endpoints also answer with pull requests, marked by a `pull_request`
    # key (REST docs, "List repository issues"); callers that want issues only skip those.

    def issue(self, repo: str, number: int) -> dict[str, Any]:
        """`GET /repos/{repo}/issues/{number}`; a transferred issue is followed to its new place (301),
        a deleted one is a `RequestRefused` with 404 or 410."""
        page = self.get(f"{_repository_path(repo)}/issues/{_number(number)}")
        return dict(page.data)

    def issues(
        self,
        repo: str,
        *,
        state: str = "all",
        creator: str | None = None,
        sort: str = "created",
        direction: str = "desc",
    ) -> Iterator[dict[str, Any]]:
        """`GET /repos/{repo}/issues`, page after page as the caller reads on (stop early to save
        requests). Pull requests are included, as GitHub sends them."""
        if state not in ("open", "closed", "all") or sort not in ("created", "updated", "comments"):
            raise ValueError(f"not an issue listing: state={state!r} sort={sort!r}")
        if direction not in ("asc", "desc"):
            raise ValueError(f"not a direction: {direction!r}")
        params: dict[str, Any] = {"state": state, "sort": sort, "direction": direction, "per_page": PER_PAGE}
        if creator is not None:
            params["creator"] = check_login(creator)
        for page in self.pages(f"{_repository_path(repo)}/issues", params):
            yield from (dict(item) for item in page)

    def create_issue(self, repo: str, title: str, body: str) -> dict[str, Any]:
        """`POST /repos/{repo}/issues` (201). Sent once: see the module docstring."""
        page = self.post(f"{_repository_path(repo)}/issues", {"title": title, "body": body})
        return dict(page.data)

    def update_issue(self, repo: str, number: int, fields: dict[str, Any]) -> dict[str, Any]:
        """`PATCH /repos/{repo}/issues/{number}` with the fields to change, in one request."""
        allowed = {"title", "body", "state", "state_reason"}
        if not fields or not set(fields) <= allowed:
            raise ValueError(f"issue fields must be some of {sorted(allowed)}: {sorted(fields)}")
        page = self.patch(f"{_repository_path(repo)}/issues/{_number(number)}", fields)
        return dict(page.data)

    # --- mechanics ------------------------------------------------------------------------------

    def pages(self, path: str, params: dict[str, Any] | None = None) -> Iterator[list[Any]]:
        """Follow `Link: <...>; rel="next"`, never building page URLs by hand (GitHub's advice)."""
        page = self.get(path, params)
        while True:
            yield list(page.data or [])
            if page.next_url is None:
                return
            page = self.get(page.next_url)

    def get(self, path_or_url: str, params: dict[str, Any] | None = None, *, cached: bool = True) -> Page:
        """A GET, conditional on the ETag the response cache holds for its URL (unless `cached` is
        False: an answer that cannot change is neither looked up nor kept)."""
        url = path_or_url if path_or_url.startswith(("http://", "https://")) else self.base_url + path_or_url
        if params:  # encoded here: httpx would parse the URL a second time to merge them
            url = f"{url}{'&' if '?' in url else '?'}{urlencode(params)}"
        request = self._http.build_request("GET", url, headers=self._headers)
        cache = self._cache if cached else None
        key = str(request.url)
        kept = cache.get(key) if cache is not None else None
        if kept is not None:
            request.headers["If-None-Match"] = kept[0]
        response = self._retrying(self._send, request)
        if response.status_code == 304 and kept is not None:
            self.not_modified += 1
            return Page(json.loads(kept[2]), kept[1], from_cache=True)
        data = response.json() if response.content else None
        next_url = response.links.get("next", {}).get("url")
        etag = response.headers.get("etag")
        if etag and cache is not None:
            cache.put(key, etag, next_url, response.content)
        return Page(data, next_url, from_cache=False)

    def post(self, path: str, payload: dict[str, Any]) -> Page:
        """A create: not idempotent, so never retried in place (an `Unavailable` may have happened)."""
        return self._write("POST", path, payload, retry=False)

    def patch(self, path: str, payload: dict[str, Any]) -> Page:
        """An update to given values: idempotent, so retried on 5xx and timeouts like a read."""
        return self._write("PATCH", path, payload, retry=True)

    def _write(self, method: str, path: str, payload: dict[str, Any], *, retry: bool) -> Page:
        if path.startswith(("http://", "https://")):
            raise ValueError("writes go to paths built by this client, never to a URL from an answer")
        request = self._http.build_request(method, self.base_url + path, json=payload, headers=self._headers)
        if self._last_write is not None:
            wait = self._last_write + self._write_interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        self._last_write = time.monotonic()
        response = self._retrying(self._send, request) if retry else self._send(request)
        data = response.json() if response.content else None
        return Page(data, None, from_cache=False)

    def _send(self, request: httpx.Request) -> httpx.Response:
        if self._auth is not None:
            bearer = self._auth()
            if bearer:
                request.headers["Authorization"] = f"Bearer {bearer}"
            else:
                request.headers.pop("Authorization", None)
        try:
            response = self._http.send(request)
        except httpx.TransportError as exc:  # timeouts, refused and reset connections
            metrics.github_answered(None)
            raise Unavailable(f"GitHub did not answer {request.url}: {type(exc).__name__}") from exc
        self.requests += 1
        metrics.github_answered(response.status_code)
        state = _rate_limit(response.headers)
        if self._on_response is not None:
            self._on_response(state, response.status_code == 304)
        status = response.status_code
        if status in (403, 429):
            limited = _rate_limited(response, state)
            if limited is not None:
                raise limited
        if status >= 500:
            raise Unavailable(f"GitHub answered {status} for {request.url}")
        if status >= 400:
            raise RequestRefused(status, str(request.url), _message(response))
        return response


def _rate_limited(response: httpx.Response, state: RateLimitState) -> RateLimited | None:
    retry_after = response.headers.get("retry-after")
    if retry_after is not None:
        try:
            return RateLimited(time.time() + max(0.0, float(retry_after)), "secondary")
        except ValueError:
            pass
    if state.remaining == 0 and state.reset is not None:
        return RateLimited(float(state.reset) + 1.0, "primary")
    if "rate limit" in _message(response).lower():
        return RateLimited(time.time() + SECONDARY_DEFAULT_WAIT, "secondary")
    return None


def _rate_limit(headers: httpx.Headers) -> RateLimitState:
    def number(name: str) -> int | None:
        value = headers.get(name)
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None

    return RateLimitState(
        limit=number("x-ratelimit-limit"),
        remaining=number("x-ratelimit-remaining"),
        reset=number("x-ratelimit-reset"),
        resource=headers.get("x-ratelimit-resource"),
    )


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", ""))[:300]
    except (ValueError, AttributeError):
        return response.text[:300]


_SHA = re.compile(r"[0-9a-fA-F]{7,64}")


def _repository_path(repo: str) -> str:
    return f"/repos/{check_full_name(repo)}"


def _number(number: int) -> int:
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"not an issue or pull request number: {number!r}")
    return number


# GitHub logins: letters, digits and hyphens, not starting with a hyphen, at most 39 characters (as
# owners in tracker.core.repository); an app's bot account is `<app-slug>[bot]`.
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")


def check_login(login: str) -> str:
    """A GitHub login as GitHub allows it; raises ValueError otherwise."""
    if not _LOGIN.fullmatch(login):
        raise ValueError(f"not a GitHub login: {login!r}")
    return login


def _sha(sha: str) -> str:
    if not _SHA.fullmatch(sha):
        raise ValueError(f"not a commit sha: {sha!r}")
    return sha
