"""Finalising a group's month (`groups:` in TRACKER_CONFIG): its report over every member (the admin's view) rendered
once in every format and frozen as the group's record, as a repository's month is (tracker.records.finalize).

A group's month ends at local midnight after its last day in the group's time zone (`group_timezone`). It is
then finalised once every member with activity in the month has its own month's record: the group's record is
the merge of its members' records, the same documents the group's route serves at the month's last day. Before
that it is only finalised when forced, and a forced finalisation reads a member without a record live, as the
route does (the record names them in `pending.live`). Finalising a month that has a record returns that record,
unless forced: a forced finalisation adds the next revision and keeps every earlier one.

The record names every member, private ones too: the group's route serves it only to a reader who may read
every member it names (tracker.reports.groups.group_record_for).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from redis import Redis

from tracker.core.window import Window
from tracker.records.finalize import config_hash, final_cutoff, month_end, served_record
from tracker.records.store import DOCUMENTS, GroupRecord, MonthRecord, content_hash, group_key
from tracker.reports.collector import collector_paused
from tracker.reports.groups import (
    GroupRequest,
    UnknownGroup,
    group_report,
    group_timezone,
    render_group,
    resolve_group,
)
from tracker.reports.request import MonthRequest, ReportServices
from tracker.store.ledger import now_ms


class MembersNotRecorded(ValueError):
    """Some members with activity in the month have no month's record yet (and finalising was not forced)."""

    def __init__(self, group: str, month: str, missing: Sequence[str]) -> None:
        super().__init__(
            f"{month} of the group {group} waits for its members' own records: {', '.join(missing)} "
            f"{'has' if len(missing) == 1 else 'have'} none yet; finalise {'it' if len(missing) == 1 else 'them'} "
            "first (the schedule does), or force it (members without a record are then read live)"
        )
        self.missing = tuple(missing)


def _every_member(_repo: str, _window: Window) -> bool:
    return True  # a record is the admin's view: every member


def group_final_request(
    services: ReportServices, name: str, month: str, *, force: bool, now: datetime | None = None
) -> GroupRequest:
    """The group over every member, in the window a finalisation renders: the whole month once it has ended in
    the group's time zone; before, only when forced, up to today. Raises UnknownGroup, WindowError or
    MonthNotEnded."""
    config = services.config
    group = config.group_named(name)
    if group is None:
        raise UnknownGroup(name)
    parsed, cutoff, today = final_cutoff(month, group_timezone(config), force=force, now=now)
    # Each member's today is its own (None), unless a moment was given (tests): then the group's.
    return resolve_group(
        services, group, str(parsed), cutoff.isoformat(), _every_member, today=today if now is not None else None
    )


def members_records(services: ReportServices, group: GroupRequest) -> dict[MonthRequest, MonthRecord | None]:
    """Each member's record that answers its month at the group's cutoff (as the group's route reads it)."""
    return {member: served_record(services.records, member) for member in group.members}


def unrecorded_members(
    services: ReportServices, group: GroupRequest, records: dict[MonthRequest, MonthRecord | None]
) -> list[str]:
    """The members with activity in the group's month and no record of it: what a finalisation waits for. A
    member without activity in the month has nothing to record (the schedule never finalises it)."""
    month = str(group.month)
    return [
        member.repo
        for member, record in records.items()
        if record is None and month in services.state.month_versions(member.repo)
    ]


def finalize_group(
    services: ReportServices,
    name: str,
    month: str,
    *,
    force: bool = False,
    trigger: str = "cli",
    now: datetime | None = None,
    cache: Redis | None = None,
) -> tuple[GroupRecord, bool]:
    """The group's month's record, and whether this call created it. Raises UnknownGroup, WindowError,
    MonthNotEnded (see `group_final_request`) or MembersNotRecorded (unless forced). `cache`: the render cache
    a member read live is taken from (tracker.reports.cache)."""
    group = group_final_request(services, name, month, force=force, now=now)
    month_text = str(group.month)
    if not force:
        existing = services.records.latest_group(group.name, month_text)
        if existing is not None:
            return existing, False
    records = members_records(services, group)
    missing = unrecorded_members(services, group, records)
    if missing and not force:
        raise MembersNotRecorded(group.name, month_text, missing)
    with collector_paused():
        report = group_report(services, group, cache, records)
        documents = {(fmt, lang): render_group(report, fmt, lang or "en").decode("utf-8") for fmt, lang in DOCUMENTS}
    members: list[dict[str, Any]] = []
    for member, kept in records.items():
        if kept is not None:
            members.append({"repo": member.repo, "revision": kept.revision, "content_hash": kept.content_hash})
        else:
            members.append({"repo": member.repo, "revision": None, "content_hash": None})
    members += [{"repo": repo, "revision": None, "content_hash": None} for repo in group.waiting]
    record = GroupRecord(
        name=group.name,
        month=month_text,
        revision=0,  # the store decides
        cutoff=group.cutoff.isoformat(),
        created_at=now_ms(),
        trigger=trigger,
        forced=force,
        members=tuple(members),
        config_hash=config_hash(services.config),
        content_hash=content_hash([documents[key] for key in DOCUMENTS]),
        # Read live: members without a record (active or not); waiting: members with no delivery at all.
        pending={
            "live": [member.repo for member, kept in records.items() if kept is None],
            "unrecorded": missing,
            "waiting": list(group.waiting),
        },
        documents=documents,
    )
    stored = services.records.add_group(record, first_only=not force)
    if stored is None:  # another finalisation stored revision 1 meanwhile: that one is the record
        existing = services.records.latest_group(group.name, month_text)
        assert existing is not None
        return existing, False
    return stored, True


def due_group_months(
    services: ReportServices, *, grace_seconds: float, now: datetime | None = None
) -> list[tuple[str, str]]:
    """(group, month) of every group's month in which a member has activity, that ended more than
    `grace_seconds` ago in the group's time zone and has no record yet, oldest first. Whether its members are
    recorded is the finalisation's to check: a group waiting for them stays due, and is looked at again."""
    config = services.config
    if not config.groups:
        return []
    moment = (now or datetime.now(UTC)).timestamp()
    recorded = services.records.recorded_group_months()
    tracked = services.state.repository_names()
    zone = group_timezone(config)
    due = []
    for group in config.groups:
        months: set[str] = set()
        for repo in config.members_of(group, tracked):
            months.update(services.state.month_versions(repo))
        for month in sorted(months):
            if (group_key(group), month) not in recorded and month_end(month, zone) + grace_seconds <= moment:
                due.append((group, month))
    return sorted(due, key=lambda item: (item[1], item[0].lower()))
