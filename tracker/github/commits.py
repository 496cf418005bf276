"""The commit messages of pull requests inside a report's window, for the narrator's input (issue 13).

`GET /repos/{o}/{r}/pulls/{n}/commits` lists a pull request's commits, oldest first, at most 250. A
commit belongs to the window when its committer date (when it was put on the branch: a rebase or an
amend renews it, a cherry-pick keeps the author's) falls inside it; a merge commit (two parents) says
nothing of the change and is left out. Every GET is conditional (the response cache's ETags), so
asking again for an unchanged PR costs a 304, which GitHub does not count against the rate limit.

A PR GitHub no longer shows (404, 410) or no longer lets us read (403 without a rate limit) has no
messages; a rate limit or an outage (`RateLimited`, `Unavailable`) is the caller's to wait for.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from tracker.core.window import Window
from tracker.github.client import GitHubClient, RequestRefused


def commit_messages(
    client: GitHubClient, full_name: str, numbers: Iterable[int], window: Window
) -> dict[int, list[str]]:
    """The messages of each PR's commits made inside `window`, oldest first, by PR number."""
    found: dict[int, list[str]] = {}
    for number in sorted(set(numbers)):
        try:
            commits = client.pull_request_commits(full_name, number)
        except RequestRefused:
            continue
        found[number] = [message for commit in commits if (message := _inside(commit, window)) is not None]
    return found


def _inside(commit: dict[str, Any], window: Window) -> str | None:
    """The commit's message when it is no merge and was committed inside `window`, else None."""
    detail = commit.get("commit")
    parents = commit.get("parents")
    if not isinstance(detail, dict) or (isinstance(parents, list) and len(parents) > 1):
        return None
    message, committer = detail.get("message"), detail.get("committer")
    date = committer.get("date") if isinstance(committer, dict) else None
    if not isinstance(message, str) or not isinstance(date, str):
        return None
    try:
        instant = datetime.fromisoformat(date.replace("Z", "+00:00"))
    except ValueError:
        return None
    if instant.tzinfo is None:
        return None
    return message if window.contains(int(instant.timestamp())) else None
