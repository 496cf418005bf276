"""`tracker/records/finalize.py` and `tracker/records/store.py`: a month's final report frozen as its
record, on SQLite and PostgreSQL, with expectations written by hand."""

from __future__ import annotations

import json
import multiprocessing
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.clock import at
from tests.support.tracking import Tracker
from tracker.config import RepositoryConfig, TrackerConfig
from tracker.core.window import Month, WindowError, month_window
from tracker.records.finalize import (
    MonthNotEnded,
    due_months,
    finalize,
    late_deliveries,
    month_end,
    served_record,
)
from tracker.records.store import DOCUMENTS, MonthRecord, RecordStore
from tracker.reports.loading import UnknownRepository, report_for
from tracker.reports.render import render
from tracker.reports.request import MonthRequest
from tracker.store.database import connect
from tracker.store.heads import HeadStore
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState

pytestmark = needs_shared

SHANGHAI = "Asia/Shanghai"
REPO = "octo-org/octo-repo"
WEST = "octo-org/west-repo"  # the same stories, in America/Los_Angeles
CONFIG = TrackerConfig(repositories={WEST: RepositoryConfig(timezone="America/Los_Angeles")})
AFTER_JULY = datetime(2026, 8, 2, tzinfo=UTC)  # July has ended everywhere


def july(repo: str = REPO) -> list[PullRequestStory]:
    """#1 opened Jul 6, merged Jul 9 (Shanghai); #2 opened Jul 20, merged at 2026-07-31T17:00Z, which
    is Aug 1 01:00 in Shanghai but Jul 31 10:00 in Los Angeles; #3 opened Jul 25, still open."""
    return [
        PullRequestStory(1, at("2026-07-06T02:00:00+00:00"), repo=repo, title="Faster data loader")
        .opened()
        .merged(at("2026-07-09T02:00:00+00:00")),
        PullRequestStory(2, at("2026-07-20T02:00:00+00:00"), repo=repo, title="Checkpoint resharding")
        .opened()
        .merged(at("2026-07-31T17:00:00+00:00")),
        PullRequestStory(3, at("2026-07-25T02:00:00+00:00"), repo=repo, title="Expert parallel overlap").opened(),
    ]


@pytest.fixture
def tracker(engine: Engine) -> Tracker:
    return Tracker(Ledger(engine), MonthState(engine), HeadStore(engine), CONFIG)


@pytest.fixture
def filled(tracker: Tracker) -> Tracker:
    for story in july(REPO) + july(WEST):
        tracker.deliver(story.deliveries)
    tracker.give_files({1: ["megatron/core/data.py"], 2: ["megatron/core/ckpt.py"], 3: ["megatron/core/moe.py"]})
    return tracker


@pytest.fixture
def records(engine: Engine) -> RecordStore:
    return RecordStore(engine)


def freeze(
    tracker: Tracker,
    repo: str = REPO,
    month: str = "2026-07",
    *,
    force: bool = False,
    trigger: str = "cli",
    now: datetime | None = None,
) -> tuple[MonthRecord, bool]:
    return finalize(tracker, repo, month, force=force, trigger=trigger, now=now)


def test_a_month_that_has_not_ended_is_refused_saying_when_it_ends(filled: Tracker, records: RecordStore) -> None:
    # 2026-07-31T15:59:59Z is 23:59:59 on the last day in Shanghai.
    with pytest.raises(MonthNotEnded) as refused:
        freeze(filled, now=at("2026-07-31T15:59:59+00:00"))
    assert refused.value.ends_at == int(at("2026-07-31T16:00:00+00:00").timestamp())
    assert "it ends at 2026-07-31T16:00:00Z (midnight in Asia/Shanghai)" in str(refused.value)
    assert records.latest(REPO, "2026-07") is None
    with pytest.raises(WindowError):
        freeze(filled, month="2026-13")
    with pytest.raises(UnknownRepository):
        freeze(filled, repo="nobody/nothing")


def test_forced_before_the_end_it_stops_at_today(filled: Tracker, records: RecordStore) -> None:
    record, created = freeze(filled, force=True, now=at("2026-07-20T04:00:00+00:00"))
    assert created and record.revision == 1 and record.forced
    assert record.cutoff == "2026-07-20"
    assert json.loads(record.document("json", ""))["final"] is False


def test_the_record_is_the_final_report_in_every_format(filled: Tracker, records: RecordStore) -> None:
    record, created = freeze(filled, now=AFTER_JULY, trigger="schedule")
    assert created and record.revision == 1 and not record.forced and record.trigger == "schedule"
    assert record.cutoff == "2026-07-31"
    window = month_window(Month.parse("2026-07"), record_day(record), SHANGHAI)
    report = report_for(filled, MonthRequest(REPO, window))
    for fmt, lang in DOCUMENTS:
        assert record.document(fmt, lang or "en") == render(report, fmt, lang or "en")
    document = json.loads(record.document("json", ""))
    assert document["final"] is True
    # Shanghai: #2's merge at 2026-07-31T17:00Z is August 1: July counts one merge (#1).
    assert document["stats"]["merged"] == 1
    assert record.document("md", "en").splitlines()[0].endswith("(Final, through July 31, 2026)")
    assert record.pending == {"deliveries": 0, "pending_classification": 0}
    assert record.position.deliveries_received == record.position.deliveries_processed == 10
    assert len(record.content_hash) == 64 and len(record.config_hash) == 64


def record_day(record: MonthRecord) -> date:
    return date.fromisoformat(record.cutoff)


def test_the_time_zone_edge_puts_a_merge_in_the_right_month(filled: Tracker, records: RecordStore) -> None:
    east, _ = freeze(filled, repo=REPO, now=AFTER_JULY)
    west, _ = freeze(filled, repo=WEST, now=AFTER_JULY)
    east_prs = {pr["number"]: pr for pr in json.loads(east.document("json", ""))["pull_requests"]}
    west_prs = {pr["number"]: pr for pr in json.loads(west.document("json", ""))["pull_requests"]}
    assert east_prs[2]["state_at_cutoff"] == "open"  # merged on August 1 in Shanghai
    assert west_prs[2]["state_at_cutoff"] == "merged"  # on July 31 in Los Angeles
    assert json.loads(west.document("json", ""))["stats"]["merged"] == 2


def test_los_angeles_finalises_fifteen_hours_after_shanghai(filled: Tracker, records: RecordStore) -> None:
    # July ends at 2026-07-31T16:00Z in Shanghai (UTC+8) and 2026-08-01T07:00Z in Los Angeles (PDT, UTC-7).
    assert month_end("2026-07", SHANGHAI) == int(at("2026-07-31T16:00:00+00:00").timestamp())
    assert month_end("2026-07", "America/Los_Angeles") - month_end("2026-07", SHANGHAI) == 15 * 3600
    grace = 3600.0
    just_after_shanghai = at("2026-07-31T17:00:00+00:00")
    assert ("octo-org/octo-repo", "2026-07") in due(filled, grace, just_after_shanghai)
    assert ("octo-org/west-repo", "2026-07") not in due(filled, grace, just_after_shanghai)
    fifteen_hours_later = just_after_shanghai + timedelta(hours=15)
    assert ("octo-org/west-repo", "2026-07") in due(filled, grace, fifteen_hours_later)
    assert ("octo-org/west-repo", "2026-07") not in due(filled, grace, fifteen_hours_later - timedelta(seconds=1))
    freeze(filled, repo=REPO, now=fifteen_hours_later)
    assert ("octo-org/octo-repo", "2026-07") not in due(filled, grace, fifteen_hours_later)


def due(tracker: Tracker, grace: float, now: datetime) -> list[tuple[str, str]]:
    return due_months(tracker, grace_seconds=grace, now=now)


def test_finalising_again_returns_the_record_and_forcing_adds_a_revision(filled: Tracker, records: RecordStore) -> None:
    first, created = freeze(filled, now=AFTER_JULY)
    again, created_again = freeze(filled, now=AFTER_JULY)
    assert created and not created_again
    assert again.revision == 1 and again.content_hash == first.content_hash
    forced, created_forced = freeze(filled, now=AFTER_JULY, force=True)
    assert created_forced and forced.revision == 2 and forced.forced
    assert [r.revision for r in records.all(REPO, "2026-07")] == [1, 2]
    assert records.latest(REPO, "2026-07").revision == 2  # type: ignore[union-attr]


def test_a_late_delivery_changes_nothing_in_the_record_and_is_counted(filled: Tracker, records: RecordStore) -> None:
    record, _ = freeze(filled, now=AFTER_JULY)
    before = {key: record.document(*key) for key in DOCUMENTS}
    time.sleep(0.01)  # received after the record (milliseconds)
    late = PullRequestStory(4, at("2026-07-28T02:00:00+00:00"), repo=REPO, title="A July PR seen in August").opened()
    elsewhere = PullRequestStory(5, at("2026-08-05T02:00:00+00:00"), repo=REPO, title="An August PR").opened()
    filled.deliver(late.deliveries + elsewhere.deliveries)
    window = month_window(Month.parse("2026-07"), record_day(record), SHANGHAI)
    served = served_record(records, MonthRequest(REPO, window))
    assert served is not None and {key: served.document(*key) for key in DOCUMENTS} == before
    assert late_deliveries(records, served, SHANGHAI) == {"count": 1, "pull_requests": [4]}
    # The live report sees #4; the record does not.
    live = report_for(filled, MonthRequest(REPO, window))
    assert 4 in {pr.status.number for pr in live.snapshot.pull_requests}
    assert 4 not in {pr["number"] for pr in json.loads(served.document("json", ""))["pull_requests"]}


def test_what_was_pending_is_said_in_the_record(tracker: Tracker, records: RecordStore) -> None:
    tracker.deliver(july(REPO)[0].deliveries)  # no files stored: #1 is pending classification
    record, _ = freeze(tracker, now=AFTER_JULY)
    assert record.pending == {"deliveries": 0, "pending_classification": 1}


def test_a_partial_request_is_not_served_from_the_record(filled: Tracker, records: RecordStore) -> None:
    freeze(filled, now=AFTER_JULY)
    month = Month.parse("2026-07")
    partial = MonthRequest(REPO, month_window(month, month.last_day - timedelta(days=1), SHANGHAI))
    assert served_record(records, partial) is None


def _finalize_in_a_process(url: str, barrier: Any, results: Any) -> None:
    engine = connect(url)
    try:
        tracker = Tracker(Ledger(engine), MonthState(engine), HeadStore(engine), CONFIG)
        barrier.wait(10)
        record, created = finalize(tracker, REPO, "2026-07", now=AFTER_JULY)
        results.put((record.revision, created, record.content_hash))
    finally:
        engine.dispose()


@pytest.mark.system
def test_two_finalisations_at_once_in_two_processes_store_one_record(
    filled: Tracker, records: RecordStore, database_url: str
) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(3), context.Queue()
    processes = [
        context.Process(target=_finalize_in_a_process, args=(database_url, barrier, results)) for _ in range(3)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(30)
        assert process.exitcode == 0
    assert sorted(created for _, created, _ in outcomes) == [False, False, True]
    assert {revision for revision, _, _ in outcomes} == {1}
    assert len({content for _, _, content in outcomes}) == 1
    assert [r.revision for r in records.all(REPO, "2026-07")] == [1]
