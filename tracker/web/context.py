"""What the blueprints need from the app, without importing the app factory (which imports them)."""

from __future__ import annotations

import re
from typing import cast

from flask import current_app, request

from tracker.services import Services

# GitHub caps webhook payloads at 25 MB ("Webhook events and payloads"); larger bodies are refused
# with 413 before they are read.
MAX_BODY_BYTES = 25 * 1024 * 1024
# The repository a webhook delivery is about, left in the WSGI environ for the access log (tracker.web.server).
REPOSITORY_ENVIRON = "tracker.repository"

# GitHub's delivery ids are GUIDs; the webhook takes any visible ASCII, up to the 100 characters the
# ledger keeps of one.
DELIVERY_ID = re.compile(r"[\x21-\x7e]{1,100}")
# The most characters of a request's own value that an error quotes back (a 10 KB query value is not
# worth echoing, and an answer must not grow with what the client sent).
QUOTED = 64

_EXTENSION = "tracker"


def clipped(value: str, limit: int = QUOTED) -> str:
    """`value`, or its first `limit` characters and `…` when it is longer. Clip a request's value before
    a parser that quotes it in its error: every value these routes accept is shorter than the limit, and
    the `…` keeps a clipped value from ever reading as a valid one."""
    return value if len(value) <= limit else value[:limit] + "…"


def asked_repository(owner: str, repo: str) -> str:
    """`owner/repo` from a URL, each part clipped at the longest GitHub allows (39 and 100 characters,
    tracker.core.repository), so that no name GitHub could give is changed."""
    return f"{clipped(owner, 39)}/{clipped(repo, 100)}"


def services() -> Services:
    """The services object of the running app (built once by `create_app`)."""
    return cast(Services, current_app.extensions[_EXTENSION])


def installed(app: object) -> Services | None:
    """The services object of `app`, if it is an app `create_app` built."""
    extensions = getattr(app, "extensions", None)
    return cast("Services | None", extensions.get(_EXTENSION)) if isinstance(extensions, dict) else None


def install(extensions: dict[str, object], built: Services) -> None:
    extensions[_EXTENSION] = built


def query_argument(name: str) -> str | None:
    """A query parameter of the request, clipped before anything may quote it in an error (`clipped`)."""
    value = request.args.get(name)
    return clipped(value) if value is not None else None
