"""A local GitHub for bench/service.py: answers the tracker's head fetches at once, in a process of its own.

The tracker's fetch job (workers.jobs.fetch_head_files -> tracker.github.fetch) asks
`GET /repos/{o}/{r}/pulls/{n}/files?per_page=100` and reads the head the listing belongs to from its
entries' `contents_url` (`?ref=<sha>`); when that is not the head it wanted (the PR moved on), it
stores the listing under that newer head and asks `GET /repos/{o}/{r}/compare/{base}...{head}` for the
wanted one; a listing without refs makes it ask `GET /repos/{o}/{r}/pulls/{n}` for the head. A head
whose PR the ledger already shows at a later head is asked of the compare endpoint at once.

GitHub answers for a PR's head *now*. So does this fake: the PR's current head is the head of its
latest version in the ledger (`pr_versions`, newest `at`, written by the workers when they apply a
delivery, before they queue the head's fetch), read per request from the database given by
--database-url (read-only queries). The files of a PR are the changed files of the real Megatron-LM PR
its title comes from (bench/_stories.py; a `(vN)` retitle suffix is ignored), at most --max-files of
them (one page), else those of a real PR chosen by the PR number; each with GitHub's entry shape
(sha, filename, status, additions, deletions, changes, blob/raw/contents URLs naming the head,
previous_filename for renames) and a unified-diff `patch` of its line counts, at most
--patch-lines lines each side (none for binary files). A compare answers `status: ahead` with the
files of the PR that head belongs to. The list of PRs (`GET /repos/{o}/{r}/pulls`, the first request
of the reconciliation `tracker schedule` queues every hour, sorted by `updated` descending) is empty:
the bench's PRs were last updated in past months, so GitHub's list would end the reconciliation at
its first item, before the lookback (a day) anyway.

Every answer carries generous rate-limit headers (x-ratelimit-limit 1,000,000, remaining counting
down, reset an hour ahead, resource core) and an ETag (a request with a matching If-None-Match gets
304, as GitHub does). `GET /` answers 200 (readiness); `GET /_fake/stats` the requests served per
route (`files`, `files 304`, `compare`, `pull`, `files 404`, ...). Unknown PRs and routes answer 404
`{"message": "Not Found"}`.

    python bench/_fake_github_server.py --port 8765 --database-url sqlite:////tmp/x/var/tracker.db
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import signal
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

HERE = Path(__file__).resolve().parent
for entry in (str(HERE), str(HERE.parent)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from sqlalchemy import create_engine, text  # noqa: E402

RATE_LIMIT = 1_000_000
_STATUS = {"A": "added", "M": "modified", "D": "removed", "R": "renamed"}
# Paths of the Megatron-LM tree, for the rare PR whose real one lists no files (or no data file).
FALLBACK_PATHS = (
    "megatron/core/transformer/attention.py",
    "megatron/core/transformer/moe/router.py",
    "megatron/core/models/gpt/gpt_model.py",
    "megatron/core/distributed/param_and_grad_buffer.py",
    "megatron/training/arguments.py",
    "tests/unit_tests/transformer/test_attention.py",
    "docs/source/user-guide/features/moe.md",
)
FILES_ROUTE = re.compile(r"/repos/([^/]+/[^/]+)/pulls/(\d+)/files")
PULL_ROUTE = re.compile(r"/repos/([^/]+/[^/]+)/pulls/(\d+)")
PULLS_ROUTE = re.compile(r"/repos/([^/]+/[^/]+)/pulls")
COMPARE_ROUTE = re.compile(r"/repos/([^/]+/[^/]+)/compare/([0-9a-fA-F]+)\.\.\.([0-9a-fA-F]+)")


def patch_text(path: str, added: int, deleted: int, cap: int) -> str:
    """One hunk: three lines of context, then the deleted and added lines (at most `cap` each)."""
    minus, plus = min(deleted, cap), min(added, cap)
    stem = Path(path).stem.replace("-", "_") or "module"
    lines = [f"@@ -40,{minus + 3} +40,{plus + 3} @@ def {stem}_setup(config):"]
    lines += [f"     # {stem}: unchanged line {k}" for k in range(3)]
    lines += [f"-    old_{stem}_{k} = build(config, {k})" for k in range(minus)]
    lines += [f"+    {stem}_{k} = build(config, {k}, strict=True)" for k in range(plus)]
    return "\n".join(lines)


class Catalogue:
    """The files each PR lists (paths and line counts from the real PRs; head-free parts precomputed)."""

    def __init__(self, max_files: int, patch_lines: int) -> None:
        from _stories import real_pull_requests

        self.max_files, self.patch_lines = max_files, patch_lines
        self.by_title: dict[str, tuple[dict[str, Any], ...]] = {}
        self.with_files: list[tuple[dict[str, Any], ...]] = []
        for pr in real_pull_requests():
            if pr.files:
                self.by_title.setdefault(pr.title, pr.files)
                self.with_files.append(pr.files)
        if not self.with_files:
            self.with_files = [tuple({"status": "M", "path": p, "added": 12, "deleted": 3} for p in FALLBACK_PATHS)]
        self._made: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def files(self, repo: str, number: int, title: str) -> list[dict[str, Any]]:
        """The head-free part of a PR's entries (filename, status, counts, patch)."""
        key = (repo, number)
        with self._lock:
            made = self._made.get(key)
        if made is not None:
            return made
        real = self.by_title.get(re.sub(r" \(v\d+\)$", "", title))
        if not real:
            digest = int(hashlib.sha256(f"{repo}#{number}".encode()).hexdigest()[:12], 16)
            real = self.with_files[digest % len(self.with_files)]
        made = []
        for item in real[: self.max_files]:
            added, deleted = int(item.get("added") or 0), int(item.get("deleted") or 0)
            status = _STATUS.get(str(item.get("status", "M"))[:1], "modified")
            entry: dict[str, Any] = {
                "filename": item["path"],
                "status": status,
                "additions": added,
                "deletions": deleted,
                "changes": added + deleted,
            }
            if not item.get("binary"):
                entry["patch"] = patch_text(item["path"], added, deleted, self.patch_lines)
            if status == "renamed" and item.get("old_path"):
                entry["previous_filename"] = item["old_path"]
            made.append(entry)
        with self._lock:
            self._made[key] = made
        return made


def listing(full_name: str, head_sha: str, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GitHub's files-listing entries of `files` at `head_sha` (key order as GitHub sends them)."""
    out = []
    for item in files:
        name = item["filename"]
        entry: dict[str, Any] = {
            "sha": hashlib.sha1(f"{head_sha}:{name}".encode()).hexdigest(),
            "filename": name,
            "status": item["status"],
            "additions": item["additions"],
            "deletions": item["deletions"],
            "changes": item["changes"],
            "blob_url": f"https://github.com/{full_name}/blob/{head_sha}/{name}",
            "raw_url": f"https://github.com/{full_name}/raw/{head_sha}/{name}",
            "contents_url": f"https://api.github.com/repos/{full_name}/contents/{name}?ref={head_sha}",
        }
        if "patch" in item:
            entry["patch"] = item["patch"]
        if "previous_filename" in item:
            entry["previous_filename"] = item["previous_filename"]
        out.append(entry)
    return out


class Ledger:
    """The PRs' current heads, read from the tracker's ledger (read-only queries)."""

    def __init__(self, url: str) -> None:
        options: dict[str, Any] = {}
        if url.startswith("sqlite"):
            options["connect_args"] = {"timeout": 30}
        self.engine = create_engine(url, pool_size=8, max_overflow=8, **options)
        self.head_of: dict[str, tuple[int, str]] = {}  # head sha -> (number, title), as seen
        self._rowid = 0  # SQLite: the last pr_versions row `pull_of` has read
        self._lock = threading.Lock()

    def current(self, repo: str, number: int) -> tuple[str, str] | None:
        """(head sha, title) of the PR's latest version, remembering each of its heads' PR."""
        query = text(
            "SELECT head_sha, title FROM pr_versions WHERE repo = :repo AND number = :number ORDER BY at, delivery_id"
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query, {"repo": repo, "number": number}).all()
        if not rows:
            return None
        with self._lock:
            for head_sha, title in rows:
                self.head_of.setdefault(head_sha, (number, title))
        return str(rows[-1][0]), str(rows[-1][1])

    def pull_of(self, repo: str, head_sha: str) -> tuple[int, str] | None:
        """The PR a head belongs to (a compare names no PR). pr_versions has no index on head_sha, so on
        SQLite the rows added since the last look are read by rowid (each row once in all) rather than the
        table scanned for every unknown head; on another database, one scan for this head."""
        with self._lock:
            known = self.head_of.get(head_sha)
        if known is not None:
            return known
        with self.engine.connect() as conn:
            if self.engine.dialect.name == "sqlite":
                with self._lock:
                    since = self._rowid
                rows = conn.execute(
                    text("SELECT rowid, head_sha, number, title FROM pr_versions WHERE rowid > :since ORDER BY rowid"),
                    {"since": since},
                ).all()
                with self._lock:
                    for rowid, sha, number, title in rows:
                        self.head_of.setdefault(sha, (int(number), str(title)))
                        self._rowid = max(self._rowid, int(rowid))
                    return self.head_of.get(head_sha)
            query = text("SELECT number, title FROM pr_versions WHERE repo = :repo AND head_sha = :sha LIMIT 1")
            row = conn.execute(query, {"repo": repo, "sha": head_sha}).first()
        return (int(row[0]), str(row[1])) if row is not None else None


class FakeGitHub:
    def __init__(self, ledger: Ledger, catalogue: Catalogue) -> None:
        self.ledger, self.catalogue = ledger, catalogue
        self.counts: Counter[str] = Counter()
        self.remaining = RATE_LIMIT
        self.started = time.time()
        self.lock = threading.Lock()
        self.url = ""  # set once the server is bound: `Link` headers are absolute, as GitHub's

    def answer(self, method: str, target: str, headers: Any) -> tuple[int, bytes, dict[str, str]]:
        parts = urlsplit(target)
        path, query = parts.path.rstrip("/") or "/", parse_qs(parts.query)
        route, status, extra = "other", 404, {}
        body: Any = {"message": "Not Found"}
        if method == "GET" and path == "/":
            route, status, body = "root", 200, {"current_user_url": "/user"}
        elif method == "GET" and path == "/_fake/stats":
            with self.lock:
                stats = {"requests": dict(self.counts), "since": self.started}
            return 200, json.dumps(stats).encode(), {"Content-Type": "application/json"}
        elif method == "GET" and (match := FILES_ROUTE.fullmatch(path)):
            route = "files"
            found = self._files(match.group(1), int(match.group(2)), query)
            if found is not None:
                status, body, extra = 200, found[0], found[1]
        elif method == "GET" and (match := PULL_ROUTE.fullmatch(path)):
            route = "pull"
            full_name, number = match.group(1), int(match.group(2))
            current = self.ledger.current(full_name.lower(), number)
            if current is not None:
                status, body = 200, self._pull(full_name, number, *current)
        elif method == "GET" and PULLS_ROUTE.fullmatch(path):
            route, status, body = "pulls", 200, []  # see the module docstring: no PR updated lately
        elif method == "GET" and (match := COMPARE_ROUTE.fullmatch(path)):
            route = "compare"
            full_name, base, head = match.groups()
            pull = self.ledger.pull_of(full_name.lower(), head)
            if pull is not None:
                files = self.catalogue.files(full_name.lower(), pull[0], pull[1])
                status = 200
                body = {
                    "status": "ahead",
                    "ahead_by": 1,
                    "behind_by": 0,
                    "total_commits": 1,
                    "base_commit": {"sha": base},
                    "commits": [{"sha": head}],
                    "files": listing(full_name, head, files)[:300],
                }
        raw = json.dumps(body, separators=(",", ":")).encode()
        etag = '"' + hashlib.sha1(raw).hexdigest() + '"'
        not_modified = status == 200 and headers.get("If-None-Match") == etag
        with self.lock:
            self.counts[f"{route} 304" if not_modified else route if status < 400 else f"{route} {status}"] += 1
            if status < 400 and not not_modified:  # GitHub: a 304 does not count against the rate limit
                self.remaining = max(1, self.remaining - 1)
            remaining = self.remaining
        out = {
            "Content-Type": "application/json; charset=utf-8",
            "x-ratelimit-limit": str(RATE_LIMIT),
            "x-ratelimit-remaining": str(remaining),
            "x-ratelimit-used": str(RATE_LIMIT - remaining),
            "x-ratelimit-reset": str(int(time.time()) + 3600),
            "x-ratelimit-resource": "core",
            "ETag": etag,
            **extra,
        }
        if not_modified:
            return 304, b"", out
        return status, raw, out

    def _files(self, full_name: str, number: int, query: dict[str, list[str]]) -> tuple[Any, dict[str, str]] | None:
        current = self.ledger.current(full_name.lower(), number)
        if current is None:
            return None
        head_sha, title = current
        entries = listing(full_name, head_sha, self.catalogue.files(full_name.lower(), number, title))
        per_page = min(100, max(1, int((query.get("per_page") or ["30"])[0])))
        page = max(1, int((query.get("page") or ["1"])[0]))
        last = max(1, -(-len(entries) // per_page))
        links = []
        base = f"/repos/{full_name}/pulls/{number}/files"
        if page < last:
            links.append(f'<{self.url}{base}?{urlencode({"per_page": per_page, "page": page + 1})}>; rel="next"')
            links.append(f'<{self.url}{base}?{urlencode({"per_page": per_page, "page": last})}>; rel="last"')
        return entries[(page - 1) * per_page : page * per_page], ({"Link": ", ".join(links)} if links else {})

    @staticmethod
    def _pull(full_name: str, number: int, head_sha: str, title: str) -> dict[str, Any]:
        owner = full_name.split("/", 1)[0]
        return {
            "url": f"https://api.github.com/repos/{full_name}/pulls/{number}",
            "number": number,
            "state": "open",
            "title": title,
            "head": {"label": f"{owner}:feature-{number}", "ref": f"feature-{number}", "sha": head_sha},
            "base": {"label": f"{owner}:main", "ref": "main", "sha": "0" * 40},
        }


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a burst of fetch jobs' connections must not be refused


def handler_for(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as GitHub
        # Headers and body in one write, sent at once: written apart without TCP_NODELAY, the body
        # waited for the client's delayed ACK (Nagle), about 40 ms an answer, and so did the fetch jobs.
        wbufsize = 1 << 16
        disable_nagle_algorithm = True
        server_version = "GitHub.com"
        sys_version = ""

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            try:
                status, body, headers = fake.answer("GET", self.path, self.headers)
            except Exception as exc:  # noqa: BLE001 - a 500 the client retries, and the reason in the log
                print(f"fake GitHub: {self.path}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                status, body, headers = 500, b'{"message":"Server Error"}', {"Content-Type": "application/json"}
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)  # buffered: http.server flushes headers and body together after do_GET

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True, help="the tracker's ledger (read-only queries)")
    parser.add_argument("--max-files", type=int, default=100, help="files listed per PR at most (one page)")
    parser.add_argument("--patch-lines", type=int, default=40, help="deleted and added lines per patch at most")
    args = parser.parse_args()
    fake = FakeGitHub(Ledger(args.database_url), Catalogue(args.max_files, args.patch_lines))
    server = Server(("127.0.0.1", args.port), handler_for(fake))
    fake.url = f"http://127.0.0.1:{args.port}"
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    print(f"fake GitHub at {fake.url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
