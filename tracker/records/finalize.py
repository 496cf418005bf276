"""Finalising a month: its final report rendered once in every format, frozen as the month's record,
and served from then on byte for byte, whatever arrives later.

A month ends at local midnight after its last day in the repository's time zone. Before that it is
only finalised when forced (the record then says the day it stops at). Finalising a month that has a
record returns that record, unless forced: a forced finalisation adds the next revision and keeps
every earlier one. A record of a repository that uses the language-model narrator says in `pending` which
sections had no prose yet (`narration`): prose written later adds a revision (tracker.narration.jobs).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tracker.config import TrackerConfig
from tracker.core.derive import derive
from tracker.core.payloads import IncompleteBody, MalformedBody
from tracker.core.repository import repository_key
from tracker.core.window import Month, WindowError, iso_utc, local_midnight, month_window
from tracker.records.store import DOCUMENTS, MonthRecord, Position, RecordStore, content_hash
from tracker.reports.loading import UnknownRepository, report_for, snapshot_for
from tracker.reports.render import render
from tracker.reports.request import MonthRequest, ReportServices
from tracker.store.ledger import now_ms
from tracker.store.month_state import MonthState


class MonthNotEnded(ValueError):
    """The month has not ended in the repository's time zone (and finalising was not forced)."""

    def __init__(self, month: str, ends_at: int, timezone: str) -> None:
        super().__init__(
            f"{month} has not ended yet: it ends at {iso_utc(ends_at)} (midnight in {timezone}); "
            "finalise it then, or force it"
        )
        self.ends_at = ends_at


@dataclass(frozen=True)
class Readiness:
    """What a finalisation would still wait for."""

    pending_deliveries: int  # the repository's deliveries not processed yet
    pending_classification: int  # the month's PRs whose files are not known yet

    @property
    def ready(self) -> bool:
        return self.pending_deliveries == 0 and self.pending_classification == 0

    def as_dict(self) -> dict[str, int]:
        return {"deliveries": self.pending_deliveries, "pending_classification": self.pending_classification}


def month_end(month: str, timezone: str) -> int:
    """The instant (epoch seconds) the month ends: local midnight after its last day."""
    return local_midnight(Month.parse(month).last_day + timedelta(days=1), ZoneInfo(timezone))


def stored_name(state: MonthState, full_name: str) -> str:
    stored = state.repository_name(full_name)
    if stored is None:
        raise UnknownRepository(f"no deliveries have been received for {full_name}")
    return stored


def final_request(
    services: ReportServices, full_name: str, month: str, *, force: bool, now: datetime | None = None
) -> MonthRequest:
    """The window a finalisation renders: the whole month once it has ended; before, only when
    forced, up to today. Raises UnknownRepository, WindowError or MonthNotEnded."""
    stored = stored_name(services.state, full_name)
    timezone = services.config.timezone_for(stored)
    parsed, cutoff, today = final_cutoff(month, timezone, force=force, now=now)
    return MonthRequest(stored, month_window(parsed, cutoff, timezone, ended=cutoff < today))


def final_cutoff(month: str, timezone: str, *, force: bool, now: datetime | None = None) -> tuple[Month, date, date]:
    """The month, the cutoff a finalisation renders in `timezone` (the month's last day once it has ended;
    before, only when forced, today) and today there. Raises WindowError or MonthNotEnded."""
    parsed = Month.parse(month)
    moment = now or datetime.now(UTC)
    today = moment.astimezone(ZoneInfo(timezone)).date()
    if parsed.first_day > today:
        raise WindowError(f"month {parsed} has not started yet (today is {today.isoformat()} in {timezone})")
    ends = month_end(str(parsed), timezone)
    if moment.timestamp() < ends and not force:
        raise MonthNotEnded(str(parsed), ends, timezone)
    return parsed, min(parsed.last_day, today), today


def readiness(services: ReportServices, request: MonthRequest) -> Readiness:
    snapshot = snapshot_for(services, request)  # the numbers only: no groups, no themes
    return Readiness(services.ledger.pending_for(request.repo), snapshot.pending_classification)


def finalize(
    services: ReportServices,
    full_name: str,
    month: str,
    *,
    force: bool = False,
    trigger: str = "cli",
    now: datetime | None = None,
) -> tuple[MonthRecord, bool]:
    """The month's record, and whether this call created it. Raises UnknownRepository, WindowError
    or MonthNotEnded (see `final_request`)."""
    state, ledger, records, config = services.state, services.ledger, services.records, services.config
    request = final_request(services, full_name, month, force=force, now=now)
    month_text = str(request.window.month)
    if not force:
        existing = records.latest(request.repo, month_text)
        if existing is not None:
            return existing, False
    version, generation = state.month_version(request.repo, month_text)
    counts = ledger.counts()
    report = report_for(services, request)
    documents = {(fmt, lang): render(report, fmt, lang or "en") for fmt, lang in DOCUMENTS}
    left = Readiness(ledger.pending_for(request.repo), report.snapshot.pending_classification)
    pending: dict[str, Any] = left.as_dict()
    if report.narrator.get("kind") == "llm":  # the sections the narrator wrote no prose for (yet)
        written = report.narrator.get("sections", ())
        pending["narration"] = [s.id for s in report.sections if s.changes and s.id not in written]
    record = MonthRecord(
        full_name=request.repo,
        month=month_text,
        revision=0,  # the store decides
        cutoff=request.window.cutoff.isoformat(),
        created_at=now_ms(),
        trigger=trigger,
        forced=force,
        position=Position(version, generation, counts.received, counts.processed),
        config_hash=config_hash(config),
        content_hash=content_hash([documents[key] for key in DOCUMENTS]),
        pending=pending,
        documents=documents,
    )
    stored = records.add(record, first_only=not force)
    if stored is None:  # another finalisation stored revision 1 meanwhile: that one is the record
        existing = records.latest(request.repo, month_text)
        assert existing is not None
        return existing, False
    return stored, True


def config_hash(config: TrackerConfig) -> str:
    return hashlib.sha256(config.model_dump_json().encode()).hexdigest()


def served_record(records: RecordStore, request: MonthRequest) -> MonthRecord | None:
    """The record that answers a request for the month at its last day (the default cutoff of an
    ended month), if the month has one."""
    if not request.window.final:
        return None
    return records.latest(request.repo, str(request.window.month))


def late_deliveries(records: RecordStore, record: MonthRecord, timezone: str) -> dict[str, Any]:
    """Deliveries received after the record that carry facts of its month, and the PRs they are
    about: what an operator weighs before re-finalising."""
    count = 0
    numbers: set[int] = set()
    for delivery_id, content_type, body in records.deliveries_since(record.full_name, record.created_at):
        try:
            derivation = derive(delivery_id, content_type, body, lambda _name: timezone)
        except (MalformedBody, IncompleteBody):
            continue
        if record.month in derivation.activity_months and derivation.repo == repository_key(record.full_name):
            count += 1
            numbers.add(derivation.number)
    return {"count": count, "pull_requests": sorted(numbers)}


def due_months(services: ReportServices, *, grace_seconds: float, now: datetime | None = None) -> list[tuple[str, str]]:
    """(repository, month) of every month with activity that ended more than `grace_seconds` ago in
    its repository's time zone and has no record yet, oldest first."""
    moment = (now or datetime.now(UTC)).timestamp()
    recorded = services.records.recorded_months()
    due = []
    for full_name in services.state.repository_names():
        timezone = services.config.timezone_for(full_name)
        for month in services.state.month_versions(full_name):
            if (repository_key(full_name), month) in recorded:
                continue
            if month_end(month, timezone) + grace_seconds <= moment:
                due.append((full_name, month))
    return sorted(due, key=lambda item: (item[1], item[0].lower()))
