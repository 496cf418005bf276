"""POST /webhook through the real Flask app, real Redis and a real ledger."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from bench.fixtures.paths import WEBHOOKS, needs_shared
from tests.support.app import SECRET, fixture_payload, post, run_jobs, show_head_to_github, signed_headers, stored_count
from tracker.store.schema import hooks
from tracker.web.context import MAX_BODY_BYTES, services
from tracker.web.signature import sign

pytestmark = needs_shared

PR_FIXTURES = sorted(WEBHOOKS.glob("pull_request.*.json")) + sorted((WEBHOOKS / "ghes-3.5").glob("*.json"))


def queued(app: Flask) -> int:
    with app.app_context():
        return services().delivery_queue.count


def test_every_fixture_delivery_is_accepted_and_processed(app: Flask, client: FlaskClient) -> None:
    for number, path in enumerate(PR_FIXTURES):
        body = path.read_bytes()
        answer = client.post("/webhook", data=body, headers=signed_headers(body, "pull_request", f"fixture-{number}"))
        assert answer.status_code == 202, (path.name, answer.json)
    assert queued(app) == 1  # one drain for the burst (workers.drain), not a job each
    run_jobs(app)
    status = client.get("/api/v1/status").json
    assert status["deliveries"] == {
        "received": len(PR_FIXTURES),
        "processed": len(PR_FIXTURES),
        "failed": 0,
        "pending": 0,
    }
    assert status["repositories"] == ["Codertocat/Hello-World"]


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "",
        "sha256=",
        "sha1=0123",
        "sha256=deadbeef",
        "wrong-secret",
        "truncated",
        "uppercase-prefix",
    ],
)
def test_bad_signatures_are_rejected_and_store_nothing(app: Flask, client: FlaskClient, signature: str | None) -> None:
    body = (WEBHOOKS / "pull_request.opened.json").read_bytes()
    headers = signed_headers(body, "pull_request", "bad-signature")
    good = headers.pop("X-Hub-Signature-256")
    if signature == "wrong-secret":
        signature = sign(b"not the secret", body)
    elif signature == "truncated":
        signature = good[:-2]
    elif signature == "uppercase-prefix":
        signature = "SHA256=" + good.removeprefix("sha256=")
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    answer = client.post("/webhook", data=body, headers=headers)
    assert answer.status_code == 401
    assert "signature" in answer.json["error"].lower()
    assert SECRET not in answer.get_data(as_text=True)
    assert stored_count(app) == 0
    assert queued(app) == 0


def test_a_body_changed_after_signing_is_rejected(app: Flask, client: FlaskClient) -> None:
    body = (WEBHOOKS / "pull_request.opened.json").read_bytes()
    headers = signed_headers(body, "pull_request", "tampered")
    answer = client.post("/webhook", data=body.replace(b'"opened"', b'"closed"', 1), headers=headers)
    assert answer.status_code == 401
    assert stored_count(app) == 0


def test_form_encoded_deliveries_are_accepted(app: Flask, client: FlaskClient) -> None:
    document = (WEBHOOKS / "pull_request.opened.json").read_text()
    body = urlencode({"payload": document}).encode()
    show_head_to_github(body)
    headers = signed_headers(body, "pull_request", "form-1")
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    assert client.post("/webhook", data=body, headers=headers).status_code == 202
    run_jobs(app)
    snapshot = client.get("/api/v1/repos/Codertocat/Hello-World/months/2019-05").json
    assert [pr["number"] for pr in snapshot["pull_requests"]] == [2]
    assert snapshot["stats"]["opened"] == 1


def test_a_redelivery_is_stored_once(app: Flask, client: FlaskClient) -> None:
    payload = fixture_payload("pull_request.opened.json")
    assert post(client, payload, "pull_request", "same-guid").status_code == 202
    again = post(client, payload, "pull_request", "same-guid")
    assert again.status_code == 200
    assert again.json["status"] == "duplicate"
    assert stored_count(app) == 1
    assert queued(app) == 1


def test_ping_is_answered_and_shown_in_status(app: Flask, client: FlaskClient) -> None:
    answer = post(client, fixture_payload("ping.json"), "ping", "ping-1")
    assert answer.status_code == 200
    post(client, fixture_payload("ping.json"), "ping", "ping-2")
    hooks_shown = client.get("/api/v1/status").json["hooks"]
    assert len(hooks_shown) == 1
    assert hooks_shown[0]["hook_id"] == "109948940"  # the signed body's `hook_id`, not the header's 4242
    assert hooks_shown[0]["events"] == fixture_payload("ping.json")["hook"]["events"]
    assert hooks_shown[0]["pings"] == 2
    assert hooks_shown[0]["last_ping_at"].endswith("Z")
    assert stored_count(app) == 0  # pings are not deliveries to process
    with app.app_context(), services().ledger.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(hooks)).scalar_one() == 1


@pytest.mark.parametrize("event", ["push", "issues", "pull_request_review", "check_run"])
def test_events_the_tracker_does_not_use_get_204_and_are_not_stored(
    app: Flask, client: FlaskClient, event: str
) -> None:
    answer = post(client, fixture_payload("push.json"), event, f"other-{event}")
    assert answer.status_code == 204
    assert stored_count(app) == 0
    assert queued(app) == 0


@pytest.mark.parametrize("missing", ["X-GitHub-Event", "X-GitHub-Delivery"])
def test_missing_github_headers_are_400(app: Flask, client: FlaskClient, missing: str) -> None:
    body = (WEBHOOKS / "pull_request.opened.json").read_bytes()
    headers = signed_headers(body, "pull_request", "no-header")
    del headers[missing]
    answer = client.post("/webhook", data=body, headers=headers)
    assert answer.status_code == 400
    assert missing in answer.json["error"]
    assert stored_count(app) == 0


@pytest.mark.parametrize("body", [b"{not json", b"", b'{"action": "opened", "pull_request": ', b"\xff\xfe"])
def test_malformed_json_is_400(app: Flask, client: FlaskClient, body: bytes) -> None:
    answer = client.post("/webhook", data=body, headers=signed_headers(body, "pull_request", "malformed"))
    assert answer.status_code == 400
    assert "JSON" in answer.json["error"]
    assert stored_count(app) == 0


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("action",), "action"),
        (("pull_request", "number"), "pull_request.number"),
        (("pull_request", "created_at"), "pull_request.created_at"),
        (("pull_request", "updated_at"), "pull_request.updated_at"),
        (("repository", "full_name"), "repository.full_name"),
        (("pull_request",), "pull_request"),
    ],
)
def test_a_body_without_what_the_tracker_needs_is_422_naming_the_field(
    app: Flask, client: FlaskClient, path: tuple[str, ...], field: str
) -> None:
    payload = fixture_payload("pull_request.opened.json")
    container = payload
    for key in path[:-1]:
        container = container[key]
    del container[path[-1]]
    answer = post(client, payload, "pull_request", "incomplete")
    assert answer.status_code == 422
    assert field in answer.json["error"]
    assert stored_count(app) == 0


def test_oversized_bodies_are_413_without_being_stored(app: Flask, client: FlaskClient) -> None:
    body = b"x" * (MAX_BODY_BYTES + 1)
    answer = client.post("/webhook", data=body, headers=signed_headers(b"", "pull_request", "huge"))
    assert answer.status_code == 413
    assert stored_count(app) == 0


def test_other_content_types_are_415(app: Flask, client: FlaskClient) -> None:
    body = (WEBHOOKS / "pull_request.opened.json").read_bytes()
    headers = {**signed_headers(body, "pull_request", "xml"), "Content-Type": "application/xml"}
    assert client.post("/webhook", data=body, headers=headers).status_code == 415
    assert stored_count(app) == 0


def test_accepted_while_redis_is_down_is_kept_for_the_sweep(app: Flask, client: FlaskClient) -> None:
    from tracker.queue import connect_redis
    from workers.sweep import sweep

    with app.app_context():
        queue = services().delivery_queue
    working = queue.connection
    queue.connection = connect_redis("redis://127.0.0.1:1/0")
    try:
        answer = post(client, fixture_payload("pull_request.opened.json"), "pull_request", "redis-down")
    finally:
        queue.connection = working
    assert answer.status_code == 202
    assert stored_count(app) == 1
    assert queued(app) == 0
    with app.app_context():
        assert sweep(services(), grace_seconds=0) == 1
    run_jobs(app)
    assert client.get("/api/v1/status").json["deliveries"]["processed"] == 1


def test_stored_delivery_keeps_raw_body_and_useful_headers(app: Flask, client: FlaskClient) -> None:
    body = (WEBHOOKS / "pull_request.labeled.json").read_bytes()
    client.post("/webhook", data=body, headers=signed_headers(body, "pull_request", "raw-1"))
    with app.app_context():
        stored = services().ledger.get("raw-1")
    assert stored is not None
    assert stored.body == body
    assert stored.action == "labeled"
    assert stored.repo == "Codertocat/Hello-World"
    assert stored.headers["X-GitHub-Hook-ID"] == "4242"
    assert "X-Hub-Signature-256" not in json.dumps(stored.headers)
