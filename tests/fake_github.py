"""A local stand-in for api.github.com, serving GitHub's own example responses.

Bodies are GitHub's examples from ../shared/fixtures/github/rest/ (`pulls.list-files.200.json`,
`pulls.get.200.json`) with the fields a test controls (file names, patches, the head sha in the
URLs) filled in. It paginates with `Link` headers, answers `If-None-Match` with 304, and plays
scripted misbehaviour (rate limits, retry-after, 5xx, slow answers) before its normal answers.

Issues are stateful per test (emptied by `reset`): `GET /repos/{o}/{r}/issues/{n}`, `GET
/repos/{o}/{r}/issues` (state, creator, sort, direction, per_page; pull requests included, as GitHub
does; the next pages under `/repositories/{id}/issues`, as GitHub's own `Link` headers give them),
`POST /repos/{o}/{r}/issues` (201) and `PATCH /repos/{o}/{r}/issues/{n}`. Every request other than
GET is kept in `writes`, scripted refusals included, so a test can say "nothing was written".
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from tests.paths import FIXTURES

REST = FIXTURES / "rest"
_FILE = json.loads((REST / "pulls.list-files.200.json").read_text())[0]
_PULL = json.loads((REST / "pulls.get.200.json").read_text())
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

    # --- what tests set up ------------------------------------------------------------------------

    def set_files(self, repo: str, number: int, head_sha: str, files: list[dict[str, Any] | str]) -> None:
        """Give a head its files and make it the PR's current head."""
        with self._lock:
            pr = self.pulls.setdefault((repo.lower(), number), PullRequestFiles())
            pr.heads[head_sha] = [file_entry(repo, head_sha, spec) for spec in files]
            pr.head, pr.head_at = head_sha, "9999"

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

    def _new_issue(self, repo: str, title: str, body: str | None, login: str) -> dict[str, Any]:
        issues = self.issues.setdefault(repo.lower(), {})
        self.repository_ids.setdefault(repo.lower(), 515_435_940 + len(self.repository_ids))
        number = max(issues, default=0) + 1
        issues[number] = issue_object(repo, number, title, body, login)
        return issues[number]

    # --- the server --------------------------------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        request = Request(environ)
        response = self._answer(request)
        return response(environ, start_response)  # type: ignore[no-any-return]

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
                body = json.dumps(answer.body if answer.body is not None else {"message": "scripted"})
                return Response(body, answer.status, headers=answer.headers, content_type="application/json")
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

    def _pr(self, repo: str, number: int) -> PullRequestFiles | None:
        with self._lock:
            return self.pulls.get((repo.lower(), number))

    def _files(self, request: Request, repo: str, number: int) -> Response:
        pr = self._pr(repo, number)
        if pr is None:
            return self._json(request, {"message": "Not Found"}, 404)
        listing = pr.heads[pr.head][:3000]  # GitHub lists at most 3,000 files
        return self._page(request, f"{self.url}/repos/{repo}/pulls/{number}/files", listing)

    def _pull(self, request: Request, repo: str, number: int) -> Response:
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
        with self._lock:
            if status < 400:
                self.remaining = max(0, self.remaining - 1)
            remaining = self.remaining
        etag = '"' + hashlib.sha1(raw).hexdigest() + '"'
        common = {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": str(remaining),
            "x-ratelimit-reset": str(int(time.time()) + 3600),
            "x-ratelimit-resource": "core",
            "ETag": etag,
            **(headers or {}),
        }
        if status == 200 and request.headers.get("If-None-Match") == etag:
            with self._lock:
                self.remaining += 1  # GitHub: a 304 does not count against the primary rate limit
            return Response(b"", 304, headers=common)
        return Response(raw, status, headers=common, content_type="application/json; charset=utf-8")


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
