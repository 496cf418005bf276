"""GitHub requests per delivery over a replayed month, and the cost of classifying real large PRs.

1. A month of Megatron-LM PRs (real titles, branches and changed paths from
   the shared test data (data/megatron/), lives made up by a seeded generator: opened, 0-3 pushes, labels, an
   edit, a merge or a close) is posted through the real app and processed by in-process RQ workers
   against a local fake GitHub (bench/fixtures/fake_github.py). Figures: requests per delivery, files
   requests per new head against the pages that head needs (the ideal, ratio 1.00), and requests
   caused by actions that must cause none (labels, edits, closes, merges of known heads).
2. classify_head on the largest real PRs (by file count), with unified-diff patches of their real
   line counts, against json.loads of the same files listing (the cost of just reading it).

Run: .venv/bin/python bench/classification.py [--prs 300] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rq import SimpleWorker  # noqa: E402

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from bench.fixtures.fake_github import FakeGitHub  # noqa: E402
from tracker.core.classify import ChangedFile, Rules, classify_head  # noqa: E402
from tracker.embedded_redis import EmbeddedRedis  # noqa: E402
from tracker.settings import load_settings  # noqa: E402
from tracker.web.app import create_app  # noqa: E402
from tracker.web.context import services  # noqa: E402
from tracker.web.signature import sign  # noqa: E402
from workers import runtime  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "megatron" / "merged-prs-2026-03-to-06.jsonl"
REPO = "NVIDIA/Megatron-LM"
SECRET = "bench-secret"


def load_prs() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def month_of_stories(prs: list[dict], count: int, seed: int) -> tuple[list[PullRequestStory], dict]:
    """Stories for `count` PRs in May 2026, with each head's files (the PR's real paths)."""
    rng = random.Random(seed)
    chosen = [pr for pr in prs if pr["month_shanghai"] == "2026-05"][:count]
    files_of: dict[tuple[int, int], list[str]] = {}
    stories = []
    for pr in chosen:
        opened = datetime(2026, 5, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(0, 60 * 24 * 27))
        story = PullRequestStory(pr["pr_number"], opened, base=pr["branch"], title=pr["title"]).opened()
        moment = opened
        paths = [f["path"] for f in pr["files"]] or ["README.md"]
        files_of[(pr["pr_number"], 0)] = paths
        for push in range(rng.randrange(0, 4)):
            moment += timedelta(hours=rng.randrange(1, 30))
            story.pushed(moment)
            files_of[(pr["pr_number"], push + 1)] = paths
        moment += timedelta(minutes=30)
        story.labeled(moment, rng.choice(["moe", "inference", "bug"]))
        moment += timedelta(minutes=30)
        story.retitled(moment, pr["title"] + " (v2)")
        moment += timedelta(hours=rng.randrange(1, 48))
        if rng.random() < 0.8:
            story.merged(moment)
        else:
            story.closed(moment)
        stories.append(story)
    return stories, files_of


def replay_month(count: int, seed: int) -> None:
    prs = load_prs()
    stories, files_of = month_of_stories(prs, count, seed)
    github = FakeGitHub()
    with tempfile.TemporaryDirectory(prefix="trk-bench-") as directory:
        redis_server = EmbeddedRedis(Path(directory))
        redis_server.start()
        try:
            settings = load_settings(
                webhook_secret=SECRET,
                data_dir=Path(directory) / "var",
                redis_url=redis_server.url,
                github_api_url=github.url,
            )
            app = create_app(settings)
            client = app.test_client()
            with app.app_context():
                s = services()
                runtime.install(s)
                queues = [s.delivery_queue, s.github_queue]
            deliveries = 0
            pages_needed = 0
            heads = 0
            actions: dict[str, int] = {}
            started = time.perf_counter()
            for story in stories:
                head_index = 0
                for d in story.deliveries:
                    payload = json.loads(d.body)
                    action = payload["action"]
                    actions[action] = actions.get(action, 0) + 1
                    if action in ("opened", "synchronize"):
                        paths = files_of[(story.number, head_index)]
                        github.set_files(REPO, story.number, payload["pull_request"]["head"]["sha"], paths)
                        pages_needed += max(1, -(-min(len(paths), 3000) // 100))
                        heads += 1
                        head_index += 1
                    headers = {
                        "Content-Type": "application/json",
                        "X-GitHub-Event": d.event,
                        "X-GitHub-Delivery": d.delivery_id,
                        "X-Hub-Signature-256": sign(SECRET.encode(), d.body),
                    }
                    assert client.post("/webhook", data=d.body, headers=headers).status_code == 202
                    deliveries += 1
                    with app.app_context():  # jobs run as they would right after each delivery
                        SimpleWorker(queues, connection=s.redis).work(burst=True, with_scheduler=False)
            elapsed = time.perf_counter() - started
            files_requests = github.count(r"/pulls/\d+/files")
            other = len(github.requests) - files_requests
            print(
                f"replayed month: {len(stories)} PRs, {deliveries} deliveries, {heads} new heads, "
                f"actions {dict(sorted(actions.items()))}, {elapsed:.1f} s"
            )
            print(
                f"GitHub requests: {len(github.requests)} in all = {len(github.requests) / deliveries:.3f} per delivery"
            )
            print(
                f"files requests: {files_requests} for {heads} new heads needing {pages_needed} pages "
                f"= {files_requests / pages_needed:.2f} x ideal (target 1.00)"
            )
            print(f"requests other than files pages (head checks, compare): {other}")
            with app.app_context():
                pending = len(s.heads.missing())
            print(f"heads still without files: {pending} (target 0)")
        finally:
            runtime.install(None)
            redis_server.stop()
            github.close()


def patch_for(added: int, deleted: int) -> str:
    lines = [f"@@ -1,{max(deleted, 1)} +1,{max(added, 1)} @@"]
    lines += [f"-    old_line_{i} = compute({i})" for i in range(min(deleted, 400))]
    lines += [f"+    new_line_{i} = compute({i}, flag=True)" for i in range(min(added, 400))]
    return "\n".join(lines)


def classification_cost(top: int) -> None:
    prs = sorted(load_prs(), key=lambda pr: pr["files_changed"], reverse=True)[:top]
    rules = Rules()
    ratios, per_pr, per_file = [], [], []
    for pr in prs:
        files = [
            ChangedFile(
                f["path"],
                "modified",
                f.get("old_path"),
                f["added"] or 0,
                f["deleted"] or 0,
                patch_for(f["added"] or 0, f["deleted"] or 0),
            )
            for f in pr["files"]
        ]
        listing = json.dumps([{"filename": f.path, "patch": f.patch, "additions": f.additions} for f in files])
        classify = min(_timed(lambda fs=files: classify_head("x", fs, rules)) for _ in range(5))
        read = min(_timed(lambda text=listing: json.loads(text)) for _ in range(5))
        per_pr.append(classify)
        per_file.append(classify / len(files))
        ratios.append(classify / read)
    print(
        f"classify_head on the {top} largest real PRs ({prs[-1]['files_changed']}-{prs[0]['files_changed']} files): "
        f"median {statistics.median(per_pr) * 1000:.2f} ms per PR, "
        f"{statistics.median(per_file) * 1e6:.1f} µs per file, "
        f"{statistics.median(ratios):.2f} x json.loads of the same listing"
    )


def _timed(function) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prs", type=int, default=250, help="PRs in the replayed month")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--top", type=int, default=10, help="largest real PRs to classify")
    args = parser.parse_args()
    replay_month(args.prs, args.seed)
    classification_cost(args.top)


if __name__ == "__main__":
    main()
