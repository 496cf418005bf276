"""A group's finalised month published as one GitHub issue (the local fake GitHub) beside its repositories' issues,
through the real app, Redis and ledger (tracker/records/publish.py, `publish_group`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import post, release_due_jobs, run_jobs, running_app
from tests.support.clock import at
from tracker.github.issues import marker
from tracker.records.publish import as_issue, publish_group
from tracker.settings import Settings
from tracker.store.schema import publications
from tracker.web.context import services

REPO = "octo-org/octo-repo"
TARGET = "octo-org/reports"
MONTH = "2026-07"
ADMIN = {"Authorization": "Bearer test-admin-token"}
GROUP_MARKER = "<!-- monthly-activity-tracker group=platform month=2026-07 -->"
REPO_MARKER = f"<!-- monthly-activity-tracker repo={REPO} month=2026-07 -->"


@pytest.fixture
def app(settings: Settings, tmp_path: Path, github: Any) -> Iterator[tuple[Flask, FlaskClient]]:
    """A repository and a group of it, both publishing to the same issue repository."""
    issue = {"issue_repository": TARGET, "report_url": "https://tracker.example.com"}
    config = tmp_path / "tracker.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "repositories": {REPO: {"publish": issue}},
                "groups": {"Platform": {"members": [REPO], "publish": {"directory": str(tmp_path / "out"), **issue}}},
            }
        )
    )
    with running_app(settings.model_copy(update={"config_path": config})) as app:
        client = app.test_client()
        deliver(app, client, 1, "Faster data loader", "2026-07-06T02:00:00+00:00")
        yield app, client


def deliver(app: Flask, client: FlaskClient, number: int, title: str, when: str) -> None:
    story = PullRequestStory(number, at(when), repo=REPO, title=title).opened()
    for delivery in story.deliveries:
        assert post(client, delivery.body, "pull_request", delivery.delivery_id).status_code == 202
    run_jobs(app)


def finalize(app: Flask, client: FlaskClient, path: str, force: bool = False) -> None:
    answer = client.post(f"{path}/months/{MONTH}/finalize", headers=ADMIN, query_string={"force": "1"} if force else {})
    assert answer.status_code == 202, answer.json
    run_jobs(app)


def finalize_both(app: Flask, client: FlaskClient, force: bool = False) -> None:
    finalize(app, client, f"/api/v1/repos/{REPO}", force)
    finalize(app, client, "/api/v1/groups/platform", force)


def issues(github: Any) -> dict[int, dict[str, Any]]:
    return dict(github.issues.get(TARGET.lower(), {}))


@needs_shared
def test_a_groups_issue_is_created_once_then_updated_in_place_beside_the_repositorys(
    app: tuple[Flask, FlaskClient], github: Any
) -> None:
    flask_app, client = app
    finalize_both(flask_app, client)
    found = issues(github)
    [group] = [issue for issue in found.values() if issue["body"].startswith(GROUP_MARKER + "\n")]
    [repository] = [issue for issue in found.values() if issue["body"].startswith(REPO_MARKER + "\n")]
    assert len(found) == 2 and marker("group:platform", MONTH) == GROUP_MARKER
    with flask_app.app_context():
        record = services().records.latest_group("platform", MONTH)
    assert record is not None
    heading = record.document("md", "en").split("\n", 1)[0].removeprefix("# ")
    assert group["title"] == heading.replace("\\", "") and group["title"] != repository["title"]
    assert "Faster data loader" in group["body"]
    assert "https://tracker.example.com/reports/groups/platform/2026-07.md?lang=zh-CN" in group["body"]
    # The member's report is linked at this service (a relative link would lead into github.com).
    member = f"(<https://tracker.example.com/reports/{REPO}/2026-07.md?lang=en&cutoff=2026-07-31>)"
    assert member in group["body"] and "](../../" not in group["body"]
    status = client.get("/api/v1/status", headers=ADMIN).json["publications"]
    mine = [(p["kind"], p["result"], p["target"]) for p in status if p["repo"] == "group:platform"]
    assert sorted(kind for kind, _, _ in mine) == ["files", "issue"]
    assert ("issue", "created", f"{TARGET}#{group['number']}") in mine

    # A new pull request, the member and the group finalised again (forced): each issue updated in place,
    # neither taken for the other.
    deliver(flask_app, client, 2, "Sharper profiler", "2026-07-20T02:00:00+00:00")
    finalize_both(flask_app, client, force=True)
    again = issues(github)
    assert sorted(again) == sorted(found)
    assert "Sharper profiler" in again[group["number"]]["body"]
    assert again[group["number"]]["body"].startswith(GROUP_MARKER + "\n")
    assert again[repository["number"]]["body"].startswith(REPO_MARKER + "\n")
    with flask_app.app_context():
        last = services().records.last_publication("group:platform", MONTH, "issue")
        repo_last = services().records.last_publication(REPO, MONTH, "issue")
    assert last is not None and last["result"] == "updated" and last["target"] == f"{TARGET}#{group['number']}"
    assert repo_last is not None and repo_last["target"] == f"{TARGET}#{repository['number']}"


@needs_shared
def test_a_groups_issue_found_by_its_marker_alone_is_never_a_repositorys(
    app: tuple[Flask, FlaskClient], github: Any
) -> None:
    flask_app, client = app
    # Only the repository's issue exists when the group is published: its stored number unknown to the group,
    # the group lists the issues and must not take the repository's for its own.
    finalize(flask_app, client, f"/api/v1/repos/{REPO}")
    [repository] = issues(github).values()
    finalize(flask_app, client, "/api/v1/groups/platform")
    found = issues(github)
    assert len(found) == 2 and found[repository["number"]]["body"] == repository["body"]
    # With the group's stored publications gone, the group finds its own issue again by its marker.
    [group_number] = [number for number in found if number != repository["number"]]
    found[group_number]["body"] = found[group_number]["body"].replace("Faster data loader", "edited by hand")
    with flask_app.app_context():
        s = services()
        with s.records.engine.begin() as conn:
            conn.execute(publications.delete().where(publications.c.repo == "group:platform"))
        assert publish_group(s, "Platform", MONTH).endswith(f"issue #{group_number} updated")
    assert sorted(issues(github)) == sorted(found)
    assert "Faster data loader" in issues(github)[group_number]["body"]


@needs_shared
def test_a_rate_limit_publishes_the_groups_issue_later(app: tuple[Flask, FlaskClient], github: Any) -> None:
    from bench.fixtures.fake_github import Scripted

    flask_app, client = app
    finalize(flask_app, client, f"/api/v1/repos/{REPO}")
    [repository] = issues(github).values()
    listing = rf"/repos/{TARGET}/issues"
    github.script(listing, Scripted(429, {"retry-after": "1"}, {"message": "You have exceeded a secondary rate limit"}))
    finalize(flask_app, client, "/api/v1/groups/platform")
    assert list(issues(github)) == [repository["number"]]
    with flask_app.app_context():
        waiting = services().records.last_publication("group:platform", MONTH, "issue")
    assert waiting is None  # a rate limit is a pause, not a failure
    asked = github.count(listing)
    release_due_jobs(flask_app, at=time.time() + 60)
    run_jobs(flask_app)  # held back while the limit lasts, without asking GitHub
    assert github.count(listing) == asked
    time.sleep(1.1)
    release_due_jobs(flask_app)
    run_jobs(flask_app)
    found = issues(github)
    assert len(found) == 2
    assert any(issue["body"].startswith(GROUP_MARKER + "\n") for issue in found.values())
    with flask_app.app_context():
        last = services().records.last_publication("group:platform", MONTH, "issue")
    assert last is not None and last["result"] == "created"


def test_only_the_renderers_member_links_are_made_absolute() -> None:
    markdown = (
        "# T\n\n> Chinese version: [中文版本](2026-07.md?lang=zh-CN&cutoff=2026-07-31)\n\n"
        "| [`a/b`](../../a/b/2026-07.md?lang=en&cutoff=2026-07-31) | title x\\](../../evil) |\n"
    )
    body = as_issue(markdown, MONTH, "groups/platform", "https://tracker.example.com/")
    assert "[`a/b`](<https://tracker.example.com/reports/a/b/2026-07.md?lang=en&cutoff=2026-07-31>)" in body
    assert "title x\\](../../evil)" in body  # the data's escaped bracket ends no link
    assert as_issue(markdown, MONTH, "groups/platform", None).endswith(markdown.split("\n\n", 2)[2])
