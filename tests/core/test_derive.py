"""`tracker/core/derive.py` (one stored delivery -> the facts, the attribute version and the months it
touches, and the head whose files should be fetched) and `tracker/core/repository.py` (`repository_key`).

Deliveries are GitHub's own example payloads (../shared/fixtures/github/webhooks) and realistic stories
built on them by `bench/fixtures/factory.py`. Every expected value is written by hand from the payload and from
SEMANTICS ("Events and state", "Window").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from bench.fixtures.factory import PullRequestStory, delivery, pr_payload
from bench.fixtures.paths import WEBHOOKS, needs_shared
from tests.support.clock import at, utc
from tracker.core.attributes import AttributeVersion
from tracker.core.derive import Derivation, derive
from tracker.core.payloads import IncompleteBody, MalformedBody
from tracker.core.repository import repository_key
from tracker.core.timeline import Fact, FactKind

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
SHANGHAI = "Asia/Shanghai"
PULL_REQUEST_FILES = [*sorted(WEBHOOKS.glob("pull_request.*.json")), *sorted(WEBHOOKS.glob("ghes-3.5/*.json"))]
# GitHub's example PR (Codertocat/Hello-World #2).
HEAD_SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
BASE_SHA = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"


def in_utc(full_name: str) -> str:
    return "UTC"


def in_shanghai(full_name: str) -> str:
    return SHANGHAI


def zone(name: str) -> Callable[[str], str]:
    def timezone_for(full_name: str) -> str:
        return name

    return timezone_for


def derive_json(body: bytes, timezone_for: Callable[[str], str] = in_utc, delivery_id: str = "d-1") -> Derivation:
    return derive(delivery_id, JSON, body, timezone_for)


def example(name: str) -> bytes:
    return (WEBHOOKS / name).read_bytes()


def _id(path: Path) -> str:
    return str(path.relative_to(WEBHOOKS))


@needs_shared
def test_the_fixture_folder_is_there() -> None:
    # Guard against silently parametrizing over nothing.
    assert len(PULL_REQUEST_FILES) >= 30


# --- GitHub's examples --------------------------------------------------------------------------


@needs_shared
def test_the_opened_example() -> None:
    derivation = derive_json(example("pull_request.opened.json"), delivery_id="72d3162e-cc78-11e3-81ab-4c9367dc0958")
    opened_at = utc("2019-05-15T15:20:33Z")
    assert derivation == Derivation(
        repo="codertocat/hello-world",
        full_name="Codertocat/Hello-World",
        number=2,
        facts=(Fact(FactKind.OPENED, opened_at),),
        version=AttributeVersion(
            at=opened_at,
            delivery_id="72d3162e-cc78-11e3-81ab-4c9367dc0958",
            title="Update the README with new information.",
            body="This is a pretty simple change that we need to pull into master.",
            base_ref="master",
            head_ref="changes",
            head_sha=HEAD_SHA,
            labels=("bug",),
            draft=False,
            author="Codertocat",
        ),
        activity_months=frozenset({"2019-05"}),
        touched_months=frozenset({"2019-05"}),
        wanted_head=(HEAD_SHA, BASE_SHA),
    )


@needs_shared
def test_the_closed_example_proves_the_opening_and_the_close() -> None:
    derivation = derive_json(example("pull_request.closed.json"))
    assert derivation.facts == (
        Fact(FactKind.OPENED, utc("2019-05-15T15:20:33Z")),
        Fact(FactKind.CLOSED, utc("2019-05-15T15:21:18Z")),
    )
    assert derivation.version.at == utc("2019-05-15T15:21:18Z")
    assert derivation.wanted_head is None  # closed without merge: its files no longer matter


@needs_shared
def test_the_synchronize_example_is_commit_activity_at_updated_at() -> None:
    derivation = derive_json(example("pull_request.synchronize.json"))
    assert derivation.facts == (
        Fact(FactKind.OPENED, utc("2019-05-15T15:20:33Z")),
        Fact(FactKind.COMMIT, utc("2019-05-15T15:20:33Z")),
    )
    assert derivation.wanted_head == (HEAD_SHA, BASE_SHA)


@needs_shared
def test_the_reopened_example_is_a_reopening_at_updated_at() -> None:
    derivation = derive_json(example("pull_request.reopened.json"))
    assert derivation.facts == (
        Fact(FactKind.OPENED, utc("2019-05-15T15:20:33Z")),
        Fact(FactKind.REOPENED, utc("2019-05-15T15:20:33Z")),
    )
    assert derivation.wanted_head == (HEAD_SHA, BASE_SHA)


@needs_shared
def test_the_labeled_example_is_no_activity_but_a_new_version() -> None:
    derivation = derive_json(example("pull_request.labeled.json"))
    assert derivation.facts == (Fact(FactKind.OPENED, utc("2019-05-15T15:20:33Z")),)
    assert derivation.version.at == utc("2019-05-15T15:20:35Z")
    assert derivation.version.labels == ("bug",)
    assert derivation.wanted_head is None


@needs_shared
def test_the_ghes_closed_example() -> None:
    derivation = derive_json(example("ghes-3.5/pull_request.closed.json"))
    assert derivation.repo == "codertocat/hello-world"
    assert derivation.facts == (
        Fact(FactKind.OPENED, utc("2019-05-15T19:38:02Z")),
        Fact(FactKind.CLOSED, utc("2019-05-15T19:39:14Z")),
    )
    assert derivation.version.head_sha == "14977a7b5485400124827221a04bfb474bcd72d1"
    assert derivation.version.labels == ()
    assert derivation.wanted_head is None


@needs_shared
def test_a_null_body_is_an_empty_body() -> None:
    assert derive_json(example("pull_request.opened.with-null-body.json")).version.body == ""


@needs_shared
def test_a_converted_to_draft_example_says_draft() -> None:
    derivation = derive_json(example("pull_request.converted_to_draft.json"))
    assert derivation.version.draft is True
    assert derivation.wanted_head is None


# Which kinds of fact each action's example proves, and whether its head's files should be fetched.
FACT_KINDS: dict[str, tuple[FactKind, ...]] = {
    "closed": (FactKind.OPENED, FactKind.CLOSED),
    "synchronize": (FactKind.OPENED, FactKind.COMMIT),
    "reopened": (FactKind.OPENED, FactKind.REOPENED),
}
WANTS_FILES = {"opened", "synchronize", "reopened"}  # none of GitHub's `closed` examples is merged


@pytest.mark.parametrize("path", PULL_REQUEST_FILES, ids=_id)
def test_every_github_example_derives(path: Path) -> None:
    raw = json.loads(path.read_text())
    action = raw["action"]
    derivation = derive_json(path.read_bytes(), delivery_id="d-7")
    assert derivation.repo == "codertocat/hello-world"
    assert derivation.full_name == "Codertocat/Hello-World"
    assert derivation.number == 2
    assert tuple(fact.kind for fact in derivation.facts) == FACT_KINDS.get(action, (FactKind.OPENED,))
    assert derivation.activity_months == frozenset({"2019-05"})
    assert derivation.touched_months == frozenset({"2019-05"})
    assert derivation.version.at == utc(raw["pull_request"]["updated_at"])
    assert derivation.version.delivery_id == "d-7"
    if action in WANTS_FILES:
        assert derivation.wanted_head == (raw["pull_request"]["head"]["sha"], raw["pull_request"]["base"]["sha"])
    else:
        assert derivation.wanted_head is None


@needs_shared
def test_a_merged_close_derived_from_the_closed_example() -> None:
    # GitHub publishes no merged `closed` example (fixtures README, "Gaps"): this one is derived from
    # pull_request.closed.json by setting the fields GitHub documents for a merge.
    raw = json.loads(example("pull_request.closed.json"))
    raw["pull_request"]["merged"] = True
    raw["pull_request"]["merged_at"] = "2019-05-15T15:21:18Z"
    raw["pull_request"]["merged_by"] = raw["pull_request"]["user"]
    derivation = derive_json(json.dumps(raw).encode())
    assert derivation.facts == (
        Fact(FactKind.OPENED, utc("2019-05-15T15:20:33Z")),
        Fact(FactKind.MERGED, utc("2019-05-15T15:21:18Z")),
    )
    assert derivation.wanted_head == (HEAD_SHA, BASE_SHA)


@needs_shared
def test_the_same_delivery_derives_the_same_twice() -> None:
    body = example("pull_request.synchronize.json")
    assert derive_json(body) == derive_json(body)


# --- months in the repository's time zone -------------------------------------------------------


@needs_shared
@pytest.mark.parametrize(
    ("created_at", "tz", "month"),
    [
        ("2026-08-31T16:30:00Z", SHANGHAI, "2026-09"),  # 2026-09-01 00:30 in Shanghai
        ("2026-08-31T16:30:00Z", "UTC", "2026-08"),
        ("2026-08-31T16:30:00Z", "America/Los_Angeles", "2026-08"),  # 09:30 on the 31st
        ("2026-08-31T15:59:59Z", SHANGHAI, "2026-08"),  # 23:59:59 on the 31st in Shanghai
        ("2026-08-31T16:00:00Z", SHANGHAI, "2026-09"),  # midnight in Shanghai
        ("2026-09-01T06:59:59Z", "America/Los_Angeles", "2026-08"),  # 23:59:59 PDT on the 31st
        ("2026-09-01T07:00:00Z", "America/Los_Angeles", "2026-09"),
    ],
)
def test_activity_months_are_in_the_repository_time_zone(created_at: str, tz: str, month: str) -> None:
    story = PullRequestStory(7, at(created_at)).opened()
    derivation = derive_json(story.deliveries[0].body, zone(tz))
    assert derivation.facts == (Fact(FactKind.OPENED, utc(created_at)),)
    assert derivation.activity_months == frozenset({month})
    assert derivation.touched_months == frozenset({month})


@needs_shared
def test_a_merge_just_after_midnight_in_shanghai_touches_both_months() -> None:
    story = PullRequestStory(8, at("2026-08-10T02:00:00Z")).opened().merged(at("2026-08-31T17:00:00Z"))
    merged = story.deliveries[-1].body
    assert derive_json(merged, in_shanghai).activity_months == frozenset({"2026-08", "2026-09"})
    assert derive_json(merged, in_utc).activity_months == frozenset({"2026-08"})


@needs_shared
def test_touched_months_include_the_month_of_the_version() -> None:
    # A label in October on a PR opened in September: no activity in October, but an October report
    # reads the new attributes.
    story = PullRequestStory(9, at("2026-09-20T03:00:00Z")).opened().labeled(at("2026-10-02T03:00:00Z"), "moe")
    derivation = derive_json(story.deliveries[-1].body, in_shanghai)
    assert derivation.facts == (Fact(FactKind.OPENED, utc("2026-09-20T03:00:00Z")),)
    assert derivation.activity_months == frozenset({"2026-09"})
    assert derivation.touched_months == frozenset({"2026-09", "2026-10"})
    assert derivation.version.labels == ("moe",)


@needs_shared
def test_touched_months_of_a_version_at_a_month_edge_follow_the_time_zone() -> None:
    story = PullRequestStory(9, at("2026-09-20T03:00:00Z")).opened().labeled(at("2026-09-30T16:30:00Z"), "moe")
    body = story.deliveries[-1].body
    assert derive_json(body, in_shanghai).touched_months == frozenset({"2026-09", "2026-10"})  # 00:30 Oct 1
    assert derive_json(body, in_utc).touched_months == frozenset({"2026-09"})


@needs_shared
def test_the_time_zone_is_asked_for_the_repository_of_the_delivery() -> None:
    def timezone_for(full_name: str) -> str:
        return SHANGHAI if repository_key(full_name) == "nvidia/megatron-lm" else "UTC"

    ours = pr_payload("opened", 1, created_at="2026-08-31T16:30:00Z", repo="NVIDIA/Megatron-LM")
    theirs = pr_payload("opened", 1, created_at="2026-08-31T16:30:00Z", repo="octo/other")
    assert derive_json(json.dumps(ours).encode(), timezone_for).activity_months == frozenset({"2026-09"})
    assert derive_json(json.dumps(theirs).encode(), timezone_for).activity_months == frozenset({"2026-08"})


# --- the head whose files are wanted ------------------------------------------------------------


def _head(body: bytes) -> tuple[str, str]:
    pr = json.loads(body)["pull_request"]
    return (pr["head"]["sha"], pr["base"]["sha"])


@needs_shared
def test_wanted_head_follows_the_action() -> None:
    story = (
        PullRequestStory(11, at("2026-09-02T01:00:00Z"), title="Add the router")
        .opened()  # 0
        .pushed(at("2026-09-03T01:00:00Z"))  # 1
        .labeled(at("2026-09-03T02:00:00Z"), "moe")  # 2
        .retitled(at("2026-09-03T03:00:00Z"), "Add the MoE router")  # 3
        .closed(at("2026-09-04T01:00:00Z"))  # 4
        .reopened(at("2026-09-05T01:00:00Z"))  # 5
        .pushed(at("2026-09-06T01:00:00Z"))  # 6
        .merged(at("2026-09-07T01:00:00Z"))  # 7
    )
    wanted = [derive_json(d.body, in_shanghai, d.delivery_id).wanted_head for d in story.deliveries]
    bodies = [d.body for d in story.deliveries]
    assert wanted == [
        _head(bodies[0]),  # opened
        _head(bodies[1]),  # synchronize: the new head
        None,  # labeled
        None,  # edited
        None,  # closed without merge
        _head(bodies[5]),  # reopened
        _head(bodies[6]),  # synchronize
        _head(bodies[7]),  # merged close
    ]
    assert _head(bodies[0])[0] != _head(bodies[1])[0] != _head(bodies[6])[0]  # each push is a new head
    assert _head(bodies[6]) == _head(bodies[7])  # the merge is of the last pushed head


@needs_shared
def test_a_delivery_without_a_head_sha_wants_nothing() -> None:
    raw = json.loads(example("pull_request.opened.json"))
    raw["pull_request"]["head"]["sha"] = None
    assert derive_json(json.dumps(raw).encode()).wanted_head is None
    del raw["pull_request"]["head"]
    assert derive_json(json.dumps(raw).encode()).wanted_head is None


@needs_shared
def test_a_delivery_without_a_base_sha_wants_the_head_with_an_empty_base() -> None:
    raw = json.loads(example("pull_request.opened.json"))
    raw["pull_request"]["base"]["sha"] = None
    assert derive_json(json.dumps(raw).encode()).wanted_head == (HEAD_SHA, "")


# --- attributes ---------------------------------------------------------------------------------


@needs_shared
def test_the_version_carries_the_attributes_of_the_delivery() -> None:
    payload = pr_payload(
        "edited",
        4242,
        created_at="2026-09-02T01:00:00Z",
        updated_at="2026-09-05T08:00:00Z",
        title="[dev] Fix the MoE router",
        base="dev",
        head_sha="a" * 40,
        labels=("zeta", "alpha"),
        draft=True,
        body="Body text",
    )
    derivation = derive_json(json.dumps(payload).encode(), in_shanghai, "edit-1")
    assert derivation.version == AttributeVersion(
        at=utc("2026-09-05T08:00:00Z"),
        delivery_id="edit-1",
        title="[dev] Fix the MoE router",
        body="Body text",
        base_ref="dev",
        head_ref="changes",  # GitHub's example head branch, kept by the factory
        head_sha="a" * 40,
        labels=("alpha", "zeta"),  # sorted
        draft=True,
        author="Codertocat",
    )
    assert derivation.number == 4242
    assert derivation.full_name == "NVIDIA/Megatron-LM"
    assert derivation.wanted_head is None


# --- form-encoded bodies ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [FORM, f"{FORM}; charset=utf-8", "Application/X-WWW-Form-Urlencoded"],
)
@pytest.mark.parametrize("path", PULL_REQUEST_FILES, ids=_id)
def test_a_form_body_derives_the_same_as_json(path: Path, content_type: str) -> None:
    document = path.read_bytes()
    form = urlencode({"payload": document.decode("utf-8")}).encode("ascii")
    assert derive("d-1", content_type, form, in_shanghai) == derive("d-1", JSON, document, in_shanghai)


@needs_shared
def test_a_form_body_keeps_characters_that_need_escaping() -> None:
    title = "Fix a+b & c=d 100% [dev] 修复 \U0001f680"
    payload = pr_payload("opened", 5, created_at="2026-09-02T01:00:00Z", title=title, body="x&payload=y")
    document = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    form = urlencode({"payload": document.decode("utf-8")}).encode("ascii")
    derivation = derive("d-1", FORM, form, in_shanghai)
    assert derivation == derive("d-1", JSON, document, in_shanghai)
    assert derivation.version.title == title
    assert derivation.version.body == "x&payload=y"


# --- malformed and incomplete bodies ------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (JSON, b""),
        (JSON, b"{not json"),
        (JSON, b'{"action": "opened",'),
        (JSON, b"\xff\xfe"),
        (JSON, urlencode({"payload": "{}"}).encode()),  # a form sent as JSON
        (FORM, b""),
        (FORM, b"zen=hello"),  # no payload field
        (FORM, b"payload"),  # not key=value
        (FORM, b"payload=%FF"),  # not UTF-8 once decoded
        (FORM, b"\xff=1"),
        (FORM, urlencode({"payload": "{not json"}).encode()),
    ],
    ids=[
        "empty",
        "not-json",
        "truncated",
        "not-utf8",
        "form-as-json",
        "empty-form",
        "form-without-payload",
        "form-without-equals",
        "form-payload-not-utf8",
        "form-not-utf8",
        "form-payload-not-json",
    ],
)
def test_a_malformed_body_raises_malformed_body(content_type: str, body: bytes) -> None:
    with pytest.raises(MalformedBody):
        derive("d-1", content_type, body, in_utc)


def _without(document: dict[str, Any], dotted: str) -> dict[str, Any]:
    *parents, last = dotted.split(".")
    node = document
    for key in parents:
        node = node[key]
    del node[last]
    return document


@needs_shared
@pytest.mark.parametrize(
    "field",
    [
        "action",
        "pull_request",
        "repository",
        "repository.full_name",
        "pull_request.number",
        "pull_request.created_at",
        "pull_request.updated_at",
    ],
)
def test_a_body_without_a_needed_field_raises_incomplete_body(field: str) -> None:
    document = _without(json.loads(example("pull_request.opened.json")), field)
    with pytest.raises(IncompleteBody) as raised:
        derive_json(json.dumps(document).encode())
    assert raised.value.field == field


@needs_shared
def test_a_field_of_the_wrong_type_raises_incomplete_body() -> None:
    document = json.loads(example("pull_request.opened.json"))
    document["pull_request"]["created_at"] = "yesterday"
    with pytest.raises(IncompleteBody) as raised:
        derive_json(json.dumps(document).encode())
    assert raised.value.field == "pull_request.created_at"


@needs_shared
def test_an_incomplete_form_body_raises_incomplete_body() -> None:
    document = _without(json.loads(example("pull_request.opened.json")), "pull_request.created_at")
    form = urlencode({"payload": json.dumps(document)}).encode()
    with pytest.raises(IncompleteBody) as raised:
        derive("d-1", FORM, form, in_utc)
    assert raised.value.field == "pull_request.created_at"


# --- repository_key -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling", ["NVIDIA/Megatron-LM", "nvidia/megatron-lm", "NVIDIA/MEGATRON-LM", "Nvidia/Megatron-lm"]
)
def test_repository_key_is_case_insensitive(spelling: str) -> None:
    assert repository_key(spelling) == "nvidia/megatron-lm"


def test_repository_key_tells_different_repositories_apart() -> None:
    assert repository_key("NVIDIA/Megatron-LM") != repository_key("NVIDIA/Megatron-LM2")
    assert repository_key("NVIDIA/Megatron-LM") != repository_key("NVIDIA-Megatron/LM")


def test_repository_key_is_idempotent() -> None:
    assert repository_key(repository_key("Codertocat/Hello-World")) == "codertocat/hello-world"


@needs_shared
def test_deliveries_spelling_the_repository_differently_share_its_key() -> None:
    created = "2026-09-02T01:00:00Z"
    upper = delivery("pull_request", pr_payload("opened", 1, created_at=created, repo="NVIDIA/Megatron-LM"))
    lower = delivery("pull_request", pr_payload("opened", 1, created_at=created, repo="nvidia/megatron-lm"))
    a, b = derive_json(upper.body, in_shanghai), derive_json(lower.body, in_shanghai)
    assert a.repo == b.repo == "nvidia/megatron-lm"
    assert (a.full_name, b.full_name) == ("NVIDIA/Megatron-LM", "nvidia/megatron-lm")
