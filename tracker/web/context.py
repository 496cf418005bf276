"""What the blueprints need from the app, without importing the app factory (which imports them)."""

from __future__ import annotations

from typing import cast

from flask import current_app

from tracker.services import Services

# GitHub caps webhook payloads at 25 MB ("Webhook events and payloads"); larger bodies are refused
# with 413 before they are read.
MAX_BODY_BYTES = 25 * 1024 * 1024
# The repository a webhook delivery is about, left in the WSGI environ for the access log (tracker.web.server).
REPOSITORY_ENVIRON = "tracker.repository"

_EXTENSION = "tracker"


def services() -> Services:
    """The services object of the running app (built once by `create_app`)."""
    return cast(Services, current_app.extensions[_EXTENSION])


def installed(app: object) -> Services | None:
    """The services object of `app`, if it is an app `create_app` built."""
    extensions = getattr(app, "extensions", None)
    return cast("Services | None", extensions.get(_EXTENSION)) if isinstance(extensions, dict) else None


def install(extensions: dict[str, object], built: Services) -> None:
    extensions[_EXTENSION] = built
