"""The JSON API over real deliveries, end to end through the webhook and the worker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import post, run_jobs
from tests.support.clock import at
from tracker.core.window import today_in
from tracker.settings import Settings
from tracker.web.app import create_app

pytestmark = needs_shared


def deliver(client: FlaskClient, *stories: PullRequestStory) -> None:
    for story in stories:
        for d in story.deliveries:
            assert post(client, d.body, d.event, d.delivery_id).status_code == 202


@pytest.fixture
def september(app: Flask, client: FlaskClient) -> FlaskClient:
    """A small September 2026 in Asia/Shanghai (UTC+8)."""
    deliver(
        client,
        # opened Sep 2, merged Sep 10
        PullRequestStory(101, at("2026-09-02T01:00:00Z"), base="dev").opened().merged(at("2026-09-10T03:00:00Z")),
        # opened Sep 5, closed Sep 8, reopened Sep 9, still open: active
        PullRequestStory(102, at("2026-09-05T01:00:00Z"))
        .opened()
        .closed(at("2026-09-08T01:00:00Z"))
        .reopened(at("2026-09-09T01:00:00Z")),
        # opened in August, pushed Sep 3, merged Sep 20 (after a Sep 13 cutoff)
        PullRequestStory(103, at("2026-08-20T01:00:00Z"))
        .opened()
        .pushed(at("2026-09-03T01:00:00Z"))
        .merged(at("2026-09-20T01:00:00Z")),
        # opened in August, only labeled in September: not in September
        PullRequestStory(104, at("2026-08-21T01:00:00Z")).opened().labeled(at("2026-09-04T01:00:00Z"), "bug"),
        # closed Sep 12 and reopened Sep 15
        PullRequestStory(105, at("2026-09-01T00:00:00Z"))
        .opened()
        .closed(at("2026-09-12T01:00:00Z"))
        .reopened(at("2026-09-15T01:00:00Z")),
        # 23:59:59 UTC on Sep 30 is October 1 in Shanghai
        PullRequestStory(106, at("2026-09-30T23:59:59Z")).opened(),
    )
    run_jobs(app)
    return client


def test_month_snapshot_at_a_mid_month_cutoff(september: FlaskClient) -> None:
    answer = september.get("/api/v1/repos/NVIDIA/Megatron-LM/months/2026-09?cutoff=2026-09-13")
    assert answer.status_code == 200
    body = answer.json
    assert body["repo"] == "NVIDIA/Megatron-LM"
    assert body["month"] == "2026-09"
    assert body["cutoff"] == "2026-09-13"
    assert body["timezone"] == "Asia/Shanghai"
    assert body["final"] is False
    assert body["window"] == {"start": "2026-08-31T16:00:00Z", "end": "2026-09-13T16:00:00Z"}
    # opened: 101, 102, 105; merged: 101; closed unmerged: 105 (reopened after the cutoff);
    # active: 102 (opened), 103 (committed, merge comes later)
    assert body["stats"] == {"opened": 3, "merged": 1, "closed_unmerged": 1, "active_at_cutoff": 2}
    states = {pr["number"]: pr["state_at_cutoff"] for pr in body["pull_requests"]}
    assert states == {101: "merged", 102: "open", 103: "open", 105: "closed"}
    pr101 = next(pr for pr in body["pull_requests"] if pr["number"] == 101)
    assert pr101["base_ref"] == "dev"
    assert pr101["title"] == "Change number 101"
    assert pr101["activity"] == {"opened": True, "committed": False, "closed": False, "reopened": False, "merged": True}


def test_month_snapshot_final(september: FlaskClient) -> None:
    body = september.get("/api/v1/repos/NVIDIA/Megatron-LM/months/2026-09").json
    assert body["cutoff"] == "2026-09-30"
    assert body["final"] is True
    # 103 merged Sep 20, 105 reopened and still open (opened in window): active
    assert body["stats"] == {"opened": 3, "merged": 2, "closed_unmerged": 0, "active_at_cutoff": 2}
    assert [pr["number"] for pr in body["pull_requests"]] == [101, 102, 103, 105]
    october = september.get("/api/v1/repos/NVIDIA/Megatron-LM/months/2026-10").json
    assert [pr["number"] for pr in october["pull_requests"]] == [106]


def test_repository_names_are_case_insensitive(september: FlaskClient) -> None:
    body = september.get("/api/v1/repos/nvidia/megatron-lm/months/2026-09?cutoff=2026-09-13").json
    assert body["repo"] == "NVIDIA/Megatron-LM"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("months/2026-13", "not a month"),
        ("months/2026-9", "not a month"),
        ("months/september", "not a month"),
        ("months/2026-09?cutoff=2026-10-01", "outside 2026-09"),
        ("months/2026-09?cutoff=2026-08-31", "outside 2026-09"),
        ("months/2026-09?cutoff=13", "not a day"),
        ("months/2026-09?cutoff=2026-09-31", "not a real day"),
        ("months/2099-01", "has not started"),
    ],
)
def test_bad_months_and_cutoffs_are_400(september: FlaskClient, query: str, message: str) -> None:
    answer = september.get(f"/api/v1/repos/NVIDIA/Megatron-LM/{query}")
    assert answer.status_code == 400
    assert message in answer.json["error"]


def test_unknown_repository_is_404(september: FlaskClient) -> None:
    answer = september.get("/api/v1/repos/someone/else/months/2026-09")
    assert answer.status_code == 404
    assert "someone/else" in answer.json["error"]


def test_current_month_defaults_to_today(app: Flask, client: FlaskClient) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    deliver(client, PullRequestStory(7, now - timedelta(minutes=5)).opened())
    run_jobs(app)
    today = today_in("Asia/Shanghai")
    body = client.get("/api/v1/repos/NVIDIA/Megatron-LM/months/current").json
    assert body["month"] == f"{today.year:04d}-{today.month:02d}"
    assert body["cutoff"] == today.isoformat()
    assert body["stats"]["opened"] == 1
    assert body["stats"]["active_at_cutoff"] == 1


def test_status_counts_and_queue(september: FlaskClient) -> None:
    status = september.get("/api/v1/status").json
    assert status["deliveries"]["received"] == status["deliveries"]["processed"] == 14
    assert status["deliveries"]["pending"] == status["deliveries"]["failed"] == 0
    assert status["queue"]["queued"] == 0


def test_repository_list_shows_months(september: FlaskClient) -> None:
    repos = september.get("/api/v1/repos").json["repositories"]
    assert [r["repo"] for r in repos] == ["NVIDIA/Megatron-LM"]
    assert set(repos[0]["months"]) == {"2026-08", "2026-09", "2026-10"}


def test_index_page_links_the_months(september: FlaskClient) -> None:
    page = september.get("/").get_data(as_text=True)
    assert "/api/v1/repos/NVIDIA/Megatron-LM/months/2026-09" in page


def test_healthz_ok(client: FlaskClient) -> None:
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json == {"status": "ok", "ledger": "ok", "redis": "ok"}


def test_healthz_503_when_redis_is_unreachable(settings: Settings) -> None:
    broken = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    answer = create_app(broken).test_client().get("/healthz")
    assert answer.status_code == 503
    assert answer.json["redis"].startswith("unreachable")
    assert answer.json["ledger"] == "ok"


def test_healthz_503_when_the_ledger_is_unreachable(app: Flask, client: FlaskClient) -> None:
    from sqlalchemy import create_engine

    from tracker.web.context import services

    with app.app_context():
        ledger = services().ledger
    working = ledger.engine
    ledger.engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none", connect_args={"connect_timeout": 1})
    try:
        answer = client.get("/healthz")
    finally:
        ledger.engine = working
    assert answer.status_code == 503
    assert answer.json["ledger"].startswith("unreachable")
    assert answer.json["redis"] == "ok"


def test_admin_retry_endpoint_needs_the_token(client: FlaskClient) -> None:
    # Issue 31, item 9: as every admin endpoint (README, "Month records"): 401 without a token, 403
    # with a wrong one (it was 401).
    assert client.post("/api/v1/deliveries/retry-failed").status_code == 401
    for wrong in ("Bearer nope", "Bearer test-admin-tokeN", "Bearer test-admin-token2"):
        answer = client.post("/api/v1/deliveries/retry-failed", headers={"Authorization": wrong})
        assert answer.status_code == 403
        assert answer.json == {"error": "the admin token is wrong"}
    right = {"Authorization": "Bearer test-admin-token"}
    answer = client.post("/api/v1/deliveries/retry-failed", headers=right)
    assert answer.status_code == 200
    assert answer.json == {"requeued": 0}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/api/v1/deliveries/retry-failed"),
        ("post", "/api/v1/repos/NVIDIA/Megatron-LM/months/2026-09/finalize"),
        ("post", "/api/v1/repos/NVIDIA/Megatron-LM/backfill?month=2026-09"),
    ],
)
def test_admin_endpoints_refuse_alike(client: FlaskClient, method: str, path: str) -> None:
    answers = [
        getattr(client, method)(path, headers=headers).status_code
        for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": "Bearer wrong-token-0123456789"})
    ]
    assert answers == [401, 401, 403]


def test_admin_endpoint_is_off_without_a_token(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"admin_token": None}))
    answer = app.test_client().post("/api/v1/deliveries/retry-failed", headers={"Authorization": "Bearer x"})
    assert answer.status_code == 503  # as the other admin endpoints
    assert "TRACKER_ADMIN_TOKEN" in answer.json["error"]


# --- issue 31, item 9: errors quote at most a short prefix of what was sent ---------------------

LONG = "A" * 10_000


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("get", f"/reports/NVIDIA/Megatron-LM/2026-09.md?lang={LONG}", 400),
        ("get", f"/reports/NVIDIA/Megatron-LM/2026-09.html?lang={LONG}", 400),
        ("get", f"/reports/NVIDIA/Megatron-LM/2026-09.json?detail={LONG}", 400),
        ("get", f"/reports/NVIDIA/Megatron-LM/2026-09.md?cutoff={LONG}", 400),
        ("get", f"/reports/NVIDIA/Megatron-LM/{LONG}.md", 400),
        ("get", f"/reports/NVIDIA/Megatron-LM/{LONG}.txt", 404),
        ("get", f"/api/v1/repos/NVIDIA/Megatron-LM/months/{LONG}", 400),
        ("get", f"/reports/{LONG}/{LONG}/2026-09.md", 404),
        ("get", f"/reports/{LONG}/{LONG}/2026-09.html", 404),
        ("get", f"/api/v1/repos/{LONG}/{LONG}/months/2026-09/records", 404),
        ("get", f"/api/v1/repos/NVIDIA/Megatron-LM/months/{LONG}/records", 400),
        ("post", f"/api/v1/repos/NVIDIA/Megatron-LM/months/{LONG}/finalize", 400),
        ("post", f"/api/v1/repos/{LONG}/{LONG}/months/2026-09/finalize", 404),
        ("post", f"/api/v1/repos/NVIDIA/Megatron-LM/backfill?since={LONG}", 400),
        ("post", f"/api/v1/repos/NVIDIA/Megatron-LM/backfill?month={LONG}", 400),
    ],
)
def test_an_error_quotes_a_short_prefix_of_a_long_value(
    september: FlaskClient, method: str, path: str, status: int
) -> None:
    """Before: a 10 KB `lang` (or month, cutoff, detail, name) came back whole in the error."""
    answer = getattr(september, method)(path, headers={"Authorization": "Bearer test-admin-token"})
    assert answer.status_code == status, answer.get_data(as_text=True)[:300]
    text = answer.get_data(as_text=True)
    assert "A" * 101 not in text
    assert len(text) < 5000  # the HTML page's markup and the repositories it lists, never the value


def test_a_long_content_type_is_not_echoed(client: FlaskClient) -> None:
    from tests.support.app import signed_headers

    body = b"{}"
    headers = {**signed_headers(body, "pull_request", "long-type"), "Content-Type": "text/" + LONG}
    answer = client.post("/webhook", data=body, headers=headers)
    assert answer.status_code == 415
    assert len(answer.get_data()) < 300


def test_start_up_without_a_secret_is_a_clear_error(settings: Settings) -> None:
    from tracker.settings import SettingsError

    with pytest.raises(SettingsError, match="TRACKER_WEBHOOK_SECRET is not set"):
        create_app(settings.model_copy(update={"webhook_secret": None}))


# --- Redis trouble (issue 8): /healthz within a second, retry-failed changing nothing ------------


def failed_deliveries(app: Flask, count: int) -> list[str]:
    """Deliveries in the ledger that used up their retries."""
    from tracker.web.context import services

    story = PullRequestStory(301, at("2026-09-02T01:00:00Z")).opened()
    for day in range(3, 3 + count - 1):
        story.pushed(at(f"2026-09-{day:02d}T01:00:00Z"))
    with app.app_context():
        ledger = services().ledger
        for d in story.deliveries:
            assert ledger.store(d.as_ledger_delivery())
            ledger.record_attempt_failed(d.delivery_id, "ValueError: probe", final=True)
    return [d.delivery_id for d in story.deliveries]


def statuses(app: Flask, ids: list[str]) -> list[str | None]:
    from tracker.web.context import services

    with app.app_context():
        return [services().ledger.status_of(delivery_id) for delivery_id in ids]


ADMIN = {"Authorization": "Bearer test-admin-token"}


@pytest.mark.system
def test_healthz_answers_503_within_a_second_when_redis_hangs(settings: Settings) -> None:
    import time

    from tests.security.test_redis_outage import HEALTHZ_LIMIT, RedisServer

    server = RedisServer().start()
    try:
        client = create_app(settings.model_copy(update={"redis_url": server.url})).test_client()
        assert client.get("/healthz").status_code == 200
        server.hang()
        for _ in range(2):  # the pooled connection is not used: each check has its own
            started = time.monotonic()
            answer = client.get("/healthz")
            took = time.monotonic() - started
            assert answer.status_code == 503
            assert answer.json == {"status": "unavailable", "ledger": "ok", "redis": "unreachable (TimeoutError)"}
            assert took < HEALTHZ_LIMIT, f"/healthz answered after {took:.2f} s"
        server.resume()
        assert client.get("/healthz").status_code == 200
    finally:
        server.kill()


def test_retry_failed_while_redis_is_down_is_503_and_changes_nothing(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}))
    ids = failed_deliveries(app, 2)
    answer = app.test_client().post("/api/v1/deliveries/retry-failed", headers=ADMIN)
    assert answer.status_code == 503
    assert answer.json["error"].startswith("Redis is unreachable (ConnectionError): nothing was changed")
    assert statuses(app, ids) == ["failed", "failed"]


def test_retry_failed_changes_nothing_when_redis_fails_while_queueing(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    from tracker.web import api
    from tracker.web.context import services

    ids = failed_deliveries(app, 3)

    def fails_half_way(queue: object, delivery_ids: object) -> int:
        raise RedisConnectionError("Connection closed by server.")

    monkeypatch.setattr(api, "enqueue_deliveries", fails_half_way)
    answer = client.post("/api/v1/deliveries/retry-failed", headers=ADMIN)
    assert answer.status_code == 503
    assert "nothing was changed" in answer.json["error"]
    assert statuses(app, ids) == ["failed"] * 3
    monkeypatch.undo()

    answer = client.post("/api/v1/deliveries/retry-failed", headers=ADMIN)  # Redis is fine again
    assert answer.json == {"requeued": 3}
    assert statuses(app, ids) == ["pending"] * 3
    with app.app_context():
        assert services().delivery_queue.count == 3


def test_retry_failed_queues_first_and_leaves_what_a_worker_processed_meanwhile(
    app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rq import Queue

    from tracker.queue import enqueue_deliveries
    from tracker.web import api
    from workers.jobs import process_delivery

    first, second = failed_deliveries(app, 2)

    def queue_then_a_worker_is_quick(queue: Queue, delivery_ids: list[str]) -> int:
        assert statuses(app, [first, second]) == ["failed", "failed"]  # the ledger is untouched until now
        count = enqueue_deliveries(queue, delivery_ids)
        process_delivery(first)  # a worker ran the first job before the ledger was updated
        return count

    monkeypatch.setattr(api, "enqueue_deliveries", queue_then_a_worker_is_quick)
    answer = client.post("/api/v1/deliveries/retry-failed", headers=ADMIN)
    assert answer.json == {"requeued": 2}
    assert statuses(app, [first, second]) == ["processed", "pending"]
