"""The GitHub client's HTTP transport: every network operation of a request ends by its deadline.

httpx's `timeout` bounds each connect, read and write, never a whole exchange: a server that sends its
status line and headers a byte at a time, each byte within the read timeout, holds the caller as long
as it likes (httpcore takes up to 100 KB of headers). `httpx.HTTPTransport` takes no network backend
(httpx discussion #3180), so this transport is httpcore's connection pool (or proxy) over a backend
whose streams give each operation the smaller of its own timeout and the time left before the
deadline the caller set with `request_deadline`. Both are public APIs: httpx's custom transports
(`httpx.BaseTransport`) and httpcore's network backends.

Given a transport, httpx no longer reads HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY, so
`proxy_mounts` reads them as httpx documents it does (its "Environment Variables" page) and routes
proxied origins to transports that keep the deadline too.
"""

from __future__ import annotations

import ipaddress
import ssl
import time
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.request import getproxies

import httpcore
import httpx

# httpx's default pool limits (httpx.HTTPTransport's): httpcore's own defaults differ.
_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)

# time.monotonic() by which the current request must be over; per thread (the process's connection
# pool is shared by every thread, and a pooled connection serves whichever request holds it).
_deadline: ContextVar[float | None] = ContextVar("github_request_deadline", default=None)


@contextmanager
def request_deadline(at: float) -> Iterator[None]:
    """Bound every connect, TLS handshake, read and write inside the block by `at` (time.monotonic())."""
    token = _deadline.set(at)
    try:
        yield
    finally:
        _deadline.reset(token)


def _bounded(timeout: float | None, late: type[httpcore.TimeoutException]) -> float | None:
    """The smaller of an operation's timeout and the time left; `late` once none is left (even with
    bytes at hand: a server sending a byte a millisecond would otherwise go on past the deadline)."""
    at = _deadline.get()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise late("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        try:
            bounded = _bounded(timeout, httpcore.ConnectTimeout)
        except httpcore.ConnectTimeout:
            self._stream.close()  # as httpcore's streams do when a handshake fails
            raise
        # The handshake as a whole is bounded by the timeout it gets (Python's ssl module).
        return _Stream(self._stream.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """TCP only (the pools get no `uds`); `sleep`, for connection retries, is the base class's."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _Stream(self._backend.connect_tcp(host, port, bounded, local_address, socket_options))


# httpcore's errors as httpx's (what httpx.HTTPTransport raises), the most specific first.
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
)


@contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for raised, meant in _ERRORS:
            if isinstance(exc, raised):
                raise meant(str(exc)) from exc
        raise


class _Body(httpx.SyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self._response.iter_stream()

    def close(self) -> None:
        self._response.close()


class DeadlineTransport(httpx.BaseTransport):
    """HTTP/1.1 to an origin, directly or through `proxy`, each operation bounded by `request_deadline`."""

    def __init__(self, ssl_context: ssl.SSLContext, proxy: httpx.Proxy | None = None) -> None:
        limits: dict[str, typing.Any] = {
            "max_connections": _LIMITS.max_connections,
            "max_keepalive_connections": _LIMITS.max_keepalive_connections,
            "keepalive_expiry": _LIMITS.keepalive_expiry,
            "network_backend": _Backend(),
        }
        self._pool: httpcore.ConnectionPool
        if proxy is None:
            self._pool = httpcore.ConnectionPool(ssl_context=ssl_context, **limits)
            return
        url = httpcore.URL(
            scheme=proxy.url.raw_scheme, host=proxy.url.raw_host, port=proxy.url.port, target=proxy.url.raw_path
        )
        if proxy.url.scheme in ("http", "https"):
            self._pool = httpcore.HTTPProxy(
                proxy_url=url,
                proxy_auth=proxy.raw_auth,
                proxy_headers=proxy.headers.raw,
                ssl_context=ssl_context,
                proxy_ssl_context=proxy.ssl_context,
                **limits,
            )
        else:  # socks5 and socks5h, the other schemes httpx.Proxy takes (needs the socksio package)
            self._pool = httpcore.SOCKSProxy(
                proxy_url=url, proxy_auth=proxy.raw_auth, ssl_context=ssl_context, **limits
            )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.SyncByteStream):
            raise TypeError("DeadlineTransport sends the requests of a synchronous httpx.Client only")
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            answer = self._pool.handle_request(sent)
        return httpx.Response(
            status_code=answer.status, headers=answer.headers, stream=_Body(answer), extensions=answer.extensions
        )

    def close(self) -> None:
        self._pool.close()


def proxy_mounts(ssl_context: ssl.SSLContext) -> dict[str, httpx.BaseTransport | None]:
    """httpx mounts for the proxies the environment names, as httpx reads them: HTTP_PROXY, HTTPS_PROXY
    and ALL_PROXY by scheme, NO_PROXY's hosts (None: the client's own transport) before them; a `*` in
    NO_PROXY turns every proxy off."""
    settings = getproxies()
    mounts: dict[str, httpx.BaseTransport | None] = {}
    for scheme in ("http", "https", "all"):
        if settings.get(scheme):
            url = settings[scheme] if "://" in settings[scheme] else f"http://{settings[scheme]}"
            mounts[f"{scheme}://"] = DeadlineTransport(ssl_context, httpx.Proxy(url))
    for host in (entry.strip() for entry in settings.get("no", "").split(",")):
        if host == "*":
            return {}
        if host:
            mounts[_no_proxy_pattern(host)] = None
    return mounts


def _no_proxy_pattern(host: str) -> str:
    """The URL pattern of a NO_PROXY entry (curl's rules, as httpx applies them): `example.com` is that
    domain and its subdomains, `.example.com` the subdomains only."""
    if "://" in host:
        return host
    try:
        address = ipaddress.ip_address(host.split("/")[0])
    except ValueError:
        return f"all://{host}" if host.lower() == "localhost" else f"all://*{host}"
    return f"all://[{host}]" if address.version == 6 else f"all://{host}"
