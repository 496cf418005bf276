"""One logging set-up for every process: the CLI, `tracker run` and its children, gunicorn's and
the web processes, the RQ workers.

Every line has one format, `FORMAT`, on stderr. `-v` (`tracker -v …`) logs debug messages; `tracker
run` hands it on to its children in the environment (`TRACKER_VERBOSE=1`, read here), so a verbose
`tracker run` has verbose web processes and workers. Without it, the libraries' routine chatter
stays out: RQ's per-job lines ("Job OK", "result is kept …", "started with PID …", "cleaning
registries …") and httpx's per-request lines show only with `-v`; their warnings and errors always.

Nothing logged here carries a secret or a request body: the web access log (tracker.web.server)
writes the method, the path with secret-looking query values redacted, the status, GitHub's
delivery id and the duration; GitHub errors are logged with their reason, never the token. As a last
guard every line has the values of the secret settings (the webhook secret, the tokens, the link
secret, the App's key, the model's API key; 6 characters or more) and the password of any URL
replaced by `***`.

`TRACKER_LOG_FORMAT=json` (the setting `log_format`) makes every line one JSON object, for a log
collector: `time` (ISO 8601, UTC), `level`, `logger`, `message`, then what is known of the line's
context: `delivery_id` (GitHub's X-GitHub-Delivery), `repository`, `job_id` (RQ), and, on the access
log's lines, `method`, `path`, `status` and `duration_ms`; `exc_info` holds a traceback. Only these
fields: whatever else a library attaches to a record stays out. The context comes from `extra=` or
from `context(...)`, which tags every line logged inside it (the access log tags a request's lines
with its delivery id, a worker a job's lines with the job's id). `tracker run` hands the format on to
its children in the setting's own variable, so they all log alike.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter
from redis.exceptions import ConnectionError as RedisConnectionError

from tracker.settings import Settings, SettingsError, load_settings

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The variable `tracker run` sets for its children when it runs with -v (not a setting: it says how
# much to log, nothing about what to do).
VERBOSE_VARIABLE = "TRACKER_VERBOSE"
# The setting's own variable (Settings.log_format), which `tracker run` sets for its children.
FORMAT_VARIABLE = "TRACKER_LOG_FORMAT"
TEXT, JSON = "text", "json"
# What a JSON line may carry besides time, level, logger and message: a line's context, and the
# access log's request.
CONTEXT_FIELDS = ("delivery_id", "repository", "job_id")
REQUEST_FIELDS = ("method", "path", "status", "duration_ms")

# Libraries whose INFO lines are routine, per job or per request: WARNING and above unless -v.
_CHATTY = ("rq", "httpx")
# Libraries too detailed even for -v (every socket read).
_QUIET = ("httpcore", "hpack")

# Secret values this long or longer are starred in every line (see `_read`).
_SHORTEST_SECRET = 6

_verbose = False
# The format and the secrets to keep out of every line, read from the settings at the first
# `configure` of the process (a forked web process keeps its parent's).
_format: str | None = None
_secrets: tuple[str, ...] = ()
# The context of the lines being logged: (field, value) pairs, innermost last.
_context: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("tracker_log_context", default=())


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a line is logged (a test runner may swap it)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def configure(verbose: bool | None = None, settings: Settings | None = None) -> bool:
    """Log to stderr in `FORMAT` (or JSON, `log_format`), at DEBUG when `verbose` (or TRACKER_VERBOSE
    is set, or an earlier call in this process was verbose and `verbose` is None), else at INFO. The
    format and the secrets come from `settings`, else from an earlier call, else from the settings
    read now (plain text while they cannot be read: the command says what is wrong with them when it
    reads them itself). Safe to call again (a forked web process does, after its app set its own
    levels). Returns whether it is verbose."""
    global _verbose
    if verbose is None:
        verbose = _verbose
    _verbose = bool(verbose) or _from_environment()
    if settings is not None or _format is None:
        _read(settings)
    level = logging.DEBUG if _verbose else logging.INFO
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _Stderr):
            root.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(formatter())
    handler.addFilter(with_context)
    handler.addFilter(redis_loss_in_one_line)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("tracker", "workers"):
        logging.getLogger(name).setLevel(level)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(logging.DEBUG if _verbose else logging.WARNING)
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    return _verbose


def verbose() -> bool:
    """Whether this process logs debug messages (-v, or TRACKER_VERBOSE from `tracker run`)."""
    return _verbose or _from_environment()


def rq_level() -> str:
    """The level for RQ's own loggers (its `logging_level` option): its per-job lines only with -v."""
    return "DEBUG" if verbose() else "WARNING"


def log_format() -> str:
    """How this process logs: `text` or `json`."""
    if _format is None:
        _read(None)
    assert _format is not None
    return _format


def child_environment() -> dict[str, str]:
    """What a child process needs in its environment to log as this one does."""
    environment = {FORMAT_VARIABLE: log_format()}
    if verbose():
        environment[VERBOSE_VARIABLE] = "1"
    return environment


def _read(settings: Settings | None) -> None:
    global _format, _secrets
    if settings is None:
        try:
            settings = load_settings()
        except SettingsError:
            _format, _secrets = TEXT, ()
            return
    _format = settings.log_format
    values = (
        settings.webhook_secret,
        settings.admin_token,
        settings.link_secret,
        settings.metrics_token,
        settings.github_token,
        settings.github_app_private_key,
        settings.llm_api_key,
    )
    # A value shorter than that would be starred wherever its letters occur, unreadably.
    kept = (value.get_secret_value() for value in values if value is not None)
    _secrets = tuple(secret for secret in kept if len(secret) >= _SHORTEST_SECRET)


def formatter() -> logging.Formatter:
    """The formatter of every line this process logs (gunicorn's error log uses it too)."""
    return JsonLines() if log_format() == JSON else TextLines(FORMAT)


@contextmanager
def context(**fields: str | None) -> Iterator[None]:
    """Within the block, every line logged in this thread (or task) carries `fields` (those not None),
    one of CONTEXT_FIELDS each, unless the line sets the field itself (`extra=`)."""
    unknown = fields.keys() - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"not a context field of the log: {', '.join(sorted(unknown))}")
    token = _context.set((*_context.get(), *((k, v) for k, v in fields.items() if v is not None)))
    try:
        yield
    finally:
        _context.reset(token)


def with_context(record: logging.LogRecord) -> bool:
    """A handler's filter: the fields of the enclosing `context` blocks onto the record."""
    for field, value in dict(_context.get()).items():
        if field not in record.__dict__:
            setattr(record, field, value)
    return True


def redis_loss_in_one_line(record: logging.LogRecord) -> bool:
    """A handler's filter: a lost Redis connection logged with its traceback (RQ's worker does, when
    Redis goes away in the middle of a job) becomes one line with the reason. Losing Redis is an
    operational event that the worker's loop reports and waits out (workers.runtime); when systemd
    stops the service it sends SIGTERM to every process at once, the embedded Redis among them, and
    the traceback was noise in a JSON log."""
    failure = record.exc_info[1] if record.exc_info else None
    if isinstance(failure, RedisConnectionError):
        record.msg, record.args = f"{record.getMessage()} (Redis went away: {failure})", None
        record.exc_info, record.exc_text = None, None
    return True


# `scheme://user:password@host`: the password of a URL (a database's, Redis's) in a message.
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)[^\s/@]+@")


def _scrubbed(text: str) -> str:
    return _URL_PASSWORD.sub(r"\1***@", redact(text, _secrets))


class TextLines(logging.Formatter):
    """`FORMAT`, with secrets scrubbed from the whole line (a traceback included)."""

    def format(self, record: logging.LogRecord) -> str:
        return _scrubbed(super().format(record))


class JsonLines(JsonFormatter):
    """One JSON object per line: time (ISO 8601, UTC, milliseconds), level, logger, message, then the
    context and request fields the line has, then `exc_info` (a traceback) or `stack_info`. Nothing
    else a record carries is written, so no header or body some library attached can reach the log."""

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        moment = datetime.fromtimestamp(record.created, UTC)
        log_data["time"] = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        log_data["level"] = record.levelname
        log_data["logger"] = record.name
        log_data["message"] = _scrubbed(record.message)
        for field in (*CONTEXT_FIELDS, *REQUEST_FIELDS):
            value = record.__dict__.get(field)
            if value is not None:
                log_data[field] = _scrubbed(value) if isinstance(value, str) else value
        for field in ("exc_info", "stack_info"):
            if message_dict.get(field):
                log_data[field] = _scrubbed(str(message_dict[field]))


def _from_environment() -> bool:
    return os.environ.get(VERBOSE_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every occurrence of each (non-empty) secret replaced by `***`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def one_line(text: str) -> str:
    """A message as one line: line breaks become `; `, and pydantic's "For further information"
    links are dropped (YAML and validation errors span several lines)."""
    parts = [part.strip() for part in text.splitlines()]
    parts = [
        part
        for part in parts
        if part and not part.startswith("For further information visit") and not re.fullmatch(r"\^+", part)
    ]
    joined = "".join(
        part if not n else (" " if parts[n - 1].endswith(":") else "; ") + part for n, part in enumerate(parts)
    )
    return re.sub(r"\s+", " ", joined).rstrip(":")
