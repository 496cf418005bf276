"""tracker.github.commits: the messages of a PR's commits inside a report's window, for the narrator, read
from the fake GitHub's `GET /repos/{o}/{r}/pulls/{n}/commits` (GitHub's example, filled in)."""

from __future__ import annotations

from datetime import date

import pytest

from bench.fixtures.paths import require_shared

require_shared()  # bench.fixtures.fake_github reads GitHub's example answers from ../shared as it loads

from bench.fixtures.fake_github import FakeGitHub, Scripted  # noqa: E402
from tests.github.test_client import MemoryCache, client_for  # noqa: E402
from tracker.core.window import Month, month_window  # noqa: E402
from tracker.github.client import RateLimited  # noqa: E402
from tracker.github.commits import commit_messages  # noqa: E402

REPO = "NVIDIA/Megatron-LM"
# September 2026 through the 15th, in Shanghai: [Aug 31 16:00 UTC, Sep 15 16:00 UTC).
WINDOW = month_window(Month(2026, 9), date(2026, 9, 15), "Asia/Shanghai")


@pytest.fixture
def fake(github_server: FakeGitHub) -> FakeGitHub:
    github_server.reset()
    return github_server


def test_only_commits_inside_the_window_and_no_merge_commit(fake: FakeGitHub) -> None:
    fake.set_commits(
        REPO,
        7,
        [
            ("Start the MoE router rework", "2026-08-31T15:59:59Z"),  # 23:59:59 on Aug 31 in Shanghai: before
            ("Route tokens by expert capacity\n\nLonger text.", "2026-08-31T16:00:00Z"),  # the window's first second
            ("Merge branch 'main' into moe-router", "2026-09-03T10:00:00Z", 2),
            ("Address review comments", "2026-09-15T15:59:59Z"),
            ("Late fix-up", "2026-09-15T16:00:00Z"),  # the 16th in Shanghai: after the cutoff
        ],
    )
    fake.set_commits(REPO, 8, [("Fix typo", "2026-09-02T08:00:00Z")])
    with client_for(fake) as client:
        found = commit_messages(client, REPO, [8, 7, 7], WINDOW)
    assert found == {7: ["Route tokens by expert capacity\n\nLonger text.", "Address review comments"], 8: ["Fix typo"]}


def test_pages_are_followed_and_a_pr_github_does_not_show_has_none(fake: FakeGitHub) -> None:
    fake.set_commits(REPO, 7, [(f"Step {i}", f"2026-09-05T10:{i // 60:02d}:{i % 60:02d}Z") for i in range(130)])
    with client_for(fake) as client:
        found = commit_messages(client, REPO, [7, 404], WINDOW)
    assert found == {7: [f"Step {i}" for i in range(130)]}  # 404: no entry, no error
    assert sum("/pulls/7/commits" in r for r in fake.requests) == 2  # 100 a page, per GitHub's maximum


def test_asking_again_is_conditional(fake: FakeGitHub) -> None:
    fake.set_commits(REPO, 7, [("Fix typo", "2026-09-02T08:00:00Z")])
    cache = MemoryCache()
    with client_for(fake, cache=cache) as client:
        first = commit_messages(client, REPO, [7], WINDOW)
        assert commit_messages(client, REPO, [7], WINDOW) == first == {7: ["Fix typo"]}
        assert client.not_modified == 1


def test_a_rate_limit_is_the_callers_to_wait_for(fake: FakeGitHub) -> None:
    reset = "4102444800"  # 2100-01-01
    fake.script(
        r"/pulls/\d+/commits",
        Scripted(
            403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}, {"message": "API rate limit exceeded"}
        ),
    )
    with client_for(fake) as client, pytest.raises(RateLimited) as raised:
        commit_messages(client, REPO, [7], WINDOW)
    assert raised.value.retry_at == float(reset) + 1  # the client adds a second for clock skew
