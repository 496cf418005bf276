"""History over HTTP: queue a backfill (admin), and see each repository's runs and coverage."""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, request, url_for

from tracker.core.repository import check_full_name
from tracker.core.window import WindowError
from tracker.history.derive import BACKFILL, history_range
from tracker.history.store import QUEUED, SAMPLE_REFUSAL
from tracker.queue import enqueue_history, redis_failure
from tracker.records.views import admin_refusal
from tracker.reports.coverage import coverage_summary
from tracker.web.access import admin_request
from tracker.web.context import clipped
from tracker.web.context import services as current_services

blueprint = Blueprint("history", __name__)


@blueprint.post("/api/v1/repos/<owner>/<repo>/backfill")
def queue_backfill(owner: str, repo: str) -> Any:
    """`?month=YYYY-MM` or `?since=YYYY-MM-DD`, and `files=daily|end` (or the same keys in a JSON body):
    202 with the run's location while a worker reads the history; progress is there and in /api/v1/status."""
    refusal = admin_refusal()
    if refusal is not None:
        return refusal
    services = current_services()
    given = request.get_json(silent=True) if request.is_json else None
    fields = given if isinstance(given, dict) else {}
    month = _clipped(request.args.get("month", fields.get("month")))
    since = _clipped(request.args.get("since", fields.get("since")))
    files = request.args.get("files", fields.get("files", "daily"))
    try:
        full_name = check_full_name(f"{owner}/{repo}")
    except ValueError as exc:
        return {"error": f"the repository {exc}"}, 400
    try:
        if not (month is None or isinstance(month, str)) or not (since is None or isinstance(since, str)):
            raise WindowError("month and since are strings: YYYY-MM and YYYY-MM-DD")
        if files not in ("daily", "end"):
            raise WindowError("files is daily (every day's head, the default) or end (the range's last head)")
        start, end = history_range(month, since, services.config.timezone_for(full_name), int(time.time()))
    except WindowError as exc:
        return {"error": str(exc)}, 400
    if services.history.is_sample(full_name):
        return {"error": SAMPLE_REFUSAL.format(full_name)}, 409
    failure = redis_failure(services.github_queue.connection)
    if failure is not None:
        return {"error": f"Redis is unreachable ({type(failure).__name__}): try again once /healthz is 200"}, 503
    services.history.open_run(BACKFILL, full_name, start, end, state=QUEUED)
    job = enqueue_history(services.github_queue, BACKFILL, full_name, start, end, files=files)
    location = url_for("history.repository_history", owner=owner, repo=repo)
    body = {"status": "queued" if job else "already queued", "job": job, "location": location}
    return body, 202, {"Location": location}


@blueprint.get("/api/v1/repos/<owner>/<repo>/history")
def repository_history(owner: str, repo: str) -> Any:
    """The repository's backfill and reconciliation runs (newest first) and the intervals whose
    history is complete."""
    services = current_services()
    try:
        full_name = check_full_name(f"{owner}/{repo}")
    except ValueError as exc:
        return {"error": f"the repository {exc}"}, 400
    if not services.config.is_public(full_name) and not admin_request(
        services.settings, request.headers.get("Authorization")
    ):
        # To anyone but the admin, a private repository is a name nothing is known of (the answer
        # such a name gets), so that whether it exists is not told either.
        return {"repo": full_name, "runs": [], "coverage": {"intervals": [], "complete": []}}
    return {
        "repo": full_name,
        "runs": [run.as_dict() for run in services.history.runs(full_name)],
        "coverage": coverage_summary(services.history, full_name, int(time.time())),
    }


def _clipped(value: Any) -> Any:
    """A string parameter clipped before an error may quote it (context.clipped); others as they are."""
    return clipped(value) if isinstance(value, str) else value
