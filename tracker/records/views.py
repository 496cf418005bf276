"""Month records over HTTP: finalise a repository's or a group's month (admin), list its records, and what came
late."""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, request, url_for

from tracker.core.window import Month, WindowError
from tracker.queue import enqueue_finalize, enqueue_finalize_group, redis_failure
from tracker.records.finalize import MonthNotEnded, final_request, late_deliveries, stored_name
from tracker.records.groups import MembersNotRecorded, group_final_request, members_records, unrecorded_members
from tracker.reports.groups import UnknownGroup
from tracker.reports.loading import UnknownRepository
from tracker.services import Services
from tracker.web.access import admin_request, bearer_token, is_admin, unknown_or_private
from tracker.web.context import asked_repository, clipped
from tracker.web.context import services as current_services

blueprint = Blueprint("records", __name__)


def admin_refusal() -> tuple[dict[str, str], int] | None:
    """None for a request with the admin token; else the answer: 503 when no token is configured,
    401 without one, 403 with a wrong one (compared in constant time)."""
    settings = current_services().settings
    if settings.admin_token is None:
        return {"error": "admin endpoints are off: set TRACKER_ADMIN_TOKEN to use them"}, 503
    given = bearer_token(request.headers.get("Authorization"))
    if not given:
        return {"error": "send Authorization: Bearer <TRACKER_ADMIN_TOKEN>"}, 401
    if not is_admin(settings, given):
        return {"error": "the admin token is wrong"}, 403
    return None


@blueprint.post("/api/v1/repos/<owner>/<repo>/months/<month>/finalize")
def finalize(owner: str, repo: str, month: str) -> Any:
    """202 with the records' location while the finalisation runs; 200 when the month already has a
    record (unless `?force=1`); 409 for a month that has not ended (unless forced)."""
    refusal = admin_refusal()
    if refusal is not None:
        return refusal
    services = current_services()
    force = request.args.get("force", "").lower() in ("1", "true", "yes")
    try:
        wanted = final_request(services, asked_repository(owner, repo), clipped(month), force=force)
    except UnknownRepository as exc:
        return {"error": str(exc)}, 404
    except MonthNotEnded as exc:
        return {"error": str(exc)}, 409
    except WindowError as exc:
        return {"error": str(exc)}, 400
    month_text = str(wanted.window.month)
    location = url_for("records.records", owner=owner, repo=repo, month=month_text)
    if not force:
        existing = services.records.latest(wanted.repo, month_text)
        if existing is not None:
            return _recorded(existing.summary(), location)
    queue = services.records_queue
    if (unreachable := _redis_unreachable(queue)) is not None:
        return unreachable
    deadline = time.time() + services.settings.finalize_wait
    job = enqueue_finalize(queue, wanted.repo, month_text, force=force, trigger="api", deadline=deadline)
    body = {
        "status": "finalizing",
        "location": location,
        "job": job,
        "waits_at_most_seconds": services.settings.finalize_wait,
    }
    return body, 202, {"Location": location}


@blueprint.get("/api/v1/repos/<owner>/<repo>/months/<month>/records")
def records(owner: str, repo: str, month: str) -> Any:
    """Every record of the month (newest last), without their documents, and the deliveries that
    arrived after the latest one."""
    services = current_services()
    asked = asked_repository(owner, repo)
    # A private repository's records are the admin's: to anyone else it is answered as a name the
    # ledger does not know, asked before the name is looked up, so that whether it exists is not told.
    admin = admin_request(services.settings, request.headers.get("Authorization"))
    if not admin and not services.config.is_public(asked):
        return {"error": unknown_or_private(asked)}, 404
    try:
        full_name = stored_name(services.state, asked)
    except UnknownRepository as exc:
        return {"error": str(exc) if admin else unknown_or_private(asked)}, 404
    try:
        month_text = str(Month.parse(clipped(month)))
    except WindowError as exc:
        return {"error": str(exc)}, 400
    kept = services.records.all(full_name, month_text)
    body: dict[str, Any] = {"repo": full_name, "month": month_text, "records": [r.summary() for r in kept]}
    if kept:
        body["late_deliveries"] = late_deliveries(services.records, kept[-1], services.config.timezone_for(full_name))
    return body


def unknown_group_answer(services: Services, name: str) -> Any:
    """404 as the group routes answer a name that is not a group this reader may see (tracker.web.groups, which
    imports this module's neighbours: imported when asked)."""
    from tracker.web.groups import unknown_group_answer as answer

    return answer("json", services, name)


# --- a group's month (tracker.records.groups) ---------------------------------------------------------------


@blueprint.post("/api/v1/groups/<name>/months/<month>/finalize")
def finalize_group(name: str, month: str) -> Any:
    """As a repository's: 202 while it runs, 200 when the month has a record (unless `?force=1`), 409 for a
    month that has not ended or whose members with activity are not all recorded yet (unless forced)."""
    refusal = admin_refusal()
    if refusal is not None:
        return refusal
    services = current_services()
    force = request.args.get("force", "").lower() in ("1", "true", "yes")
    try:
        group = group_final_request(services, clipped(name), clipped(month), force=force)
    except UnknownGroup:
        return unknown_group_answer(services, clipped(name))
    except MonthNotEnded as exc:
        return {"error": str(exc)}, 409
    except WindowError as exc:
        return {"error": str(exc)}, 400
    month_text = str(group.month)
    location = url_for("records.group_records", name=group.name, month=month_text)
    if not force:
        existing = services.records.latest_group(group.name, month_text)
        if existing is not None:
            return _recorded(existing.summary(), location)
        missing = unrecorded_members(services, group, members_records(services, group))
        if missing:
            return {"error": str(MembersNotRecorded(group.name, month_text, missing)), "members": missing}, 409
    queue = services.records_queue
    if (unreachable := _redis_unreachable(queue)) is not None:
        return unreachable
    job = enqueue_finalize_group(queue, group.name, month_text, force=force, trigger="api")
    return {"status": "finalizing", "location": location, "job": job}, 202, {"Location": location}


@blueprint.get("/api/v1/groups/<name>/months/<month>/records")
def group_records(name: str, month: str) -> Any:
    """Every record of the group's month (newest last), without their documents. A record names every member:
    to anyone but the admin a group with a private member (now, or in a record) is answered as an unknown one."""
    services = current_services()
    config = services.config
    admin = admin_request(services.settings, request.headers.get("Authorization"))
    group = config.group_named(clipped(name))
    if group is None:
        return unknown_group_answer(services, clipped(name))
    if not admin and not all(config.is_public(m) for m in config.members_of(group, services.state.repository_names())):
        return unknown_group_answer(services, clipped(name))
    try:
        month_text = str(Month.parse(clipped(month)))
    except WindowError as exc:
        return {"error": str(exc)}, 400
    kept = services.records.all_group(group, month_text)
    if not admin and not all(config.is_public(m["repo"]) for record in kept for m in record.members):
        return unknown_group_answer(services, clipped(name))
    return {"group": group, "month": month_text, "records": [record.summary() for record in kept]}


def _recorded(summary: dict[str, Any], location: str) -> tuple[dict[str, Any], int, dict[str, str]]:
    """The answer to a finalisation the month's record already answers."""
    return {"status": "recorded", "record": summary, "location": location}, 200, {"Location": location}


def _redis_unreachable(queue: Any) -> tuple[dict[str, str], int] | None:
    """503 when the queue's Redis does not answer (the finalisation could not be queued)."""
    failure = redis_failure(queue.connection)
    if failure is None:
        return None
    return {"error": f"Redis is unreachable ({type(failure).__name__}): try again once /healthz is 200"}, 503
