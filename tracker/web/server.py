"""The production web server of `tracker web` and `tracker run`: gunicorn's master, Tornado in each worker.

Slow clients must not stop the webhook: GitHub gives a delivery 10 seconds and does not retry by
itself. Each worker process runs one Tornado HTTP server (`tornado.httpserver.HTTPServer`, public API)
on the master's listening sockets. Its event loop reads every connection's request, headers and body,
as the bytes come, and runs the WSGI app (`tornado.wsgi.WSGIContainer`) on a request only once all of
it has arrived, in the loop's own thread: a slow socket costs a file descriptor and a buffer, never
the worker. A connection whose request has not fully arrived `RECEIVE_SECONDS` after it opened (silent,
or trickling its headers or its body) is closed without an answer: GitHub has given up on it by then.
These are Tornado's documented header and body timeouts, the body's set per request
(`HTTP1Connection.set_body_timeout`) to what is left of the connection's time.

gunicorn keeps the rest: forking, one app per process built after the fork, restarting a worker that
dies or whose heartbeat stops for `timeout` (a request stuck in the app), graceful stop on SIGTERM,
logs to stderr, no control socket. Each connection carries one request (no keep-alive), so each new
one goes to whichever process accepts it first; a process holds at most `CONNECTIONS` open and stops
accepting meanwhile (an attacker with more sockets is for the TLS reverse proxy in front to limit).

Every request answered is one line of the access log (`access_log`, logger `tracker.access`): method,
path (secret-looking query values redacted), status, GitHub's delivery id when the request has one,
and the duration in ms; never a signature, a token or a body. gunicorn's own lines share the format
of every other process (tracker.logs); with TRACKER_LOG_FORMAT=json the access log's line carries
these as fields, and every line logged while a request runs carries its delivery id.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger as GunicornLogger
from gunicorn.workers.base import Worker
from tornado.http1connection import HTTP1Connection
from tornado.httpserver import HTTPServer
from tornado.httputil import (
    HTTPConnection,
    HTTPHeaders,
    HTTPMessageDelegate,
    HTTPServerRequest,
    RequestStartLine,
    ResponseStartLine,
)
from tornado.iostream import IOStream
from tornado.netutil import add_accept_handler
from tornado.wsgi import WSGIContainer

from tracker import logs, metrics
from tracker.settings import Settings
from tracker.web.app import create_app
from tracker.web.context import MAX_BODY_BYTES, REPOSITORY_ENVIRON, installed

# GitHub counts a delivery as failed when it has not been answered within 10 seconds, so a request
# still arriving after that is either broken or hostile.
RECEIVE_SECONDS = 10
# How long a graceful stop still waits for requests that are arriving.
STOP_RECEIVE_SECONDS = 1.0
# Open connections per process (slow ones included) before it stops accepting.
CONNECTIONS = 1000
# Room over GitHub's 25 MB cap, so that the app's own 413 answers a body a little over it; Tornado
# refuses a larger one (400) before buffering it.
BODY_ROOM_BYTES = 1024 * 1024
# GitHub sends a few hundred bytes of headers.
MAX_HEADER_BYTES = 64 * 1024
# As gunicorn did: X-Forwarded-Proto is trusted from a proxy on this machine, and from nothing else.
TRUSTED_PROXY = "127.0.0.1"
HEARTBEAT_SECONDS = 0.2

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class WebServer(BaseApplication):  # type: ignore[misc]
    def __init__(self, settings: Settings, host: str, port: int, processes: int) -> None:
        self.settings = settings
        self.options = {
            "bind": f"{host}:{port}",
            "workers": processes,
            "worker_class": BufferingWorker,
            # A request running longer than this stops the worker's heartbeat: the master restarts it.
            "timeout": 30,
            "graceful_timeout": RECEIVE_SECONDS,
            "accesslog": None,  # the app's own access log (`access_log`) has the delivery id and no secrets
            "errorlog": "-",
            "loglevel": "debug" if logs.verbose() else "info",
            "logger_class": OneFormatLogger,
            # Several servers can run on one machine (tests, benchmarks): no shared control socket.
            "control_socket_disable": True,
            "child_exit": metrics.child_exit,  # prometheus-client's multiprocess bookkeeping
        }
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        # Called in each worker after the fork: every process opens its own database and Redis pools.
        return self.serving(create_app(self.settings))

    @staticmethod
    def serving(app: Any) -> Any:
        """`app`, made ready to serve in this worker process (a benchmark's app too, as `tracker web`'s)."""
        logs.configure()  # the levels of -v (or TRACKER_VERBOSE) again, over what the app set
        built = installed(app)
        if built is not None:
            built.drain_asker.start()  # requests ask for drains without waiting for Redis
        return app


class OneFormatLogger(GunicornLogger):  # type: ignore[misc]
    """gunicorn's error log in the format of every other process (tracker.logs.FORMAT, or JSON)."""

    error_fmt = logs.FORMAT
    datefmt = None

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(logs.formatter())
            handler.addFilter(logs.with_context)


class BufferingWorker(Worker):  # type: ignore[misc]
    """A gunicorn worker serving its app with Tornado's HTTP server, in one thread (see the module's docstring)."""

    def run(self) -> None:
        _log_tornado_like(self.log)
        try:
            asyncio.run(self._serve())
        finally:
            built = installed(self.wsgi)
            if built is not None:
                built.drain_asker.stop()  # the ask a last request wanted, now rather than at the sweep

    async def _serve(self) -> None:
        server = Server(
            Answering(answered(access_log(plain_input(self.wsgi)), self.log)),
            no_keep_alive=True,
            idle_connection_timeout=RECEIVE_SECONDS,  # Tornado's time for a request's headers
            body_timeout=RECEIVE_SECONDS,  # and for its body, cut per request to what is left
            max_header_size=MAX_HEADER_BYTES,
            max_body_size=MAX_BODY_BYTES + BODY_ROOM_BYTES,
        )
        server.connections = Connections(server, self.sockets, _connection_limit())
        server.connections.accept()
        while self.alive:
            self.notify()  # the master restarts a worker silent for `timeout`: a request stuck in the app
            if self.ppid != os.getppid():
                self.log.info("parent changed, shutting down: %s", self)
                break
            await asyncio.sleep(HEARTBEAT_SECONDS)
        server.connections.stop_accepting()  # the other workers and the master keep the sockets
        await self._drain(server.connections)

    async def _drain(self, connections: Connections) -> None:
        """Finish the requests being answered, and wait a little for those arriving, within the graceful
        timeout; the connections still open when the process exits are closed without an answer."""
        stopping_since = time.monotonic()
        until = stopping_since + max(0.0, self.cfg.graceful_timeout - 1.0)
        while time.monotonic() < until and connections.worth_waiting_for(time.monotonic() - stopping_since):
            self.notify()
            await asyncio.sleep(0.05)


class Server(HTTPServer):
    """Tornado's HTTP server, telling `connections` when a connection opens, when its request has fully
    arrived and when it closes (the documented hooks of `HTTPServerConnectionDelegate` and `TCPServer`)."""

    connections: Connections

    def handle_stream(self, stream: IOStream, address: tuple[Any, ...]) -> None:
        self.connections.opened()
        super().handle_stream(stream, address)

    def start_request(self, server_conn: object, request_conn: HTTPConnection) -> HTTPMessageDelegate:
        delegate = super().start_request(server_conn, request_conn)
        return Arrival(delegate, request_conn, lambda: self.connections.arrived(server_conn))

    def on_close(self, server_conn: object) -> None:
        super().on_close(server_conn)
        self.connections.closed(server_conn)


class Arrival(HTTPMessageDelegate):
    """One request as it arrives: its body must be in by `RECEIVE_SECONDS` after the request began."""

    def __init__(self, delegate: HTTPMessageDelegate, request_conn: HTTPConnection, arrived: Callable[[], None]):
        self.delegate = delegate
        self.request_conn = request_conn
        self.arrived = arrived
        self.deadline = time.monotonic() + RECEIVE_SECONDS

    def headers_received(
        self, start_line: RequestStartLine | ResponseStartLine, headers: HTTPHeaders
    ) -> Awaitable[None] | None:
        if isinstance(self.request_conn, HTTP1Connection):
            self.request_conn.set_body_timeout(max(0.001, self.deadline - time.monotonic()))
        return self.delegate.headers_received(start_line, headers)

    def data_received(self, chunk: bytes) -> Awaitable[None] | None:
        return self.delegate.data_received(chunk)

    def finish(self) -> None:
        self.arrived()
        self.delegate.finish()

    def on_connection_close(self) -> None:
        self.delegate.on_connection_close()


class Connections:
    """A process's open connections: it accepts new ones only while fewer than `limit` are open."""

    def __init__(self, server: Server, listeners: list[Any], limit: int) -> None:
        self.server = server
        self.listeners = listeners
        self.limit = limit
        self.open = 0
        self.answering: set[int] = set()  # connections whose request has fully arrived
        self._stop_accepting: list[Callable[[], None]] = []
        self.stopped = False

    def accept(self) -> None:
        if self._stop_accepting or self.stopped:
            return
        for listener in self.listeners:
            listener.setblocking(False)
            self._stop_accepting.append(add_accept_handler(listener, self._accepted))

    def stop_accepting(self, for_good: bool = True) -> None:
        self.stopped = self.stopped or for_good
        for remove in self._stop_accepting:
            remove()
        self._stop_accepting = []

    def _accepted(self, connection: Any, address: Any) -> None:
        self.server.handle_stream(IOStream(connection), address)

    def opened(self) -> None:
        self.open += 1
        if self.open >= self.limit:
            self.stop_accepting(for_good=False)

    def arrived(self, server_conn: object) -> None:
        self.answering.add(id(server_conn))

    def closed(self, server_conn: object) -> None:
        self.open -= 1
        self.answering.discard(id(server_conn))
        if self.open < self.limit:
            self.accept()

    def worth_waiting_for(self, stopping_for: float) -> bool:
        """What a graceful stop waits for: a request being answered, or one still arriving within
        STOP_RECEIVE_SECONDS of the stop (a real delivery arrives in milliseconds)."""
        return bool(self.answering) or (self.open > 0 and stopping_for < STOP_RECEIVE_SECONDS)


class Answering:
    """Tornado's request callback: the WSGI app run on a request that has fully arrived, at once, in the
    loop's thread, and its answer written (`tornado.wsgi.WSGIContainer` does the same through an
    executor, which costs three thread-safe wake-ups of the loop per request: a third of a trivial
    request's CPU). The environ is WSGIContainer's."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.container = WSGIContainer(app)

    def __call__(self, request: HTTPServerRequest) -> None:
        started: list[tuple[str, list[tuple[str, str]]]] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started.append((status, headers))
            return chunks.append

        chunks: list[bytes] = []
        chunks.extend(self.app(self.container.environ(request), start_response))  # `answered`: never raises
        status, headers = started[-1] if started else ("500 Internal Server Error", [])
        code, _, reason = status.partition(" ")
        answer = HTTPHeaders()
        for name, value in headers:
            answer.add(name, value)
        body = b"".join(chunks)
        if "Content-Length" not in answer and code not in ("204", "304"):
            answer["Content-Length"] = str(len(body))
        assert request.connection is not None
        request.connection.write_headers(ResponseStartLine("HTTP/1.1", int(code), reason), answer, chunk=body)
        request.connection.finish()


def answered(app: WSGIApp, log: Any) -> WSGIApp:
    """`app`, its answer read whole (Tornado writes it in one piece), and a 500 when it fails: Tornado
    would otherwise leave the connection open without an answer."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            answer = app(environ, start_response)
            try:
                return list(answer)
            finally:
                close = getattr(answer, "close", None)
                if close is not None:
                    close()
        except Exception:
            log.exception("Error handling %s %s", quote(environ.get("REQUEST_METHOD", "-"), safe=""), _path(environ))
            body = b"Internal Server Error\n"
            headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
            start_response("500 Internal Server Error", headers, sys.exc_info())
            return [body]

    return wrapped


access = logging.getLogger("tracker.access")

# Query parameters whose values are never logged (a signed report link carries `token=`).
_SECRET_PARAMETER = re.compile(r"token|secret|key|sig|pass|auth|code", re.IGNORECASE)
_DELIVERY_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")


def access_log(app: WSGIApp) -> WSGIApp:
    """One INFO line per request, once its answer is sent: `POST /webhook 202 3 ms delivery=<id>`."""

    def logged(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.monotonic()
        status = ["-"]

        def recording_start_response(status_line: str, headers: Any, exc_info: Any = None) -> Any:
            status[0] = status_line.split(" ", 1)[0]
            return start_response(status_line, headers, exc_info)

        def done() -> None:
            _log_request(environ, status[0], time.monotonic() - started)

        try:
            with logs.context(delivery_id=_delivery_id(environ)):  # on every line the request logs
                answer = app(environ, recording_start_response)
        except BaseException:
            status[0] = "500"
            done()
            raise
        return _Logged(answer, done)

    return logged


class _Logged:
    """The app's answer; `close` (which the server calls once it is sent) also logs the request."""

    def __init__(self, answer: Iterable[bytes], done: Callable[[], None]) -> None:
        self._answer = answer
        self._done = done

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._answer)

    def close(self) -> None:
        try:
            close = getattr(self._answer, "close", None)
            if close is not None:
                close()
        finally:
            self._done()


def _log_request(environ: dict[str, Any], status: str, seconds: float) -> None:
    path = _path(environ)
    delivery = _delivery_id(environ)
    said = "" if "HTTP_X_GITHUB_DELIVERY" not in environ else f" delivery={delivery or '(malformed)'}"
    method = quote(environ.get("REQUEST_METHOD", "-"), safe="")
    request = {
        "method": method,
        "path": path,
        "status": int(status) if status.isdigit() else None,
        "duration_ms": round(seconds * 1000, 1),
        "delivery_id": delivery,
        "repository": environ.get(REPOSITORY_ENVIRON),  # set by the webhook once the body is read
    }  # the fields of a JSON line (tracker.logs)
    access.info("%s %s %s %.0f ms%s", method, path, status, seconds * 1000, said, extra=request)


def _path(environ: dict[str, Any]) -> str:
    """The request's path and query, secret-looking query values redacted."""
    path = quote(environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""), safe="/:@!$&'()*+,;=-._~")
    query = environ.get("QUERY_STRING", "")
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        path += "?" + urlencode([(k, "redacted" if _SECRET_PARAMETER.search(k) else v) for k, v in pairs])
    return path


def _delivery_id(environ: dict[str, Any]) -> str | None:
    """GitHub's delivery id of a request, when it has a well-formed one."""
    delivery = environ.get("HTTP_X_GITHUB_DELIVERY")
    return delivery if delivery is not None and _DELIVERY_ID.fullmatch(delivery) else None


def plain_input(app: WSGIApp) -> WSGIApp:
    """The environ as the app expects it: the body, which has fully arrived, read to its end whatever its
    framing (chunked has no Content-Length), and the scheme a proxy on this machine says it was asked in."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ["wsgi.input"] = Body(environ["wsgi.input"])
        environ["wsgi.input_terminated"] = True
        if environ.get("REMOTE_ADDR") == TRUSTED_PROXY:
            scheme = environ.get("HTTP_X_FORWARDED_PROTO", "").lower()
            if scheme in ("http", "https"):
                environ["wsgi.url_scheme"] = scheme
        return app(environ, start_response)

    return wrapped


class Body:
    """`wsgi.input` with exactly the methods PEP 3333 gives it. Given the buffered body as a file with
    `readinto` too, Werkzeug's capped stream answers the webhook's `read(cap + 1)` by zero-filling a
    fresh buffer the size of the cap (25 MB) for every delivery."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def read(self, size: int | None = -1) -> bytes:
        data: bytes = self._stream.read(size)
        return data

    def readline(self, size: int | None = -1) -> bytes:
        line: bytes = self._stream.readline(size)
        return line

    def readlines(self, hint: int = -1) -> list[bytes]:
        lines: list[bytes] = self._stream.readlines(hint)
        return lines

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._stream)


def _connection_limit() -> int:
    """`CONNECTIONS`, or fewer if the file descriptor limit cannot be raised to hold them."""
    wanted = CONNECTIONS + 100  # each connection's socket, plus the app's own
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft == resource.RLIM_INFINITY:
        return CONNECTIONS
    return max(16, min(CONNECTIONS, soft - 100))


def _log_tornado_like(log: Any) -> None:
    """Tornado's warnings (a malformed request, an error in the loop) to gunicorn's error log; never its
    own access log, which would print query strings unredacted."""
    for name in ("tornado.application", "tornado.general"):
        logger = logging.getLogger(name)
        logger.handlers = list(log.error_log.handlers)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    logging.getLogger("tornado.access").disabled = True
