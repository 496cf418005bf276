"""`tracker/web/admin_rq.py`: the read-only page of RQ's queues, workers and failed jobs under /admin/rq
(issue 31, item 8: it replaced rq-dashboard).

Over the real app, the real Redis of the test fixtures and real RQ jobs, run by RQ's SimpleWorker
(`tests.conftest.run_jobs`). The job functions below are imported by RQ by their names.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from redis import Redis
from rq import Queue, Worker

from bench.fixtures.factory import delivery, pr_payload
from tests.support.app import post, run_jobs, running_app
from tracker.settings import Settings
from tracker.web.admin_rq import ROWS, TEXT
from tracker.web.app import SECURITY_HEADERS, create_app
from tracker.web.context import services

TOKEN = "test-admin-token"  # tests/conftest.py's settings
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
PAGE, DATA = "/admin/rq", "/admin/rq.json"
HOSTILE = "<img src=x onerror=alert(1)>"
FINALIZE = "/api/v1/repos/octo/open/months/2026-05/finalize"  # another admin endpoint, to compare answers


def explode(text: str) -> None:
    """A job that fails saying `text`: tests.web.test_admin_rq.explode."""
    raise ValueError(f"cannot process {text}")


def succeed() -> str:
    """A job that succeeds: tests.web.test_admin_rq.succeed."""
    return "done"


class Parsed(HTMLParser):
    """The page's tags with their attributes, its text, and the text of each table's cells, row by row."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.tables: list[list[list[str]]] = []
        self.texts: list[str] = []  # each piece of text, its spaces folded
        self._cell: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.texts.append(" ".join(data.split()))
        if self._cell is not None:
            self._cell.append(data)

    def table(self, number: int) -> list[dict[str, str]]:
        """Table `number` (0 queues, 1 workers, then failed jobs) as rows keyed by its header cells."""
        header, *rows = self.tables[number]
        return [dict(zip(header, row, strict=True)) for row in rows]


def _page(client: FlaskClient) -> Parsed:
    answer = client.get(PAGE, headers=ADMIN)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.content_type == "text/html; charset=utf-8"
    return Parsed(answer.get_data(as_text=True))


def _data(client: FlaskClient) -> dict[str, Any]:
    answer = client.get(DATA, headers=ADMIN)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    body: dict[str, Any] = answer.get_json()
    return body


def _queues(client: FlaskClient) -> dict[str, dict[str, Any]]:
    return {queue["name"]: queue for queue in _data(client)["queues"]}


def _queue(app: Flask, name: str) -> Queue:
    with app.app_context():
        return Queue(name, connection=services().require_redis())


def _redis_contents(redis: Redis) -> dict[bytes, bytes | None]:
    """Every key of the test's Redis database and its serialised value."""
    return {key: redis.dump(key) for key in sorted(redis.keys("*"))}  # type: ignore[misc]


def test_the_admin_token_is_required_as_by_the_other_admin_endpoints(client: FlaskClient) -> None:
    for headers, status in (({}, 401), ({"Authorization": "Bearer not-the-token"}, 403)):
        other = client.post(FINALIZE, headers=headers)
        assert other.status_code == status
        message = other.get_json()["error"]
        data = client.get(DATA, headers=headers)
        assert (data.status_code, data.get_json()) == (status, {"error": message})
        page = client.get(PAGE, headers=headers)  # the page people open: the app's HTML error page
        assert page.status_code == status and page.content_type == "text/html; charset=utf-8"
        assert Parsed(page.get_data(as_text=True)).tables == []
        assert message.replace("<", "&lt;").replace(">", "&gt;") in page.get_data(as_text=True)
        for answer in (data, page):
            assert answer.headers["Cache-Control"] == "private, no-store"
            assert TOKEN not in answer.get_data(as_text=True)
    assert client.get(PAGE, headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401  # a Bearer token only


def test_without_an_admin_token_the_page_is_off_as_the_other_admin_endpoints(settings: Settings) -> None:
    with running_app(settings.model_copy(update={"admin_token": None})) as app:
        client = app.test_client()
        other = client.post(FINALIZE, headers=ADMIN)
        assert other.status_code == 503
        assert client.get(DATA, headers=ADMIN).get_json() == other.get_json()
        assert client.get(PAGE, headers=ADMIN).status_code == 503


def test_an_empty_redis_shows_the_trackers_queues_at_zero(client: FlaskClient) -> None:
    page = _page(client)
    queues = page.table(0)
    assert [row["queue"] for row in queues] == ["deliveries", "github", "records"]
    assert all(value == "0" for row in queues for name, value in row.items() if name != "queue")
    assert len(page.tables) == 1  # no worker, no failed job: a sentence each instead of a table
    ids = {attrs.get("id") for tag, attrs in page.tags}
    assert {"no-workers", "no-failures"} <= ids
    data = _data(client)
    assert data["workers"] == [] and data["failed"] == [] and data["failed_total"] == 0


def test_the_counts_follow_the_jobs(app: Flask, client: FlaskClient) -> None:
    opened = delivery("pull_request", pr_payload("opened", 7, created_at="2026-05-04T10:00:00Z"))
    assert post(client, opened.body, opened.event, opened.delivery_id).status_code == 202  # asks for a drain
    github, records = _queue(app, "github"), _queue(app, "records")
    failing = github.enqueue(explode, "delivery 1")
    github.enqueue(succeed, depends_on=failing)  # waits on a job that will fail: deferred for good
    records.enqueue(succeed)
    extra = _queue(app, "extra")  # a queue the tracker does not use is shown too
    extra.enqueue(succeed)
    extra.enqueue_in(timedelta(hours=1), succeed)  # scheduled: no scheduler runs in the tests

    before = _queues(client)
    assert {name: q["queued"] for name, q in before.items()} == {"deliveries": 1, "extra": 1, "github": 1, "records": 1}
    assert before["github"]["deferred"] == 1 and before["extra"]["scheduled"] == 1
    assert [row["queued"] for row in _page(client).table(0)] == ["1", "1", "1", "1"]

    run_jobs(app)  # the tracker's three queues; `extra` has no worker
    after = _queues(client)
    assert {name: q["queued"] for name, q in after.items()} == {"deliveries": 0, "extra": 1, "github": 0, "records": 0}
    assert after["deliveries"]["finished"] == 1
    assert after["records"]["finished"] == 1 and after["extra"]["scheduled"] == 1
    assert after["github"]["failed"] == 1 and after["github"]["deferred"] == 1
    rows = {row["queue"]: row for row in _page(client).table(0)}
    assert rows["github"]["failed"] == "1" and rows["deliveries"]["finished"] == "1"
    failed = _data(client)["failed"]
    assert [(job["id"], job["queue"], job["function"]) for job in failed] == [
        (failing.id, "github", "tests.web.test_admin_rq.explode")
    ]
    assert failed[0]["error"] == "ValueError: cannot process delivery 1"
    assert failed[0]["enqueued_at"] <= failed[0]["ended_at"]  # both in UTC, as `2026-12-05T21:55:15Z`


def test_a_hostile_failed_job_is_shown_escaped_under_the_apps_policy(app: Flask, client: FlaskClient) -> None:
    job = _queue(app, "github").enqueue(explode, HOSTILE, description=f"deliver {HOSTILE}")
    run_jobs(app)

    answer = client.get(PAGE, headers=ADMIN)
    assert answer.status_code == 200
    text = answer.get_data(as_text=True)
    assert HOSTILE not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    page = Parsed(text)
    (row,) = page.table(1)  # no worker: the failed jobs are the second table
    assert row["job"] == f"{job.id} deliver {HOSTILE}"  # as text: the browser shows it, never runs it
    assert row["error"] == f"ValueError: cannot process {HOSTILE}"
    # Nothing in the page runs, loads or styles anything from elsewhere: the app's own policy holds.
    assert answer.headers["Content-Security-Policy"] == SECURITY_HEADERS["Content-Security-Policy"]
    assert "script-src" not in SECURITY_HEADERS["Content-Security-Policy"]  # so no script would run anyway
    assert "style-src 'unsafe-inline'" in SECURITY_HEADERS["Content-Security-Policy"]  # the page's <style>
    tags = {tag for tag, attrs in page.tags}
    assert not tags & {"script", "img", "link", "iframe", "object", "embed", "base"}
    assert not [name for tag, attrs in page.tags for name in attrs if name.startswith("on") or name == "style"]
    assert answer.headers["Cache-Control"] == "private, no-store"
    assert _data(client)["failed"][0]["description"] == f"deliver {HOSTILE}"  # JSON: the text as it is


def test_long_values_are_cut_and_tables_have_at_most_rows_rows(app: Flask, client: FlaskClient) -> None:
    github = _queue(app, "github")
    for number in range(ROWS + 2):
        github.enqueue(explode, "x" * 5000 if number == 0 else f"delivery {number}", description="y" * 5000)
    run_jobs(app)

    data = _data(client)
    assert data["failed_total"] == ROWS + 2 and len(data["failed"]) == ROWS
    assert all(len(job["description"]) == TEXT and job["description"].endswith("…") for job in data["failed"])
    assert max(len(job["error"]) for job in data["failed"]) <= TEXT
    page = _page(client)
    assert len(page.table(1)) == ROWS
    assert f"Failed jobs ({ROWS + 2})" in page.texts


def test_the_workers_are_listed(app: Flask, client: FlaskClient) -> None:
    github = _queue(app, "github")
    job = github.enqueue(succeed)
    worker = Worker([github], name="worker-1", connection=github.connection)
    worker.register_birth()  # type: ignore[no-untyped-call]
    worker.set_state("busy")
    worker.set_current_job_id(job.id)
    worker.heartbeat()
    try:
        (row,) = _page(client).table(1)
        assert row["worker"] == "worker-1" and row["state"] == "busy" and row["queues"] == "github"
        assert row["current job"] == job.id
        assert row["last heartbeat"].endswith("Z")
        assert _data(client)["workers_total"] == 1
    finally:
        worker.register_death()  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_nothing_but_get_is_answered_and_nothing_changes(app: Flask, client: FlaskClient, method: str) -> None:
    github = _queue(app, "github")
    job = github.enqueue(explode, "delivery 1")
    run_jobs(app)
    github.enqueue(succeed)
    redis = github.connection
    contents = _redis_contents(redis)
    hostile_origin = {**ADMIN, "Origin": "https://evil.example"}
    # rq-dashboard's routes (empty, compact, requeue, delete) and ours: none does anything now.
    for path in (
        PAGE,
        DATA,
        f"{PAGE}/",
        f"{PAGE}/0/data/queues.json",
        f"{PAGE}/queue/github/empty",
        f"{PAGE}/queue/github/compact",
        f"{PAGE}/job/{job.id}/requeue",
        f"{PAGE}/job/{job.id}/delete",
        f"{PAGE}/requeue/all",
    ):
        answer = client.open(path, method=method, headers=hostile_origin)
        assert answer.status_code in (404, 405), (path, answer.status_code)
    # GETs read only too (with the registries' clean-up off).
    assert client.get(PAGE, headers=ADMIN).status_code == 200
    assert client.get(DATA, headers=ADMIN).status_code == 200
    assert _redis_contents(redis) == contents
    assert github.count == 1 and github.failed_job_registry.get_job_count(cleanup=False) == 1


def test_redis_unreachable_is_503(settings: Settings) -> None:
    client = create_app(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})).test_client()
    data = client.get(DATA, headers=ADMIN)
    assert data.status_code == 503
    assert data.get_json()["error"] == "Redis is unreachable (ConnectionError): try again once /healthz is 200"
    assert client.get(PAGE, headers=ADMIN).status_code == 503


@pytest.mark.system
def test_the_page_in_headless_chromium_under_the_apps_policy(app: Flask) -> None:
    """The page as a browser shows it: its style applies, the hostile text is text, and Chromium reports
    no violation of the Content-Security-Policy (each would be a console error)."""
    from playwright.sync_api import sync_playwright
    from werkzeug.serving import make_server

    from tests.reports.test_browser import CHROMIUM_ARGS, OUTPUT, ensure_chromium  # skips without ../shared

    executable = ensure_chromium()
    _queue(app, "github").enqueue(explode, HOSTILE, description=f"deliver {HOSTILE}")
    run_jobs(app)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    problems: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(extra_http_headers=ADMIN)
                page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type == "error" else None)
                page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
                page.on("dialog", lambda dialog: problems.append(f"dialog: {dialog.message}"))
                answer = page.goto(f"http://127.0.0.1:{server.server_port}{PAGE}")
                assert answer is not None and answer.status == 200
                assert page.locator("h1").inner_text() == "RQ queues"
                header = page.locator("#queues + .table th").first  # the inline style sheet applied
                assert header.evaluate("th => getComputedStyle(th).backgroundColor") == "rgb(246, 248, 250)"
                assert page.locator("img").count() == 0
                assert page.get_by_text(f"ValueError: cannot process {HOSTILE}").count() == 1
                OUTPUT.mkdir(exist_ok=True)
                page.screenshot(path=str(OUTPUT / "admin-rq.png"), full_page=True)
            finally:
                browser.close()
    finally:
        server.shutdown()
    assert problems == []
