"""Deliveries can arrive late, twice, or out of order: the result must be the same as if they had
arrived once, in order (SEMANTICS, "Events and state").

The reference is a fresh SQLite ledger fed every delivery once, in the order the events happened,
each processed by the real job function (`workers.jobs.process_delivery`, called directly: no Redis).
Hypothesis then shuffles and repeats the deliveries and checks that the JSON snapshots of several
months and cutoffs are byte-identical.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fixtures import factory
from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tracker.config import TrackerConfig
from tracker.core.classify import ChangedFile, Rules
from tracker.reports.loading import load_snapshot, snapshot_json
from tracker.services import Services
from tracker.settings import load_settings
from tracker.store.database import connect
from tracker.store.heads import HeadStore
from tracker.store.ledger import Delivery, Ledger
from tracker.store.month_state import MonthState
from tracker.store.rebuild import rebuild
from workers import runtime
from workers.drain import process_batch
from workers.jobs import process_delivery

pytestmark = needs_shared

# Jobs here run without Redis or GitHub: only the ledger and the derived state are used.
PURE_SETTINGS = load_settings(webhook_secret="unused")

REPO = "NVIDIA/Megatron-LM"
FORM = "application/x-www-form-urlencoded"

# Asia/Shanghai is UTC+8: September 2026 starts at 2026-08-31T16:00Z; cutoff 2026-09-13 ends at 09-13T16:00Z.
SEPTEMBER = datetime(2026, 8, 31, 16, tzinfo=UTC)
AFTER_13TH = datetime(2026, 9, 13, 16, tzinfo=UTC)
SECOND = timedelta(seconds=1)
STARTS = [
    SEPTEMBER - timedelta(days=6),
    SEPTEMBER - SECOND,
    SEPTEMBER,
    SEPTEMBER + timedelta(days=4, hours=3),
    AFTER_13TH - SECOND,
    AFTER_13TH,
    AFTER_13TH + timedelta(days=5),
]
# Zero on purpose: events at one instant exercise the tie order and the version tie-break.
STEPS = [timedelta(0), SECOND, timedelta(hours=1), timedelta(days=1), timedelta(days=3), timedelta(days=8)]
REPORTS = [
    ("2026-08", None),
    ("2026-09", "2026-09-01"),
    ("2026-09", "2026-09-13"),
    ("2026-09", "2026-09-14"),
    ("2026-09", None),
    ("2026-10", None),
]
TODAY = date(2026, 12, 1)
PROPERTY_SETTINGS = settings(
    max_examples=25,  # each example is a month of stories through the webhook and the jobs: seconds
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- building stories ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """A delivery with the instant its event happened, for putting the reference in order."""

    at: datetime
    delivery: factory.Delivery


@st.composite
def pull_request_events(draw: st.DrawFn, number: int) -> list[Event]:
    story = PullRequestStory(number, draw(st.sampled_from(STARTS)), repo=REPO)
    events: list[Event] = []

    def emit(at: datetime) -> None:
        events.append(Event(at, story.deliveries[-1]))

    story.opened()
    emit(story.created_at)
    at, state = story.created_at, "open"
    for step in range(draw(st.integers(0, 6))):
        at += draw(st.sampled_from(STEPS))
        choices = {
            "open": ["push", "label", "retitle", "close", "merge"],
            "closed": ["reopen", "label", "retitle"],
            "merged": ["label", "retitle"],
        }[state]
        action = draw(st.sampled_from(choices))
        if action == "push":
            story.pushed(at)
        elif action == "label":
            story.labeled(at, draw(st.sampled_from(["bug", "docs", "formatting", "needs-review"])))
        elif action == "retitle":
            story.retitled(at, f"PR {number}, title {step}")
        elif action == "close":
            story.closed(at)
            state = "closed"
        elif action == "reopen":
            story.reopened(at)
            state = "open"
        else:
            story.merged(at)
            state = "merged"
        emit(at)
    if len(events) > 1 and draw(st.booleans()):
        events = events[1:]  # the `opened` delivery was lost; later payloads still carry created_at
    return events


class Scenario(list[factory.Delivery]):
    """Deliveries in the order their events happened; shown briefly when Hypothesis reports a failure."""

    def __repr__(self) -> str:
        lines = []
        for delivery in self:
            payload = json.loads(delivery.body)
            pr = payload["pull_request"]
            lines.append(f"#{pr['number']} {payload['action']} updated_at={pr['updated_at']} id={delivery.delivery_id}")
        return "Scenario[\n  " + "\n  ".join(lines) + "\n]"


@st.composite
def deliveries_in_order(draw: st.DrawFn) -> Scenario:
    count = draw(st.integers(1, 4))
    events = [event for number in range(101, 101 + count) for event in draw(pull_request_events(number))]
    # Stable: events of one PR at one instant stay in the order they happened.
    return Scenario(event.delivery for event in sorted(events, key=lambda event: event.at))


@st.composite
def arrivals(draw: st.DrawFn, count: int) -> list[int]:
    """Indexes of deliveries in arrival order: a permutation, with some of them repeated."""
    repeats = draw(st.lists(st.integers(0, count - 1), max_size=count))
    return list(draw(st.permutations(list(range(count)) + repeats)))


# --- running deliveries through the ledger and the job function ---------------------------------


def as_ledger_delivery(delivery: factory.Delivery, form: bool) -> Delivery:
    return delivery.as_ledger_delivery(form=form)


@dataclass
class Tracker:
    ledger: Ledger
    state: MonthState

    def store(self, delivery: Delivery) -> bool:
        return self.ledger.store(delivery)

    def process(self, delivery_id: str) -> str:
        return process_delivery(delivery_id)

    def store_files(self, limit: int = 1000) -> None:
        """Files arrive from GitHub apart from deliveries: give heads shown so far one code file."""
        heads = HeadStore(self.state.engine)
        for head in heads.missing()[:limit]:
            heads.store(
                head.full_name.lower(),
                head.number,
                head.head_sha,
                [ChangedFile(f"megatron/core/change_{head.number}.py", patch="@@ -1 +1 @@\n-a\n+b")],
                truncated=False,
                source="pulls",
                rules=Rules(),
            )

    def snapshots(self) -> dict[tuple[str, str | None], str]:
        self.store_files()
        services = Services.over(self.state.engine, TrackerConfig(), settings=PURE_SETTINGS)
        return {
            (month, cutoff): snapshot_json(load_snapshot(services, REPO, month, cutoff, today=TODAY))
            for month, cutoff in REPORTS
        }


@contextmanager
def fresh_tracker() -> Iterator[Tracker]:
    # A WAL checkpointer thread of the process may still be writing the log beside the ledger as the
    # directory is removed ("Directory not empty", seen once in a full run): what is left goes with /tmp.
    with tempfile.TemporaryDirectory(prefix="trk-prop-", ignore_cleanup_errors=True) as directory:
        engine = connect(f"sqlite:///{Path(directory) / 'ledger.sqlite3'}")
        ledger, state = Ledger(engine), MonthState(engine)
        runtime.install(Services(PURE_SETTINGS, TrackerConfig(), ledger, state))
        try:
            yield Tracker(ledger, state)
        finally:
            runtime.install(None)
            engine.dispose()


def run_in_order(tracker: Tracker, deliveries: Sequence[Delivery]) -> None:
    for delivery in deliveries:
        assert tracker.store(delivery) is True
        assert tracker.process(delivery.id) == "processed"


def reference(deliveries: Sequence[Delivery]) -> tuple[dict[tuple[str, str | None], str], dict[str, int]]:
    with fresh_tracker() as tracker:
        run_in_order(tracker, deliveries)
        return tracker.snapshots(), tracker.state.month_versions(REPO)


# --- properties ---------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(stories=deliveries_in_order(), form=st.booleans(), data=st.data())
def test_any_arrival_order_with_repeats_gives_the_same_snapshots(
    stories: list[factory.Delivery], form: bool, data: st.DataObject
) -> None:
    deliveries = [as_ledger_delivery(d, form) for d in stories]
    expected_snapshots, expected_versions = reference(deliveries)

    order = data.draw(arrivals(len(deliveries)), label="arrival order")
    process_apart = data.draw(st.booleans(), label="store everything before processing")
    with fresh_tracker() as tracker:
        if process_apart:
            # The webhook stores every delivery; the worker gets to them later, in its own order.
            stored: set[int] = set()
            for index in order:
                assert tracker.store(deliveries[index]) is (index not in stored)
                stored.add(index)
            processing = data.draw(arrivals(len(deliveries)), label="processing order")
            processed: set[int] = set()
            for index in processing:
                expected = "already processed" if index in processed else "processed"
                assert tracker.process(deliveries[index].id) == expected
                processed.add(index)
        else:
            seen: set[int] = set()
            for index in order:
                first = index not in seen
                assert tracker.store(deliveries[index]) is first
                assert tracker.process(deliveries[index].id) == ("processed" if first else "already processed")
                seen.add(index)
        assert tracker.snapshots() == expected_snapshots
        assert tracker.state.month_versions(REPO) == expected_versions


@PROPERTY_SETTINGS
@given(stories=deliveries_in_order(), data=st.data())
def test_processing_a_delivery_twice_changes_nothing(stories: list[factory.Delivery], data: st.DataObject) -> None:
    deliveries = [as_ledger_delivery(d, form=False) for d in stories]
    with fresh_tracker() as tracker:
        run_in_order(tracker, deliveries)
        before = tracker.snapshots()
        versions = tracker.state.month_versions(REPO)
        again = data.draw(st.lists(st.sampled_from(deliveries), min_size=1, max_size=3), label="processed again")
        for delivery in again:
            assert tracker.process(delivery.id) == "already processed"
            assert tracker.ledger.status_of(delivery.id) == "processed"
            assert tracker.store(delivery) is False  # a redelivery keeps its X-GitHub-Delivery id
            assert tracker.process(delivery.id) == "already processed"
        assert tracker.snapshots() == before
        assert tracker.state.month_versions(REPO) == versions
        assert tracker.ledger.counts().as_dict() == {
            "received": len(deliveries),
            "processed": len(deliveries),
            "failed": 0,
            "pending": 0,
        }


@PROPERTY_SETTINGS
@given(stories=deliveries_in_order(), data=st.data())
def test_batches_late_arrivals_and_files_in_between_give_the_reference_and_the_rebuild(
    stories: list[factory.Delivery], data: st.DataObject
) -> None:
    """The drain (workers.drain.process_batch) over batches of any size, with deliveries arriving
    late and repeated between batches and heads' files arriving in between, ends where the reference
    (one delivery at a time, in order) ends, and where a rebuild of the same ledger ends."""
    deliveries = [as_ledger_delivery(d, form=False) for d in stories]
    expected, _ = reference(deliveries)
    order = data.draw(arrivals(len(deliveries)), label="arrival order")
    with fresh_tracker() as tracker:
        services = runtime.current()
        position = 0
        while position < len(order) or tracker.ledger.fresh_pending(1):
            waiting = bool(tracker.ledger.fresh_pending(1))
            arriving = data.draw(st.integers(0 if waiting else 1, len(order) - position), label="arriving")
            for index in order[position : position + arriving]:
                tracker.store(deliveries[index])
            position += arriving
            tracker.store_files(data.draw(st.integers(0, 3), label="heads whose files arrive"))
            batch = tracker.ledger.fresh_pending(data.draw(st.integers(1, 8), label="batch size"))
            process_batch(services, batch)
        assert tracker.snapshots() == expected
        rebuild(tracker.ledger, tracker.state, TrackerConfig())
        assert tracker.snapshots() == expected


# --- the reference itself is right --------------------------------------------------------------


def shanghai(month: int, day: int, hour: int = 12, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC) - timedelta(hours=8)


def month_story() -> list[factory.Delivery]:
    """Five PRs around the August/September boundary, with events after the 13th; numbers by hand below."""
    stories = [
        # 1: opened in August, a commit on Sep 2, a label on Sep 12, retitled after the cutoff.
        PullRequestStory(1, shanghai(8, 25), repo=REPO)
        .opened()
        .pushed(shanghai(9, 2))
        .labeled(shanghai(9, 12), "bug")
        .retitled(shanghai(9, 20), "New title"),
        # 2: opened at the last second of August, only labeled in September: not in September.
        PullRequestStory(2, shanghai(8, 31, 23, 59, 59), repo=REPO).opened().labeled(shanghai(9, 3), "docs"),
        # 3: opened at the first second of September, closed Sep 5, reopened Sep 20.
        PullRequestStory(3, shanghai(9, 1, 0, 0, 0), repo=REPO)
        .opened()
        .closed(shanghai(9, 5))
        .reopened(shanghai(9, 20)),
        # 4: opened Sep 10, merged at the first second of Sep 14.
        PullRequestStory(4, shanghai(9, 10), repo=REPO).opened().merged(shanghai(9, 14, 0, 0, 0)),
        # 5: opened Sep 2, closed Sep 4, reopened Sep 6.
        PullRequestStory(5, shanghai(9, 2), repo=REPO).opened().closed(shanghai(9, 4)).reopened(shanghai(9, 6)),
    ]
    return [d for story in stories for d in story.deliveries]


def test_the_reference_counts_what_semantics_says(tmp_path: Path) -> None:
    engine = connect(f"sqlite:///{tmp_path / 'ledger.sqlite3'}")
    tracker = Tracker(Ledger(engine), MonthState(engine))
    runtime.install(Services(PURE_SETTINGS, TrackerConfig(), tracker.ledger, tracker.state))
    try:
        run_in_order(tracker, [as_ledger_delivery(d, form=False) for d in month_story()])
        documents: dict[tuple[str, str | None], Any] = {
            key: json.loads(text) for key, text in tracker.snapshots().items()
        }
    finally:
        runtime.install(None)
        engine.dispose()

    august = documents[("2026-08", None)]
    assert august["final"] is True
    assert august["stats"] == {"opened": 2, "merged": 0, "closed_unmerged": 0, "active_at_cutoff": 2}
    assert [pr["number"] for pr in august["pull_requests"]] == [1, 2]

    partial = documents[("2026-09", "2026-09-13")]
    assert partial["final"] is False
    assert partial["window"] == {"start": "2026-08-31T16:00:00Z", "end": "2026-09-13T16:00:00Z"}
    # opened: 3, 4, 5; closed unmerged: 3 (reopened after the cutoff); active: 1 (commit), 4, 5.
    assert partial["stats"] == {"opened": 3, "merged": 0, "closed_unmerged": 1, "active_at_cutoff": 3}
    assert [pr["number"] for pr in partial["pull_requests"]] == [1, 3, 4, 5]
    by_number = {pr["number"]: pr for pr in partial["pull_requests"]}
    assert by_number[1]["title"] == "Change number 1"  # the retitle came after the cutoff
    assert by_number[1]["labels"] == ["bug"]
    assert by_number[3]["state_at_cutoff"] == "closed"
    assert by_number[4]["state_at_cutoff"] == "open"
    assert by_number[4]["merged_at"] is None

    day_14 = documents[("2026-09", "2026-09-14")]
    assert day_14["stats"] == {"opened": 3, "merged": 1, "closed_unmerged": 1, "active_at_cutoff": 2}

    final = documents[("2026-09", None)]
    assert final["final"] is True
    assert final["cutoff"] == "2026-09-30"
    # opened: 3, 4, 5; merged: 4; closed unmerged: none (3 was reopened); active: 1, 3, 5.
    assert final["stats"] == {"opened": 3, "merged": 1, "closed_unmerged": 0, "active_at_cutoff": 3}
    assert {pr["number"]: pr["title"] for pr in final["pull_requests"]}[1] == "New title"

    first_day = documents[("2026-09", "2026-09-01")]
    # Only PR 3 (opened at 00:00:00 on Sep 1) has activity on Sep 1.
    assert first_day["stats"] == {"opened": 1, "merged": 0, "closed_unmerged": 0, "active_at_cutoff": 1}

    assert documents[("2026-10", None)]["pull_requests"] == []


def test_one_repository_whatever_the_case_of_its_name() -> None:
    first = PullRequestStory(1, shanghai(9, 2), repo="NVIDIA/Megatron-LM").opened().deliveries
    second = PullRequestStory(2, shanghai(9, 3), repo="nvidia/megatron-lm").opened().deliveries
    with fresh_tracker() as tracker:
        run_in_order(tracker, [as_ledger_delivery(d, form=False) for d in first + second])
        tracker.snapshots()  # the files of both heads arrive
        services = Services.over(tracker.state.engine, TrackerConfig(), settings=PURE_SETTINGS)
        snapshot = load_snapshot(services, REPO, "2026-09", None, today=TODAY)
    assert [pr.status.number for pr in snapshot.pull_requests] == [1, 2]
    assert snapshot.stats.opened == 2


@pytest.fixture(autouse=True)
def no_runtime_left_behind() -> Iterator[None]:
    yield
    runtime.install(None)
