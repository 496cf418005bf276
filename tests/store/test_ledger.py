"""Unit tests of `tracker.store.ledger`: the ledger of raw deliveries and hook pings."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from bench.fixtures import factory
from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import fixture_payload
from tracker.store.ledger import FAILED, PENDING, PROCESSED, Delivery, DeliveryCounts, Ledger, now_ms
from tracker.store.month_state import MonthState

OPENED_AT = datetime(2026, 9, 2, 10, tzinfo=UTC)
ISO_SECOND = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    return Ledger(engine)


def as_ledger_delivery(delivery: factory.Delivery, received_at: int) -> Delivery:
    return delivery.as_ledger_delivery(received_at=received_at)


def story_deliveries(number: int = 7, received_at: int = 1_790_000_000_000) -> list[Delivery]:
    """Four deliveries of one PR (opened, pushed, labeled, merged), received one second apart."""
    story = PullRequestStory(number, OPENED_AT).opened()
    story.pushed(OPENED_AT + timedelta(hours=1))
    story.labeled(OPENED_AT + timedelta(hours=2), "bug")
    story.merged(OPENED_AT + timedelta(days=1))
    return [as_ledger_delivery(d, received_at + 1000 * i) for i, d in enumerate(story.deliveries)]


def ping_delivery(delivery_id: str, received_at: int) -> Delivery:
    body = json.dumps(fixture_payload("ping.json")).encode()
    return Delivery(
        id=delivery_id,
        event="ping",
        action=None,
        repo="Octocoders/Hello-World",
        hook_id="109948940",
        content_type="application/json",
        headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": delivery_id},
        body=body,
        received_at=received_at,
    )


def with_id(delivery: Delivery, delivery_id: str, received_at: int | None = None) -> Delivery:
    changes: dict[str, object] = {"id": delivery_id}
    if received_at is not None:
        changes["received_at"] = received_at
    return dataclasses.replace(delivery, **changes)  # type: ignore[arg-type]


# --- storing and reading ------------------------------------------------------------------------


@needs_shared
def test_store_then_get_gives_back_every_field(ledger: Ledger) -> None:
    delivery = story_deliveries()[0]
    assert ledger.store(delivery) is True
    assert ledger.get(delivery.id) == delivery
    stored = ledger.get(delivery.id)
    assert stored is not None
    assert isinstance(stored.body, bytes)
    assert stored.action == "opened"
    assert stored.repo == "NVIDIA/Megatron-LM"
    assert stored.headers == {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": delivery.id}


def test_get_and_status_of_an_unknown_id_are_none(ledger: Ledger) -> None:
    assert ledger.get("no-such-delivery") is None
    assert ledger.status_of("no-such-delivery") is None


@needs_shared
def test_a_stored_delivery_is_pending_with_no_attempts(ledger: Ledger) -> None:
    delivery = story_deliveries()[0]
    ledger.store(delivery)
    assert ledger.status_of(delivery.id) == PENDING
    assert ledger.failures() == []


@needs_shared
def test_a_duplicate_id_is_refused_and_the_first_body_kept(ledger: Ledger) -> None:
    opened, pushed = story_deliveries()[:2]
    assert ledger.store(opened) is True
    redelivery = dataclasses.replace(pushed, id=opened.id, received_at=opened.received_at + 60_000)
    assert ledger.store(redelivery) is False
    assert ledger.store(opened) is False
    assert ledger.get(opened.id) == opened
    assert ledger.counts() == DeliveryCounts(received=1, processed=0, failed=0, pending=1)


@needs_shared
def test_a_known_digest_under_a_new_id_is_refused_in_one_transaction(ledger: Ledger) -> None:
    opened, pushed = story_deliveries()[:2]
    assert ledger.store(opened, digest="a" * 64) is True
    replay = dataclasses.replace(opened, id="replayed-under-a-new-id")
    assert ledger.store(replay, digest="a" * 64) is False
    assert ledger.get("replayed-under-a-new-id") is None
    assert ledger.store(pushed, digest="b" * 64) is True
    # The same body in another repository is that repository's news.
    elsewhere = dataclasses.replace(opened, id="other-repo", repo="octo-org/other")
    assert ledger.store(elsewhere, digest="a" * 64) is True
    # A known id with a new digest stores nothing, not even the digest: the body is news later.
    assert ledger.store(dataclasses.replace(opened, received_at=1), digest="c" * 64) is False
    assert ledger.store(dataclasses.replace(opened, id="new-id"), digest="c" * 64) is True
    assert ledger.counts().received == 4


@needs_shared
def test_a_body_that_is_not_utf8_is_kept_byte_for_byte(ledger: Ledger) -> None:
    delivery = dataclasses.replace(
        story_deliveries()[0], body=b"payload=%7B%7D\x00\xff\xfe", content_type="application/x-www-form-urlencoded"
    )
    ledger.store(delivery)
    stored = ledger.get(delivery.id)
    assert stored is not None
    assert stored.body == b"payload=%7B%7D\x00\xff\xfe"
    assert stored.content_type == "application/x-www-form-urlencoded"


def test_counts_of_an_empty_ledger(ledger: Ledger) -> None:
    counts = ledger.counts()
    assert counts == DeliveryCounts(0, 0, 0, 0)
    assert counts.as_dict() == {"received": 0, "processed": 0, "failed": 0, "pending": 0}


@needs_shared
def test_counts_by_status(ledger: Ledger, engine: Engine) -> None:
    opened, pushed, labeled, merged = story_deliveries()
    for delivery in (opened, pushed, labeled, merged):
        ledger.store(delivery)
    assert MonthState(engine).apply(opened.id, None) is True
    ledger.record_attempt_failed(pushed.id, "ValueError: bad", final=True)
    ledger.record_attempt_failed(labeled.id, "ValueError: bad", final=False)
    counts = ledger.counts()
    assert counts == DeliveryCounts(received=4, processed=1, failed=1, pending=2)
    assert counts.as_dict() == {"received": 4, "processed": 1, "failed": 1, "pending": 2}


@needs_shared
def test_ids_with_status_in_order_of_receipt_then_id(ledger: Ledger) -> None:
    opened, pushed, labeled, merged = story_deliveries(received_at=1_790_000_000_000)
    # Stored out of order; `labeled` and a ping share the instant of `pushed`.
    ledger.store(with_id(merged, "d-merged"))
    ledger.store(with_id(labeled, "b-labeled", received_at=pushed.received_at))
    ledger.store(with_id(pushed, "c-pushed"))
    ledger.store(with_id(opened, "z-opened"))
    ledger.store(ping_delivery("a-ping", pushed.received_at))
    assert ledger.ids_with_status(PENDING) == ["z-opened", "a-ping", "b-labeled", "c-pushed", "d-merged"]
    assert ledger.ids_with_status(PROCESSED) == []
    assert ledger.ids_with_status(FAILED) == []


@needs_shared
def test_ids_with_status_received_before_is_exclusive(ledger: Ledger) -> None:
    deliveries = story_deliveries(received_at=1_790_000_000_000)
    for delivery in deliveries:
        ledger.store(delivery)
    ids = [d.id for d in deliveries]
    assert ledger.ids_with_status(PENDING, received_before=1_790_000_000_000) == []
    assert ledger.ids_with_status(PENDING, received_before=1_790_000_000_001) == ids[:1]
    assert ledger.ids_with_status(PENDING, received_before=1_790_000_002_000) == ids[:2]
    assert ledger.ids_with_status(PENDING, received_before=1_790_000_002_001) == ids[:3]
    assert ledger.ids_with_status(PENDING, received_before=1_800_000_000_000) == ids
    assert ledger.ids_with_status(FAILED, received_before=1_800_000_000_000) == []


# --- outcomes of processing -----------------------------------------------------------------


@needs_shared
def test_a_failed_attempt_that_is_not_final_keeps_the_delivery_pending(ledger: Ledger) -> None:
    delivery = story_deliveries()[0]
    ledger.store(delivery)
    ledger.record_attempt_failed(delivery.id, "OperationalError: database is locked", final=False)
    assert ledger.status_of(delivery.id) == PENDING
    assert ledger.failures() == []  # only failed deliveries are listed
    ledger.record_attempt_failed(delivery.id, "OperationalError: still locked", final=False)
    assert ledger.status_of(delivery.id) == PENDING
    assert ledger.counts() == DeliveryCounts(received=1, processed=0, failed=0, pending=1)


@needs_shared
def test_the_final_failed_attempt_marks_the_delivery_failed(ledger: Ledger) -> None:
    delivery = story_deliveries()[0]
    ledger.store(delivery)
    ledger.record_attempt_failed(delivery.id, "first", final=False)
    ledger.record_attempt_failed(delivery.id, "second", final=False)
    ledger.record_attempt_failed(delivery.id, "IncompleteBody: no pull_request", final=True)
    assert ledger.status_of(delivery.id) == FAILED
    assert ledger.ids_with_status(FAILED) == [delivery.id]
    assert ledger.failures() == [
        {
            "delivery_id": delivery.id,
            "repo": "NVIDIA/Megatron-LM",
            "attempts": 3,
            "error": "IncompleteBody: no pull_request",
        }
    ]


@needs_shared
def test_a_long_error_is_cut_to_2000_characters(ledger: Ledger) -> None:
    delivery = story_deliveries()[0]
    ledger.store(delivery)
    ledger.record_attempt_failed(delivery.id, "E" * 1999 + "é" + "tail" * 100, final=True)
    (failure,) = ledger.failures()
    assert failure["error"] == "E" * 1999 + "é"


@needs_shared
def test_a_failed_attempt_never_undoes_processing(ledger: Ledger, engine: Engine) -> None:
    delivery = story_deliveries()[0]
    ledger.store(delivery)
    assert MonthState(engine).apply(delivery.id, None) is True
    ledger.record_attempt_failed(delivery.id, "late failure of a retried job", final=True)
    assert ledger.status_of(delivery.id) == PROCESSED
    assert ledger.failures() == []


def test_a_failed_attempt_of_an_unknown_delivery_changes_nothing(ledger: Ledger) -> None:
    ledger.record_attempt_failed("no-such-delivery", "whatever", final=True)
    assert ledger.counts() == DeliveryCounts(0, 0, 0, 0)


@needs_shared
def test_failures_newest_first_up_to_the_limit(ledger: Ledger) -> None:
    deliveries = story_deliveries(received_at=1_790_000_000_000)
    for delivery in deliveries:
        ledger.store(delivery)
    for delivery in deliveries[:3]:
        ledger.record_attempt_failed(delivery.id, f"error of {delivery.action}", final=True)
    assert [f["delivery_id"] for f in ledger.failures()] == [deliveries[2].id, deliveries[1].id, deliveries[0].id]
    assert ledger.failures(limit=2) == [
        {"delivery_id": deliveries[2].id, "repo": "NVIDIA/Megatron-LM", "attempts": 1, "error": "error of labeled"},
        {"delivery_id": deliveries[1].id, "repo": "NVIDIA/Megatron-LM", "attempts": 1, "error": "error of synchronize"},
    ]


@needs_shared
def test_reset_failed_turns_failed_deliveries_back_to_pending(ledger: Ledger, engine: Engine) -> None:
    opened, pushed, labeled, merged = story_deliveries()
    for delivery in (opened, pushed, labeled, merged):
        ledger.store(delivery)
    MonthState(engine).apply(opened.id, None)
    ledger.record_attempt_failed(pushed.id, "boom", final=True)
    ledger.record_attempt_failed(merged.id, "boom", final=True)
    ledger.record_attempt_failed(labeled.id, "boom", final=False)
    assert sorted(ledger.reset_failed()) == sorted([pushed.id, merged.id])
    assert ledger.status_of(pushed.id) == PENDING
    assert ledger.status_of(merged.id) == PENDING
    assert ledger.status_of(labeled.id) == PENDING
    assert ledger.status_of(opened.id) == PROCESSED
    assert ledger.counts() == DeliveryCounts(received=4, processed=1, failed=0, pending=3)
    assert ledger.failures() == []
    assert ledger.reset_failed() == []


@needs_shared
def test_reset_failed_on_a_ledger_without_failures(ledger: Ledger) -> None:
    assert ledger.reset_failed() == []
    ledger.store(story_deliveries()[0])
    assert ledger.reset_failed() == []


# --- hooks ------------------------------------------------------------------------------------


def test_no_hooks_before_a_ping(ledger: Ledger) -> None:
    assert ledger.hooks() == []


def test_the_first_ping_records_the_hook(ledger: Ledger) -> None:
    before = now_ms() // 1000
    ledger.record_ping("109948940", "Repository", ["*"], "Octocoders/Hello-World")
    after = now_ms() // 1000
    (hook,) = ledger.hooks()
    assert {k: v for k, v in hook.items() if not k.endswith("_ping_at")} == {
        "hook_id": "109948940",
        "type": "Repository",
        "events": ["*"],
        "target": "Octocoders/Hello-World",
        "pings": 1,
    }
    assert hook["first_ping_at"] == hook["last_ping_at"]
    assert ISO_SECOND.match(hook["first_ping_at"])
    moment = datetime.strptime(hook["first_ping_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    assert before <= moment <= after


def test_a_later_ping_updates_the_hook_and_counts(ledger: Ledger) -> None:
    ledger.record_ping("109948940", "Repository", ["*"], "Octocoders/Hello-World")
    (first,) = ledger.hooks()
    ledger.record_ping("109948940", "Organization", ["pull_request", "ping"], "Octocoders")
    ledger.record_ping("109948940", "Organization", ["pull_request"], None)
    (hook,) = ledger.hooks()
    assert hook["hook_id"] == "109948940"
    assert hook["type"] == "Organization"
    assert hook["events"] == ["pull_request"]
    assert hook["target"] is None
    assert hook["pings"] == 3
    assert hook["first_ping_at"] == first["first_ping_at"]
    assert hook["last_ping_at"] >= hook["first_ping_at"]


def test_hooks_are_listed_by_id(ledger: Ledger) -> None:
    ledger.record_ping("900", "Repository", ["pull_request"], "NVIDIA/Megatron-LM")
    ledger.record_ping("1000", None, [], None)
    ledger.record_ping("4242", "Organization", ["*"], "NVIDIA")
    hooks = ledger.hooks()
    # Ids are strings: "1000" < "4242" < "900".
    assert [h["hook_id"] for h in hooks] == ["1000", "4242", "900"]
    assert hooks[0] == {
        "hook_id": "1000",
        "type": None,
        "events": [],
        "target": None,
        "first_ping_at": hooks[0]["first_ping_at"],
        "last_ping_at": hooks[0]["last_ping_at"],
        "pings": 1,
    }


@needs_shared
def test_hooks_and_deliveries_are_apart(ledger: Ledger) -> None:
    ledger.record_ping("109948940", "Repository", ["*"], "Octocoders/Hello-World")
    assert ledger.counts() == DeliveryCounts(0, 0, 0, 0)
    ledger.store(ping_delivery("ping-1", 1_790_000_000_000))
    assert [h["pings"] for h in ledger.hooks()] == [1]


# --- rebuild batches ---------------------------------------------------------------------------


@needs_shared
def test_iter_pull_request_deliveries_in_batches_by_id(ledger: Ledger) -> None:
    deliveries = story_deliveries(number=7) + story_deliveries(number=8)[:1]
    renamed = [with_id(d, f"pr-{i}") for i, d in zip([4, 0, 3, 1, 2], deliveries, strict=True)]
    for delivery in renamed:
        ledger.store(delivery)
    ledger.store(ping_delivery("pr-25-ping", 1_790_000_000_000))  # not a pull_request: never yielded
    batches = list(ledger.iter_pull_request_deliveries(batch=2))
    assert [[d.id for d in batch] for batch in batches] == [["pr-0", "pr-1"], ["pr-2", "pr-3"], ["pr-4"]]
    by_id = {d.id: d for d in renamed}
    assert [d for batch in batches for d in batch] == [by_id[f"pr-{i}"] for i in range(5)]


@needs_shared
def test_iter_pull_request_deliveries_with_a_full_last_batch(ledger: Ledger) -> None:
    deliveries = story_deliveries()
    for delivery in deliveries:
        ledger.store(delivery)
    batches = list(ledger.iter_pull_request_deliveries(batch=2))
    assert [len(batch) for batch in batches] == [2, 2]
    assert sorted(d.id for batch in batches for d in batch) == sorted(d.id for d in deliveries)
    assert [len(batch) for batch in ledger.iter_pull_request_deliveries()] == [4]
    assert [len(batch) for batch in ledger.iter_pull_request_deliveries(batch=1)] == [1, 1, 1, 1]


@needs_shared
def test_iter_pull_request_deliveries_includes_every_status(ledger: Ledger, engine: Engine) -> None:
    opened, pushed, labeled, _ = story_deliveries()
    for delivery in (opened, pushed, labeled):
        ledger.store(delivery)
    MonthState(engine).apply(opened.id, None)
    ledger.record_attempt_failed(pushed.id, "boom", final=True)
    (batch,) = ledger.iter_pull_request_deliveries()
    assert sorted(d.id for d in batch) == sorted([opened.id, pushed.id, labeled.id])


@needs_shared
def test_iter_pull_request_deliveries_of_an_empty_ledger(ledger: Ledger) -> None:
    ledger.store(ping_delivery("ping-1", 1_790_000_000_000))
    assert list(ledger.iter_pull_request_deliveries()) == []
