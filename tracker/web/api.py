"""The JSON API, the health check and the index page."""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Blueprint, Response, render_template, request
from redis.exceptions import RedisError
from sqlalchemy import text

from tracker.core.window import WindowError
from tracker.github.quota import Quota
from tracker.queue import enqueue_deliveries, queue_counts, redis_failure, waiting_on_github
from tracker.reports.cache import rendered
from tracker.reports.coverage import coverage_summary
from tracker.reports.loading import UnknownRepository, resolve
from tracker.reports.records import served_record
from tracker.reports.render import FORMATS, UnknownLanguage, language
from tracker.settings import SettingsError
from tracker.store.ledger import FAILED
from tracker.web.access import NO_STORE, TOKEN_PARAMETER, AccessDenied, admin_request, authorize, carry_token
from tracker.web.context import services

blueprint = Blueprint("api", __name__)
log = logging.getLogger(__name__)


@blueprint.get("/api/v1/repos/<owner>/<repo>/months/<month>")
def month_snapshot(owner: str, repo: str, month: str) -> Any:
    """The JSON snapshot (the same document as /reports/<owner>/<repo>/<month>.json)."""
    return _report(owner, repo, month, "json", "en")


_MEDIA_TYPES = {
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "json": "application/json",
}


@blueprint.get("/reports/<owner>/<repo>/<name>")
def report(owner: str, repo: str, name: str) -> Any:
    """`<YYYY-MM|current>.<md|html|json>?cutoff=YYYY-MM-DD&lang=en|zh-CN`."""
    month, _, fmt = name.rpartition(".")
    if fmt not in FORMATS or not month:
        return {"error": f"{name!r}: ask for <YYYY-MM or current>.md, .html or .json"}, 404
    try:
        lang = language(request.args.get("lang"))
    except UnknownLanguage as exc:
        return {"error": str(exc)}, 400
    return _report(owner, repo, month, fmt, lang)


def _report(owner: str, repo: str, month: str, fmt: str, lang: str) -> Any:
    app = services()
    name = f"{owner}/{repo}"
    try:
        # Access first: for a private repository, whether it exists and which months are valid is
        # itself something only the admin or a link's holder may learn.
        grant = authorize(
            app.settings, app.config, name, request.headers.get("Authorization"), request.args.get(TOKEN_PARAMETER)
        )
        wanted = resolve(app.state, app.config, name, month, request.args.get("cutoff"))
        grant.require(wanted.repo, wanted.window)
    except AccessDenied as exc:
        return exc.answer()
    except UnknownRepository as exc:
        return {"error": str(exc)}, 404
    except WindowError as exc:
        return {"error": str(exc)}, 400
    headers = dict(grant.headers)
    # A finalised month asked for at its last day (the default cutoff of an ended month) is its
    # record, byte for byte, whatever arrived later; `?live=1` shows what the ledger says now.
    record = None if request.args.get("live") == "1" else served_record(app.records, wanted)
    if record is not None:
        text = record.document(fmt, lang)
        headers["X-Tracker-Record"] = f"revision={record.revision}; content-hash={record.content_hash}"
    else:
        text = rendered(app.state, app.config, wanted, fmt, lang, cache=app.redis)
    if grant.token is not None and fmt == "html":
        # After the cache, which keeps one copy for every reader: the token is this reader's own.
        text = carry_token(text, grant.token)
    return Response(text, content_type=_MEDIA_TYPES[fmt], headers=headers)


def _listed_repositories() -> tuple[list[str], dict[str, str]]:
    """The repositories this request may see, and the headers its answer needs: private ones are
    left out unless the request carries the admin token (a link opens one month, not the list)."""
    app = services()
    names = app.state.repository_names()
    if admin_request(app.settings, request.headers.get("Authorization")):
        private = any(not app.config.is_public(name) for name in names)
        return names, dict(NO_STORE) if private else {}
    return [name for name in names if app.config.is_public(name)], {}


@blueprint.get("/api/v1/repos")
def repository_list() -> Any:
    state = services().state
    names, headers = _listed_repositories()
    return {"repositories": [{"repo": name, "months": state.month_versions(name)} for name in names]}, 200, headers


@blueprint.get("/api/v1/status")
def status() -> Any:
    app = services()
    names, headers = _listed_repositories()  # private repositories only for the admin
    body: dict[str, Any] = {
        "deliveries": app.ledger.counts().as_dict(),
        "hooks": app.ledger.hooks(),
        "repositories": names,
    }
    try:
        body["queue"] = queue_counts(app.delivery_queue)
        body["github"] = {
            **Quota(app.require_redis()).summary(),
            "waiting_jobs": waiting_on_github(app.github_queue),
            "heads_without_files": len(app.heads.missing()),
        }
    except Exception as exc:
        body["queue"] = {"error": f"Redis is unreachable ({type(exc).__name__})"}
    if body["deliveries"][FAILED]:
        body["failed_deliveries"] = app.ledger.failures()
    shown = {name.lower() for name in names}
    body["history"] = {
        # A backfill queued before the repository's first delivery is shown too (unless private).
        "runs": [
            run.as_dict()
            for run in app.history.runs()
            if run.full_name.lower() in shown or (app.config.is_public(run.full_name) and run.full_name not in names)
        ],
        "coverage": {name: coverage_summary(app.history, name, int(time.time()))["complete"] for name in names},
    }
    body["publications"] = [p for p in app.records.publications(10) if p["repo"] in shown]  # newest first
    return body, 200, headers


@blueprint.post("/api/v1/deliveries/retry-failed")
def retry_failed() -> Any:
    app = services()
    if app.settings.admin_token is None:
        return {"error": "admin endpoints are off: set TRACKER_ADMIN_TOKEN to use them"}, 403
    if not admin_request(app.settings, request.headers.get("Authorization")):
        return {"error": "send Authorization: Bearer <TRACKER_ADMIN_TOKEN>"}, 401
    # Redis first, and the ledger only after the jobs are queued: while Redis is down nothing
    # changes (the deliveries stay failed, for another try), and a Redis that fails half-way
    # leaves them failed too (a job queued before the failure may still process its delivery).
    queue = app.delivery_queue
    failure = redis_failure(queue.connection)
    if failure is None:
        ids = app.ledger.ids_with_status(FAILED)
        try:
            enqueue_deliveries(queue, ids)
        except RedisError as exc:
            failure = exc
        else:
            app.ledger.reset_failed(ids)
            return {"requeued": len(ids)}
    log.warning("retry-failed refused: Redis is unreachable (%s: %s)", type(failure).__name__, failure)
    message = f"Redis is unreachable ({type(failure).__name__}): nothing was changed; try again once /healthz is 200"
    return {"error": message}, 503


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
    # Within a second whatever Redis does (a probe of its own, no retries): a hung Redis is a 503.
    failure = redis_failure(app.redis) if app.redis is not None else SettingsError("no Redis")
    checks["redis"] = "ok" if failure is None else f"unreachable ({type(failure).__name__})"
    healthy = all(value == "ok" for value in checks.values())
    return {"status": "ok" if healthy else "unavailable", **checks}, 200 if healthy else 503


@blueprint.get("/")
def index() -> Any:
    state = services().state
    names, headers = _listed_repositories()
    repos = [(name, state.month_versions(name)) for name in names]
    return render_template("index.html", repositories=repos), 200, headers
