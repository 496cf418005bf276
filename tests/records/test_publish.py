"""`tracker/records/publish.py`: a month published as files and as one GitHub issue (the local fake GitHub),
after a finalisation and weekly while the month runs, through the real app, Redis and ledger."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
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
from tracker.config import PublishConfig
from tracker.core.window import Month, today_in
from tracker.records.publish import as_file, as_issue, file_path, write_atomically
from tracker.settings import Settings
from tracker.web.context import services
from workers import runtime
from workers.jobs import due_work

REPO = "octo-org/octo-repo"
TARGET = "octo-org/reports"
ADMIN = {"Authorization": "Bearer test-admin-token"}


@pytest.fixture
def published(settings: Settings, tmp_path: Path, github: Any) -> Iterator[tuple[Flask, FlaskClient, Path]]:
    directory = tmp_path / "published"
    config = tmp_path / "tracker.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "repositories": {
                    REPO: {
                        "publish": {
                            "directory": str(directory),
                            "issue_repository": TARGET,
                            "report_url": "https://tracker.example.com",
                            "weekly_partial": True,
                        }
                    }
                }
            }
        )
    )
    with running_app(settings.model_copy(update={"config_path": config})) as app:
        client = app.test_client()
        stories = [
            PullRequestStory(1, at("2026-07-06T02:00:00+00:00"), repo=REPO, title="Faster data loader")
            .opened()
            .merged(at("2026-07-09T02:00:00+00:00")),
            PullRequestStory(2, at("2026-07-20T02:00:00+00:00"), repo=REPO, title="Ping @alice about #12").opened(),
        ]
        for story in stories:
            for delivery in story.deliveries:
                assert post(client, delivery.body, "pull_request", delivery.delivery_id).status_code == 202
        run_jobs(app)
        yield app, client, directory


def finalize(app: Flask, client: FlaskClient, force: bool = False, expect: int = 202) -> None:
    suffix = "?force=1" if force else ""
    answer = client.post(f"/api/v1/repos/{REPO}/months/2026-07/finalize{suffix}", headers=ADMIN)
    assert answer.status_code == expect, answer.json
    run_jobs(app)


@needs_shared
def test_a_finalised_month_is_published_as_files_linking_each_other(
    published: tuple[Flask, FlaskClient, Path],
) -> None:
    app, client, directory = published
    finalize(app, client)
    english = directory / "reports" / "en-US" / "2026" / "07.md"
    chinese = directory / "reports" / "zh-CN" / "2026" / "07.md"
    assert english.exists() and chinese.exists()
    assert "[中文版本](../../zh-CN/2026/07.md)" in english.read_text()
    assert "[English](../../en-US/2026/07.md)" in chinese.read_text()
    with app.app_context():
        record = services().records.latest(REPO, "2026-07")
    assert record is not None
    # The files are the record, but for the link between the languages.
    assert english.read_text() == record.document("md", "en").replace(
        "(2026-07.md?lang=zh-CN&cutoff=2026-07-31)", "(../../zh-CN/2026/07.md)"
    )
    assert not list(english.parent.glob(".*"))  # no temporary file left behind
    status = client.get("/api/v1/status").json["publications"]
    assert {(p["kind"], p["edition"], p["result"]) for p in status} == {
        ("files", "final", "written"),
        ("issue", "final", "created"),
    }


@needs_shared
def test_the_issue_is_created_once_then_updated_in_place(
    published: tuple[Flask, FlaskClient, Path], github: Any
) -> None:
    app, client, _ = published
    finalize(app, client)
    [issue] = _issues(github)
    body = issue["body"]
    assert body.startswith(f"<!-- monthly-activity-tracker repo={REPO} month=2026-07 -->")
    assert "https://tracker.example.com/reports/octo-org/octo-repo/2026-07.md?lang=zh-CN" in body
    assert "@alice" not in body.replace("@<!-- -->alice", "")  # nobody is notified
    assert issue["title"].endswith("(Final, through July 31, 2026)") and "\\" not in issue["title"]
    writes = len(github.writes)
    finalize(app, client, expect=200)  # already recorded: nothing is published again
    assert len(github.writes) == writes
    finalize(app, client, force=True)  # a new revision with the same content: no write either
    assert len(github.writes) == writes
    kinds = [(p["kind"], p["result"]) for p in client.get("/api/v1/status").json["publications"]]
    assert ("issue", "unchanged") in kinds and ("files", "unchanged") in kinds


@needs_shared
def test_an_outage_or_a_rate_limit_publishes_the_issue_later(
    published: tuple[Flask, FlaskClient, Path], github: Any
) -> None:
    from bench.fixtures.fake_github import Scripted

    app, client, _ = published
    issues = rf"/repos/{TARGET}/issues"
    github.script(issues, Scripted(502), Scripted(502), Scripted(502))  # past the client's own tries
    finalize(app, client)
    assert _issues(github) == []
    # The next run, after a backoff of about 30 s, meets a secondary rate limit for a second.
    github.script(issues, Scripted(429, {"retry-after": "1"}, {"message": "You have exceeded a secondary rate limit"}))
    release_due_jobs(app, at=time.time() + 60)
    run_jobs(app)
    assert _issues(github) == []
    asked = github.count(issues)
    release_due_jobs(app, at=time.time() + 60)
    run_jobs(app)  # held back while the limit lasts, without asking GitHub
    assert github.count(issues) == asked
    time.sleep(1.1)
    release_due_jobs(app)
    run_jobs(app)
    assert len(_issues(github)) == 1
    with app.app_context():
        last = services().records.last_publication(REPO, "2026-07", "issue")
    assert last is not None and last["result"] == "created"


@needs_shared
def test_a_weekly_partial_updates_the_current_months_issue(
    published: tuple[Flask, FlaskClient, Path], github: Any
) -> None:
    app, client, directory = published
    current = Month.containing(today_in("Asia/Shanghai"))
    story = PullRequestStory(5, datetime.now(UTC), repo=REPO, title="This month's work").opened()
    assert post(client, story.deliveries[0].body, "pull_request", story.deliveries[0].delivery_id).status_code == 202
    run_jobs(app)
    with app.app_context():
        runtime.install(services())
        first = due_work()
    assert "1 partial publications queued" in first
    run_jobs(app)
    assert file_path(directory, str(current), "en").exists()
    with app.app_context():
        again = due_work()  # within the week: nothing more
    assert "partial" not in again
    marker = f"<!-- monthly-activity-tracker repo={REPO} month={current} -->"
    [partial] = [issue for issue in _issues(github) if issue["body"].startswith(marker)]
    assert "This month's work" in partial["body"]
    with app.app_context():
        last = services().records.last_publication(REPO, str(current), "issue")
    assert last is not None and last["edition"] == "partial" and last["result"] == "created"


def _issues(github: Any) -> list[dict[str, Any]]:
    return list(github.issues.get(TARGET.lower(), {}).values())


def test_files_are_written_atomically_and_only_when_changed(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.md"
    assert write_atomically(path, "one\n") is True
    assert write_atomically(path, "one\n") is False
    assert write_atomically(path, "two\n") is True
    assert path.read_text() == "two\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["b.md"]


def test_as_file_rewrites_only_the_language_link() -> None:
    markdown = (
        "# T\n\n> Chinese version: [中文版本](2026-07.md?lang=zh-CN&cutoff=2026-07-31)\n\n"
        "body (2026-07.md?lang=zh-CN&cutoff=x)\n"
    )
    assert as_file(markdown, "2026-07", "en") == (
        "# T\n\n> Chinese version: [中文版本](../../zh-CN/2026/07.md)\n\nbody (2026-07.md?lang=zh-CN&cutoff=x)\n"
    )


def test_the_report_url_cannot_end_the_issues_link_early() -> None:
    import cmarkgfm

    # Parentheses and brackets are URL characters, so the config lets them through; written `<…>`
    # in the link, they cannot close it and open another.
    hostile = PublishConfig(report_url="https://tracker.example.com/)[click](javascript:alert(1))").report_url
    markdown = "# T\n\n> Chinese version: [中文版本](2026-07.md?lang=zh-CN&cutoff=2026-07-31)\n\nbody\n"
    body = as_issue(markdown, "2026-07", REPO, hostile)
    html = cmarkgfm.github_flavored_markdown_to_html(body, options=cmarkgfm.cmark.Options.CMARK_OPT_UNSAFE)
    [link] = re.findall(r'<a href="([^"]*)">([^<]*)</a>', html)
    address = f"https://tracker.example.com/)%5Bclick%5D(javascript:alert(1))/reports/{REPO}/2026-07.md?lang=zh-CN"
    assert link == (address, "中文版本")
