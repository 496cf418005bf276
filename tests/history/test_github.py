"""`tracker/history/github.py` against a broken or hostile GitHub (issue 31): a run fails with an error
that says what was wrong, and leaves the run failed with that detail; it never loops on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.fake_github import FakeGitHub, Scripted  # noqa: E402
from tracker.github.client import BadAnswer, LimitExceeded  # noqa: E402
from tracker.history import github as history  # noqa: E402
from tracker.history.derive import BACKFILL, history_range  # noqa: E402
from tracker.history.github import read_history  # noqa: E402
from tracker.history.jobs import target  # noqa: E402
from tracker.history.store import FAILED  # noqa: E402
from tracker.services import Services  # noqa: E402
from tracker.settings import Settings  # noqa: E402

REPO = "NVIDIA/Megatron-LM"


@pytest.fixture
def services(settings: Settings, tmp_path: Path) -> Iterator[Services]:
    built = Services.from_settings(settings, redis=False)
    try:
        yield built
    finally:
        built.close()


def backfill(services: Services) -> Any:
    start, end = history_range("2026-05", None, services.config.timezone_for(REPO), int(time.time()))
    with services.github(REPO) as client:
        return read_history(client, services.history, services.heads, target(services, REPO, start, end), BACKFILL)


def listed(number: int, **fields: Any) -> dict[str, Any]:
    """A pull request as the list endpoint gives it, updated inside May 2026, with `fields` over it."""
    pr = {
        "number": number,
        "state": "open",
        "title": "A change",
        "created_at": "2026-05-03T08:00:00Z",
        "updated_at": "2026-05-04T08:00:00Z",
        "user": {"login": "octocat"},
        "base": {"ref": "main", "sha": "b" * 40},
        "head": {"ref": "topic", "sha": "a" * 40},
        "labels": [],
    }
    return pr | fields


def test_an_endless_pull_list_stops_at_its_page_limit(
    services: Services, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "PULL_LIST_PAGES", 4)  # 500 in earnest: seconds of requests
    link = {"Link": f'<{github.url}/repositories/1/pulls?state=all&page=2>; rel="next"'}
    github.script(r"/pulls$", *(Scripted(200, link, []) for _ in range(5)))
    with pytest.raises(LimitExceeded, match="goes on past 4 pages, the page limit"):
        backfill(services)
    assert github.count(r"/pulls\?") == 4
    [run] = services.history.runs(REPO)
    assert run.state == FAILED and "LimitExceeded" in (run.detail or "") and "past 4 pages" in (run.detail or "")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (Scripted(200, raw=b"[{"), "GitHub's answer for /repos/NVIDIA/Megatron-LM/pulls is not JSON"),
        (Scripted(200, body={"message": "hi"}), "answered an object where its API documents a list of objects"),
        (Scripted(200, body=[listed(5) | {"number": "5"}]), "'number' as a string, not a number"),
        (Scripted(200, body=[listed(5, updated_at=1777900000)]), "'updated_at' as a number, not a string"),
        (Scripted(200, body=[listed(5, user="octocat")]), "#5 is not what its API documents: pull_request.user"),
        (Scripted(200, body=[listed(5, labels="bug")]), "#5 is not what its API documents: pull_request.labels"),
        (Scripted(200, body=[listed(5, created_at="yesterday")]), "'created_at' as 'yesterday', not a time"),
    ],
)
def test_wrong_answers_fail_the_run_with_what_was_wrong(
    services: Services, github: FakeGitHub, answer: Scripted, message: str
) -> None:
    github.set_timeline(REPO, 5, [])
    github.script(r"/pulls$", answer)
    with pytest.raises(BadAnswer, match=message):
        backfill(services)
    [run] = services.history.runs(REPO)
    assert run.state == FAILED and "BadAnswer" in (run.detail or "")


@pytest.mark.parametrize(
    ("timeline", "message"),
    [
        ({"event": "labeled"}, "answered an object where its API documents a list of objects"),
        ([{"event": "labeled", "created_at": "2026-05-04T08:00:00Z", "label": "bug"}], "timeline.0.label"),
        ([{"event": "closed", "created_at": 17}], "timeline.0.created_at"),
    ],
)
def test_a_wrong_timeline_fails_the_run(services: Services, github: FakeGitHub, timeline: Any, message: str) -> None:
    github.script(r"/pulls$", Scripted(200, body=[listed(5)]))
    github.script(r"/issues/5/timeline$", Scripted(200, body=timeline))
    with pytest.raises(BadAnswer, match=message):
        backfill(services)


def test_wrong_file_entries_fail_the_run(services: Services, github: FakeGitHub) -> None:
    github.set_timeline(REPO, 5, [])
    github.script(r"/pulls$", Scripted(200, body=[listed(5)]))
    github.script(r"/pulls/5/files$", Scripted(200, body=[{"filename": "a.py", "additions": "many"}]))
    with pytest.raises(BadAnswer, match="'additions' as a string, not a number"):
        backfill(services)
