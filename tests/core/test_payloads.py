"""`tracker/payloads.py`: GitHub webhook bodies, checked leniently (GitHub adds fields; GHES sends older shapes)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, urlencode

import pytest

from bench.fixtures.paths import WEBHOOKS, needs_shared
from tracker.core.payloads import (
    IncompleteBody,
    MalformedBody,
    check_shape,
    json_bytes,
    parse_ping,
    parse_pull_request_event,
)

PULL_REQUEST_FILES = sorted(WEBHOOKS.glob("pull_request.*.json")) + sorted(WEBHOOKS.glob("ghes-3.5/*.json"))
PING_FILES = sorted(WEBHOOKS.glob("ping*.json"))
FORM = "application/x-www-form-urlencoded"


@needs_shared
def test_the_fixture_folder_is_there() -> None:
    # Guard against silently parametrizing over nothing.
    assert len(PULL_REQUEST_FILES) >= 30
    assert any(path.parent.name == "ghes-3.5" for path in PULL_REQUEST_FILES)
    assert len(PING_FILES) >= 3


def _id(path: Path) -> str:
    return str(path.relative_to(WEBHOOKS))


@pytest.mark.parametrize("path", PULL_REQUEST_FILES, ids=_id)
def test_every_github_example_passes_check_shape(path: Path) -> None:
    raw = json.loads(path.read_text())
    shape = check_shape(path.read_bytes())
    assert shape.action == raw["action"]
    assert shape.pull_request.number == raw["pull_request"]["number"]
    assert shape.repository.full_name == raw["repository"]["full_name"]


@pytest.mark.parametrize("path", PULL_REQUEST_FILES, ids=_id)
def test_every_github_example_parses_as_an_event(path: Path) -> None:
    raw = json.loads(path.read_text())
    event = parse_pull_request_event(path.read_bytes())
    pr = event.pull_request
    assert event.action == raw["action"]
    assert event.repository.full_name == raw["repository"]["full_name"]
    assert pr.number == raw["pull_request"]["number"]
    assert pr.title == (raw["pull_request"]["title"] or "")
    assert pr.state == raw["pull_request"]["state"]
    assert pr.created_at == datetime.strptime(raw["pull_request"]["created_at"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=UTC
    )
    assert [label.name for label in pr.labels] == [label["name"] for label in raw["pull_request"]["labels"] or []]


@pytest.mark.parametrize("path", PULL_REQUEST_FILES, ids=_id)
def test_every_github_example_parses_from_a_form_body(path: Path) -> None:
    body = urlencode({"payload": path.read_text()}).encode()
    event = parse_pull_request_event(json_bytes(body, FORM))
    assert event.pull_request.number == json.loads(path.read_text())["pull_request"]["number"]


@needs_shared
def test_the_closed_example_in_detail() -> None:
    event = parse_pull_request_event((WEBHOOKS / "pull_request.closed.json").read_bytes())
    pr = event.pull_request
    assert event.action == "closed"
    assert pr.number == 2
    assert pr.state == "closed"
    assert pr.merged_at is None
    assert pr.closed_at == datetime(2019, 5, 15, 15, 21, 18, tzinfo=UTC)
    assert pr.updated_at == datetime(2019, 5, 15, 15, 21, 18, tzinfo=UTC)
    assert event.repository.full_name == "Codertocat/Hello-World"


@needs_shared
def test_a_null_body_is_accepted() -> None:
    event = parse_pull_request_event((WEBHOOKS / "pull_request.opened.with-null-body.json").read_bytes())
    assert event.pull_request.body is None


@pytest.mark.parametrize("path", PING_FILES, ids=_id)
def test_ping_examples_parse(path: Path) -> None:
    raw = json.loads(path.read_text())
    ping = parse_ping(path.read_bytes())
    assert ping.zen == "Anything added dilutes everything else."
    assert ping.hook_id == 109948940
    assert ping.hook.type == raw["hook"]["type"]
    assert ping.hook.events == raw["hook"]["events"]


# --- form bodies --------------------------------------------------------------------------------


def opened() -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((WEBHOOKS / "pull_request.opened.json").read_text())
    return payload


@needs_shared
def test_form_body_payload_is_unwrapped() -> None:
    document = json.dumps(opened())
    body = ("payload=" + quote_plus(document)).encode()
    assert json_bytes(body, FORM) == document.encode()
    assert json_bytes(body, "Application/X-WWW-Form-Urlencoded; charset=utf-8") == document.encode()
    shape = check_shape(json_bytes(body, FORM))
    assert shape.pull_request.number == 2
    assert parse_pull_request_event(json_bytes(body, FORM)).action == "opened"


@needs_shared
def test_form_body_with_non_ascii_text() -> None:
    payload = opened()
    payload["pull_request"]["title"] = "修复 — naïve ✓ & 100% = done+"
    body = urlencode({"payload": json.dumps(payload, ensure_ascii=False)}).encode()
    assert parse_pull_request_event(json_bytes(body, FORM)).pull_request.title == "修复 — naïve ✓ & 100% = done+"


@needs_shared
@pytest.mark.parametrize("content_type", ["application/json", None, ""])
def test_json_body_is_returned_as_is(content_type: str | None) -> None:
    body = json.dumps(opened()).encode()
    assert json_bytes(body, content_type) == body


@pytest.mark.parametrize("body", [b"other=1", b"", b"payload"], ids=["no-payload-field", "empty", "no-equals"])
def test_form_body_without_payload_is_malformed(body: bytes) -> None:
    with pytest.raises(MalformedBody):
        json_bytes(body, FORM)


def test_form_body_that_is_not_utf8_is_malformed() -> None:
    with pytest.raises(MalformedBody):
        json_bytes(b"payload=\xff\xfe", FORM)


# --- missing and malformed ----------------------------------------------------------------------


def without(path: str) -> bytes:
    payload = copy.deepcopy(opened())
    *parents, last = path.split(".")
    node = payload
    for key in parents:
        node = node[key]
    del node[last]
    return json.dumps(payload).encode()


REQUIRED = [
    "action",
    "pull_request.number",
    "pull_request.created_at",
    "pull_request.updated_at",
    "repository.full_name",
]


@needs_shared
@pytest.mark.parametrize("field", REQUIRED)
def test_check_shape_names_the_missing_field(field: str) -> None:
    with pytest.raises(IncompleteBody) as caught:
        check_shape(without(field))
    assert caught.value.field == field
    assert str(caught.value) == f"{field}: is missing"


@needs_shared
@pytest.mark.parametrize("field", REQUIRED)
def test_parse_event_names_the_missing_field(field: str) -> None:
    with pytest.raises(IncompleteBody) as caught:
        parse_pull_request_event(without(field))
    assert caught.value.field == field


@needs_shared
@pytest.mark.parametrize("field", ["pull_request", "repository"])
def test_check_shape_names_a_missing_object(field: str) -> None:
    with pytest.raises(IncompleteBody) as caught:
        check_shape(without(field))
    assert caught.value.field == field


@needs_shared
@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("pull_request.number", "two"),
        ("pull_request.created_at", "yesterday"),
        ("pull_request.updated_at", None),
        ("action", ""),
        ("repository.full_name", None),
    ],
)
def test_check_shape_names_a_wrong_field(path: str, value: object) -> None:
    payload = opened()
    *parents, last = path.split(".")
    node = payload
    for key in parents:
        node = node[key]
    node[last] = value
    with pytest.raises(IncompleteBody) as caught:
        check_shape(json.dumps(payload).encode())
    assert caught.value.field == path


@pytest.mark.parametrize(
    "body",
    [b"{", b"not json", b"", b'{"action": "opened",}', b"\xff\xfe{}"],
    ids=["unterminated", "text", "empty", "trailing-comma", "not-utf8"],
)
def test_invalid_json_is_malformed(body: bytes) -> None:
    with pytest.raises(MalformedBody):
        check_shape(body)
    with pytest.raises(MalformedBody):
        parse_pull_request_event(body)
    with pytest.raises(MalformedBody):
        parse_ping(body)


def test_malformed_and_incomplete_are_value_errors() -> None:
    assert issubclass(MalformedBody, ValueError)
    assert issubclass(IncompleteBody, ValueError)
    assert not issubclass(MalformedBody, IncompleteBody)


@needs_shared
def test_unknown_extra_keys_are_ignored() -> None:
    payload = opened()
    payload["brand_new_top_level_field"] = {"nested": [1, 2, 3]}
    payload["pull_request"]["auto_merge_v2"] = {"enabled": True}
    payload["pull_request"]["base"]["mystery"] = 1
    payload["repository"]["custom_properties"] = {"team": "core"}
    document = json.dumps(payload).encode()
    shape = check_shape(document)
    event = parse_pull_request_event(document)
    assert shape.pull_request.number == 2
    assert event.pull_request.number == 2
    assert event.pull_request.base.ref == opened()["pull_request"]["base"]["ref"]
    assert not hasattr(event, "brand_new_top_level_field")


def test_optional_fields_may_be_absent() -> None:
    minimal = {
        "action": "opened",
        "pull_request": {"number": 5, "created_at": "2026-09-01T00:00:00Z", "updated_at": "2026-09-01T00:00:00Z"},
        "repository": {"full_name": "o/r"},
    }
    event = parse_pull_request_event(json.dumps(minimal).encode())
    pr = event.pull_request
    assert (pr.number, pr.title, pr.state, pr.draft, pr.labels) == (5, "", "open", False, [])
    assert pr.base.ref is None and pr.user.login is None


@needs_shared
def test_null_title_draft_and_labels_are_tolerated() -> None:
    payload = opened()
    payload["pull_request"].update({"title": None, "draft": None, "labels": None})
    pr = parse_pull_request_event(json.dumps(payload).encode()).pull_request
    assert (pr.title, pr.draft, pr.labels) == ("", False, [])
