"""The production web server of `tracker web` and `tracker run`: gunicorn's master, waitress in each worker.

Slow clients must not be able to stop the webhook: GitHub gives a delivery 10 seconds and does not
retry by itself ("Best practices for using webhooks"). gunicorn's sync worker reads a request in the
worker process itself, so two sockets sending a body one byte every 5 s held both workers (issue 8);
its gthread worker gives each connection a pool thread while it reads the headers, with no deadline,
so a few more sockets than threads do the same.

Here each worker process runs one waitress event loop on the master's listening socket. The loop
reads every connection's request, headers and body, as its bytes come, and runs the app on a request
only once all of it has arrived, in the loop's own thread (no thread switches: as cheap as a sync
worker, bench/README.md), so a slow socket costs a file descriptor and a buffer, never the worker. A
request that has not fully arrived `RECEIVE_SECONDS` after its first byte, or a connection silent that
long, is dropped without an answer: GitHub has given up on it by then. gunicorn keeps the rest:
forking, one app per process built after the fork, restarting a worker that dies or that stays
silent for `timeout` (a request stuck in the app, as a sync worker was), graceful stop on SIGTERM,
logs to stderr, no control socket.

Each connection carries one request, as with sync workers, so that each new one goes to whichever
process accepts it first (kept-alive connections pinned to one process halved throughput with gthread
in a measurement on a 2-core machine). Per process at most `CONNECTIONS` are open at once; an attacker
with more sockets than that is for the TLS reverse proxy in front (README) to limit.

Every request answered is one line of the access log (`access_log`, logger `tracker.access`): method,
path (secret-looking query values redacted), status, GitHub's delivery id when the request has one,
and the duration in ms; never a signature, a token or a body. gunicorn's own lines share the format
of every other process (tracker.logs); with TRACKER_LOG_FORMAT=json the access log's line carries
these as fields, and every line logged while a request runs carries its delivery id.
"""

from __future__ import annotations

import logging
import os
import re
import resource
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger as GunicornLogger
from gunicorn.workers.base import Worker
from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import WSGITask

from tracker import logs, metrics
from tracker.settings import Settings
from tracker.web.app import create_app
from tracker.web.context import MAX_BODY_BYTES, REPOSITORY_ENVIRON, installed

# GitHub counts a delivery as failed when it has not been answered within 10 seconds, so a request
# still arriving after that is either broken or hostile.
RECEIVE_SECONDS = 10
# How long a graceful stop still waits for requests that are arriving.
STOP_RECEIVE_SECONDS = 1.0
# Open connections per process (slow ones included) before it stops accepting; each needs up to two
# file descriptors (its socket, and a temporary file once its body passes `BODY_IN_MEMORY`).
CONNECTIONS = 1000
BODY_IN_MEMORY = 128 * 1024  # a typical delivery is 25 KB
# Room over GitHub's 25 MB cap for chunked framing, which waitress counts as body.
CHUNK_FRAMING_BYTES = 1024 * 1024
# GitHub sends a few hundred bytes of headers.
MAX_HEADER_BYTES = 64 * 1024
NEVER = 2**62

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


class ClosingTask(WSGITask):  # type: ignore[misc]
    """Answers with `Connection: close` (one request per connection, see the module's docstring)."""

    def build_response_header(self) -> bytes:
        self.set_close_on_finish()
        header: bytes = super().build_response_header()
        return header


class DeadlineChannel(HTTPChannel):  # type: ignore[misc]
    """A connection that knows since when its current request has been arriving."""

    task_class = ClosingTask

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.receiving_since: float | None = None
        super().__init__(*args, **kwargs)

    def received(self, data: bytes) -> bool:
        before = self.request
        result: bool = super().received(data)
        if self.request is None:
            self.receiving_since = None  # every byte so far belongs to complete requests
        elif self.request is not before or self.receiving_since is None:
            self.receiving_since = time.monotonic()  # a new request began in this data
        return result

    def overdue(self, cutoff: float) -> bool:
        return self.receiving_since is not None and self.receiving_since < cutoff

    def worth_waiting_for(self, stopping_since: float) -> bool:
        """What a graceful stop waits for: a request running or being answered, or one still arriving
        within STOP_RECEIVE_SECONDS of the stop (a real delivery arrives in milliseconds)."""
        if self.requests or self.total_outbufs_len:
            return True
        return self.request is not None and time.monotonic() - stopping_since < STOP_RECEIVE_SECONDS


class DeadlineServer(TcpWSGIServer):  # type: ignore[misc]
    channel_class = DeadlineChannel

    def maintenance(self, now: float) -> None:
        super().maintenance(now)  # silent connections: channel_timeout
        cutoff = time.monotonic() - RECEIVE_SECONDS
        for channel in list(self.active_channels.values()):
            if channel.overdue(cutoff):
                channel.will_close = True  # the loop closes it without an answer


class Requests:
    """waitress's task dispatcher, without threads: the loop queues each request once it has fully
    arrived, and `serve` runs them in the loop's thread after each poll, as a sync worker would."""

    def __init__(self) -> None:
        self.queued: deque[Any] = deque()

    def add_task(self, channel: Any) -> None:
        self.queued.append(channel)

    def serve(self) -> None:
        while self.queued:
            self.queued.popleft().service()

    def shutdown(self, cancel_pending: bool = True, timeout: float = 0) -> bool:
        while cancel_pending and self.queued:
            self.queued.popleft().cancel()
        return True


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
    path = quote(environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""), safe="/:@!$&'()*+,;=-._~")
    query = environ.get("QUERY_STRING", "")
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        path += "?" + urlencode([(k, "redacted" if _SECRET_PARAMETER.search(k) else v) for k, v in pairs])
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


def _delivery_id(environ: dict[str, Any]) -> str | None:
    """GitHub's delivery id of a request, when it has a well-formed one."""
    delivery = environ.get("HTTP_X_GITHUB_DELIVERY")
    return delivery if delivery is not None and _DELIVERY_ID.fullmatch(delivery) else None


def plain_input(app: WSGIApp) -> WSGIApp:
    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ["wsgi.input"] = Body(environ["wsgi.input"])
        return app(environ, start_response)

    return wrapped


class Body:
    """`wsgi.input` with exactly the methods PEP 3333 gives it. waitress passes the buffered body as a
    file with `readinto` too, and then Werkzeug's capped stream answers the webhook's
    `read(cap + 1)` by zero-filling a fresh buffer the size of the cap (25 MB) for every delivery."""

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


class BufferingWorker(Worker):  # type: ignore[misc]
    """A gunicorn worker serving its app with waitress, in one thread (see the module's docstring)."""

    def run(self) -> None:
        channels: dict[int, Any] = {}
        requests = Requests()
        adjustments = Adjustments(
            backlog=self.cfg.backlog,
            connection_limit=_connection_limit(),
            channel_timeout=RECEIVE_SECONDS,
            cleanup_interval=1,
            max_request_header_size=MAX_HEADER_BYTES,
            # The app refuses a body over GitHub's 25 MB cap (413); waitress refuses, before buffering
            # it, one that is larger still. It counts chunked framing, hence the room.
            max_request_body_size=MAX_BODY_BYTES + CHUNK_FRAMING_BYTES,
            inbuf_overflow=BODY_IN_MEMORY,
            # An answer is written from this thread, which must never wait for itself to send it.
            outbuf_high_watermark=NEVER,
            asyncore_use_poll=True,  # select() cannot watch descriptors past 1024
            log_socket_errors=False,  # a client that resets its connection is no error of ours
            # As gunicorn did: trust X-Forwarded-Proto from a proxy on this machine, and nothing else.
            trusted_proxy="127.0.0.1",
            trusted_proxy_headers={"x-forwarded-proto"},
        )
        _log_waitress_like(self.log)
        app = access_log(plain_input(self.wsgi))
        listeners = [
            DeadlineServer(
                app,
                channels,
                _sock=listener.sock,
                dispatcher=requests,
                adj=adjustments,
                bind_socket=False,
                sockinfo=(listener.sock.family, listener.sock.type, listener.sock.proto, listener.sock.getsockname()),
            )
            for listener in self.sockets
        ]
        try:
            notified = 0.0
            while self.alive:
                wasyncore.loop(timeout=1.0, map=channels, use_poll=True, count=1)
                requests.serve()
                if time.monotonic() - notified >= 1.0:
                    self.notify()  # the master restarts a worker silent for `timeout`: a stuck request
                    notified = time.monotonic()
                if self.ppid != os.getppid():
                    self.log.info("parent changed, shutting down: %s", self)
                    break
            for listener in listeners:
                listener.close()  # stop accepting; the other workers and the master keep the socket
            self._drain(channels, requests)
        finally:
            wasyncore.close_all(channels)
            built = installed(self.wsgi)
            if built is not None:
                built.drain_asker.stop()  # the ask a last request wanted, now rather than at the sweep

    def _drain(self, channels: dict[int, Any], requests: Requests) -> None:
        """Finish the requests running or about to, within the graceful timeout; close the rest."""
        stopping_since = time.monotonic()
        until = stopping_since + max(0.0, self.cfg.graceful_timeout - 1.0)
        while time.monotonic() < until:
            busy = False
            for channel in list(channels.values()):
                if isinstance(channel, DeadlineChannel):
                    if channel.worth_waiting_for(stopping_since):
                        busy = True
                    else:
                        channel.will_close = True
            wasyncore.loop(timeout=0.2 if busy else 0.0, map=channels, use_poll=True, count=1)
            requests.serve()
            if not busy:
                return
            self.notify()


def _connection_limit() -> int:
    """`CONNECTIONS`, or fewer if the file descriptor limit cannot be raised to hold them."""
    wanted = 2 * CONNECTIONS + 100  # each connection's socket and spilled body, plus the app's own
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft == resource.RLIM_INFINITY:
        return CONNECTIONS
    return max(16, min(CONNECTIONS, (soft - 100) // 2))


def _log_waitress_like(log: Any) -> None:
    """waitress's warnings (the connection limit reached, an app error) to gunicorn's error log."""
    waitress = logging.getLogger("waitress")
    waitress.handlers = list(log.error_log.handlers)
    waitress.setLevel(logging.WARNING)
    waitress.propagate = False
    # "Task queue depth is N" each time a request waits for a thread: routine under load.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
