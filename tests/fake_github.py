"""A local stand-in for api.github.com, serving GitHub's own example responses.

Bodies are GitHub's examples from ../shared/fixtures/github/rest/ (`pulls.list-files.200.json`,
`pulls.get.200.json`) with the fields a test controls (file names, patches, the head sha in the
URLs) filled in. It paginates with `Link` headers, answers `If-None-Match` with 304, and plays
scripted misbehaviour (rate limits, retry-after, 5xx, slow answers, raw bodies such as malformed
JSON, bodies trickled a byte at a time) before its normal answers.
Scripts match the request path (without the query), so they can target any route below.

Issues are stateful per test (emptied by `reset`): `GET /repos/{o}/{r}/issues/{n}`, `GET
/repos/{o}/{r}/issues` (state, creator, sort, direction, per_page; pull requests included, as GitHub
does; the next pages under `/repositories/{id}/issues`, as GitHub's own `Link` headers give them),
`POST /repos/{o}/{r}/issues` (201) and `PATCH /repos/{o}/{r}/issues/{n}`. Every request other than
GET is kept in `writes`, scripted refusals included, so a test can say "nothing was written".

The REST view of pull requests, for a backfill (see tests/world.py, which fills it from stories):

- `set_pull` stores pull request objects shaped on `pulls.get.200.json` (`pull_object`).
  `GET /repos/{o}/{r}/pulls` lists them with GitHub's query semantics: `state` (open by default,
  closed, all), `sort` (created by default, updated; popularity and long-running answer 400, not
  supported by the fake), `direction` (GitHub: "Default: desc when sort is created or sort is not
  specified, otherwise asc"), `base`, `head` (`user:ref`), `per_page` (max 100, default 30) and
  `page`. Items have the `pulls.list.200.json` keys (no `merged`, `mergeable`, counts, ...); later
  pages are linked under `/repositories/{id}/pulls`, as the issues are. Ties are broken by number.
  `GET /repos/{o}/{r}/pulls/{n}` answers the stored object with `merged`; without one it keeps the
  older behaviour (the example with the number and the current head of `set_files`/`saw_head`).
- `set_commits` gives a PR its commits (GitHub's `pulls.list-commits.200.json` example with the message,
  dates and parents filled in); `GET /repos/{o}/{r}/pulls/{n}/commits` pages them, empty for a PR the
  fake knows otherwise, 404 for an unknown or deleted one.
- `set_timeline` stores a PR's timeline; `GET /repos/{o}/{r}/issues/{n}/timeline` pages it (next
  pages under `/repositories/{id}/issues/{n}/timeline`). A PR (or issue) without one has an empty
  timeline; an unknown number answers 404. `issue_event`, `committed_event` and `comment_event`
  build events on the example `issues.list-events-for-timeline.200.json` (its actor objects, its
  `commented` item) and on GitHub's `timeline-committed-event` schema (no example exists).
- `delete_pull` makes `pulls/{n}`, its timeline and its files answer 404 and drops it from later
  list pages (a page fetched before still named it). `compare` keeps answering its heads: commits
  outlive the PR.
- Hook deliveries (`add_hook_delivery`): `GET /repos/{o}/{r}/hooks/{id}/deliveries` (newest first,
  `per_page`, `redelivery=true|false`, cursor pagination: `Link: <...&cursor=v1_{delivery id}>;
  rel="next"`, the cursor naming the first delivery of the next page; a cursor the fake never gave
  answers 400), `GET .../deliveries/{delivery_id}` (shape of `repos.get-webhook-delivery.200.json`,
  with the request's headers and payload) and `POST .../deliveries/{delivery_id}/attempts`
  (202 `{}`). A redelivery is performed before the 202 (GitHub queues it; doing it at once keeps
  tests deterministic): with `webhook_target` set (a URL, or a callable `(headers, body) -> status`)
  the original body is POSTed with its original headers (`X-GitHub-Delivery` = the original guid,
  `X-GitHub-Event`, `X-GitHub-Hook-ID`, ...) and `X-Hub-Signature-256` (plus the legacy SHA-1
  `X-Hub-Signature`) computed afresh with `webhook_secret` (no signature headers when it is None),
  and a new entry is listed: `redelivery: true`, the same guid, the status the target answered.
  Statuses: 2xx "OK", another code "Invalid HTTP Response: {code}", no answer within 10 s
  status_code 0 "timed out", no connection (or no target) status_code 0 "failed to connect to
  host" (GitHub's exact wording for the last two is not documented). The fake does not enforce
  GitHub's 3-day redelivery window. `installation_id` is null (a repository hook, not an app's).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from tests.paths import FIXTURES, require_shared

require_shared()  # GitHub's example answers: a test that starts the fake is skipped without them

REST = FIXTURES / "rest"
_FILE = json.loads((REST / "pulls.list-files.200.json").read_text())[0]
_PULL = json.loads((REST / "pulls.get.200.json").read_text())
# The keys a list item has (`pulls.list.200.json`); `pulls/{n}` adds merged, mergeable, counts, ...
_PULL_LIST_KEYS = frozenset(json.loads((REST / "pulls.list.200.json").read_text())[0])
_TIMELINE = json.loads((REST / "issues.list-events-for-timeline.200.json").read_text())
_COMMIT = json.loads((REST / "pulls.list-commits.200.json").read_text())[0]
# An issue event (id, node_id, url, actor, event, commit_id, commit_url, created_at,
# performed_via_github_app): the example's `labeled` item, its `label` taken off.
_ISSUE_EVENT = {k: v for k, v in next(e for e in _TIMELINE if e["event"] == "labeled").items() if k != "label"}
_COMMENTED = next(e for e in _TIMELINE if e["event"] == "commented")
_DELIVERY = json.loads((REST / "repos.list-webhook-deliveries.200.json").read_text())[0]
_DELIVERY_DETAIL = json.loads((REST / "repos.get-webhook-delivery.200.json").read_text())
REDELIVERY_TIMEOUT = 10.0  # GitHub: a 2xx within 10 seconds, or the delivery failed
WebhookTarget = str | Callable[[dict[str, str], bytes], int]
# An issue as GitHub answered `POST /repos/{owner}/{repo}/issues` (201), recorded by octokit/fixtures
# against api.github.com on 2022-07-19 (`recorded/paginate-issues.raw-fixture.json`; the same shape
# as the items of its `GET .../issues` pages). Preferred to the example item of
# `search.issues-and-pull-requests.200.json`, which is a pull request (it has a `pull_request` key)
# and carries search-only fields (`score`). `issue_object` sets: the number, the id, the URLs that
# name the repository and the number, title, body, state, state_reason, closed_at, created_at,
# updated_at and the author's login; the rest (reactions, labels, ...) stays as recorded.
_RECORDED_ISSUE = next(
    exchange["response"]
    for exchange in json.loads((REST / "recorded" / "paginate-issues.raw-fixture.json").read_text())
    if exchange["method"] == "post" and exchange["path"].endswith("/issues")
)
# GitHub's 422 for a longer body: "body is too long (maximum is 65536 characters)". The fake counts
# code points; the tracker counts more strictly (tracker.github.issues.BODY_LIMIT).
ISSUE_BODY_LIMIT = 65_536
LOGIN = "monthly-tracker-bot"  # whom the fake's token belongs to: the author of the issues it creates


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def issue_object(repo: str, number: int, title: str, body: str | None, login: str) -> dict[str, Any]:
    """An issue in the shape GitHub answers with (see _RECORDED_ISSUE for what is set)."""
    issue: dict[str, Any] = copy.deepcopy(_RECORDED_ISSUE)
    api = f"https://api.github.com/repos/{repo}"
    issue.update(
        url=f"{api}/issues/{number}",
        repository_url=api,
        labels_url=f"{api}/issues/{number}/labels{{/name}}",
        comments_url=f"{api}/issues/{number}/comments",
        events_url=f"{api}/issues/{number}/events",
        timeline_url=f"{api}/issues/{number}/timeline",
        html_url=f"https://github.com/{repo}/issues/{number}",
        id=1_300_000_000 + number,
        number=number,
        title=title,
        body=body,
        state="open",
        state_reason=None,
        closed_at=None,
        created_at=_now(),
        updated_at=_now(),
    )
    issue["reactions"]["url"] = f"{api}/issues/{number}/reactions"
    issue["user"] = {**issue["user"], "login": login, "url": f"https://api.github.com/users/{login}"}
    return issue


def file_entry(repo: str, head_sha: str, spec: dict[str, Any] | str) -> dict[str, Any]:
    """A files-listing entry in GitHub's example shape; `spec` is a path or a dict of overrides."""
    spec = {"filename": spec} if isinstance(spec, str) else spec
    entry: dict[str, Any] = copy.deepcopy(_FILE)
    entry.update({"additions": 3, "deletions": 1, "changes": 4, "status": "modified", "patch": "@@ -1 +1 @@\n-a\n+b"})
    entry.update(spec)
    name = entry["filename"]
    entry["sha"] = hashlib.sha1(f"{head_sha}:{name}".encode()).hexdigest()
    entry["blob_url"] = f"https://github.com/{repo}/blob/{head_sha}/{name}"
    entry["raw_url"] = f"https://github.com/{repo}/raw/{head_sha}/{name}"
    entry["contents_url"] = f"https://api.github.com/repos/{repo}/contents/{name}?ref={head_sha}"
    entry["changes"] = entry["additions"] + entry["deletions"]
    return entry


def commit_object(repo: str, message: str, committed_at: str, parents: int = 1) -> dict[str, Any]:
    """A commit as `GET /repos/{o}/{r}/pulls/{n}/commits` lists it, on GitHub's example."""
    sha = _sha(f"{repo}:{message}:{committed_at}")
    commit = copy.deepcopy(_COMMIT)
    commit["sha"] = sha
    commit["url"] = f"https://api.github.com/repos/{repo}/commits/{sha}"
    commit["commit"]["message"] = message
    commit["commit"]["committer"]["date"] = committed_at
    commit["commit"]["author"]["date"] = committed_at
    commit["parents"] = [{"sha": _sha(f"{sha}:{i}"), "url": ""} for i in range(parents)]
    return commit


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _number_from(text: str, digits: int = 9) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:digits], 16)


def as_user(template: dict[str, Any], login: str) -> dict[str, Any]:
    """A copy of one of GitHub's example user objects renamed to `login` (its URLs too)."""
    old = template["login"]
    user = {
        key: value.replace(f"/{old}", f"/{login}") if isinstance(value, str) and key != "avatar_url" else value
        for key, value in template.items()
    }
    user.update(login=login, id=_number_from(f"user:{login}", 8))
    return copy.deepcopy(user)


def label_object(repo: str, label: dict[str, Any] | str) -> dict[str, Any]:
    """A label in the shape of the `pulls.get` example's, from a name or a webhook label."""
    given = {"name": label} if isinstance(label, str) else label
    entry: dict[str, Any] = copy.deepcopy(_PULL["labels"][0])
    name = given["name"]
    entry.update(
        id=_number_from(f"label:{repo}:{name}"),
        url=f"https://api.github.com/repos/{repo}/labels/{name}",
        name=name,
        description=None,
        color="ededed",
        default=False,
    )
    entry.update({k: v for k, v in given.items() if k in entry and k not in ("url", "name")})
    return entry


def _overlay(into: dict[str, Any], fields: dict[str, Any]) -> None:
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _overlay(into[key], value)
        else:
            into[key] = value


def pull_object(repo: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A pull request as `GET /repos/{o}/{r}/pulls/{n}` answers it, on GitHub's example.

    The example's URLs are made to name `repo` and the number (and `statuses_url` the head sha), its
    lock is lifted, and `fields` (at least `number`) are laid over it, nested dicts merged (`user`,
    `base`, `head`: give `{"login": ...}`, `{"ref": ..., "sha": ...}`). Labels may be names. Derived
    unless given: `state` (closed when `closed_at` or `merged_at`), `merged` (from `merged_at`),
    `merged_by` (null unless merged), `merge_commit_sha` (made up from repo and number), the user's
    URLs from its login, `head.label`. Milestone, assignees, reviewers and counts stay as in the
    example. `list_item` gives the list endpoint's shape."""
    number = int(fields["number"])
    text = json.dumps(_PULL).replace("octocat/Hello-World", repo)
    for kind in ("pulls", "pull", "issues"):
        text = text.replace(f"/{kind}/{_PULL['number']}", f"/{kind}/{number}")
    pr: dict[str, Any] = json.loads(text)
    owner, name = repo.split("/", 1)
    for side in ("base", "head"):
        pr[side]["repo"].update(name=name, full_name=repo, id=_number_from(f"repo:{repo.lower()}", 8))
        pr[side]["repo"]["owner"] = as_user(pr[side]["repo"]["owner"], owner)
        pr[side]["user"] = as_user(pr[side]["user"], owner)
    pr.update(
        id=_number_from(f"pull:{repo.lower()}#{number}"),
        number=number,
        locked=False,
        active_lock_reason=None,
        closed_at=None,
        merged_at=None,
        draft=False,
        state="open",
    )
    pr["base"]["label"] = f"{owner}:{pr['base']['ref']}"
    user = fields.get("user", {}).get("login")
    given = copy.deepcopy(fields)
    _overlay(pr, given)
    if user:
        pr["user"] = as_user(_PULL["user"], user) | {k: v for k, v in given["user"].items() if k != "login"}
    pr["labels"] = [label_object(repo, label) for label in pr["labels"]]
    for side in ("base", "head"):
        pr[side]["label"] = f"{owner}:{pr[side]['ref']}"
    head = pr["head"]["sha"]
    pr["statuses_url"] = f"https://api.github.com/repos/{repo}/statuses/{head}"
    pr["_links"]["statuses"]["href"] = pr["statuses_url"]
    merged = pr["merged_at"] is not None
    if "state" not in fields:
        pr["state"] = "closed" if (pr["closed_at"] or merged) else "open"
    if "merged" not in fields:
        pr["merged"] = merged
    if "merged_by" not in fields:
        pr["merged_by"] = pr["merged_by"] if merged else None
    if "merge_commit_sha" not in fields:
        pr["merge_commit_sha"] = merge_sha(repo, number)
    return pr


def merge_sha(repo: str, number: int) -> str:
    """The made-up merge commit of a PR (its `merge_commit_sha`, its `merged` event's commit_id)."""
    return _sha(f"merge:{repo.lower()}#{number}")


def list_item(pr: dict[str, Any]) -> dict[str, Any]:
    """A pull request as the list endpoint gives it: without `merged` and the other single-PR fields."""
    return {key: copy.deepcopy(value) for key, value in pr.items() if key in _PULL_LIST_KEYS}


def issue_event(
    repo: str,
    event_id: int,
    kind: str,
    created_at: str,
    actor: str,
    *,
    commit_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A timeline issue event (labeled, unlabeled, renamed, closed, merged, reopened,
    ready_for_review, convert_to_draft, ...) on the example's, with `extra` (label, rename, ...)."""
    event = copy.deepcopy(_ISSUE_EVENT)
    event.update(
        id=event_id,
        node_id=f"{kind[:2].upper()}E_kwDO{event_id:x}",
        url=f"https://api.github.com/repos/{repo}/issues/events/{event_id}",
        actor=as_user(_ISSUE_EVENT["actor"], actor),
        event=kind,
        commit_id=commit_id,
        commit_url=f"https://api.github.com/repos/{repo}/commits/{commit_id}" if commit_id else None,
        created_at=created_at,
    )
    performed = event.pop("performed_via_github_app")
    event.update(extra)
    event["performed_via_github_app"] = performed
    return event


def committed_event(
    repo: str, sha: str, date: str, parents: list[str], message: str, author: str = "Codertocat"
) -> dict[str, Any]:
    """A timeline `committed` event (GitHub's `timeline-committed-event`: a git commit with
    `event`; no id, actor or created_at): author and committer dated `date`."""
    person = {"name": author, "email": f"{author.lower()}@users.noreply.github.com", "date": date}
    tree = _sha(f"tree:{sha}")
    return {
        "sha": sha,
        "node_id": f"C_kwDO{sha[:24]}",
        "url": f"https://api.github.com/repos/{repo}/git/commits/{sha}",
        "html_url": f"https://github.com/{repo}/commit/{sha}",
        "author": dict(person),
        "committer": dict(person),
        "tree": {"sha": tree, "url": f"https://api.github.com/repos/{repo}/git/trees/{tree}"},
        "message": message,
        "parents": [
            {
                "sha": parent,
                "url": f"https://api.github.com/repos/{repo}/git/commits/{parent}",
                "html_url": f"https://github.com/{repo}/commit/{parent}",
            }
            for parent in parents
        ],
        "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None},
        "event": "committed",
    }


def comment_event(repo: str, number: int, comment_id: int, created_at: str, login: str, body: str) -> dict[str, Any]:
    """A timeline `commented` event on the example's."""
    event: dict[str, Any] = copy.deepcopy(_COMMENTED)
    user = as_user(_COMMENTED["user"], login) | {"site_admin": False}
    event.update(
        url=f"https://api.github.com/repos/{repo}/issues/comments/{comment_id}",
        html_url=f"https://github.com/{repo}/pull/{number}#issuecomment-{comment_id}",
        issue_url=f"https://api.github.com/repos/{repo}/issues/{number}",
        id=comment_id,
        node_id=f"IC_kwDO{comment_id:x}",
        user=user,
        created_at=created_at,
        updated_at=created_at,
        author_association="CONTRIBUTOR",
        body=body,
        actor=copy.deepcopy(user),
    )
    event["reactions"]["url"] = f"https://api.github.com/repos/{repo}/issues/comments/{comment_id}/reactions"
    return event


def delivery_status(status_code: int) -> str:
    """The `status` GitHub lists for a delivery its target answered with `status_code` (0: none)."""
    if 200 <= status_code < 300:
        return "OK"
    if status_code == 0:
        return "failed to connect to host"
    return f"Invalid HTTP Response: {status_code}"


def signature_headers(secret: str | None, body: bytes) -> dict[str, str]:
    """GitHub's signature headers for `body`: none without a secret."""
    if secret is None:
        return {}
    key = secret.encode()
    return {
        "X-Hub-Signature-256": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest(),
        "X-Hub-Signature": "sha1=" + hmac.new(key, body, hashlib.sha1).hexdigest(),
    }


@dataclass
class HookDelivery:
    """One attempt GitHub made at delivering an event to a hook (a redelivery is another one)."""

    id: int
    guid: str
    delivered_at: str
    redelivery: bool
    status_code: int
    status: str
    event: str
    action: str | None
    repository_id: int
    body: bytes
    headers: dict[str, str]
    duration: float = 0.27
    installation_id: int | None = None
    throttled_at: str | None = None
    response: str = ""

    def item(self) -> dict[str, Any]:
        """As `GET .../hooks/{id}/deliveries` lists it (the example's keys, in its order)."""
        fields = {name: getattr(self, name) for name in _DELIVERY}
        return fields

    def detail(self, target: WebhookTarget | None) -> dict[str, Any]:
        """As `GET .../hooks/{id}/deliveries/{delivery_id}` answers it."""
        try:
            payload: Any = json.loads(self.body)
        except ValueError:
            payload = self.body.decode(errors="replace")
        answer = {name: getattr(self, name) for name in _DELIVERY_DETAIL if hasattr(self, name)}
        answer["url"] = target if isinstance(target, str) else None
        answer["request"] = {"headers": dict(self.headers), "payload": payload}
        answer["response"] = {"headers": {"Content-Type": "text/plain"}, "payload": self.response}
        return {name: answer[name] for name in _DELIVERY_DETAIL}


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


@dataclass
class Scripted:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay: float = 0.0
    method: str | None = None  # answer only requests of this method (any when None)
    raw: bytes | None = None  # the body as is (malformed JSON, ...), instead of `body` as JSON
    trickle: float = 0.0  # seconds between the body's bytes, sent one at a time (a slow or hostile server)


@dataclass(frozen=True)
class Write:
    method: str
    path: str
    payload: Any


@dataclass
class PullRequestFiles:
    head: str = ""
    head_at: str = ""
    heads: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class FakeGitHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()

    def reset(self) -> None:
        with getattr(self, "_lock", threading.Lock()):
            self.pulls: dict[tuple[str, int], PullRequestFiles] = {}
            self.scripts: list[tuple[re.Pattern[str], Scripted]] = []
            self.requests: list[str] = []
            self.last_headers: dict[str, str] = {}
            self.remaining = 4999
            self.auto_register = True
            self.issues: dict[str, dict[int, dict[str, Any]]] = {}  # by repository (lower case), number
            self.repository_ids: dict[str, int] = {}
            self.writes: list[Write] = []
            self.login = LOGIN
            self.pull_requests: dict[str, dict[int, dict[str, Any]]] = {}  # by repository (lower case), number
            self.timelines: dict[tuple[str, int], list[dict[str, Any]]] = {}
            self.commits: dict[tuple[str, int], list[dict[str, Any]]] = {}  # by (repository, number)
            self.deleted_pulls: set[tuple[str, int]] = set()
            self.hook_deliveries: dict[tuple[str, int], list[HookDelivery]] = {}  # by (repository, hook id)
            self.webhook_target: WebhookTarget | None = None  # where redeliveries go
            self.webhook_secret: str | None = None  # what signs them

    # --- what tests set up ------------------------------------------------------------------------

    def set_files(self, repo: str, number: int, head_sha: str, files: list[dict[str, Any] | str]) -> None:
        """Give a head its files and make it the PR's current head."""
        with self._lock:
            pr = self.pulls.setdefault((repo.lower(), number), PullRequestFiles())
            pr.heads[head_sha] = [file_entry(repo, head_sha, spec) for spec in files]
            pr.head, pr.head_at = head_sha, "9999"

    def set_commits(self, repo: str, number: int, commits: list[tuple[str, str] | tuple[str, str, int]]) -> None:
        """A PR's commits, oldest first: (message, committer date) or (message, committer date, parents)."""
        with self._lock:
            self.commits[(repo.lower(), number)] = [commit_object(repo, *commit) for commit in commits]

    def saw_head(self, repo: str, number: int, head_sha: str, at: str) -> None:
        """A delivery stamped `at` showed this head: it has one code file unless set before, and it is
        the PR's current head if no later delivery showed another."""
        with self._lock:
            pr = self.pulls.setdefault((repo.lower(), number), PullRequestFiles())
            pr.heads.setdefault(head_sha, [file_entry(repo, head_sha, f"megatron/core/change_{number}.py")])
            if at >= pr.head_at:
                pr.head, pr.head_at = head_sha, at

    def script(self, path_pattern: str, *answers: Scripted) -> None:
        """Answer the next requests matching `path_pattern` with these, in order."""
        with self._lock:
            self.scripts.extend((re.compile(path_pattern), answer) for answer in answers)

    def count(self, pattern: str) -> int:
        return sum(1 for path in self.requests if re.search(pattern, path))

    def add_issue(
        self,
        repo: str,
        title: str,
        body: str | None = None,
        *,
        state: str = "open",
        login: str | None = None,
        pull_request: bool = False,
    ) -> dict[str, Any]:
        """An issue (or, with `pull_request`, a pull request as the issue endpoints list it) that is
        already on GitHub; numbered after the repository's last one."""
        with self._lock:
            issue = self._new_issue(repo, title, body, login or self.login)
            if state == "closed":
                issue.update(state="closed", state_reason="completed", closed_at=_now())
            if pull_request:
                number = issue["number"]
                issue["pull_request"] = {
                    "url": f"https://api.github.com/repos/{repo}/pulls/{number}",
                    "html_url": f"https://github.com/{repo}/pull/{number}",
                    "diff_url": f"https://github.com/{repo}/pull/{number}.diff",
                    "patch_url": f"https://github.com/{repo}/pull/{number}.patch",
                }
            return copy.deepcopy(issue)

    def issue(self, repo: str, number: int) -> dict[str, Any] | None:
        with self._lock:
            found = self.issues.get(repo.lower(), {}).get(number)
            return copy.deepcopy(found)

    def edit_issue(self, repo: str, number: int, **fields: Any) -> None:
        """Someone changes the issue on GitHub (closes it, edits its body, ...)."""
        with self._lock:
            issue = self.issues[repo.lower()][number]
            if fields.get("state") == "closed" and issue["state"] != "closed":
                issue.update(state_reason="completed", closed_at=_now())
            issue.update(fields, updated_at=_now())

    def set_pull(self, repo: str, pr: dict[str, Any]) -> dict[str, Any]:
        """Put a pull request on GitHub (replacing the one of the same number): `pr` is laid over
        GitHub's example (see `pull_object`); returns the stored object."""
        stored = pull_object(repo, pr)
        with self._lock:
            self._repository_id(repo)
            self.pull_requests.setdefault(repo.lower(), {})[stored["number"]] = stored
            self.deleted_pulls.discard((repo.lower(), stored["number"]))
            return copy.deepcopy(stored)

    def pull(self, repo: str, number: int) -> dict[str, Any] | None:
        with self._lock:
            return copy.deepcopy(self.pull_requests.get(repo.lower(), {}).get(number))

    def set_timeline(self, repo: str, number: int, events: list[dict[str, Any]]) -> None:
        """The PR's (or issue's) timeline, in the order GitHub lists it."""
        with self._lock:
            self._repository_id(repo)
            self.timelines[(repo.lower(), number)] = copy.deepcopy(events)

    def delete_pull(self, repo: str, number: int) -> None:
        """The PR is gone: `pulls/{n}`, its timeline and its files answer 404, and later list pages
        leave it out."""
        with self._lock:
            self.deleted_pulls.add((repo.lower(), number))

    def add_hook_delivery(
        self,
        repo: str,
        hook_id: int,
        guid: str,
        event: str,
        action: str | None,
        body: bytes,
        status_code: int,
        delivered_at: str,
        *,
        status: str | None = None,
        redelivery: bool = False,
        duration: float = 0.27,
        content_type: str = "application/json",
    ) -> int:
        """GitHub delivered (or tried to deliver) `body` to the hook: `status_code` is what the
        target answered, 0 for no answer (`status` then says why, e.g. "timed out"; by default
        `delivery_status`). Returns the delivery's id."""
        with self._lock:
            return self._add_delivery(
                repo,
                int(hook_id),
                guid,
                event,
                action,
                body,
                status_code,
                delivered_at,
                status=status,
                redelivery=redelivery,
                duration=duration,
                content_type=content_type,
            ).id

    def set_delivery_status(
        self, repo: str, hook_id: int, guid: str, status_code: int, status: str | None = None
    ) -> None:
        """The first delivery of `guid` had this outcome (e.g. 502, or 0 with "timed out")."""
        with self._lock:
            found = next(d for d in self.hook_deliveries[(repo.lower(), int(hook_id))] if d.guid == guid)
            found.status_code, found.status = status_code, status or delivery_status(status_code)

    def deliveries(self, repo: str, hook_id: int) -> list[dict[str, Any]]:
        """The hook's deliveries as GitHub lists them (newest first), all of them."""
        with self._lock:
            return [d.item() for d in self._newest_first(repo, int(hook_id))]

    def _add_delivery(
        self,
        repo: str,
        hook_id: int,
        guid: str,
        event: str,
        action: str | None,
        body: bytes,
        status_code: int,
        delivered_at: str,
        *,
        status: str | None,
        redelivery: bool,
        duration: float,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> HookDelivery:
        repository_id = self._repository_id(repo)
        existing = self.hook_deliveries.setdefault((repo.lower(), hook_id), [])
        count = sum(len(v) for v in self.hook_deliveries.values())
        headers = headers or {
            "Accept": "*/*",
            "Content-Type": content_type,
            "User-Agent": "GitHub-Hookshot/fake",
            "X-GitHub-Delivery": guid,
            "X-GitHub-Event": event,
            "X-GitHub-Hook-ID": str(hook_id),
            "X-GitHub-Hook-Installation-Target-ID": str(repository_id),
            "X-GitHub-Hook-Installation-Target-Type": "repository",
        }
        entry = HookDelivery(
            id=40_000_000_000 + count + 1,
            guid=guid,
            delivered_at=delivered_at,
            redelivery=redelivery,
            status_code=status_code,
            status=status or delivery_status(status_code),
            event=event,
            action=action,
            repository_id=repository_id,
            body=body,
            headers=headers,
            duration=duration,
        )
        existing.append(entry)
        return entry

    def _newest_first(self, repo: str, hook_id: int) -> list[HookDelivery]:
        listing = self.hook_deliveries.get((repo.lower(), hook_id), [])
        return sorted(listing, key=lambda d: (d.delivered_at, d.id), reverse=True)

    def _repository_id(self, repo: str) -> int:
        return self.repository_ids.setdefault(repo.lower(), 515_435_940 + len(self.repository_ids))

    def _repository_named(self, repository_id: str) -> str | None:
        """The (lower-case) repository of a `/repositories/{id}/...` path."""
        by_id = {number: name for name, number in self.repository_ids.items()}
        return by_id.get(int(repository_id))

    def _new_issue(self, repo: str, title: str, body: str | None, login: str) -> dict[str, Any]:
        issues = self.issues.setdefault(repo.lower(), {})
        self._repository_id(repo)
        number = max(issues, default=0) + 1
        issues[number] = issue_object(repo, number, title, body, login)
        return issues[number]

    # --- the server --------------------------------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request(environ)
        response = self._answer(request)
        return response(environ, start_response)

    def _answer(self, request: Request) -> Response:
        path = request.path
        with self._lock:
            self.requests.append(request.full_path.rstrip("?"))
            self.last_headers = dict(request.headers)
            if request.method != "GET":
                self.writes.append(Write(request.method, path, request.get_json(silent=True)))
            script = next(
                (s for s in self.scripts if s[0].search(path) and s[1].method in (None, request.method)), None
            )
            if script is not None:
                self.scripts.remove(script)
        if script is not None:
            answer = script[1]
            time.sleep(answer.delay)
            if answer.status:
                body = json.dumps(answer.body if answer.body is not None else {"message": "scripted"}).encode()
                body = answer.raw if answer.raw is not None else body
                if answer.trickle:
                    return Response(
                        _trickled(body, answer.trickle),
                        answer.status,
                        headers={**answer.headers, "Content-Length": str(len(body))},
                        content_type="application/json",
                    )
                return Response(body, answer.status, headers=answer.headers, content_type="application/json")
        where = r"(?:/repos/([^/]+/[^/]+)|/repositories/(\d+))"
        pulls = re.fullmatch(where + r"/pulls", path)
        if pulls and request.method == "GET":
            return self._pull_list(request, self._named(pulls))
        timeline = re.fullmatch(where + r"/issues/(\d+)/timeline", path)
        if timeline and request.method == "GET":
            return self._timeline(request, self._named(timeline), int(timeline.group(3)))
        hook = re.fullmatch(r"/repos/([^/]+/[^/]+)/hooks/(\d+)/deliveries(?:/(\d+)(/attempts)?)?", path)
        if hook and (request.method == "POST") == bool(hook.group(4)):
            return self._hook(request, hook.group(1), int(hook.group(2)), hook.group(3), bool(hook.group(4)))
        commits = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)/commits", path)
        if commits and request.method == "GET":
            return self._commits(request, commits.group(1), int(commits.group(2)))
        files = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)/files", path)
        if files:
            return self._files(request, files.group(1), int(files.group(2)))
        pull = re.fullmatch(r"/repos/([^/]+/[^/]+)/pulls/(\d+)", path)
        if pull:
            return self._pull(request, pull.group(1), int(pull.group(2)))
        compare = re.fullmatch(r"/repos/([^/]+/[^/]+)/compare/([0-9a-f]+)\.\.\.([0-9a-f]+)", path)
        if compare:
            return self._compare(request, compare.group(1), compare.group(3))
        issue = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues/(\d+)", path)
        if issue and request.method in ("GET", "PATCH"):
            return self._issue(request, issue.group(1), int(issue.group(2)))
        issues = re.fullmatch(r"/repos/([^/]+/[^/]+)/issues|/repositories/(\d+)/issues", path)
        if issues and request.method in ("GET", "POST"):
            return self._issues(request, issues.group(1), issues.group(2))
        return self._json(request, {"message": "Not Found"}, 404)

    def _issue(self, request: Request, repo: str, number: int) -> Response:
        status, answer = 200, None
        with self._lock:  # (`_json` takes the lock too: answer after releasing it)
            issue = self.issues.get(repo.lower(), {}).get(number)
            fields = (request.get_json(silent=True) or {}) if request.method == "PATCH" else {}
            refused = _invalid_issue(fields, creating=False)
            if issue is None:
                status, answer = 404, {"message": "Not Found"}
            elif refused is not None:
                status, answer = 422, refused
            else:
                if request.method == "PATCH":
                    _apply(issue, fields)
                answer = copy.deepcopy(issue)
        return self._json(request, answer, status)

    def _issues(self, request: Request, repo: str | None, repository_id: str | None) -> Response:
        with self._lock:  # (`_json` takes the lock too: answer after releasing it)
            if repo is None:
                by_id = {number: name for name, number in self.repository_ids.items()}
                repo = by_id.get(int(repository_id or 0))
            fields = (request.get_json(silent=True) or {}) if request.method == "POST" else {}
            refused = _invalid_issue(fields, creating=True) if request.method == "POST" else None
            created = None
            if repo is not None and request.method == "POST" and refused is None:
                created = copy.deepcopy(self._new_issue(repo, fields["title"], fields.get("body"), self.login))
            listing = [copy.deepcopy(i) for i in self.issues.get((repo or "").lower(), {}).values()]
            repository_id = str(self.repository_ids.get((repo or "").lower(), 0))
        if repo is None:
            return self._json(request, {"message": "Not Found"}, 404)
        if refused is not None:
            return self._json(request, refused, 422)
        if created is not None:
            location = f"{self.url}/repos/{repo}/issues/{created['number']}"
            return self._json(request, created, 201, {"Location": location})
        args = request.args
        state = args.get("state", "open")  # GitHub's default lists open issues only
        if state != "all":
            listing = [i for i in listing if i["state"] == state]
        if "creator" in args:
            listing = [i for i in listing if i["user"]["login"].lower() == args["creator"].lower()]
        listing.sort(key=lambda i: int(i["number"]), reverse=args.get("direction", "desc") == "desc")
        return self._page(request, f"{self.url}/repositories/{repository_id}/issues", listing)

    def _page(self, request: Request, base: str, listing: list[Any]) -> Response:
        """One page of `listing`, with `Link` headers to the others under `base`, keeping the query."""
        per_page = min(int(request.args.get("per_page", 30)), 100)
        page = int(request.args.get("page", 1))
        last = max(1, -(-len(listing) // per_page))
        query = {k: v for k, v in request.args.items() if k != "page"} | {"per_page": str(per_page)}
        links = []
        if page < last:
            links.append(f'<{base}?{urlencode(query | {"page": page + 1})}>; rel="next"')
            links.append(f'<{base}?{urlencode(query | {"page": last})}>; rel="last"')
        if page > 1:
            links.append(f'<{base}?{urlencode(query | {"page": page - 1})}>; rel="prev"')
            links.append(f'<{base}?{urlencode(query | {"page": 1})}>; rel="first"')
        body = listing[(page - 1) * per_page : page * per_page]
        return self._json(request, body, 200, {"Link": ", ".join(links)} if links else {})

    def _named(self, match: re.Match[str]) -> str | None:
        """The repository of a route matched as `/repos/{o}/{r}` or `/repositories/{id}`."""
        if match.group(1):
            return match.group(1)
        with self._lock:
            return self._repository_named(match.group(2))

    def _pull_list(self, request: Request, repo: str | None) -> Response:
        args = request.args
        state, sort = args.get("state", "open"), args.get("sort", "created")
        direction = args.get("direction", "desc" if sort == "created" else "asc")
        refused = [
            {"resource": "Search", "field": name, "code": "invalid"}
            for name, value, allowed in (
                ("state", state, ("open", "closed", "all")),
                ("sort", sort, ("created", "updated", "popularity", "long-running")),
                ("direction", direction, ("asc", "desc")),
            )
            if value not in allowed
        ]
        if refused:
            return self._json(request, {"message": "Validation Failed", "errors": refused, "status": "422"}, 422)
        if sort not in ("created", "updated"):
            return self._json(request, {"message": f"the fake GitHub does not sort by {sort}"}, 400)
        if repo is None:
            return self._json(request, {"message": "Not Found"}, 404)
        with self._lock:
            listing = [
                list_item(pr)
                for number, pr in self.pull_requests.get(repo.lower(), {}).items()
                if (repo.lower(), number) not in self.deleted_pulls
            ]
            repository_id = self._repository_id(repo)
        if state != "all":
            listing = [pr for pr in listing if pr["state"] == state]
        if "base" in args:
            listing = [pr for pr in listing if pr["base"]["ref"] == args["base"]]
        if "head" in args:
            listing = [pr for pr in listing if pr["head"]["label"].lower() == args["head"].lower()]
        key = "created_at" if sort == "created" else "updated_at"
        listing.sort(key=lambda pr: (pr[key], pr["number"]), reverse=direction == "desc")
        return self._page(request, f"{self.url}/repositories/{repository_id}/pulls", listing)

    def _commits(self, request: Request, repo: str, number: int) -> Response:
        with self._lock:
            key = (repo.lower(), number)
            known = key in self.commits or key in self.pulls or number in self.pull_requests.get(key[0], {})
            listing = copy.deepcopy(self.commits.get(key, []))
        if not known or key in self.deleted_pulls:
            return self._json(request, {"message": "Not Found"}, 404)
        return self._page(request, f"{self.url}/repos/{repo}/pulls/{number}/commits", listing)

    def _timeline(self, request: Request, repo: str | None, number: int) -> Response:
        with self._lock:
            key = ((repo or "").lower(), number)
            known = key in self.timelines or number in self.pull_requests.get(key[0], {})
            known = known or number in self.issues.get(key[0], {})
            events = copy.deepcopy(self.timelines.get(key, []))
            repository_id = self._repository_id(repo) if repo else 0
        if repo is None or not known or key in self.deleted_pulls:
            return self._json(request, {"message": "Not Found"}, 404)
        return self._page(request, f"{self.url}/repositories/{repository_id}/issues/{number}/timeline", events)

    def _hook(self, request: Request, repo: str, hook_id: int, delivery_id: str | None, attempt: bool) -> Response:
        with self._lock:
            listing = self._newest_first(repo, hook_id)
        if delivery_id is None:
            return self._hook_deliveries(request, repo, hook_id, listing)
        found = next((d for d in listing if d.id == int(delivery_id)), None)
        if found is None:
            return self._json(request, {"message": "Not Found"}, 404)
        if not attempt:
            return self._json(request, found.detail(self.webhook_target))
        self._redeliver(repo, hook_id, found)
        return self._json(request, {}, 202)

    def _hook_deliveries(self, request: Request, repo: str, hook_id: int, listing: list[HookDelivery]) -> Response:
        args = request.args
        if "redelivery" in args:
            listing = [d for d in listing if d.redelivery == (args["redelivery"].lower() == "true")]
        per_page = min(int(args.get("per_page", 30)), 100)
        start = 0
        if "cursor" in args:
            ids = [f"v1_{d.id}" for d in listing]
            if args["cursor"] not in ids:
                return self._json(request, {"message": "Bad Request: unknown cursor"}, 400)
            start = ids.index(args["cursor"])
        page = [d.item() for d in listing[start : start + per_page]]
        headers = {}
        if start + per_page < len(listing):
            query = {k: v for k, v in args.items() if k != "cursor"} | {"per_page": str(per_page)}
            query["cursor"] = f"v1_{listing[start + per_page].id}"
            headers["Link"] = f'<{self.url}/repos/{repo}/hooks/{hook_id}/deliveries?{urlencode(query)}>; rel="next"'
        return self._json(request, page, 200, headers)

    def _redeliver(self, repo: str, hook_id: int, original: HookDelivery) -> None:
        """Post the original body again, with its original headers and a fresh signature, and list
        the attempt with what the target answered."""
        with self._lock:
            target, secret = self.webhook_target, self.webhook_secret
        headers = {k: v for k, v in original.headers.items() if not k.startswith("X-Hub-Signature")}
        headers |= signature_headers(secret, original.body)
        began = time.monotonic()
        status_code, status, response = 0, "failed to connect to host", ""
        if callable(target):
            status_code = int(target(dict(headers), original.body))
            status = delivery_status(status_code)
        elif target is not None:
            try:
                answer = httpx.post(target, content=original.body, headers=headers, timeout=REDELIVERY_TIMEOUT)
                status_code, status, response = answer.status_code, delivery_status(answer.status_code), answer.text
            except httpx.TimeoutException:
                status = "timed out"
            except httpx.HTTPError:
                pass
        with self._lock:
            entry = self._add_delivery(
                repo,
                hook_id,
                original.guid,
                original.event,
                original.action,
                original.body,
                status_code,
                _now(),
                status=status,
                redelivery=True,
                duration=round(time.monotonic() - began, 2),
                content_type=original.headers.get("Content-Type", "application/json"),
                headers=headers,
            )
            entry.response = response

    def _pr(self, repo: str, number: int) -> PullRequestFiles | None:
        with self._lock:
            if (repo.lower(), number) in self.deleted_pulls:
                return None
            return self.pulls.get((repo.lower(), number))

    def _files(self, request: Request, repo: str, number: int) -> Response:
        pr = self._pr(repo, number)
        if pr is None:
            return self._json(request, {"message": "Not Found"}, 404)
        listing = pr.heads[pr.head][:3000]  # GitHub lists at most 3,000 files
        return self._page(request, f"{self.url}/repos/{repo}/pulls/{number}/files", listing)

    def _pull(self, request: Request, repo: str, number: int) -> Response:
        with self._lock:
            deleted = (repo.lower(), number) in self.deleted_pulls
            stored = copy.deepcopy(self.pull_requests.get(repo.lower(), {}).get(number))
        if deleted:
            return self._json(request, {"message": "Not Found"}, 404)
        if stored is not None:
            return self._json(request, stored)
        pr = self._pr(repo, number)
        if pr is None:
            return self._json(request, {"message": "Not Found"}, 404)
        body = copy.deepcopy(_PULL)
        body["number"] = number
        body["head"]["sha"] = pr.head
        return self._json(request, body)

    def _compare(self, request: Request, repo: str, head: str) -> Response:
        for pr in list(self.pulls.values()):
            if head in pr.heads:
                return self._json(request, {"status": "ahead", "files": pr.heads[head][:300]})
        return self._json(request, {"message": "Not Found"}, 404)

    def _json(self, request: Request, body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        raw = json.dumps(body).encode()
        etag = '"' + hashlib.sha1(raw).hexdigest() + '"'
        not_modified = status == 200 and request.headers.get("If-None-Match") == etag
        with self._lock:
            if status < 400 and not not_modified:  # GitHub: a 304 does not count against the rate limit
                self.remaining = max(0, self.remaining - 1)
            remaining = self.remaining
        common = {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": str(remaining),
            "x-ratelimit-reset": str(int(time.time()) + 3600),
            "x-ratelimit-resource": "core",
            "ETag": etag,
            **(headers or {}),
        }
        if not_modified:
            return Response(b"", 304, headers=common)
        return Response(raw, status, headers=common, content_type="application/json; charset=utf-8")


def _trickled(body: bytes, every: float) -> Iterable[bytes]:
    for index in range(len(body)):
        time.sleep(every)
        yield body[index : index + 1]


def _invalid_issue(fields: dict[str, Any], *, creating: bool) -> dict[str, Any] | None:
    """GitHub's 422 "Validation Failed" for what the fake checks: a title, the body's length, the state."""
    errors = []
    title = fields.get("title")
    if (creating or "title" in fields) and (not isinstance(title, str) or not title.strip()):
        errors.append({"resource": "Issue", "code": "missing_field", "field": "title"})
    body = fields.get("body")
    if isinstance(body, str) and len(body) > ISSUE_BODY_LIMIT:
        message = f"body is too long (maximum is {ISSUE_BODY_LIMIT} characters)"
        errors.append({"resource": "Issue", "code": "custom", "field": "body", "message": message})
    if fields.get("state") not in (None, "open", "closed"):
        errors.append({"resource": "Issue", "code": "invalid", "field": "state"})
    if not errors:
        return None
    return {"message": "Validation Failed", "errors": errors, "status": "422"}


def _apply(issue: dict[str, Any], fields: dict[str, Any]) -> None:
    """A PATCH as GitHub applies it: given fields only; `state_reason` only with a change of state."""
    for name in ("title", "body"):
        if name in fields:
            issue[name] = fields[name]
    state = fields.get("state")
    if state == "closed" and issue["state"] == "open":
        issue.update(state="closed", closed_at=_now(), state_reason=fields.get("state_reason") or "completed")
    elif state == "open" and issue["state"] == "closed":
        issue.update(state="open", closed_at=None, state_reason=fields.get("state_reason") or "reopened")
    issue["updated_at"] = _now()
