"""History over HTTP (`tracker/history/views.py`, and `history` in `GET /api/v1/status`): queueing a
backfill is for the admin only and puts one job on the `github` queue of the real Redis; a
repository's runs and coverage are shown as its reports are (private ones to the admin only); the
admin token is never echoed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from redis import Redis
from rq import Queue

from bench.fixtures.factory import pr_payload
from bench.fixtures.paths import needs_shared
from tests.support.app import post, run_jobs, running_app
from tests.support.clock import utc
from tracker.settings import Settings

pytestmark = needs_shared

REPO = "octo-org/octo-repo"
PRIVATE = "secret-org/internal"
TOKEN = "test-admin-token"  # the `settings` fixture's
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
BACKFILL = f"/api/v1/repos/{REPO}/backfill"
HISTORY = f"/api/v1/repos/{REPO}/history"


def github_jobs(redis_url: str) -> list[Any]:
    """The jobs waiting on the `github` queue, read from Redis directly."""
    connection = Redis.from_url(redis_url)
    try:
        return Queue("github", connection=connection).get_jobs()
    finally:
        connection.close()


def text(answer: Any) -> str:
    """Everything an answer says: its body and its headers."""
    return str(answer.get_data(as_text=True)) + str(dict(answer.headers))


def runs(client: FlaskClient, path: str = HISTORY, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    answer = client.get(path, headers=headers or {})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    found: list[dict[str, Any]] = answer.get_json()["runs"]
    return found


# --- queueing a backfill --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "code"),
    [({}, 401), ({"Authorization": "Bearer"}, 401), ({"Authorization": "Bearer wrong-token"}, 403)],
    ids=["none", "empty", "wrong"],
)
def test_a_backfill_needs_the_admin_token(
    client: FlaskClient, redis_url: str, headers: dict[str, str], code: int
) -> None:
    answer = client.post(f"{BACKFILL}?month=2026-05", headers=headers)
    assert answer.status_code == code
    assert TOKEN not in text(answer) and "wrong-token" not in text(answer)
    assert github_jobs(redis_url) == []
    assert runs(client) == []


@pytest.mark.parametrize(
    ("path", "options"),
    [
        (f"{BACKFILL}?month=2026-13", {}),
        (f"{BACKFILL}?month=May", {}),
        (f"{BACKFILL}?month=2026-05&since=2026-05-10", {}),
        (BACKFILL, {}),
        (f"{BACKFILL}?since=2026-02-30", {}),
        (f"{BACKFILL}?since=2999-01-01", {}),
        (BACKFILL, {"json": {"month": 202605}}),
        ("/api/v1/repos/bad_owner/repo/backfill?month=2026-05", {}),
        ("/api/v1/repos/-octo/repo/backfill?month=2026-05", {}),
    ],
    ids=["month-13", "month-word", "both", "neither", "no-such-day", "future", "json-number", "underscore", "hyphen"],
)
def test_a_backfill_that_cannot_run_is_refused(
    client: FlaskClient, redis_url: str, path: str, options: dict[str, Any]
) -> None:
    answer = client.post(path, headers=ADMIN, **options)
    assert answer.status_code == 400, answer.get_data(as_text=True)
    assert answer.get_json()["error"]
    assert TOKEN not in text(answer)
    assert github_jobs(redis_url) == []
    assert runs(client) == []


def test_a_backfill_is_queued_on_the_github_queue(client: FlaskClient, redis_url: str) -> None:
    answer = client.post(f"{BACKFILL}?month=2026-05", headers=ADMIN)
    assert answer.status_code == 202
    assert answer.headers["Location"].endswith(HISTORY)
    assert answer.get_json()["status"] == "queued"
    assert TOKEN not in text(answer)
    # May 2026 in the settings' time zone, Asia/Shanghai.
    may = (utc("2026-04-30T16:00:00Z"), utc("2026-05-31T16:00:00Z"))
    (job,) = github_jobs(redis_url)
    assert job.id == answer.get_json()["job"]
    assert job.func_name == "workers.jobs.read_history_job"
    assert job.args[:5] == ("backfill", REPO, *may, 0)  # kind, repository, range, attempt
    (run,) = runs(client, answer.headers["Location"])
    assert (run["repo"], run["kind"], run["state"]) == (REPO, "backfill", "queued")
    assert run["range"] == {"start": "2026-04-30T16:00:00Z", "end": "2026-05-31T16:00:00Z"}
    assert run["progress"] == {"done": 0, "total": 0}


def test_the_same_backfill_asked_twice_is_queued_once(client: FlaskClient, redis_url: str) -> None:
    first = client.post(f"{BACKFILL}?month=2026-05", headers=ADMIN)
    again = client.post(f"{BACKFILL}?month=2026-05", headers=ADMIN)
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.get_json()["status"] == "already queued" and again.get_json()["job"] is None
    assert len(github_jobs(redis_url)) == 1
    assert len(runs(client)) == 1


def test_a_backfill_since_a_day_is_asked_in_a_json_body(client: FlaskClient, redis_url: str) -> None:
    before = int(time.time())
    answer = client.post(BACKFILL, headers=ADMIN, json={"since": "2026-05-10"})
    assert answer.status_code == 202
    (job,) = github_jobs(redis_url)
    kind, full_name, start, end, attempt = job.args[:5]
    assert (kind, full_name, start, attempt) == ("backfill", REPO, utc("2026-05-09T16:00:00Z"), 0)
    assert before <= end <= int(time.time())  # up to now


def test_the_same_backfill_since_a_day_asked_twice_is_queued_once(client: FlaskClient, redis_url: str) -> None:
    since = (datetime.now(UTC) - timedelta(days=3)).date().isoformat()
    assert client.post(f"{BACKFILL}?since={since}", headers=ADMIN).status_code == 202
    time.sleep(1.1)
    again = client.post(f"{BACKFILL}?since={since}", headers=ADMIN)
    assert again.status_code == 202
    assert len(github_jobs(redis_url)) == 1
    assert again.get_json()["status"] == "already queued"


# --- a repository's history, and the status ----------------------------------------------------


@pytest.fixture
def private_app(settings: Settings, tmp_path: Path) -> Iterator[tuple[Flask, FlaskClient]]:
    """A public and a private repository (config `public: false`), each with one delivery."""
    config = tmp_path / "tracker.yaml"
    config.write_text(f"repositories:\n  {PRIVATE}:\n    public: false\n", encoding="utf-8")
    with running_app(settings.model_copy(update={"config_path": config})) as app:
        client = app.test_client()
        for number, repo in ((1, REPO), (2, PRIVATE)):
            payload = pr_payload("opened", number, created_at="2026-05-04T02:00:00Z", repo=repo)
            assert post(client, payload, "pull_request", f"may-{number}").status_code == 202
        run_jobs(app)
        for repo in (REPO, PRIVATE):
            assert client.post(f"/api/v1/repos/{repo}/backfill?month=2026-05", headers=ADMIN).status_code == 202
        yield app, client


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}])
def test_the_history_of_a_private_repository_needs_the_admin_token(
    private_app: tuple[Flask, FlaskClient], headers: dict[str, str]
) -> None:
    _, client = private_app
    for spelled in (PRIVATE, "Secret-Org/Internal"):  # GitHub's names are matched without regard to case
        answer = client.get(f"/api/v1/repos/{spelled}/history", headers=headers)
        # Issue 31, item 3: what a name nothing is known of gets (it was 401 or 403, telling it exists).
        assert answer.status_code == 200
        assert answer.get_json() == {"repo": spelled, "runs": [], "coverage": {"intervals": [], "complete": []}}
        unknown = client.get("/api/v1/repos/secret-org/nothing/history", headers=headers)
        assert unknown.get_json() == {**answer.get_json(), "repo": "secret-org/nothing"}
        assert TOKEN not in text(answer)
    assert [run["repo"] for run in runs(client, f"/api/v1/repos/{PRIVATE}/history", ADMIN)] == [PRIVATE]
    assert [run["repo"] for run in runs(client)] == [REPO]  # a public one: anyone


def test_the_history_shows_the_webhooks_coverage(private_app: tuple[Flask, FlaskClient]) -> None:
    _, client = private_app
    coverage = client.get(HISTORY).get_json()["coverage"]
    (interval,) = coverage["intervals"]
    assert (interval["source"], interval["start"]) == ("webhook", "2026-05-04T02:00:00Z")
    assert [c["start"] for c in coverage["complete"]] == ["2026-05-04T02:00:00Z"]


def test_status_shows_runs_and_coverage_and_hides_private_repositories(
    private_app: tuple[Flask, FlaskClient],
) -> None:
    _, client = private_app
    anyone = client.get("/api/v1/status")
    admin = client.get("/api/v1/status", headers=ADMIN)
    assert (anyone.status_code, admin.status_code) == (200, 200)
    for answer, shown in ((anyone, {REPO}), (admin, {REPO, PRIVATE})):
        history = answer.get_json()["history"]
        assert {run["repo"] for run in history["runs"]} == shown
        assert all(run["state"] == "queued" for run in history["runs"])
        assert set(history["coverage"]) == shown
        assert [c["start"] for c in history["coverage"][REPO]] == ["2026-05-04T02:00:00Z"]
        assert TOKEN not in text(answer)
    assert PRIVATE not in anyone.get_data(as_text=True)


def test_status_shows_a_backfill_queued_before_any_delivery(app: Flask, client: FlaskClient) -> None:
    assert client.post(f"{BACKFILL}?month=2026-05", headers=ADMIN).status_code == 202
    history = client.get("/api/v1/status", headers=ADMIN).get_json()["history"]
    assert [run["repo"] for run in history["runs"]] == [REPO]
