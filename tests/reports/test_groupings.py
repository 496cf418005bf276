"""The theme grouping kept in Redis by content (tracker.reports.groupings): read instead of computed, never
stale when the data changes, and the same as a computation from nothing. A real ledger (SQLite), a real
Redis, real Megatron-LM titles and paths (bench/fixtures/scenario.py), applied the way the worker applies them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from redis import Redis

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from bench.fixtures.scenario import REPO, megatron_month
from tests.support.months import copy_sqlite
from tests.support.tracking import Tracker
from tracker.config import TrackerConfig
from tracker.core import clusters
from tracker.core.noise import MAINTENANCE_THEME
from tracker.core.report import Report
from tracker.queue import connect_redis
from tracker.reports import groupings
from tracker.reports.loading import report_for, resolve
from tracker.reports.render import render
from tracker.reports.request import MonthRequest
from tracker.store.database import connect
from tracker.store.heads import HeadStore
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState

pytestmark = needs_shared

TODAY = date(2026, 6, 10)
CUTOFF = "2026-05-20"


def tracker(path: Path) -> Tracker:
    engine = connect(f"sqlite:///{path}")
    return Tracker(Ledger(engine), MonthState(engine), HeadStore(engine), TrackerConfig())


@pytest.fixture(scope="module")
def ledger_of_may(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 real PRs of May 2026, their files as fetched: a ledger made once for the module."""
    path = tmp_path_factory.mktemp("may") / "l.sqlite3"
    made = tracker(path)
    scenario = megatron_month(count=40, still_open=8)
    made.deliver([d for story in scenario.stories for d in story.deliveries])
    made.give_files({number: paths for (number, _), paths in scenario.files.items()})
    made.state.engine.dispose()
    return path


@pytest.fixture
def may(ledger_of_may: Path, tmp_path: Path) -> Iterator[Tracker]:
    """The 40 PRs of May 2026, in a copy of the module's ledger of them for each test."""
    copy_sqlite(ledger_of_may, tmp_path / "l.sqlite3")
    copied = tracker(tmp_path / "l.sqlite3")
    try:
        yield copied
    finally:
        copied.state.engine.dispose()


def _day(day: int) -> datetime:
    return datetime(2026, 5, day, 4, tzinfo=UTC)


def grouping_keys(redis: Redis) -> set[bytes]:
    return set(redis.scan_iter(match=f"{groupings.PREFIX}*"))


def request(tracker: Tracker) -> MonthRequest:
    return resolve(tracker, REPO, "2026-05", CUTOFF, today=TODAY)


def from_nothing(tracker: Tracker) -> Report:
    """A real computation: no Redis, no grouping remembered in the process."""
    clusters.forget()
    return report_for(tracker, request(tracker))


def themes(report: Report) -> list[tuple[str, list[list[int]]]]:
    return [
        (theme.en, [[n for change in h.changes for n in change.numbers] for h in theme.highlights])
        for section in report.sections
        for theme in section.themes
    ]


def test_each_sections_grouping_is_kept_and_equals_a_computation_from_nothing(may: Tracker, redis: Redis) -> None:
    clusters.forget()
    cached = report_for(may, request(may), cache=redis)
    assert len(grouping_keys(redis)) == sum(1 for section in cached.sections if section.changes) == 2
    for key in grouping_keys(redis):
        assert 0 < redis.ttl(key) <= groupings.GROUPING_SECONDS
    # Another process (nothing remembered in this one) reads it, and gets what a computation gives.
    clusters.forget()
    again = report_for(may, request(may), cache=redis)
    first, second = from_nothing(may), from_nothing(may)  # two real computations
    assert render(first, "json", "en") == render(second, "json", "en")
    for report in (cached, again):
        assert render(report, "json", "en") == render(first, "json", "en")
        assert render(report, "md", "zh-CN") == render(first, "md", "zh-CN")


def test_a_stored_grouping_is_read_instead_of_computed(may: Tracker, redis: Redis) -> None:
    clusters.forget()
    report_for(may, request(may), cache=redis)
    assert len(grouping_keys(redis)) == 2
    # Plant a grouping of the same items: every change in one theme.
    for key in grouping_keys(redis):
        stored = json.loads(redis.get(key) or b"[]")
        members = sorted(m for g in stored for m in g["members"])
        topic = {"members": members, "terms": ["planted"], "share": 1.0}
        planted = [{"members": members, "terms": ["planted"], "topics": [topic], "other": False}]
        redis.set(key, json.dumps(planted), keepttl=True)
    clusters.forget()
    read = report_for(may, request(may), cache=redis)
    # Every change the grouping saw in one theme (upkeep is apart: it is not grouped).
    grouped = [[theme for theme in section.themes if theme.id != MAINTENANCE_THEME[0]] for section in read.sections]
    assert [len(themes) for themes in grouped] == [1, 1]
    assert all(theme.en.startswith("Planted") for themes in grouped for theme in themes)


def test_a_grouping_that_does_not_fit_its_items_is_computed_again(may: Tracker, redis: Redis) -> None:
    clusters.forget()
    report_for(may, request(may), cache=redis)
    for key in grouping_keys(redis):
        redis.set(key, b'[{"members": [0], "terms": [], "topics": [], "other": false}]', keepttl=True)
    clusters.forget()
    again = report_for(may, request(may), cache=redis)
    assert render(again, "json", "en") == render(from_nothing(may), "json", "en")


def test_new_data_is_a_new_grouping_never_a_stale_one(may: Tracker, redis: Redis) -> None:
    clusters.forget()
    before = report_for(may, request(may), cache=redis)
    keys_before = grouping_keys(redis)
    # Three new PRs of one story, opened in the window and still open: In Progress changes, Delivered not.
    titles = {9101: "Add MXFP8 grouped GEMM", 9102: "MXFP8 grouped GEMM for MoE", 9103: "Tune MXFP8 GEMM"}
    for number, title in titles.items():
        story = PullRequestStory(number, _day(12), repo=REPO, title=title).opened()
        may.deliver(story.deliveries)
    may.give_files({n: ["megatron/core/fusions/mxfp8_gemm.py"] for n in (9101, 9102, 9103)})
    after = report_for(may, request(may), cache=redis)
    keys_after = grouping_keys(redis)
    assert len(keys_after - keys_before) == 1  # In Progress grouped anew; Delivered's content is the same
    new_numbers = {n for section in after.sections for change in section.changes for n in change.numbers}
    assert {9101, 9102, 9103} <= new_numbers
    assert themes(after) != themes(before)
    assert render(after, "json", "en") == render(from_nothing(may), "json", "en")
    # A retitle changes the items again.
    story = PullRequestStory(9103, _day(12), repo=REPO, title="Tune MXFP8 GEMM").opened()
    story.retitled(_day(13), "Document the release process")
    may.deliver(story.deliveries[1:])
    retitled = report_for(may, request(may), cache=redis)
    assert len(grouping_keys(redis) - keys_after) == 1
    assert render(retitled, "md", "en") == render(from_nothing(may), "md", "en")
    assert "Document the release process" in render(retitled, "md", "en")


def test_a_redis_that_fails_costs_a_grouping_nothing_more(may: Tracker) -> None:
    # The client the app makes (its short timeouts and retries), of a Redis that is not there: a client with
    # redis-py's own retries waited 10 s and more for its back-offs, which only made the test slow.
    dead = connect_redis("redis://127.0.0.1:1/0")
    clusters.forget()
    report = report_for(may, request(may), cache=dead)
    assert render(report, "json", "en") == render(from_nothing(may), "json", "en")
