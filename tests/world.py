"""The REST view GitHub would give *today* of a month of pull-request stories, put on the fake GitHub.

A backfill rebuilds a month from the REST API instead of webhooks; to test it against receiving the
same month as webhooks, `publish_world` puts on `tests.fake_github.FakeGitHub`, for the stories of
`tests.factory.PullRequestStory` (as `tests.scenario` builds them), what GitHub would answer after
the last delivery:

- each PR object at its final state, from its last delivery's `pull_request` (title, body, labels,
  draft, base, head, state, created/updated/closed/merged_at, author);
- its timeline, in time order, derived from consecutive deliveries;
- the files of every head (`set_files` where `head_files` names them, else `saw_head`'s default
  file), the PR's current head being its last one;
- optionally (`hook_id=`) every delivery registered as a hook delivery, all delivered ("OK", 200).

Where GitHub's real behaviour is uncertain or the fake simplifies it, the choices made are these:

- Commits. A push adds exactly one `committed` event: `sha` the head after the push, `parents` the
  head before it, author and committer dated the delivery's `pull_request.updated_at`. The opening
  head gets one too, dated `created_at`, its parent the base sha. Real pushes may add several
  commits, and real commit dates are the git dates (usually before the push, possibly long
  before); a force-push would show `head_ref_force_pushed` and the rewritten commits instead. As
  GitHub's committed events are git commits, they have no `created_at`, `id` or `actor`.
- Merging. A merged PR gets a `merged` event (commit_id the made-up `merge_sha`, which is also its
  `merge_commit_sha`) and, at the same instant, the `closed` event GitHub also records, with the same
  commit_id; `merged` is listed first. A PR closed unmerged gets `closed` without a commit. The
  `state_reason` of `closed`/`reopened` is null (GitHub fills it for issues; for pull requests it
  is not documented).
- State events come from the delivery's action (`closed`, `reopened`), not from a change of state:
  the factory keeps `merged_at` after a reopening (GitHub cannot reopen a merged PR).
- Labels, titles and drafts come from comparing consecutive deliveries: `labeled`/`unlabeled`
  (label `{name, color}`), `renamed` (`rename.from`/`to`), `ready_for_review`/`convert_to_draft`,
  dated the later delivery's `updated_at`. Labels present at opening give `labeled` events at
  `created_at`; opening as a draft gives no event. NB the factory does not carry labels forward: a
  delivery after `labeled` has none, so the timeline shows them `unlabeled` at that delivery, and
  the final PR has no labels, exactly as the webhooks say.
- Within one delivery the order is: committed, renamed, unlabeled, labeled, draft change, then the
  state events; across deliveries events are sorted by time (stable), committed events by their
  date. GitHub's order of events at the same second is not documented.
- Noise the backfill must ignore: one `commented` event per PR with at least two deliveries a
  second or more apart, halfway between its first two deliveries, so it never moves the PR's
  `updated_at` (a comment does on GitHub; inside the span it is superseded by a later delivery).
- Actors are the delivery's `sender`; the PR's author its `pull_request.user`. Timeline event ids
  are deterministic (repository, number, position).
- Hook deliveries: `delivered_at` is the delivery's `pull_request.updated_at` (GitHub delivers within
  seconds), guid its delivery id, status 200 "OK"; mark some failed with `set_delivery_status`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from tests.factory import PullRequestStory
from tests.fake_github import FakeGitHub, comment_event, committed_event, issue_event, merge_sha

HeadFiles = Mapping[tuple[int, str], list[str]]


def _payloads(story: PullRequestStory) -> list[dict[str, Any]]:
    return [json.loads(d.body) for d in story.deliveries]


def _repo(story: PullRequestStory) -> str:
    return str(_payloads(story)[0]["repository"]["full_name"]) if story.deliveries else story.repo


def pull_fields(story: PullRequestStory) -> dict[str, Any]:
    """The fields of the PR's REST object at its final state (its last delivery), for `set_pull`."""
    last = _payloads(story)[-1]
    pr = last["pull_request"]
    merged = pr.get("merged_at") is not None
    fields: dict[str, Any] = {
        "number": pr["number"],
        "title": pr["title"],
        "body": pr["body"],
        "state": pr["state"],
        "draft": bool(pr.get("draft")),
        "created_at": pr["created_at"],
        "updated_at": pr["updated_at"],
        "closed_at": pr["closed_at"],
        "merged_at": pr["merged_at"],
        "user": {"login": pr["user"]["login"]},
        "base": {"ref": pr["base"]["ref"], "sha": pr["base"]["sha"]},
        "head": {"ref": pr["head"]["ref"], "sha": pr["head"]["sha"]},
        "labels": [{"name": label["name"], "color": label.get("color", "ededed")} for label in pr["labels"]],
        "html_url": pr["html_url"],
    }
    if merged:
        fields["merged_by"] = {"login": last["sender"]["login"]}
    return fields


def _event_id(repo: str, number: int, position: int) -> int:
    return (
        8_000_000_000 + int(hashlib.sha256(f"{repo.lower()}#{number}".encode()).hexdigest()[:6], 16) * 1000 + position
    )


def _when(event: dict[str, Any]) -> str:
    return str(event["created_at"] if "created_at" in event else event["committer"]["date"])


def timeline_of(story: PullRequestStory, *, comments: bool = True) -> list[dict[str, Any]]:
    """The PR's timeline as GitHub would list it after the story's last delivery (see the module
    docstring for the choices)."""
    repo, number = _repo(story), story.number
    events: list[dict[str, Any]] = []

    def event(kind: str, at: str, actor: str, **extra: Any) -> None:
        events.append(issue_event(repo, _event_id(repo, number, len(events)), kind, at, actor, **extra))

    def commit(sha: str, at: str, parent: str, message: str, author: str) -> None:
        events.append(committed_event(repo, sha, at, [parent], message, author))

    previous: dict[str, Any] | None = None
    pushes = 0
    for payload in _payloads(story):
        pr, action, actor = payload["pull_request"], payload["action"], payload["sender"]["login"]
        at = pr["updated_at"]
        author = pr["user"]["login"]
        if previous is None:
            commit(pr["head"]["sha"], pr["created_at"], pr["base"]["sha"], f"{pr['title']}", author)
            for label in pr["labels"]:
                event("labeled", pr["created_at"], actor, label={"name": label["name"], "color": label["color"]})
        else:
            if pr["head"]["sha"] != previous["head"]["sha"]:
                pushes += 1
                commit(pr["head"]["sha"], at, previous["head"]["sha"], f"Address review ({pushes})", author)
            if pr["title"] != previous["title"]:
                event("renamed", at, actor, rename={"from": previous["title"], "to": pr["title"]})
            before = {label["name"]: label for label in previous["labels"]}
            after = {label["name"]: label for label in pr["labels"]}
            for name in sorted(set(before) - set(after)):
                event("unlabeled", at, actor, label={"name": name, "color": before[name]["color"]})
            for name in sorted(set(after) - set(before)):
                event("labeled", at, actor, label={"name": name, "color": after[name]["color"]})
            if bool(pr.get("draft")) != bool(previous.get("draft")):
                event("convert_to_draft" if pr.get("draft") else "ready_for_review", at, actor)
        if action == "closed" and pr.get("merged_at"):
            merge = merge_sha(repo, number)
            event("merged", pr["merged_at"], actor, commit_id=merge)
            event("closed", pr["merged_at"], actor, commit_id=merge, state_reason=None)
        elif action == "closed":
            event("closed", pr["closed_at"] or at, actor, state_reason=None)
        elif action == "reopened":
            event("reopened", at, actor, state_reason=None)
        previous = pr
    if comments:
        times = sorted({p["pull_request"]["updated_at"] for p in _payloads(story)})
        if len(times) >= 2:
            middle = _midpoint(times[0], times[1])
            if middle is not None:
                author = _payloads(story)[0]["sender"]["login"]
                comment_id = _event_id(repo, number, 999) + 1_000_000_000
                body = "Thanks! Could you add a test for this?"
                events.append(comment_event(repo, number, comment_id, middle, author, body))
    events.sort(key=_when)
    return events


def _midpoint(first: str, second: str) -> str | None:
    """The second halfway between two ISO instants, or None when they are less than 2 s apart."""
    from datetime import UTC, datetime

    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    start, end = parse(first), parse(second)
    if (end - start).total_seconds() < 2:
        return None
    return (start + (end - start) / 2).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def publish_story(
    fake: FakeGitHub,
    story: PullRequestStory,
    head_files: HeadFiles | None = None,
    *,
    hook_id: int | None = None,
    comments: bool = True,
) -> None:
    """Put one story's REST view on the fake (see `publish_world`)."""
    if not story.deliveries:
        return
    repo, number = _repo(story), story.number
    fake.set_pull(repo, pull_fields(story))
    fake.set_timeline(repo, number, timeline_of(story, comments=comments))
    seen: list[str] = []
    for payload in _payloads(story):
        pr = payload["pull_request"]
        sha = pr["head"]["sha"]
        if sha in seen:
            continue
        seen.append(sha)
        paths = (head_files or {}).get((number, sha))
        if paths:
            fake.set_files(repo, number, sha, list(paths))
        else:
            fake.saw_head(repo, number, sha, pr["updated_at"])
    fake.saw_head(repo, number, seen[-1], "9999")  # the last head is current, whatever came before
    if hook_id is not None:
        for d, payload in zip(story.deliveries, _payloads(story), strict=True):
            fake.add_hook_delivery(
                repo,
                hook_id,
                d.delivery_id,
                d.event,
                payload.get("action"),
                d.body,
                200,
                payload["pull_request"]["updated_at"],
            )


def publish_world(
    fake: FakeGitHub,
    stories: list[PullRequestStory],
    head_files: HeadFiles | None = None,
    *,
    hook_id: int | None = None,
    comments: bool = True,
) -> None:
    """Put on the fake exactly the REST view GitHub would give of these stories after their last
    delivery: PR objects, timelines, files of every head, and (with `hook_id`) hook deliveries.
    `head_files` maps (number, head sha) to real paths, e.g. `{(n, sha): paths for n, sha, paths in
    scenario.head_files()}`."""
    for story in stories:
        publish_story(fake, story, head_files, hook_id=hook_id, comments=comments)
