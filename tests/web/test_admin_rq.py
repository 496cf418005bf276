"""`tracker/web/admin_rq.py`: RQ's dashboard under /admin/rq, for the admin alone, on the tracker's Redis.

Over the real app (real Redis, real ledger), wrapped in the production server's access log
(`tracker.web.server.access_log`), so that what a request would write to the log is checked too.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from flask import Flask
from werkzeug.test import Client, TestResponse

from tests.conftest import post, run_jobs
from tests.factory import delivery, pr_payload
from tracker.settings import Settings
from tracker.web.admin_rq import COOKIE, DASHBOARD_POLICY, PREFIX
from tracker.web.context import services
from tracker.web.server import access_log

TOKEN = "test-admin-token"  # tests/conftest.py's settings
ADMIN = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def browser(app: Flask) -> Client:
    """A client of the app as `tracker web` serves it: through the access log, keeping cookies."""
    return Client(access_log(app.wsgi_app), use_cookies=True)


@pytest.fixture
def access_lines(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)


def _queue_names(answer: TestResponse) -> set[str]:
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return {queue["name"] for queue in answer.get_json()["queues"]}


def test_without_the_token_the_dashboard_is_refused(browser: Client) -> None:
    for path in (f"{PREFIX}/", f"{PREFIX}/0/view/workers", f"{PREFIX}/0/view/jobs/deliveries/queued/8/asc/1"):
        answer = browser.get(path)
        assert answer.status_code == 401, path
        assert answer.headers["WWW-Authenticate"] == 'Bearer realm="tracker"'
        page = answer.get_data(as_text=True)
        assert 'name="token"' in page and f'action="{PREFIX}/session"' in page  # the form to type it in
        assert "deliveries" not in page
    data = browser.get(f"{PREFIX}/0/data/queues.json")
    assert data.status_code == 401 and "queues" not in data.get_json()
    assert browser.get(f"{PREFIX}/static/js/jquery-3.5.1.min.js").status_code == 401


def test_a_wrong_token_is_refused(browser: Client) -> None:
    assert browser.get(f"{PREFIX}/", headers={"Authorization": "Bearer not-the-token"}).status_code == 403
    typed = browser.post(f"{PREFIX}/session", data={"token": "not-the-token"})
    assert typed.status_code == 403 and COOKIE not in typed.headers.get("Set-Cookie", "")
    assert browser.get(f"{PREFIX}/").status_code == 401
    forged = Client(browser.application)
    forged.set_cookie(COOKIE, "ImFkbWluIg.aw6wYw.BsSHbvLeanwOq2bm1csT3XjHeHA", path=PREFIX)
    assert forged.get(f"{PREFIX}/").status_code == 401


def test_the_bearer_token_opens_the_dashboard_with_the_trackers_queues(app: Flask, browser: Client) -> None:
    opened = delivery("pull_request", pr_payload("opened", 7, created_at="2026-05-04T10:00:00Z"))
    assert post(app.test_client(), opened.body, opened.event, opened.delivery_id).status_code == 202

    page = browser.get(f"{PREFIX}/", headers=ADMIN)
    assert page.status_code == 200
    assert "RQ dashboard" in page.get_data(as_text=True)
    assert page.headers["Content-Security-Policy"] == DASHBOARD_POLICY  # its own scripts run, from this host only
    assert page.headers["Cache-Control"] == "no-store"
    # The drain the delivery asked for waits on the tracker's own `deliveries` queue.
    queues = browser.get(f"{PREFIX}/0/data/queues.json", headers=ADMIN).get_json()["queues"]
    assert {q["name"]: q["count"] for q in queues}["deliveries"] == 1
    jobs = browser.get(f"{PREFIX}/0/data/jobs/deliveries/queued/8/asc/1.json", headers=ADMIN).get_json()
    assert [job["description"] for job in jobs["jobs"]] == ["process the pending deliveries"]
    for path in ("/0/view/workers", "/0/data/workers.json", "/static/favicon.ico", "/static/js/jquery-3.5.1.min.js"):
        assert browser.get(PREFIX + path, headers=ADMIN).status_code == 200, path

    run_jobs(app)  # the drain runs: the queue is empty, and RQ's registries show where it went
    with app.app_context():
        assert services().delivery_queue.count == 0
    finished = browser.get(f"{PREFIX}/0/data/jobs/deliveries/finished/8/asc/1.json", headers=ADMIN).get_json()
    assert [job["description"] for job in finished["jobs"]] == ["process the pending deliveries"]


def test_every_queue_the_tracker_uses_is_listed(app: Flask, browser: Client) -> None:
    with app.app_context():
        built = services()
        for queue in (built.delivery_queue, built.github_queue, built.records_queue):
            queue.enqueue("workers.jobs.process_delivery", "no-such-delivery")
    names = _queue_names(browser.get(f"{PREFIX}/0/data/queues.json", headers=ADMIN))
    assert {"deliveries", "github", "records"} <= names


def test_the_form_sets_a_session_cookie_that_is_not_the_token(
    browser: Client, access_lines: pytest.LogCaptureFixture
) -> None:
    typed = browser.post(f"{PREFIX}/session", data={"token": TOKEN})
    assert typed.status_code == 303 and typed.headers["Location"] == f"{PREFIX}/"
    cookie = typed.headers["Set-Cookie"]
    assert TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and f"Path={PREFIX}" in cookie

    page = browser.get(f"{PREFIX}/")
    assert page.status_code == 200 and "RQ dashboard" in page.get_data(as_text=True)
    assert _queue_names(browser.get(f"{PREFIX}/0/data/queues.json")) == set()  # nothing queued yet
    # The cookie opens the dashboard only, never the API's admin endpoints.
    assert browser.post("/api/v1/deliveries/retry-failed").status_code == 401

    ended = browser.post(f"{PREFIX}/session/end")
    assert ended.status_code == 303
    assert browser.get(f"{PREFIX}/").status_code == 401


def test_the_token_is_in_no_page_and_no_log_line(
    browser: Client, app: Flask, access_lines: pytest.LogCaptureFixture
) -> None:
    answers = [
        browser.get(f"{PREFIX}/"),
        browser.post(f"{PREFIX}/session", data={"token": TOKEN}),
        browser.get(f"{PREFIX}/"),
        browser.get(f"{PREFIX}/0/view/workers"),
        browser.get(f"{PREFIX}/0/data/queues.json"),
        browser.get(f"{PREFIX}/", headers=ADMIN),
        browser.get(f"{PREFIX}/0/data/workers.json", headers=ADMIN),
        # A token pasted into the URL by hand: refused (only the form sets the cookie), and redacted.
        Client(browser.application).get(f"{PREFIX}/?token={TOKEN}"),
    ]
    assert [a.status_code for a in answers] == [401, 303, 200, 200, 200, 200, 200, 401]
    for answer in answers:
        answer.close()  # the access log writes its line once the answer is sent
        assert TOKEN not in answer.get_data(as_text=True)
        assert all(TOKEN not in value for name, value in answer.headers.items())
    lines = [r for r in access_lines.records if r.name == "tracker.access"]
    assert len(lines) == len(answers)  # each request was logged…
    assert f"GET {PREFIX}/?token=redacted 401" in lines[-1].getMessage()
    assert TOKEN not in _logged(access_lines)  # …and no line, nor any field of one, holds the token


def test_without_an_admin_token_there_is_no_dashboard(settings: Settings) -> None:
    from tests.conftest import running_app

    with running_app(settings.model_copy(update={"admin_token": None})) as app:
        client = app.test_client()
        assert client.get(f"{PREFIX}/").status_code == 404
        assert client.get(f"{PREFIX}/", headers=ADMIN).status_code == 404
        assert client.get(f"{PREFIX}/0/data/queues.json", headers=ADMIN).status_code == 404
        assert client.post(f"{PREFIX}/session", data={"token": TOKEN}).status_code == 404


def test_only_the_trackers_one_redis_is_shown(browser: Client) -> None:
    assert browser.get(f"{PREFIX}/0/data/queues.json", headers=ADMIN).status_code == 200
    assert browser.get(f"{PREFIX}/1/data/queues.json", headers=ADMIN).status_code == 404
