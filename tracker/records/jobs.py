"""The month-end job: freeze a month's final report as its record once what it reads has arrived, then publish
it (tracker.records.publish); and a group's, once its members are recorded (tracker.records.groups). Asked for by
the schedule (`workers.jobs.due_work`), the API or the CLI."""

from __future__ import annotations

import time

from tracker import metrics
from tracker.narration.jobs import narration_settled
from tracker.queue import enqueue_finalize
from tracker.records.finalize import final_request, finalize, readiness
from tracker.records.groups import MembersNotRecorded, finalize_group
from tracker.records.publish import publish, publish_group
from tracker.services import Services

# While the month's deliveries or files are still coming, a finalisation looks again this often,
# until its deadline (TRACKER_FINALIZE_WAIT after it was asked for).
FINALIZE_RECHECK_SECONDS = 15


def finalize_month(
    services: Services,
    full_name: str,
    month: str,
    force: bool = False,
    trigger: str = "api",
    deadline: float = 0.0,
    attempt: int = 0,
) -> str:
    """Freeze the month's final report as its record, once nothing it reads is pending and, for a repository
    that uses the narrator, its narration ran or failed (or the deadline passed: the record then says what was
    left pending); then publish it where configured."""
    request = final_request(services, full_name, month, force=force)
    if not force:
        existing = services.records.latest(request.repo, str(request.window.month))
        if existing is not None:
            return f"already recorded (revision {existing.revision})"
    if time.time() < deadline and services.redis is not None:
        # Deliveries and files first, then the narrator (which writes from them): each re-checked later.
        waiting = readiness(services, request)
        if not waiting.ready:
            why = f"{waiting.pending_deliveries} deliveries and {waiting.pending_classification} PRs' files"
        elif not narration_settled(services, full_name, month):
            why = "the narrator"
        else:
            why = ""
        if why:
            enqueue_finalize(
                services.records_queue,
                full_name,
                month,
                force=force,
                trigger=trigger,
                deadline=deadline,
                attempt=attempt + 1,
                at=time.time() + FINALIZE_RECHECK_SECONDS,
            )
            return f"waiting for {why}"
    record, created = finalize(services, full_name, month, force=force, trigger=trigger)
    if not created:
        return f"already recorded (revision {record.revision})"
    metrics.finalized()
    published = publish(services, record.full_name, record.month)
    return f"recorded revision {record.revision}" + (f"; {published}" if published else "")


def finalize_group_month(services: Services, name: str, month: str, force: bool = False, trigger: str = "api") -> str:
    """Freeze a group's month as its record once every member with activity in it has its own record (the
    schedule asks again while one has not: `workers.jobs.due_work`), then publish it where the group's config
    says (files and its issue, published here; an issue GitHub makes wait is re-scheduled)."""
    try:
        record, created = finalize_group(services, name, month, force=force, trigger=trigger, cache=services.redis)
    except MembersNotRecorded as exc:
        return f"waiting for the members' records ({', '.join(exc.missing)})"
    if not created:
        return f"already recorded (revision {record.revision})"
    metrics.finalized()
    published = publish_group(services, record.name, record.month)
    return f"recorded revision {record.revision}" + (f"; {published}" if published else "")
