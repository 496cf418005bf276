"""A read-only page of RQ's queues, workers and failed jobs, for the admin: `GET /admin/rq` (HTML) and
`GET /admin/rq.json` (the same as JSON).

It replaces rq-dashboard (issue 31, item 8: its page needed `unsafe-eval`, showed job text unescaped,
and had state-changing routes without a CSRF check). Both routes answer to `Authorization: Bearer
<TRACKER_ADMIN_TOKEN>` alone and refuse as the API's admin endpoints do (`records.admin_refusal`:
401 without the token, 403 with a wrong one, 503 when none is configured).

Nothing here changes anything: these two GETs are the only routes (any other method is 405, any
other path below `/admin/rq` 404), and they read RQ's public API only, with the registries' clean-up
off (a count that cleans up moves expired jobs between registries: a write). Worker.all, which the
page needs, does drop the registration of a worker whose key has expired (RQ's own bookkeeping). The
ledger, not Redis, says what is pending; failed deliveries are retried by `POST
/api/v1/deliveries/retry-failed`.

Each value read from Redis (job ids, descriptions, errors, worker names) is cut to TEXT characters
and escaped by Jinja2's autoescape; each table has at most ROWS rows. The page has no script and
only an inline style sheet, which the app's Content-Security-Policy allows
(`tracker.web.app.SECURITY_HEADERS`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from flask import Blueprint, render_template
from redis import Redis
from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.exceptions import DeserializationError
from rq.job import Job
from rq.registry import (
    BaseRegistry,
    DeferredJobRegistry,
    FailedJobRegistry,
    FinishedJobRegistry,
    ScheduledJobRegistry,
    StartedJobRegistry,
)
from rq.results import Result
from rq.worker import BaseWorker

from tracker.queue import GITHUB_QUEUE_NAME, QUEUE_NAME, RECORDS_QUEUE_NAME
from tracker.records.views import admin_refusal
from tracker.web.access import NO_STORE, utc_text
from tracker.web.api import error_page
from tracker.web.context import services

PREFIX = "/admin/rq"
ROWS = 50  # rows of each table at most
TEXT = 240  # characters of any value read from Redis at most
# Shown even before RQ has registered them (an empty Redis): the queues the tracker uses.
TRACKER_QUEUES = (QUEUE_NAME, GITHUB_QUEUE_NAME, RECORDS_QUEUE_NAME)

blueprint = Blueprint("admin_rq", __name__)


@dataclass(frozen=True)
class QueueRow:
    name: str
    queued: int
    started: int
    scheduled: int
    deferred: int
    finished: int
    failed: int


@dataclass(frozen=True)
class WorkerRow:
    name: str
    state: str
    queues: str
    current_job: str | None
    last_heartbeat: str | None  # UTC, as every time here


@dataclass(frozen=True)
class FailedJob:
    id: str
    queue: str
    function: str | None
    description: str | None
    enqueued_at: str | None
    ended_at: str | None
    error: str | None  # the last line of the traceback: the exception and its message


@dataclass(frozen=True)
class Overview:
    queues: list[QueueRow]
    queues_total: int
    workers: list[WorkerRow]
    workers_total: int
    failed: list[FailedJob]  # the most recent first
    failed_total: int


@blueprint.get(PREFIX)
def page() -> Any:
    return _answer(html=True)


@blueprint.get(f"{PREFIX}.json")
def data() -> Any:
    return _answer(html=False)


def _answer(*, html: bool) -> Any:
    refusal = admin_refusal()
    if refusal is not None:
        body, status = refusal
        return error_page(status, body["error"], NO_STORE) if html else (body, status, NO_STORE)
    try:
        shown = overview(services().require_redis())
    except RedisError as exc:
        message = f"Redis is unreachable ({type(exc).__name__}): try again once /healthz is 200"
        return error_page(503, message, NO_STORE) if html else ({"error": message}, 503, NO_STORE)
    if html:
        return render_template("admin_rq.html", overview=shown), NO_STORE
    return asdict(shown), NO_STORE


# --- what RQ keeps in Redis, read only ---------------------------------------------------------------


def overview(connection: Redis) -> Overview:
    names = sorted({*TRACKER_QUEUES, *(queue.name for queue in Queue.all(connection=connection))})
    queues = [Queue(name, connection=connection) for name in names]
    failed = sorted(
        (job for queue in queues for job in _recent_failures(queue)),
        key=lambda job: job.ended_at or "",  # ISO 8601 in UTC: sorts as the moments do
        reverse=True,
    )
    workers = sorted(Worker.all(connection=connection), key=lambda worker: worker.name)
    counted = [_counts(queue) for queue in queues]
    return Overview(
        queues=counted[:ROWS],
        queues_total=len(counted),
        workers=[_worker_row(worker) for worker in workers[:ROWS]],
        workers_total=len(workers),
        failed=failed[:ROWS],
        failed_total=sum(row.failed for row in counted),
    )


def _counts(queue: Queue) -> QueueRow:
    def count(registry: type[BaseRegistry]) -> int:
        return registry(queue=queue).get_job_count(cleanup=False)

    return QueueRow(
        name=_cut(queue.name) or "",
        queued=queue.count,
        started=count(StartedJobRegistry),
        scheduled=count(ScheduledJobRegistry),
        deferred=count(DeferredJobRegistry),
        finished=count(FinishedJobRegistry),
        failed=count(FailedJobRegistry),
    )


def _recent_failures(queue: Queue) -> list[FailedJob]:
    """The queue's ROWS most recent failures (the registry's score is the failure time plus the job's
    failure_ttl, the same for all the tracker's jobs)."""
    registry = FailedJobRegistry(queue=queue)
    ids = registry.get_job_ids(0, ROWS - 1, desc=True, cleanup=False)
    return [_failed_job(job, queue.name) for job in Job.fetch_many(ids, connection=queue.connection) if job]


def _failed_job(job: Job, queue: str) -> FailedJob:
    result = job.latest_result()
    trace = result.exc_string if result is not None and result.type == Result.Type.FAILED else None
    lines = (trace or "").strip().splitlines()
    return FailedJob(
        id=_cut(job.id) or "",
        queue=_cut(queue) or "",
        function=_cut(_function(job)),
        description=_cut(job.description),
        enqueued_at=_moment(job.enqueued_at),
        ended_at=_moment(job.ended_at),
        error=_cut(lines[-1]) if lines else None,
    )


def _function(job: Job) -> str | None:
    try:
        return job.func_name
    except DeserializationError:  # a job stored by another release, whose arguments no longer load
        return None


def _worker_row(worker: BaseWorker) -> WorkerRow:
    return WorkerRow(
        name=_cut(worker.name) or "",
        state=_cut(worker.get_state()) or "",
        queues=_cut(", ".join(worker.queue_names())) or "",
        current_job=_cut(worker.get_current_job_id()),
        last_heartbeat=_moment(worker.last_heartbeat),
    )


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= TEXT:
        return text
    return text[: TEXT - 1] + "…"


def _moment(moment: datetime | None) -> str | None:
    return utc_text(moment) if moment is not None else None
