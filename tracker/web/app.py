"""The Flask application factory."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from tracker.history import views as history
from tracker.records import views as records
from tracker.reports.render import json_bytes
from tracker.services import Services
from tracker.settings import Settings, load_settings
from tracker.web import admin_rq, api, drilldown, groups, metrics, webhook
from tracker.web.context import MAX_BODY_BYTES, install


def create_app(settings: Settings | None = None, services: Services | None = None) -> Flask:
    """Build the web app from settings (read from the environment when not given), or around a
    services object built elsewhere (tests, benchmarks). Raises SettingsError with what to do."""
    settings = settings or (services.settings if services is not None else load_settings())
    settings.require_webhook_secret()
    app = Flask(__name__)  # templates: tracker/web/templates (package data)
    app.json = FastJSONProvider(app)
    # One byte past GitHub's cap: the webhook reads that byte to tell "exactly 25 MB" from "more".
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES + 1
    install(app.extensions, services or Services.from_settings(settings))
    app.register_blueprint(webhook.blueprint)
    app.register_blueprint(api.blueprint)
    app.register_blueprint(records.blueprint)
    app.register_blueprint(drilldown.blueprint)  # the PRs behind each number of a report
    app.register_blueprint(groups.blueprint)  # one report over several repositories (`groups:`)
    app.register_blueprint(history.blueprint)
    app.register_blueprint(metrics.blueprint)  # GET /metrics (TRACKER_METRICS_TOKEN)
    app.register_blueprint(admin_rq.blueprint)  # GET /admin/rq: RQ's queues, read only (TRACKER_ADMIN_TOKEN)
    _errors(app)
    app.after_request(_security_headers)
    logging.getLogger("tracker").setLevel(logging.INFO)
    return app


class FastJSONProvider(DefaultJSONProvider):
    """The JSON of every answer Flask makes from a dict (status, repositories, errors, records), written
    by orjson (`tracker.reports.render.json_bytes`): keys in the order the code builds them, non-ASCII
    characters as UTF-8 (as in the report's JSON), invisible characters as `\\uXXXX` escapes, compact as
    Flask writes it outside debug mode. What JSON has no form for (dates, dataclasses, decimals) goes
    through Flask's own conversions, so each value means what it meant with the standard library."""

    sort_keys = False
    ensure_ascii = False

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if kwargs.keys() - {"indent", "separators"}:  # options only the standard library knows
            return super().dumps(obj, **kwargs)
        return json_bytes(obj, indent="indent" in kwargs, default=self.default).decode("utf-8").rstrip("\n")

    def response(self, *args: Any, **kwargs: Any) -> Response:
        obj = self._prepare_response_obj(args, kwargs)
        indent = self.compact is False or (self.compact is None and self._app.debug)
        data = json_bytes(obj, indent=indent, default=self.default)
        return Response(data if indent else data + b"\n", mimetype=self.mimetype)


def _errors(app: Flask) -> None:
    """Errors Flask itself raises (405, 413, 404 of an unknown path…): an HTML page on the routes
    people open in a browser (`/`, `/reports/…/*.html`), JSON elsewhere; same status and headers."""

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> Any:
        message, status = error.description or error.name, error.code or 500
        headers = dict(error.get_headers())
        headers.pop("Content-Type", None)
        if _html_route(request.path):
            return api.error_page(status, message, headers)
        return {"error": message}, status, headers


def _html_route(path: str) -> bool:
    return path == "/" or (path.startswith("/reports/") and path.endswith(".html"))


# Every answer, whatever its type: nothing loads from another host, no page of ours can be framed
# (clickjacking), browsers never guess a type (a Markdown report sniffed as HTML), and no URL of
# ours leaks to other sites as a referrer. The report page's own <meta> policy says the same.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def _security_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response
