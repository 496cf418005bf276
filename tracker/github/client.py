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

Nothing GitHub answers is trusted further than the API documents it (issue 31). Requests go to the
configured API's origin only (scheme, host and port of its base URL): a `Link: rel="next"` or a
redirect to any other origin is refused before anything is sent there, so the token never leaves it.
A listing follows a bounded number of pages, an answer must arrive within `deadline` seconds (from
the connection to the last byte, headers included: httpx has no total timeout, its `timeout` bounds
each read, so `tracker.github.transport` cuts every network operation at the deadline and a server
trickling a byte at a time is stopped too) and within `max_bytes`, and a body must be the JSON the
endpoint documents. Each of these ends the call with a
`BadAnswer`, which is not retried in place: the same request would get the same answer.
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
from typing import Any, Protocol, TypeVar
from urllib.parse import urlencode
from urllib.request import Request

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from tracker import __version__, metrics
from tracker.core.repository import check_full_name
from tracker.github.transport import DeadlineTransport, proxy_mounts, request_deadline
from tracker.tls import tls_context

T = TypeVar("T")

API_VERSION = "2022-11-28"
PER_PAGE = 100
# GitHub asks for at least a minute between retries of a secondary rate limit without retry-after.
SECONDARY_DEFAULT_WAIT = 60.0
# GitHub's REST best practices: "If you are making a large number of POST, PATCH, PUT, or DELETE
# requests for a single user or client ID, wait at least one second between each request."
WRITE_INTERVAL = 1.0
# Limits on one answer. GitHub ends a request it takes more than 10 seconds to process (REST docs,
# "Timeouts"), so a minute leaves room for a slow network. The largest answers the tracker asks for
# stay far below the size limit: a files page or a comparison carries at most about 1 MB of patches
# (GitHub's diff limits), a page of 100 pull requests about 2 MB (up to 9 MB were every body of the
# page 65,536 characters long, the most GitHub takes).
RESPONSE_DEADLINE = 60.0  # seconds from the start of a request (its connection too) to the last byte of its answer
MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # of a body, decompressed
MAX_REDIRECTS = 5  # GitHub redirects a renamed repository or a transferred issue once
# Pages of 100 a listing follows: GitHub's documented limits where there are some (3,000 files of a
# pull request, 250 commits), else MAX_PAGES (10,000 items); tracker.history.github gives the list
# of pull requests its own.
MAX_PAGES = 100
FILES_PAGES = 30
COMMITS_PAGES = 3


class GitHubError(Exception):
    pass


class RateLimited(GitHubError):
    def __init__(self, retry_at: float, kind: str) -> None:
        super().__init__(f"GitHub {kind} rate limit: retry after {time.strftime('%H:%M:%SZ', time.gmtime(retry_at))}")
        self.retry_at = retry_at
        self.kind = kind


class Unavailable(GitHubError):
    """A timeout, a connection error or a 5xx answer, after the in-place retries."""


class BadAnswer(GitHubError):
    """An answer the client will not use: not the JSON the endpoint documents, or pointing at another
    origin than the configured API. Not retried in place; a job fails with it."""


class LimitExceeded(BadAnswer):
    """An answer past one of the client's limits: pages of a listing, time or size of an answer."""


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


@dataclass(frozen=True)
class _Answer:
    response: httpx.Response  # status and headers (its body was read into `body`, within the limits)
    body: bytes


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
                # Redirects are followed by GitHubClient._send, which checks where each one goes first.
                follow_redirects=False,
                # Transports that end every network operation by the request's deadline (`_exchange`).
                transport=DeadlineTransport(tls_context()),
                mounts=proxy_mounts(tls_context()),
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
        deadline: float = RESPONSE_DEADLINE,
        max_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        # `auth`, when given, is asked for the bearer token before every request (a GitHub App's
        # installation tokens expire within the hour; tracker.github.app caches and renews them).
        self._auth = auth
        self.base_url = base_url.rstrip("/")
        self._origin = _origin(httpx.URL(self.base_url))
        self._deadline = deadline
        self._max_bytes = max_bytes
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
        return _object(self.get(f"{_repository_path(repo)}/pulls/{_number(number)}"))

    def pull_request_files(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Every page of `GET /repos/{repo}/pulls/{number}/files` (at most 3,000 files)."""
        files: list[dict[str, Any]] = []
        path = f"{_repository_path(repo)}/pulls/{_number(number)}/files"
        for page in self.pages(path, {"per_page": PER_PAGE}, max_pages=FILES_PAGES):
            files.extend(page)
        return files

    def pull_request_commits(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Every page of `GET /repos/{repo}/pulls/{number}/commits`, oldest first (GitHub lists at most
        250 commits of a pull request)."""
        commits: list[dict[str, Any]] = []
        path = f"{_repository_path(repo)}/pulls/{_number(number)}/commits"
        for page in self.pages(path, {"per_page": PER_PAGE}, max_pages=COMMITS_PAGES):
            commits.extend(page)
        return commits

    def compare(self, repo: str, base: str, head: str) -> dict[str, Any]:
        """`GET /repos/{repo}/compare/{base}...{head}`, never through the response cache: a comparison
        of two commits never changes and the caller stores its files at once, so its ETag would
        never be sent again, and keeping its body (tens of KB) cost a database write per head."""
        path = f"{_repository_path(repo)}/compare/{_sha(base)}...{_sha(head)}"
        return _object(self.get(path, {"per_page": PER_PAGE}, cached=False))

    # Issues. GitHub's "Issues" endpoints also answer with pull requests, marked by a `pull_request`
    # key (REST docs, "List repository issues"); callers that want issues only skip those.

    def issue(self, repo: str, number: int) -> dict[str, Any]:
        """`GET /repos/{repo}/issues/{number}`; a transferred issue is followed to its new place (301),
        a deleted one is a `RequestRefused` with 404 or 410."""
        return _object(self.get(f"{_repository_path(repo)}/issues/{_number(number)}"))

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
            yield from page

    def create_issue(self, repo: str, title: str, body: str) -> dict[str, Any]:
        """`POST /repos/{repo}/issues` (201). Sent once: see the module docstring."""
        return _object(self.post(f"{_repository_path(repo)}/issues", {"title": title, "body": body}))

    def update_issue(self, repo: str, number: int, fields: dict[str, Any]) -> dict[str, Any]:
        """`PATCH /repos/{repo}/issues/{number}` with the fields to change, in one request."""
        allowed = {"title", "body", "state", "state_reason"}
        if not fields or not set(fields) <= allowed:
            raise ValueError(f"issue fields must be some of {sorted(allowed)}: {sorted(fields)}")
        return _object(self.patch(f"{_repository_path(repo)}/issues/{_number(number)}", fields))

    # --- mechanics ------------------------------------------------------------------------------

    def pages(
        self, path: str, params: dict[str, Any] | None = None, *, max_pages: int = MAX_PAGES
    ) -> Iterator[list[dict[str, Any]]]:
        """Follow `Link: <...>; rel="next"`, never building page URLs by hand (GitHub's advice), for
        at most `max_pages` pages. Each page is a list of objects, as every listing GitHub documents."""
        page = self.get(path, params)
        for _ in range(max_pages - 1):
            yield _listing(page.data, path)
            if page.next_url is None:
                return
            page = self.get(page.next_url)
        yield _listing(page.data, path)
        if page.next_url is not None:
            raise LimitExceeded(
                f"GitHub's listing {path} goes on past {max_pages} pages, the page limit for it: stopped there"
            )

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
        answer: _Answer = self._retrying(self._send, request)
        response = answer.response
        if response.status_code == 304 and kept is not None:
            self.not_modified += 1
            return Page(json.loads(kept[2]), kept[1], from_cache=True)
        data = _json(answer)
        next_url = response.links.get("next", {}).get("url")
        etag = response.headers.get("etag")
        if etag and cache is not None:
            cache.put(key, etag, next_url, answer.body)
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
        answer: _Answer = self._retrying(self._send, request) if retry else self._send(request)
        return Page(_json(answer), None, from_cache=False)

    def _send(self, request: httpx.Request) -> _Answer:
        """One request and its answer, following redirects that stay on the API's origin."""
        deadline = time.monotonic() + self._deadline  # for the whole answer, redirects included
        for _ in range(MAX_REDIRECTS + 1):
            answer = self._exchange(request, deadline)
            if answer.response.next_request is None:
                return answer
            request = answer.response.next_request
        raise BadAnswer(f"GitHub redirected {request.url.path} more than {MAX_REDIRECTS} times")

    def _exchange(self, request: httpx.Request, deadline: float) -> _Answer:
        if _origin(request.url) != self._origin:  # checked before the token is added
            scheme, host, port = _origin(request.url)
            elsewhere = f"{scheme}://{host}" + (f":{port}" if port else "")
            raise BadAnswer(
                f"GitHub's answer pointed to {elsewhere}, another origin than the configured API "
                f"({self.base_url}): the tracker sends its requests to that origin only"
            )
        if self._auth is not None:
            bearer = self._auth()
            if bearer:
                request.headers["Authorization"] = f"Bearer {bearer}"
            else:
                request.headers.pop("Authorization", None)
        # Every connect, handshake, read and write below waits at most until the deadline (transport.py):
        # httpx's timeout bounds each read, so headers trickled a byte at a time would go on for hours.
        with request_deadline(deadline):
            try:
                response = self._http.send(request, stream=True)
            except httpx.TransportError as exc:  # timeouts, refused and reset connections
                metrics.github_answered(None)
                if time.monotonic() >= deadline:
                    raise self._too_slow(request) from exc
                raise Unavailable(f"GitHub did not answer {request.url}: {type(exc).__name__}") from exc
            try:
                # Counted once its headers are in: GitHub counts the request, whatever becomes of the body.
                self.requests += 1
                metrics.github_answered(response.status_code)
                state = _rate_limit(response.headers)
                if self._on_response is not None:
                    self._on_response(state, response.status_code == 304)
                body = self._read(response, deadline)
            except httpx.TransportError as exc:
                if time.monotonic() >= deadline:
                    raise self._too_slow(request) from exc
                raise Unavailable(f"GitHub did not finish its answer for {request.url}: {type(exc).__name__}") from exc
            finally:
                response.close()
        status = response.status_code
        if status in (403, 429):
            limited = _rate_limited(body, response.headers, state)
            if limited is not None:
                raise limited
        if status >= 500:
            raise Unavailable(f"GitHub answered {status} for {request.url}")
        if status >= 400:
            raise RequestRefused(status, str(request.url), _message(body))
        return _Answer(response, body)

    def _read(self, response: httpx.Response, deadline: float) -> bytes:
        """The body, within the size and time limits (checked as each chunk arrives: a read waits until
        the deadline at most, and a body already at hand would be read on past it). A redirect's body
        is not read."""
        if response.next_request is not None:
            return b""
        declared = response.headers.get("content-length", "")
        body = bytearray()
        if declared.isdigit() and int(declared) > self._max_bytes:
            raise self._too_large(response)
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > self._max_bytes:
                raise self._too_large(response)
            if time.monotonic() > deadline:
                break
        if time.monotonic() > deadline:
            raise self._too_slow(response.request)
        return bytes(body)

    def _too_slow(self, request: httpx.Request) -> LimitExceeded:
        return LimitExceeded(
            f"GitHub's answer for {request.url.path} took longer than {self._deadline:g} s, the time limit of an answer"
        )

    def _too_large(self, response: httpx.Response) -> LimitExceeded:
        return LimitExceeded(
            f"GitHub's answer for {response.request.url.path} is larger than {self._max_bytes} bytes, "
            "the size limit of an answer"
        )


def _rate_limited(body: bytes, headers: httpx.Headers, state: RateLimitState) -> RateLimited | None:
    retry_after = headers.get("retry-after")
    if retry_after is not None:
        try:
            return RateLimited(time.time() + max(0.0, float(retry_after)), "secondary")
        except ValueError:
            pass
    if state.remaining == 0 and state.reset is not None:
        return RateLimited(float(state.reset) + 1.0, "primary")
    if "rate limit" in _message(body).lower():
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


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("message", ""))[:300]
    except (ValueError, AttributeError, RecursionError):
        return body[:300].decode("utf-8", errors="replace")


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port (None for the scheme's default) of a URL."""
    return url.scheme, url.host, url.port


def _json(answer: _Answer) -> Any:
    """The answer's JSON document (None for an empty body)."""
    if not answer.body:
        return None
    try:
        return json.loads(answer.body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than the parser goes
        where = answer.response.request.url.path
        raise BadAnswer(f"GitHub's answer for {where} is not JSON ({type(exc).__name__}: {exc})"[:500]) from None


def _object(page: Page) -> dict[str, Any]:
    """The answer of an endpoint GitHub documents as one object."""
    if not isinstance(page.data, dict):
        raise BadAnswer(f"GitHub answered {_kind(page.data)} where its API documents an object")
    return page.data


def _listing(data: Any, path: str) -> list[dict[str, Any]]:
    """A page of a listing: a list of at most PER_PAGE objects (an empty body is an empty page)."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise BadAnswer(f"GitHub's listing {path} answered {_kind(data)} where its API documents a list of objects")
    odd = next((item for item in data if not isinstance(item, dict)), None)
    if odd is not None:
        raise BadAnswer(f"GitHub's listing {path} answered a list holding {_kind(odd)} where its API documents objects")
    if len(data) > PER_PAGE:  # GitHub's listings hold at most 100 items a page (`per_page`)
        raise LimitExceeded(
            f"GitHub's listing {path} answered {len(data)} items on one page, more than the {PER_PAGE} a page holds"
        )
    return data


_JSON_KINDS = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def _kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words."""
    return "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)


def typed(item: dict[str, Any], name: str, kind: type[T]) -> T | None:
    """`item[name]` when GitHub gave it as a `kind`, None when it is null or absent; BadAnswer when it
    is of another type (a boolean is no number here)."""
    value = item.get(name)
    if value is None:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise BadAnswer(f"GitHub's answer has {name!r} as {_kind(value)}, not {_JSON_KINDS.get(kind, kind.__name__)}")
    return value


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
