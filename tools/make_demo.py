"""Build the sample month `tracker demo` loads: tracker/demo/megatron-lm-2026-05.json.gz.

Run once from the repository root (the bundle is committed; running it again gives the same bytes):

    .venv/bin/python tools/make_demo.py

What is real and what is made up
- Real, from the shared test data, data/megatron/merged-prs-2026-03-to-06.jsonl (public NVIDIA/Megatron-LM
  history): every PR's number, title, base branch and changed paths (with their status and line
  counts), and the merge instant of every PR the sample merges. The month's PRs are a spread of the
  PRs merged in May 2026 (Asia/Shanghai, by merge time) plus every dev/main pair merged in May; the
  PRs still open or closed without merge at the month's end are real PRs merged in early June.
- Made up, by a seeded generator (as bench/fixtures/scenario.py does; the data README allows it): the lives
  before the merge (opening times, pushes, labels, one close and reopen), which June PRs were open on
  May 31 and which were closed unmerged then, the authors (GitHub's example user, Codertocat), and the
  patches (one or two lines naming the real change's line counts; real file contents are not in the
  data). Earlier heads of a PR change a leading part of its final head's files.

The webhook payloads are GitHub's example `pull_request.opened.json`, changed per delivery the way
bench/fixtures/factory.py does (action, numbers, state, instants, base, head, labels), then made small: the
`repository`, `sender`, `user`, `base.repo`/`head.repo` objects keep the few fields that name them
(the tracker reads `repository.full_name` only), and the example's `installation` (a GitHub App's;
a plain webhook sends none), `_links`, assignees, reviewers and the example objects' ids are left out.
Each delivery keeps a GUID-shaped id, derived from its content, like GitHub's `X-GitHub-Delivery`.

Each head's files are stored in the shape of GitHub's "List pull requests files" answer, so the
tracker's own conversion (tracker.github.fetch.changed_file) reads them and nothing asks GitHub.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench.fixtures lives in the work tree, not in the installed package
    sys.path.insert(0, str(ROOT))

from bench.fixtures.factory import pr_payload  # noqa: E402
from bench.fixtures.paths import MEGATRON, WEBHOOKS  # noqa: E402

REPO = "NVIDIA/Megatron-LM"
MONTH = "2026-05"
NEXT_MONTH = "2026-06"
TIMEZONE = "Asia/Shanghai"  # the data's months, and the tracker's default time zone
SEED = 2026_05
MERGED_PICKS = 52  # May PRs picked evenly by merge time (plus every dev/main pair merged in May)
STILL_OPEN = 10  # June PRs left open on May 31
CLOSED_UNMERGED = 3  # June PRs closed without merge in May (reopened and merged in June, outside the sample)
LABELS = ("Run tests", "Run functional tests", "Final Review", "Expert Review", "module: moe", "bug")
OUTPUT = ROOT / "tracker" / "demo" / f"megatron-lm-{MONTH}.json.gz"
HOUR = 3600

_STATUS = {"A": "added", "M": "modified", "D": "removed", "R": "renamed"}


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def local(day: str, hour: int = 0) -> datetime:
    year, month, dom = (int(part) for part in day.split("-"))
    return datetime(year, month, dom, hour, tzinfo=ZoneInfo(TIMEZONE)).astimezone(UTC)


def whole(moment: datetime) -> datetime:
    return moment.replace(microsecond=0)


# --- the real PRs ---------------------------------------------------------------------------------


def real_prs() -> dict[int, dict[str, Any]]:
    rows = [json.loads(line) for line in MEGATRON.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["pr_number"]: row for row in rows}


def choose(prs: dict[int, dict[str, Any]], rng: random.Random) -> tuple[list[int], list[int], list[int]]:
    """(merged in May, still open on May 31, closed unmerged in May): PR numbers."""
    may = sorted((pr for pr in prs.values() if pr["month_shanghai"] == MONTH), key=lambda p: p["committer_date"])
    step = len(may) / MERGED_PICKS
    picks = [may[int(index * step)] for index in range(MERGED_PICKS)]
    # Every PR of a dev/main pair merged in May, so the report has twins to describe once.
    picks += [pr for pr in may if any(twin["pr_number"] in prs for twin in pr["counterparts"])]
    merged: set[int] = set()
    for pr in picks:
        merged.add(pr["pr_number"])
        for twin in pr["counterparts"]:
            other = prs.get(twin["pr_number"])
            if other is not None and other["month_shanghai"] == MONTH:
                merged.add(other["pr_number"])
    # June PRs merged in the first half of June: plausibly open at May's end. The nightly syncs touch
    # hundreds of files and would only make the sample larger.
    june = sorted(
        (
            pr
            for pr in prs.values()
            if pr["month_shanghai"] == NEXT_MONTH
            and pr["committer_date"] < "2026-06-15"
            and pr["files_changed"] <= 60
            and "nightly sync" not in pr["title"].lower()
        ),
        key=lambda p: p["pr_number"],
    )
    later = rng.sample([pr["pr_number"] for pr in june], STILL_OPEN + CLOSED_UNMERGED)
    return sorted(merged), sorted(later[:STILL_OPEN]), sorted(later[STILL_OPEN:])


# --- files and patches -----------------------------------------------------------------------------


def listing_entry(number: int, head_sha: str, item: dict[str, Any]) -> dict[str, Any]:
    """One entry of GitHub's files listing for a real changed path, with a small synthetic patch."""
    status = _STATUS.get(item["status"], "modified")
    added, deleted = int(item.get("added") or 0), int(item.get("deleted") or 0)
    entry: dict[str, Any] = {
        "filename": item["path"],
        "status": status,
        "additions": added,
        "deletions": deleted,
        "changes": added + deleted,
        "contents_url": f"https://api.github.com/repos/{REPO}/contents/{item['path']}?ref={head_sha}",
    }
    if item.get("old_path"):
        entry["previous_filename"] = item["old_path"]
    if item.get("binary"):
        return entry  # GitHub lists no patch for a binary file
    note = f"sample patch: the real change adds {added} and deletes {deleted} lines"
    if status == "added":
        entry["patch"] = f"@@ -0,0 +1 @@\n+# {note}"
    elif status == "removed":
        entry["patch"] = f"@@ -1 +0,0 @@\n-# {note}"
    elif status == "renamed" and added + deleted == 0:
        pass  # a pure rename: GitHub lists no patch
    else:
        entry["patch"] = f"@@ -1 +1 @@\n-# before ({note})\n+# after ({note})"
    return entry


def head_files(pr: dict[str, Any], index: int, heads: int) -> list[dict[str, Any]]:
    """The real files of the PR's head `index` of `heads`: a growing leading part, all at the last."""
    files = pr["files"]
    if index == heads - 1:
        return list(files)
    return list(files[: max(1, len(files) * (index + 1) // heads)])


# --- payloads --------------------------------------------------------------------------------------

_TEMPLATE_REPO = "Codertocat/Hello-World"
_PR_NUMBER_URL = re.compile(r"/(pulls|pull|issues)/2(?=$|/|\.)")


def small(payload: dict[str, Any], number: int) -> dict[str, Any]:
    """The example payload with the repeated objects reduced to what names them (see the docstring)."""
    owner, name = REPO.split("/", 1)
    pr = payload["pull_request"]
    user = {"login": pr["user"]["login"], "type": pr["user"]["type"]}
    out_pr: dict[str, Any] = {}
    for key, value in pr.items():
        if key in ("id", "node_id", "_links", "assignee", "assignees", "requested_reviewers", "requested_teams"):
            continue
        if isinstance(value, str):
            value = _PR_NUMBER_URL.sub(rf"/\1/{number}", value.replace(_TEMPLATE_REPO, REPO))
        out_pr[key] = value
    out_pr["user"] = user
    out_pr["statuses_url"] = f"https://api.github.com/repos/{REPO}/statuses/{pr['head']['sha']}"
    for side in ("head", "base"):
        ref = pr[side]
        out_pr[side] = {
            "label": ref["label"],
            "ref": ref["ref"],
            "sha": ref["sha"],
            "user": {"login": ref["user"]["login"], "type": ref["user"]["type"]},
            "repo": {"name": name, "full_name": REPO, "private": False},
        }
    out_pr["labels"] = [{"name": label["name"], "color": label["color"], "default": False} for label in pr["labels"]]
    out: dict[str, Any] = {"action": payload["action"], "number": number, "pull_request": out_pr}
    for key in ("before", "after"):
        if key in payload:
            out[key] = payload[key]
    out["repository"] = {
        "name": name,
        "full_name": REPO,
        "private": False,
        "owner": {"login": owner, "type": "Organization"},
        "html_url": f"https://github.com/{REPO}",
        "url": f"https://api.github.com/repos/{REPO}",
    }
    out["sender"] = user
    return out


class Life:
    """One PR's life as deliveries, each carrying the PR's state at that moment (labels stay on)."""

    def __init__(self, pr: dict[str, Any], opened: datetime, heads: int) -> None:
        self.pr = pr
        self.heads = heads  # how many heads the PR will have had (its files grow towards the last)
        self.number = int(pr["pr_number"])
        self.opened_at = opened
        self.head = 0
        self.labels: tuple[str, ...] = ()
        self.closed_at: datetime | None = None
        self.merged_at: datetime | None = None
        self.story: list[dict[str, Any]] = []
        self.deliveries: list[dict[str, Any]] = []

    def head_sha(self, index: int | None = None) -> str:
        return hashlib.sha1(f"{REPO}#{self.number}@{self.head if index is None else index}".encode()).hexdigest()

    def emit(self, action: str, at: datetime, story_action: str | None = None) -> None:
        base = self.pr["branch"]
        payload = pr_payload(
            action,
            self.number,
            created_at=self.opened_at,
            updated_at=at,
            closed_at=self.closed_at,
            merged_at=self.merged_at,
            repo=REPO,
            title=self.pr["title"],
            base=base,
            head_sha=self.head_sha(),
            labels=self.labels,
            body=None,
        )
        pr = payload["pull_request"]
        pr["head"]["ref"] = f"pr-{self.number}"
        pr["head"]["label"] = f"Codertocat:pr-{self.number}"
        pr["base"]["label"] = f"NVIDIA:{base}"
        pr["base"]["sha"] = hashlib.sha1(f"{REPO}:{base}".encode()).hexdigest()
        pr["base"]["user"] = {"login": REPO.split("/", 1)[0], "type": "Organization"}
        files = head_files(self.pr, self.head, self.heads)
        pr["commits"] = self.head + 1
        pr["changed_files"] = len(files)
        pr["additions"] = sum(int(f.get("added") or 0) for f in files)
        pr["deletions"] = sum(int(f.get("deleted") or 0) for f in files)
        if pr["merged"]:
            pr["merge_commit_sha"] = hashlib.sha1(f"{REPO}#{self.number}:merge".encode()).hexdigest()
        body = json.dumps(small(payload, self.number), separators=(",", ":")).encode()
        tag = f"{REPO}#{self.number}:{action}@{iso(at)}:{len(self.deliveries)}"
        self.deliveries.append(
            {
                "event": "pull_request",
                "delivery_id": str(uuid.uuid5(uuid.NAMESPACE_URL, "tracker-demo:" + tag)),
                "received_at": int(at.timestamp() * 1000),
                "body": body.decode(),
            }
        )
        step: dict[str, Any] = {"action": story_action or action, "at": iso(at), "head": self.head_sha()}
        if self.labels:
            step["labels"] = list(self.labels)
        self.story.append(step)

    def opened(self) -> None:
        self.emit("opened", self.opened_at)

    def pushed(self, at: datetime) -> None:
        self.head += 1
        self.emit("synchronize", at)

    def labeled(self, at: datetime, label: str) -> None:
        self.labels = tuple(sorted({*self.labels, label}))
        self.emit("labeled", at)

    def closed(self, at: datetime) -> None:
        self.closed_at = at
        self.emit("closed", at)

    def reopened(self, at: datetime) -> None:
        self.closed_at = None
        self.emit("reopened", at)

    def merged(self, at: datetime) -> None:
        self.closed_at = self.merged_at = at
        self.emit("closed", at, story_action="merged")

    def record(self) -> dict[str, Any]:
        heads = self.head + 1
        assert heads == self.heads, (self.number, heads, self.heads)
        return {
            "number": self.number,
            "title": self.pr["title"],
            "base": self.pr["branch"],
            "life": self.story,
            "heads": [
                {
                    "sha": self.head_sha(index),
                    "files": [
                        listing_entry(self.number, self.head_sha(index), f) for f in head_files(self.pr, index, heads)
                    ],
                }
                for index in range(heads)
            ],
        }


def moments(rng: random.Random, start: datetime, end: datetime, count: int) -> list[datetime]:
    """`count` whole-second instants strictly between start and end, increasing."""
    span = (end - start).total_seconds()
    picked = sorted(rng.uniform(0.05, 0.95) * span for _ in range(count))
    out: list[datetime] = []
    for seconds in picked:
        moment = whole(start + timedelta(seconds=seconds))
        if out and moment <= out[-1]:
            moment = out[-1] + timedelta(seconds=1)
        out.append(moment)
    return out


def live(pr: dict[str, Any], rng: random.Random, *, end: str, month_end: datetime, reopen: bool = False) -> Life:
    """A PR's made-up life; `end` is merged (at the real merge instant), open or closed (in May)."""
    if end == "merged":
        last = whole(datetime.fromisoformat(pr["committer_date"]).astimezone(UTC))
        opened = whole(last - timedelta(seconds=rng.randrange(6 * HOUR, 240 * HOUR)))
    else:
        opened = whole(local("2026-05-08") + timedelta(seconds=rng.randrange(0, 21 * 24 * HOUR)))
        last = whole(
            min(month_end - timedelta(hours=2), opened + timedelta(seconds=rng.randrange(12 * HOUR, 9 * 24 * HOUR)))
        )
    steps = rng.randrange(0, 4)
    life = Life(pr, opened, heads=1 + steps + (end == "open"))
    life.opened()
    labels = rng.random() < 0.35
    middle = moments(rng, opened, last, steps + labels + (2 if reopen else 0))
    kinds = ["push"] * steps + (["label"] if labels else [])
    rng.shuffle(kinds)
    if reopen:
        kinds[len(kinds) // 2 : len(kinds) // 2] = ["close", "reopen"]
    for kind, moment in zip(kinds, middle, strict=True):
        if kind == "push":
            life.pushed(moment)
        elif kind == "label":
            life.labeled(moment, rng.choice(LABELS))
        elif kind == "close":
            life.closed(moment)
        else:
            life.reopened(moment)
    if end == "merged":
        life.merged(last)
    elif end == "closed":
        life.closed(last)
    else:
        life.pushed(last)  # an open PR still being worked on
    return life


def build() -> dict[str, Any]:
    if not MEGATRON.exists() or not (WEBHOOKS / "pull_request.opened.json").exists():
        raise SystemExit(f"needs {MEGATRON} and {WEBHOOKS}: set TRACKER_SHARED_DIR to the shared test data")
    rng = random.Random(SEED)
    prs = real_prs()
    merged, still_open, closed = choose(prs, rng)
    month_end = local("2026-06-01")
    reopened = rng.choice(merged)
    lives = [live(prs[n], rng, end="merged", month_end=month_end, reopen=n == reopened) for n in merged]
    lives += [live(prs[n], rng, end="open", month_end=month_end) for n in still_open]
    lives += [live(prs[n], rng, end="closed", month_end=month_end) for n in closed]
    lives.sort(key=lambda life: life.number)
    deliveries = sorted(
        (d for life in lives for d in life.deliveries), key=lambda d: (d["received_at"], d["delivery_id"])
    )
    return {
        "format": 1,
        "repository": REPO,
        "month": MONTH,
        "timezone": TIMEZONE,
        "about": (
            f"Sample data: {len(lives)} real public pull requests of {REPO} (numbers, titles, base branches, "
            "changed paths, merge instants) with made-up lives (opening times, pushes, labels, PRs left open "
            "or closed) and synthetic patches; built by tools/make_demo.py."
        ),
        "pull_requests": [life.record() for life in lives],
        "deliveries": deliveries,
    }


def main() -> None:
    bundle = build()
    text = json.dumps(bundle, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0 and no file name: the same input gives the same bytes.
    with OUTPUT.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as out:
        out.write(text)
    prs = bundle["pull_requests"]
    print(
        f"{OUTPUT.relative_to(ROOT)}: {len(prs)} PRs, {len(bundle['deliveries'])} deliveries, "
        f"{sum(len(pr['heads']) for pr in prs)} heads; {len(text):,} bytes of JSON, {OUTPUT.stat().st_size:,} gzipped"
    )


if __name__ == "__main__":
    main()
