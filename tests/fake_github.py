"""A local stand-in for api.github.com, serving GitHub's own example responses.

Bodies are GitHub's examples from ../shared/fixtures/github/rest/ (`pulls.list-files.200.json`,
`pulls.get.200.json`) with the fields a test controls (file names, patches, the head sha in the
URLs) filled in. It paginates with `Link` headers, answers `If-None-Match` with 304, and plays
scripted misbehaviour (rate limits, retry-after, 5xx, slow answers) before its normal answers.
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


def file_entry(repo: str, head_sha: str, spec: dict[str, Any] | str) -> dict[str, Any]:
    """A files-listing entry in GitHub's example shape; `spec` is a path or a dict of overrides."""
    spec = {"filename": spec} if isinstance(spec, str) else spec
    entry = copy.deepcopy(_FILE)
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
            script = next((s for s in self.scripts if s[0].search(path)), None)
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
        return self._json(request, {"message": "Not Found"}, 404)

    def _pr(self, repo: str, number: int) -> PullRequestFiles | None:
        with self._lock:
            return self.pulls.get((repo.lower(), number))

    def _files(self, request: Request, repo: str, number: int) -> Response:
        pr = self._pr(repo, number)
        if pr is None:
            return self._json(request, {"message": "Not Found"}, 404)
        listing = pr.heads[pr.head][:3000]  # GitHub lists at most 3,000 files
        per_page = min(int(request.args.get("per_page", 30)), 100)
        page = int(request.args.get("page", 1))
        last = max(1, -(-len(listing) // per_page))
        links = []
        base = f"{self.url}/repos/{repo}/pulls/{number}/files"
        if page < last:
            links.append(f'<{base}?{urlencode({"per_page": per_page, "page": page + 1})}>; rel="next"')
            links.append(f'<{base}?{urlencode({"per_page": per_page, "page": last})}>; rel="last"')
        if page > 1:
            links.append(f'<{base}?{urlencode({"per_page": per_page, "page": page - 1})}>; rel="prev"')
            links.append(f'<{base}?{urlencode({"per_page": per_page, "page": 1})}>; rel="first"')
        body = listing[(page - 1) * per_page : page * per_page]
        return self._json(request, body, 200, {"Link": ", ".join(links)} if links else {})

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
