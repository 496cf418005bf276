"""The JSON API, the health check, the index page, and the error page of the HTML routes.

Errors are answered in the form the route serves: an HTML page (`error.html`) for the index and the
`.html` reports, which people open in a browser; JSON (`{"error": ...}`) everywhere else. Only the
body differs: the status code and headers are the same either way.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, Response, render_template, request
from redis.exceptions import RedisError
from werkzeug.http import HTTP_STATUS_CODES

from tracker import metrics
from tracker.config import TrackerConfig
from tracker.core.since import SinceError, publication_cutoff, since_day
from tracker.core.window import WindowError
from tracker.embedded_redis import EmbeddedRedis
from tracker.github.quota import Quota
from tracker.narration.store import NarrationStore, Spent
from tracker.queue import enqueue_deliveries, queue_counts, redis_failure, waiting_on_github
from tracker.records.finalize import served_record
from tracker.records.store import group_subject
from tracker.records.views import admin_refusal
from tracker.reports.cache import rendered_bytes
from tracker.reports.coverage import coverage_summary
from tracker.reports.loading import UnknownRepository, resolve
from tracker.reports.render import (
    DETAILS,
    FORMATS,
    FULL,
    SUMMARY,
    Document,
    UnknownLanguage,
    json_bytes,
    language,
    summary_document,
)
from tracker.reports.request import MonthRequest, ReportServices
from tracker.settings import Settings, SettingsError
from tracker.store.ledger import FAILED
from tracker.web.access import (
    NO_STORE,
    TOKEN_PARAMETER,
    AccessDenied,
    NotShown,
    admin_request,
    authorize,
    carry_token,
    may_be_private,
    unknown_or_private,
)
from tracker.web.context import asked_repository, clipped, query_argument
from tracker.web.context import services as current_services

blueprint = Blueprint("api", __name__)
log = logging.getLogger(__name__)


@blueprint.get("/api/v1/repos/<owner>/<repo>/months/<month>")
def month_snapshot(owner: str, repo: str, month: str) -> Any:
    """The JSON snapshot (the same document as /reports/<owner>/<repo>/<month>.json);
    `?detail=summary`: its numbers and themes without the pull requests; `?since=`: as the report's."""
    return _report(owner, repo, month, "json", "en")


_MEDIA_TYPES = {
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "json": "application/json",
}


@blueprint.get("/reports/<owner>/<repo>/<name>")
def report(owner: str, repo: str, name: str) -> Any:
    """`<YYYY-MM|current>.<md|html|json>?cutoff=YYYY-MM-DD&lang=en|zh-CN&since=YYYY-MM-DD|last-publication`."""
    month, _, fmt = name.rpartition(".")
    if fmt not in FORMATS or not month:
        return {"error": f"{clipped(name)!r}: ask for <YYYY-MM or current>.md, .html or .json"}, 404
    try:
        lang = language(query_argument("lang"))
    except UnknownLanguage as exc:
        return error_answer(fmt, 400, str(exc))
    return _report(owner, repo, month, fmt, lang)


def _report(owner: str, repo: str, month: str, fmt: str, lang: str) -> Any:
    started = time.perf_counter()  # tracker_report_render_seconds
    services = current_services()
    name = asked_repository(owner, repo)
    detail = query_argument("detail") or FULL
    if detail not in DETAILS or (fmt != "json" and detail != FULL):
        forms = " or ".join(f"detail={d}" for d in DETAILS)
        return error_answer(
            fmt, 400, f"detail={detail!r} is not offered: the JSON has {forms}; Markdown and HTML one form"
        )
    try:
        # Access first: for a private repository, whether it exists and which months are valid is
        # itself something only the admin or a link's holder may learn.
        grant = authorize(
            services.settings,
            services.config,
            name,
            request.headers.get("Authorization"),
            request.args.get(TOKEN_PARAMETER),
        )
        wanted = resolve(services, name, clipped(month), query_argument("cutoff"))
        grant.require(wanted.repo, wanted.window)
    except AccessDenied as exc:
        return error_answer(fmt, exc.status, exc.message, exc.headers) if fmt == "html" else exc.answer()
    except NotShown:
        return not_found_answer(fmt, name, None)
    except UnknownRepository as exc:
        return not_found_answer(fmt, name, exc)
    except WindowError as exc:
        # A bad month or cutoff of a public repository: its month to date is the way on.
        public = services.config.is_public(name)
        links = [name] if public else []
        return error_answer(fmt, 400, str(exc), grant.headers, repositories=links, heading="The month to date:")
    headers = dict(grant.headers)
    asked_since = query_argument("since")
    try:
        since = since_of_request(services, wanted, asked_since) if asked_since else None
    except SinceError as exc:
        return error_answer(fmt, 400, str(exc), grant.headers)
    # A finalised month asked for at its last day (the default cutoff of an ended month) is its
    # record, byte for byte, whatever arrived later; `?live=1` shows what the ledger says now, as does
    # `?since=` (the record has no Since section: the month is rendered as the ledger says now).
    live = request.args.get("live") == "1" or since is not None
    record = None if live else served_record(services.records, wanted)
    body: str | bytes
    if record is not None:
        body = record.document(fmt, lang)
        if detail == SUMMARY:
            body = json_bytes(summary_document(json.loads(body)))
        headers["X-Tracker-Record"] = f"revision={record.revision}; content-hash={record.content_hash}"
    else:
        body = rendered_bytes(services, wanted, Document(fmt, lang, detail), cache=services.redis, since=since)
    if grant.token is not None and fmt == "html":
        # After the cache, which keeps one copy for every reader: the token is this reader's own.
        body = carry_token(body.decode("utf-8") if isinstance(body, bytes) else body, grant.token)
    metrics.report_answered(fmt, time.perf_counter() - started)
    return Response(body, content_type=_MEDIA_TYPES[fmt], headers=headers)


# `?since=last-publication`: the last publication of the month, of either edition (tracker.records.publish: the
# final edition, once the month has its record, and the weekly partial ones).
LAST_PUBLICATION = "last-publication"
EDITIONS = ("final", "partial")


def since_of_request(services: ReportServices, wanted: MonthRequest, text: str) -> date:
    """The earlier cutoff of `?since=`: a day (`core.since.since_day`), or `last-publication`, the cutoff of
    the month's last successful publication (`core.since.publication_cutoff`: a partial edition's day, a
    final one's last day of the month). Raises SinceError for what cannot be compared with the cutoff."""
    window = wanted.window
    if text != LAST_PUBLICATION:
        return since_day(text, window)
    month = str(window.month)
    times = [services.records.last_publication_at(wanted.repo, month, edition) for edition in EDITIONS]
    last = max((at for at in times if at is not None), default=None)
    if last is None:
        raise SinceError(f"{wanted.repo} has no publication of {month} yet: give since=YYYY-MM-DD")
    day = publication_cutoff(last // 1000, window.month, window.timezone)
    if day > window.cutoff:
        raise SinceError(
            f"the last publication of {month} is through {day.isoformat()}, after the cutoff "
            f"{window.cutoff.isoformat()}: ask for a later cutoff or give since=YYYY-MM-DD"
        )
    return day


def not_found_answer(fmt: str, name: str, unknown: UnknownRepository | None) -> Any:
    """404 for a repository with no reports this reader may see. Only what this reader may see: the
    admin is told the ledger has no such name and every repository; anyone else the same answer,
    headers included, whether the name is unknown or private (`unknown` None), and the public
    repositories. Never where the ledger is (`str(unknown)`, for the terminal, says that)."""
    known, _ = _listed_repositories()
    admin = admin_request(current_services().settings, request.headers.get("Authorization"))
    return error_answer(
        fmt,
        404,
        unknown.describe(known) if unknown is not None and admin else unknown_or_private(name),
        NO_STORE,
        repositories=known,
        heading="Repositories with reports (each links its month to date):",
        extra={"repositories": known},
    )


def error_answer(
    fmt: str,
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    repositories: Sequence[str] = (),
    heading: str = "",
    extra: Mapping[str, Any] | None = None,
) -> Any:
    """A report's error: the HTML page for `.html` (linking `repositories`' month to date under
    `heading`), else JSON (with `extra`). The same status and headers either way."""
    if fmt == "html":
        return error_page(status, message, headers, repositories=repositories, heading=heading)
    return {"error": message, **(extra or {})}, status, dict(headers or {})


def error_page(
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    repositories: Sequence[str] = (),
    heading: str = "",
) -> Response:
    """The small HTML page of an error, for a person's browser. Everything in it is autoescaped
    (`message` may quote a repository name taken from the URL)."""
    page = render_template(
        "error.html",
        status=status,
        title=HTTP_STATUS_CODES.get(status, "Error"),
        message=message,
        repositories=[_split(name) for name in repositories],
        heading=heading,
    )
    return Response(page, status=status, headers=dict(headers or {}), content_type=_MEDIA_TYPES["html"])


def _split(name: str) -> dict[str, str]:
    owner, _, repo = name.partition("/")
    return {"name": name, "owner": owner, "repo": repo}


def _listed_repositories() -> tuple[list[str], dict[str, str]]:
    """The repositories this request may see, and the headers its answer needs: private ones are
    left out unless the request carries the admin token (a link opens one month, not the list)."""
    services = current_services()
    names = services.state.repository_names()
    if admin_request(services.settings, request.headers.get("Authorization")):
        private = any(not services.config.is_public(name) for name in names)
        return names, dict(NO_STORE) if private else {}
    return [name for name in names if services.config.is_public(name)], {}


@blueprint.get("/api/v1/repos")
def repository_list() -> Any:
    state = current_services().state
    names, headers = _listed_repositories()
    return {"repositories": [{"repo": name, "months": state.month_versions(name)} for name in names]}, 200, headers


@blueprint.get("/api/v1/status")
def status() -> Any:
    """The service's state. Anyone sees the public part; the admin also sees private repositories
    and what names or concerns them, and where the data is."""
    services = current_services()
    names, headers = _listed_repositories()  # private repositories only for the admin
    admin = admin_request(services.settings, request.headers.get("Authorization"))
    body: dict[str, Any] = {
        "deliveries": services.ledger.counts().as_dict(),
        "hooks": recent_hooks(services.ledger.hooks()),
        "repositories": names,
    }
    # Where the data is, for the admin only: paths are not secrets, but they show the machine's
    # layout, and behind a reverse proxy on the same machine every request comes from loopback.
    if admin:
        body["storage"] = {
            "data_dir": str(services.settings.data_dir.resolve()),
            "ledger": services.ledger.shown_url(),
            "redis": redis_shown(services.settings),
        }
        headers = {**headers, **NO_STORE}
    try:
        body["queue"] = queue_counts(services.delivery_queue)
        body["github"] = {
            **Quota(services.require_redis()).summary(),
            "waiting_jobs": waiting_on_github(services.github_queue),
            "heads_without_files": len(services.heads.missing()),
        }
    except Exception as exc:
        body["queue"] = {"error": f"Redis is unreachable ({type(exc).__name__})"}
    if not admin and "github" in body and may_be_private(services.config):
        # GitHub's last error names the repository it was about, and says nothing of which: while any
        # repository may be private, it is the admin's (null to others, as when there is none).
        body["github"]["last_error"] = None
    if body["deliveries"][FAILED]:
        failures = services.ledger.failures()
        # Each failure names its repository and quotes its error: a private one's are the admin's.
        body["failed_deliveries"] = [
            f for f in failures if admin or (f["repo"] and services.config.is_public(f["repo"]))
        ]
    shown = {name.lower() for name in names}
    body["history"] = {
        # A backfill queued before the repository's first delivery is shown too (unless private).
        "runs": [
            run.as_dict()
            for run in services.history.runs()
            if run.full_name.lower() in shown
            or (services.config.is_public(run.full_name) and run.full_name not in names)
        ],
        "coverage": {name: coverage_summary(services.history, name, int(time.time()))["complete"] for name in names},
    }
    # A group's publication holds every member (tracker.records.publish): the admin's when one is private.
    config, tracked = services.config, services.state.repository_names()
    shown |= {
        group_subject(group)
        for group in config.groups
        if admin or all(config.is_public(member) for member in config.members_of(group, tracked))
    }
    publications = [p for p in services.records.publications(10) if p["repo"] in shown]  # newest first
    # Where a month was published (a directory of this machine, or an issue in a repository that may
    # be private) and what went wrong there: the admin's.
    body["publications"] = publications if admin else [_public_part(p) for p in publications]
    if services.config.narrator_model is not None:
        body["narrator"] = narrator_usage(services.narrations, services.settings, services.config, names)
    return body, 200, headers


# Hooks /api/v1/status shows, those that pinged last: a service has a hook or two (a repository's, an
# App's), and the table may hold more than GitHub ever sent (the hooks a replayed ping once added).
HOOKS_SHOWN = 10


def recent_hooks(hooks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The HOOKS_SHOWN hooks that pinged last, the latest first."""
    return sorted(hooks, key=lambda hook: (hook["last_ping_at"], hook["hook_id"]), reverse=True)[:HOOKS_SHOWN]


def _public_part(publication: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in publication.items() if key not in ("target", "detail")}


def narrator_usage(
    store: NarrationStore, settings: Settings, config: TrackerConfig, names: list[str]
) -> dict[str, Any]:
    """The language-model narrator's model and, per repository using it and month, how many sections have
    prose, what the narrator spent on the month (every request and its tokens, pruned prose and refused
    answers included) and its cost at TRACKER_LLM_INPUT_PRICE / _OUTPUT_PRICE (per million tokens)."""
    months = []
    for name in names:
        if config.narrator_for(name) != "llm":
            continue
        kept = store.usage_by_month(name)
        spent = store.spent_by_month(name)
        for month in sorted(set(kept) | set(spent)):
            bill = spent.get(month, Spent())
            cost = bill.prompt_tokens * settings.llm_input_price + bill.completion_tokens * settings.llm_output_price
            months.append(
                {
                    "repo": name,
                    "month": month,
                    "sections": kept[month].sections if month in kept else 0,
                    "requests": bill.requests,
                    "prompt_tokens": bill.prompt_tokens,
                    "completion_tokens": bill.completion_tokens,
                    "cost": round(cost / 1_000_000, 6),
                }
            )
    failure = store.last_error()  # the endpoint's last failure, of a repository this request may see
    shown = failure is not None and any(failure["repo"] == name.lower() for name in names)
    return {"model": config.narrator_model, "months": months, "last_error": failure if shown else None}


def redis_shown(settings: Settings) -> str:
    """REDIS_URL, or the embedded server's socket, with any password hidden (in the user part or a
    `password` query parameter)."""
    if not settings.redis_url:
        return EmbeddedRedis(settings.data_dir).url
    head, mark, query = settings.redis_url.partition("?")
    netloc = urlsplit(head).netloc
    user, at, host = netloc.rpartition("@")
    if at and ":" in user:
        head = head.replace(f"//{netloc}", f"//{user.partition(':')[0]}:***@{host}", 1)
    return head + mark + re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", query)


@blueprint.post("/api/v1/deliveries/retry-failed")
def retry_failed() -> Any:
    refusal = admin_refusal()  # as every admin endpoint: 503 off, 401 without the token, 403 a wrong one
    if refusal is not None:
        return refusal
    services = current_services()
    # Redis first, and the ledger only after the jobs are queued: while Redis is down nothing
    # changes (the deliveries stay failed, for another try), and a Redis that fails half-way
    # leaves them failed too (a job queued before the failure may still process its delivery).
    queue = services.delivery_queue
    failure = redis_failure(queue.connection)
    if failure is None:
        ids = services.ledger.ids_with_status(FAILED)
        try:
            enqueue_deliveries(queue, ids)
        except RedisError as exc:
            failure = exc
        else:
            services.ledger.reset_failed(ids)
            return {"requeued": len(ids)}
    log.warning("retry-failed refused: Redis is unreachable (%s: %s)", type(failure).__name__, failure)
    message = f"Redis is unreachable ({type(failure).__name__}): nothing was changed; try again once /healthz is 200"
    return {"error": message}, 503


@blueprint.get("/healthz")
def healthz() -> Any:
    services = current_services()
    checks: dict[str, str] = {}
    try:
        services.ledger.ping()
        checks["ledger"] = "ok"
    except Exception as exc:
        checks["ledger"] = f"unreachable ({type(exc).__name__})"
    # Within a second whatever Redis does (a probe of its own, no retries): a hung Redis is a 503.
    failure = redis_failure(services.redis) if services.redis is not None else SettingsError("no Redis")
    checks["redis"] = "ok" if failure is None else f"unreachable ({type(failure).__name__})"
    healthy = all(value == "ok" for value in checks.values())
    return {"status": "ok" if healthy else "unavailable", **checks}, 200 if healthy else 503


@blueprint.get("/")
def index() -> Any:
    """Every repository this visitor may see, its month to date and each month (newest first), with
    links to the HTML reports and their Markdown and JSON; without any, how to begin."""
    state = current_services().state
    names, headers = _listed_repositories()
    repos = [{**_split(name), "months": sorted(state.month_versions(name), reverse=True)} for name in names]
    return render_template("index.html", repositories=repos), 200, headers
