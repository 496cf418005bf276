"""Month records over HTTP (`tracker/records/views.py`) and from the schedule (`workers.jobs.due_work`),
through the real app, real Redis and a real ledger."""

from __future__ import annotations

import json
import logging
import time

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import post, run_jobs, running_app
from tests.support.clock import at
from tracker.core.window import Month, today_in
from tracker.settings import Settings
from tracker.web.context import services
from workers.jobs import due_work

pytestmark = needs_shared

REPO = "octo-org/octo-repo"
ADMIN = {"Authorization": "Bearer test-admin-token"}
FINALIZE = f"/api/v1/repos/{REPO}/months/2026-07/finalize"
RECORDS = f"/api/v1/repos/{REPO}/months/2026-07/records"


def deliver_july(client: FlaskClient) -> None:
    stories = [
        PullRequestStory(1, at("2026-07-06T02:00:00+00:00"), repo=REPO, title="Faster data loader")
        .opened()
        .merged(at("2026-07-09T02:00:00+00:00")),
        PullRequestStory(3, at("2026-07-25T02:00:00+00:00"), repo=REPO, title="Expert parallel overlap").opened(),
    ]
    for story in stories:
        for delivery in story.deliveries:
            assert post(client, delivery.body, "pull_request", delivery.delivery_id).status_code == 202


@pytest.fixture
def july(app: Flask, client: FlaskClient) -> FlaskClient:
    deliver_july(client)
    run_jobs(app)
    return client


@pytest.mark.parametrize(
    ("headers", "code"),
    [({}, 401), ({"Authorization": "Bearer"}, 401), ({"Authorization": "Bearer wrong"}, 403)],
)
def test_finalize_needs_the_admin_token(july: FlaskClient, headers: dict[str, str], code: int) -> None:
    answer = july.post(FINALIZE, headers=headers)
    assert answer.status_code == code
    assert "test-admin-token" not in answer.get_data(as_text=True)
    assert july.get(RECORDS).json["records"] == []


def test_finalize_is_off_without_an_admin_token(settings: Settings) -> None:
    with running_app(settings.model_copy(update={"admin_token": None})) as app:
        answer = app.test_client().post(FINALIZE, headers=ADMIN)
        assert answer.status_code == 503
        assert "TRACKER_ADMIN_TOKEN" in answer.json["error"]


def test_finalize_runs_then_answers_where_the_record_is(app: Flask, july: FlaskClient) -> None:
    answer = july.post(FINALIZE, headers=ADMIN)
    assert answer.status_code == 202
    assert answer.headers["Location"] == RECORDS
    assert answer.json["status"] == "finalizing"
    run_jobs(app)
    listed = july.get(RECORDS).json
    [record] = listed["records"]
    assert (record["revision"], record["cutoff"], record["trigger"], record["forced"]) == (
        1,
        "2026-07-31",
        "api",
        False,
    )
    assert listed["late_deliveries"] == {"count": 0, "pull_requests": []}
    again = july.post(FINALIZE, headers=ADMIN)
    assert again.status_code == 200
    assert again.json["record"]["content_hash"] == record["content_hash"]
    forced = july.post(FINALIZE + "?force=1", headers=ADMIN)
    assert forced.status_code == 202
    run_jobs(app)
    assert [r["revision"] for r in july.get(RECORDS).json["records"]] == [1, 2]


def test_a_month_that_has_not_ended_is_409_saying_when(july: FlaskClient) -> None:
    current = Month.containing(today_in("Asia/Shanghai"))  # the repository's time zone: never ended
    answer = july.post(f"/api/v1/repos/{REPO}/months/{current}/finalize", headers=ADMIN)
    assert answer.status_code == 409
    assert f"{current} has not ended yet: it ends at" in answer.json["error"]
    assert july.post(f"/api/v1/repos/{REPO}/months/2026-13/finalize", headers=ADMIN).status_code == 400
    assert july.post("/api/v1/repos/nobody/none/months/2026-07/finalize", headers=ADMIN).status_code == 404
    assert july.get(RECORDS).json["records"] == []


def test_the_schedule_finalises_each_ended_month_once(
    app: Flask, july: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    with app.app_context(), caplog.at_level(logging.INFO, logger="workers.jobs"):
        from workers import runtime

        runtime.install(services())
        first = due_work()
        second = due_work()  # a second scheduler, or the next round, before any worker ran
    assert first.startswith("1 months due, 1 finalisations queued")
    assert second.startswith("1 months due, 0 finalisations queued")
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("schedule:")]
    assert said == [f"schedule: {REPO} 2026-07 ended without a record: its finalisation is queued"]
    run_jobs(app)
    records = july.get(RECORDS).json["records"]
    assert [(r["revision"], r["trigger"]) for r in records] == [(1, "schedule")]
    with app.app_context():
        assert due_work().startswith("0 months due")


def test_downtime_across_a_month_end_is_caught_up_at_start(settings: Settings) -> None:
    """The ledger holds two ended months and the schedule never ran: its first round finalises both."""
    with running_app(settings) as app:
        client = app.test_client()
        deliver_july(client)
        june = PullRequestStory(7, at("2026-06-10T02:00:00+00:00"), repo=REPO, title="June work").opened()
        assert post(client, june.deliveries[0].body, "pull_request", june.deliveries[0].delivery_id).status_code == 202
        run_jobs(app)
        with app.app_context():
            assert due_work().startswith("2 months due, 2 finalisations queued")
        run_jobs(app)
        for month in ("2026-06", "2026-07"):
            [record] = client.get(f"/api/v1/repos/{REPO}/months/{month}/records").json["records"]
            assert record["revision"] == 1


def test_what_is_still_pending_at_the_deadline_is_said_in_the_record(settings: Settings) -> None:
    with running_app(settings.model_copy(update={"finalize_wait": 0.0})) as app:
        client = app.test_client()
        deliver_july(client)
        run_jobs(app)
        late = PullRequestStory(4, at("2026-07-08T02:00:00+00:00"), repo=REPO, title="Still in the queue").opened()
        with app.app_context():  # stored, never processed: pending when the month is finalised
            assert services().ledger.store(late.deliveries[0].as_ledger_delivery())
        assert client.post(FINALIZE, headers=ADMIN).status_code == 202
        with app.app_context():
            services().delivery_queue.empty()  # the month-end job runs before any delivery job
        run_jobs(app)
        [record] = client.get(RECORDS).json["records"]
        assert record["pending"] == {"deliveries": 1, "pending_classification": 0}


def test_a_finalised_month_is_served_from_its_record_whatever_arrives_later(app: Flask, july: FlaskClient) -> None:
    assert july.post(FINALIZE, headers=ADMIN).status_code == 202
    run_jobs(app)
    names = [("2026-07.md", "en"), ("2026-07.md", "zh-CN"), ("2026-07.html", "en"), ("2026-07.json", "en")]
    before = {}
    for name, lang in names:
        answer = july.get(f"/reports/{REPO}/{name}", query_string={"lang": lang})
        assert answer.headers["X-Tracker-Record"].startswith("revision=1; content-hash=")
        before[(name, lang)] = answer.get_data()
    same_at_last_day = july.get(f"/reports/{REPO}/2026-07.json", query_string={"cutoff": "2026-07-31"})
    assert same_at_last_day.get_data() == before[("2026-07.json", "en")]
    assert json.loads(before[("2026-07.json", "en")])["final"] is True
    time.sleep(0.01)
    late = PullRequestStory(8, at("2026-07-28T02:00:00+00:00"), repo=REPO, title="Late July work").opened()
    assert post(july, late.deliveries[0].body, "pull_request", late.deliveries[0].delivery_id).status_code == 202
    run_jobs(app)
    for (name, lang), body in before.items():
        assert july.get(f"/reports/{REPO}/{name}", query_string={"lang": lang}).get_data() == body
    live = json.loads(july.get(f"/reports/{REPO}/2026-07.json", query_string={"live": "1"}).get_data())
    assert 8 in {pr["number"] for pr in live["pull_requests"]}
    assert july.get(RECORDS).json["late_deliveries"] == {"count": 1, "pull_requests": [8]}
    # An earlier cutoff is rendered as usual, not served from the record.
    partial = july.get(f"/reports/{REPO}/2026-07.json", query_string={"cutoff": "2026-07-30"})
    assert "X-Tracker-Record" not in partial.headers
