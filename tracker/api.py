"""The JSON API, the health check and the index page."""

from __future__ import annotations

import hmac
import logging
from typing import Any

from flask import Blueprint, Response, render_template, request
from sqlalchemy import text

from tracker.app import services
from tracker.heads import HeadStore
from tracker.ledger import FAILED
from tracker.months import UnknownRepository, load_snapshot, snapshot_json
from tracker.queue import enqueue_deliveries, github_queue, queue_counts, waiting_on_github
from tracker.quota import Quota
from tracker.window import WindowError

blueprint = Blueprint("api", __name__)
log = logging.getLogger(__name__)


@blueprint.get("/api/v1/repos/<owner>/<repo>/months/<month>")
def month_snapshot(owner: str, repo: str, month: str) -> Any:
    app = services()
    try:
        snapshot = load_snapshot(app.state, app.config, f"{owner}/{repo}", month, request.args.get("cutoff"))
    except UnknownRepository as exc:
        return {"error": str(exc)}, 404
    except WindowError as exc:
        return {"error": str(exc)}, 400
    return Response(snapshot_json(snapshot), mimetype="application/json")


@blueprint.get("/api/v1/repos")
def repository_list() -> Any:
    state = services().state
    return {"repositories": [{"repo": name, "months": state.month_versions(name)} for name in state.repository_names()]}


@blueprint.get("/api/v1/status")
def status() -> Any:
    app = services()
    body: dict[str, Any] = {
        "deliveries": app.ledger.counts().as_dict(),
        "hooks": app.ledger.hooks(),
        "repositories": app.state.repository_names(),
    }
    try:
        body["queue"] = queue_counts(app.queue)
        body["github"] = {
            **Quota(app.redis).summary(),
            "waiting_jobs": waiting_on_github(github_queue(app.redis)),
            "heads_without_files": len(HeadStore(app.state.engine).missing()),
        }
    except Exception as exc:
        body["queue"] = {"error": f"Redis is unreachable ({type(exc).__name__})"}
    if body["deliveries"][FAILED]:
        body["failed_deliveries"] = app.ledger.failures()
    return body


@blueprint.post("/api/v1/deliveries/retry-failed")
def retry_failed() -> Any:
    app = services()
    token = app.settings.admin_token
    if token is None:
        return {"error": "admin endpoints are off: set TRACKER_ADMIN_TOKEN to use them"}, 403
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(given.encode(), token.get_secret_value().encode()):
        return {"error": "send Authorization: Bearer <TRACKER_ADMIN_TOKEN>"}, 401
    ids = app.ledger.reset_failed()
    enqueue_deliveries(app.queue, ids)
    return {"requeued": len(ids)}


@blueprint.get("/healthz")
def healthz() -> Any:
    app = services()
    checks: dict[str, str] = {}
    try:
        with app.ledger.engine.connect().execution_options(read_only=True) as conn:
            conn.execute(text("SELECT 1"))
        checks["ledger"] = "ok"
    except Exception as exc:
        checks["ledger"] = f"unreachable ({type(exc).__name__})"
    try:
        app.redis.ping()
        checks["redis"] = "ok"
    except Exception as exc:
        checks["redis"] = f"unreachable ({type(exc).__name__})"
    healthy = all(value == "ok" for value in checks.values())
    return {"status": "ok" if healthy else "unavailable", **checks}, 200 if healthy else 503


@blueprint.get("/")
def index() -> Any:
    state = services().state
    repos = [(name, state.month_versions(name)) for name in state.repository_names()]
    return render_template("index.html", repositories=repos)
