"""The Flask application factory."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from flask import Flask, current_app
from redis import Redis
from rq import Queue

from tracker.config import TrackerConfig, load_config
from tracker.database import connect
from tracker.embedded_redis import redis_url
from tracker.ledger import Ledger
from tracker.queue import connect_redis, delivery_queue
from tracker.settings import Settings, load_settings
from tracker.state import MonthState

# GitHub caps webhook payloads at 25 MB ("Webhook events and payloads"); larger bodies are refused
# with 413 before they are read.
MAX_BODY_BYTES = 25 * 1024 * 1024

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@dataclass(frozen=True)
class Services:
    settings: Settings
    config: TrackerConfig
    webhook_secret: bytes
    ledger: Ledger
    state: MonthState
    redis: Redis
    queue: Queue


def services() -> Services:
    return cast(Services, current_app.extensions["tracker"])


def create_app(settings: Settings | None = None) -> Flask:
    """Build the web app from settings (read from the environment when not given)."""
    settings = settings or load_settings()
    secret = settings.require_webhook_secret()
    engine = connect(settings.resolved_database_url)
    connection = connect_redis(redis_url(settings))

    app = Flask(__name__, template_folder=str(TEMPLATES))
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["tracker"] = Services(
        settings=settings,
        config=load_config(settings),
        webhook_secret=secret,
        ledger=Ledger(engine),
        state=MonthState(engine),
        redis=connection,
        queue=delivery_queue(connection),
    )

    from tracker import api, webhook

    app.register_blueprint(webhook.blueprint)
    app.register_blueprint(api.blueprint)
    _json_errors(app)
    logging.getLogger("tracker").setLevel(logging.INFO)
    return app


def _json_errors(app: Flask) -> None:
    from werkzeug.exceptions import HTTPException

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> Any:
        return {"error": error.description or error.name}, error.code or 500
