"""Digest memory benchmark: what a busy month's digest costs in Redis when every PR body is as long as
GitHub allows (issue 31: "Redis memory for a month of 1,400 PRs with maximum-size bodies stays within a
few MB per month").

The month (bench/_stories.py: --prs PRs and --deliveries deliveries of real Megatron-LM titles) is
stored twice in one run, each in its own ledger and Redis database:
- baseline: the deliveries as generated (each PR's body a few dozen characters);
- long bodies: the same deliveries, every PR's body replaced by --body-chars characters of its own
  (prose, a template comment, a code block and a cue citing another PR), a different body on each of a
  PR's deliveries that is an edit, as an author who keeps rewriting it would send.
Each is rebuilt (tracker.store.rebuild) and its digest kept (tracker.reports.digests.keep_digest, what
the warm job does), then Redis's MEMORY USAGE of the digest key and the server's used_memory are read,
and what a request pays to read one cutoff from it (tracker.reports.digests.KeptDigest.fold_at without
the evidence, as the Markdown and the HTML read it, the collector paused as a report pauses it: one
HMGET, inflating and parsing the fields, folding the snapshot): the median of --runs, mid-month and on the
month's last day. No head files are stored, so the digest holds no changed paths and little evidence: a
month whose heads are known keeps more (tests/store/test_month_digest.py measures one with real paths).

    .venv/bin/python bench/digest_memory.py [--prs 1419 --deliveries 11894 --body-chars 65536 --runs 21]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace

from _stack import Stack
from _stories import REPO, ledger_delivery, plan_months, stories

from tracker.config import load_config
from tracker.reports.collector import collector_paused
from tracker.reports.digests import KeptDigest, digest_key, keep_digest, month_windows
from tracker.reports.loading import resolve
from tracker.services import Services
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState
from tracker.store.rebuild import rebuild

WORDS = ["tensor", "parallel", "router", "kernel", "checkpoint", "loader", "pipeline", "expert", "fused", "graph"]


def long_body(number: int, edit: int, size: int) -> str:
    prose = " ".join(WORDS[(number * 7 + edit + i) % len(WORDS)] for i in range(60))
    text = (
        "<!-- Describe your change. Link the issue it fixes. -->\n## What does this PR do?\n"
        f"Revision {edit} of #{number}: {prose}.\n\nThis is the cherry-pick of #{number + 1} onto dev.\n\n```\n"
    )
    return (text + f"log line {number}.{edit} " * (size // 16))[:size]


def with_long_body(body: bytes, size: int, edits: dict[int, int]) -> bytes:
    payload = json.loads(body)
    number = payload["pull_request"]["number"]
    if payload.get("action") in ("opened", "edited"):
        edits[number] = edits.get(number, -1) + 1
    payload["pull_request"]["body"] = long_body(number, edits.get(number, 0), size)
    return json.dumps(payload).encode()


def measure(
    stack: Stack, generated: list, body_chars: int | None, month: str, runs: int
) -> tuple[int, int, float, list[float]]:
    """(digest key bytes, Redis used_memory bytes, seconds to rebuild and keep, milliseconds to read a cutoff
    mid-month and on the last day) of the month."""
    ledger, state = Ledger(stack.engine), MonthState(stack.engine)
    config = load_config(stack.settings)
    edits: dict[int, int] = {}
    for item in generated:
        delivery = ledger_delivery(item)
        if body_chars is not None:
            delivery = replace(delivery, body=with_long_body(delivery.body, body_chars, edits))
        ledger.store(delivery)
    started = time.monotonic()
    rebuild(ledger, state, config)
    redis = stack.redis()
    timezone = config.timezone_for(REPO)
    services = Services.over(state.engine, config)
    request = resolve(services, REPO, month, None)
    keep_digest(services, redis, request)
    took = time.monotonic() - started
    key = digest_key(services, request)
    used = redis.memory_usage(key, samples=0) or 0
    windows = month_windows(month, timezone)
    kept, reads = KeptDigest(redis, key), []
    for window in (windows[len(windows) // 2 - 1], windows[-1]):
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            with collector_paused():
                folded = kept.fold_at(REPO, window, evidence=False)
            times.append(time.perf_counter() - started)
            assert folded is not None, "the digest holds every cutoff of the month"
        reads.append(statistics.median(times) * 1000)
    return used, int(redis.info("memory")["used_memory"]), took, reads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--month", default="2026-04")
    parser.add_argument("--prs", type=int, default=1419)
    parser.add_argument("--deliveries", type=int, default=11894)
    parser.add_argument("--body-chars", type=int, default=65_536, help="GitHub's maximum body length")
    parser.add_argument("--runs", type=int, default=21, help="reads of each cutoff timed")
    args = parser.parse_args()
    plans = plan_months([args.month], args.prs, args.deliveries, seed=5)
    generated = [item for part in stories(plans, processes=2) for item in part]
    generated.sort(key=lambda item: (item.received_at, item.id))
    figures = {}
    for name, chars in (("baseline", None), ("long bodies", args.body_chars)):
        with Stack() as stack:
            figures[name] = measure(stack, generated, chars, args.month, args.runs)
    base_key, base_used, base_took, base_reads = figures["baseline"]
    key, used, took, reads = figures["long bodies"]
    mb = 1024 * 1024
    print(f"digest memory: {args.deliveries:,} deliveries of {args.prs:,} PRs in {args.month}")
    print(
        f"  baseline (bodies as generated): digest key {base_key / mb:.2f} MB, Redis used {base_used / mb:.1f} MB; "
        f"a cutoff read in {base_reads[0]:.1f} ms mid-month, {base_reads[1]:.1f} ms on the last day"
    )
    print(
        f"  every body {args.body_chars:,} characters: digest key {key / mb:.2f} MB "
        f"({key / base_key:.2f} x baseline), Redis used {used / mb:.1f} MB ({used / base_used:.2f} x); "
        f"rebuild and keep {took:.0f} s ({took / base_took:.2f} x); a cutoff read in {reads[0]:.1f} ms "
        f"mid-month ({reads[0] / base_reads[0]:.2f} x), {reads[1]:.1f} ms on the last day "
        f"({reads[1] / base_reads[1]:.2f} x)"
    )
    growth = (key - base_key) / mb
    print(f"  what the bodies add to the month's digest: {growth:.2f} MB (target: the month's key within about 3 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
