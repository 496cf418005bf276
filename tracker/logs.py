"""One logging set-up for every process: the CLI, `tracker run` and its children, gunicorn's and
waitress's web processes, the RQ workers.

Every line has one format, `FORMAT`, on stderr. `-v` (`tracker -v …`) logs debug messages; `tracker
run` hands it on to its children in the environment (`TRACKER_VERBOSE=1`, read here), so a verbose
`tracker run` has verbose web processes and workers. Without it, the libraries' routine chatter
stays out: RQ's per-job lines ("Job OK", "result is kept …", "started with PID …", "cleaning
registries …") and httpx's per-request lines show only with `-v`; their warnings and errors always.

Nothing logged here carries a secret or a request body: the web access log (tracker.web.server)
writes the method, the path with secret-looking query values redacted, the status, GitHub's
delivery id and the duration; GitHub errors are logged with their reason, never the token.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The variable `tracker run` sets for its children when it runs with -v (not a setting: it says how
# much to log, nothing about what to do).
VERBOSE_VARIABLE = "TRACKER_VERBOSE"

# Libraries whose INFO lines are routine, per job or per request: WARNING and above unless -v.
_CHATTY = ("rq", "httpx")
# Libraries too detailed even for -v (every socket read).
_QUIET = ("httpcore", "hpack")

_verbose = False


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


def configure(verbose: bool | None = None) -> bool:
    """Log to stderr in `FORMAT`, at DEBUG when `verbose` (or TRACKER_VERBOSE is set, or an earlier
    call in this process was verbose and `verbose` is None), else at INFO. Safe to call again (a
    forked web process does, after its app set its own levels). Returns whether it is verbose."""
    global _verbose
    if verbose is None:
        verbose = _verbose
    _verbose = bool(verbose) or _from_environment()
    level = logging.DEBUG if _verbose else logging.INFO
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _Stderr):
            root.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(logging.Formatter(FORMAT))
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


def child_environment() -> dict[str, str]:
    """What a child process needs in its environment to log as this one does."""
    return {VERBOSE_VARIABLE: "1"} if verbose() else {}


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
