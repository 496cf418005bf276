"""`tracker/attributes.py`: versioned PR attributes; a report shows each PR as it was at the window end."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime

import pytest

from bench.fixtures.factory import pr_payload
from bench.fixtures.paths import WEBHOOKS, needs_shared
from tracker.core.attributes import AttributeVersion, version_at, version_of
from tracker.core.payloads import parse_pull_request_event


def make(at: int, delivery_id: str, title: str | None = None) -> AttributeVersion:
    return AttributeVersion(
        at=at,
        delivery_id=delivery_id,
        title=title if title is not None else f"{delivery_id}@{at}",
        body="",
        base_ref="main",
        head_ref="topic",
        head_sha="0" * 40,
        labels=(),
        draft=False,
        author="octocat",
    )


A = make(100, "aaa", "first")
B = make(200, "bbb", "second")
C = make(300, "ccc", "third")


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        (1000, C),
        (301, C),
        (300, B),  # the end is exclusive: a version stamped at the end is after it
        (250, B),
        (201, B),
        (200, A),
        (101, A),
    ],
)
def test_version_at_picks_the_last_version_before_the_end(end: int, expected: AttributeVersion) -> None:
    for order in itertools.permutations([A, B, C]):
        assert version_at(list(order), end) == expected


@pytest.mark.parametrize("end", [100, 50, 0])
def test_version_at_falls_back_to_the_earliest_later_version(end: int) -> None:
    for order in itertools.permutations([A, B, C]):
        assert version_at(list(order), end) == A


def test_version_at_of_nothing_is_none() -> None:
    assert version_at([], 1000) is None


def test_version_at_breaks_ties_by_delivery_id_whatever_the_order() -> None:
    same_time = [make(200, "7f3a", "x"), make(200, "0b12", "y"), make(200, "c9e0", "z"), A]
    for order in itertools.permutations(same_time):
        chosen = version_at(list(order), 250)
        assert chosen is not None and chosen.title == "z"  # the largest delivery id at the latest time


def test_version_at_fallback_ties_by_delivery_id_whatever_the_order() -> None:
    later = [make(500, "7f3a", "x"), make(500, "0b12", "y"), make(600, "0000", "w")]
    for order in itertools.permutations(later):
        chosen = version_at(list(order), 250)
        assert chosen is not None and chosen.title == "y"  # the smallest delivery id at the earliest time


def test_version_at_time_beats_delivery_id() -> None:
    versions = [make(200, "zzz", "older"), make(201, "aaa", "newer")]
    chosen = version_at(versions, 1000)
    assert chosen is not None and chosen.title == "newer"


def test_version_at_accepts_a_one_shot_iterable_for_the_fallback() -> None:
    assert version_at(iter([B, C]), 150) == B


def test_version_at_accepts_a_one_shot_iterable_before_the_end() -> None:
    assert version_at(iter([A, C, B]), 250) == B


# --- version_of ---------------------------------------------------------------------------------


@needs_shared
def test_version_of_a_factory_payload() -> None:
    payload = pr_payload(
        "labeled",
        17,
        created_at="2026-09-01T00:00:00Z",
        updated_at="2026-09-02T03:04:05Z",
        title="Fix the sampler",
        base="dev",
        head_sha="f" * 40,
        labels=("zeta", "Alpha", "beta"),
        draft=True,
        body=None,
    )
    version = version_of(parse_pull_request_event(json.dumps(payload).encode()), "delivery-1")
    assert version.at == int(datetime(2026, 9, 2, 3, 4, 5, tzinfo=UTC).timestamp())
    assert version.delivery_id == "delivery-1"
    assert version.title == "Fix the sampler"
    assert version.body == ""  # GitHub sends null for an empty description
    assert version.base_ref == "dev"
    assert version.head_sha == "f" * 40
    assert version.labels == ("Alpha", "beta", "zeta")  # sorted, so equal label sets compare equal
    assert version.draft is True


@needs_shared
def test_version_of_github_example_labeled_payload() -> None:
    event = parse_pull_request_event((WEBHOOKS / "pull_request.labeled.json").read_bytes())
    version = version_of(event, "abc")
    raw = json.loads((WEBHOOKS / "pull_request.labeled.json").read_text())["pull_request"]
    assert version.at == int(datetime(2019, 5, 15, 15, 20, 35, tzinfo=UTC).timestamp())
    assert version.title == raw["title"]
    assert version.author == raw["user"]["login"]
    assert version.base_ref == raw["base"]["ref"]
    assert version.head_ref == raw["head"]["ref"]
    assert version.head_sha == raw["head"]["sha"]
    assert version.labels == tuple(sorted(label["name"] for label in raw["labels"]))
    assert version.labels != ()
