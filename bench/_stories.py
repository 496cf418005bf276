"""Realistic months of pull-request deliveries for the benchmarks.

Each PR is a `bench.fixtures.factory.PullRequestStory` (GitHub's own example payload, about 24 KB a
delivery) titled and based on a real merged Megatron-LM PR (the shared test data, data/megatron), its body a
description written as PR templates are (`description`: reports read it for their summary sentences). Real merged
PRs carry no opening time and no closed-unmerged or still-open siblings, so the lives built around
them (open time, pushes, labels, closes, reopens, PRs still open at month end, PRs opened the
month before) are made up here, from a seeded random generator: the same arguments give the same
deliveries.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench.fixtures lives in the work tree, not in the installed package
    sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared"
if not SHARED.exists():
    SHARED = Path(os.environ.get("TRACKER_SHARED_DIR", str(SHARED))).resolve()
MEGATRON = SHARED / "data" / "megatron" / "merged-prs-2026-03-to-06.jsonl"
OPENED_EXAMPLE = SHARED / "fixtures" / "github" / "webhooks" / "pull_request.opened.json"

REPO = "NVIDIA/Megatron-LM"
TIMEZONE = "Asia/Shanghai"
HOOK_ID = "4242"
LABELS = ("Run tests", "Run functional tests", "Final Review", "Expert Review", "module: moe", "bug")


@dataclass(frozen=True)
class StoredDelivery:
    """One delivery as the ledger stores it (tracker.store.ledger.Delivery minus the constant fields)."""

    id: str
    action: str
    body: bytes
    received_at: int  # epoch ms: the moment the event happened, as if GitHub sent it at once
    number: int = 0
    head_sha: str = ""  # the PR's head in this delivery (as bench.fixtures.factory computes it)
    title: str = ""  # the real PR this one borrows its title from


@dataclass(frozen=True)
class RealPullRequest:
    title: str
    base: str
    files: tuple[dict[str, Any], ...] = ()  # {status A|M|D|R, path, old_path?, added, deleted, binary}


def _factory() -> Any:
    """bench.fixtures.factory with its template loaded from OPENED_EXAMPLE (TRACKER_SHARED_DIR is honoured)."""
    from bench.fixtures import factory

    if factory._TEMPLATE is None:
        if not OPENED_EXAMPLE.exists():
            raise SystemExit(
                f"GitHub's example payload {OPENED_EXAMPLE} is missing: set TRACKER_SHARED_DIR to the shared/ folder"
            )
        factory._TEMPLATE = json.loads(OPENED_EXAMPLE.read_text())
    return factory


def real_pull_requests() -> list[RealPullRequest]:
    """Titles and base branches of real Megatron-LM PRs; invented ones if the data file is absent."""
    if not MEGATRON.exists():
        return [RealPullRequest(f"Change number {n}", "main") for n in range(1, 1001)]
    rows = [json.loads(line) for line in MEGATRON.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [RealPullRequest(row["title"], row["branch"], tuple(row.get("files", ()))) for row in rows]


def month_start(month: str, tz: str = TIMEZONE) -> datetime:
    year, number = (int(part) for part in month.split("-"))
    return datetime(year, number, 1, tzinfo=ZoneInfo(tz)).astimezone(UTC)


def next_month(month: str) -> str:
    year, number = (int(part) for part in month.split("-"))
    return f"{year + number // 12:04d}-{number % 12 + 1:02d}"


def previous_month(month: str) -> str:
    year, number = (int(part) for part in month.split("-"))
    return f"{year - (number == 1):04d}-{(number - 2) % 12 + 1:02d}"


def budgets(prs: int, deliveries: int, rng: random.Random) -> list[int]:
    """Deliveries per PR, summing to `deliveries`: at least one (`opened`) each, the rest skewed, as
    a few PRs get most of the pushes."""
    if deliveries < prs:
        raise SystemExit(f"{deliveries} deliveries cannot cover {prs} PRs: give at least one delivery per PR")
    counts = [1] * prs
    weights = [rng.lognormvariate(0, 0.8) for _ in range(prs)]
    for index in rng.choices(range(prs), weights=weights, k=deliveries - prs):
        counts[index] += 1
    return counts


@dataclass(frozen=True)
class PullRequestPlan:
    number: int
    month: str
    budget: int
    seed: int
    previous_month: bool
    title: str
    base: str


def plan_month(
    month: str,
    prs: int,
    deliveries: int,
    *,
    seed: int = 1,
    first_number: int = 10_000,
    previous_share: float = 0.15,
) -> list[PullRequestPlan]:
    """The PRs of one month: how many deliveries each gets and which real PR it borrows a title from."""
    rng = random.Random(f"{seed}:{month}")
    real = real_pull_requests()
    offset = rng.randrange(len(real))
    return [
        PullRequestPlan(
            number=first_number + i,
            month=month,
            budget=budget,
            seed=rng.randrange(2**32),
            previous_month=rng.random() < previous_share,
            title=real[(offset + i) % len(real)].title,
            base=real[(offset + i) % len(real)].base,
        )
        for i, budget in enumerate(budgets(prs, deliveries, rng))
    ]


def plan_months(months: Sequence[str], prs: int, deliveries: int, seed: int = 1) -> list[PullRequestPlan]:
    """`prs` PRs and `deliveries` deliveries spread evenly over `months`, PR numbers unique."""
    plans: list[PullRequestPlan] = []
    for index, month in enumerate(months):
        share_prs = prs // len(months) + (1 if index < prs % len(months) else 0)
        share_deliveries = deliveries // len(months) + (1 if index < deliveries % len(months) else 0)
        plans += plan_month(month, share_prs, share_deliveries, seed=seed, first_number=10_000 + len(plans))
    return plans


# What PR descriptions look like (real deliveries carry them, and reports read them: tracker.core.descriptions):
# most follow the repository's template, filled or not, some are a short summary, some are empty.
_TEMPLATE = """# What does this PR do ?
<!-- Add a one line overview of what this PR aims to accomplish. -->
{summary}

:warning: For major changes (either in lines of code or in its impact), please make sure to first share a
design doc with the team.

## Contribution process

```mermaid
flowchart LR
    A[Pre-checks] --> B[PR Tests]
    B --> C[Expert Review] --> D[Final Review] --> E[Merge]
```

### Pre-checks

- [ ] I want this PR in a versioned release and have added the appropriate Milestone (e.g., `Core 0.8`)
- [x] I have added relevant unit tests
- [ ] I have added proper typing to my code [Typing guidelines](https://docs.python.org/3/library/typing.html)
- [ ] I have run the [autoformatter.sh](https://github.com/NVIDIA/Megatron-LM/blob/main/tools/autoformat.sh)

### Code review

The following process is enforced via the CODEOWNERS file for changes into `megatron/core`. For changes
outside of `megatron/core`, it is up to the PR author whether or not to tag the Final Reviewer team.

<details>
<summary>For MRs into `main` branch</summary>

#### (Step 1): Add PR label `Expert Review`

#### (Step 2): Collect the expert reviewers reviews

1. Attach the `Expert Review` label when your PR is ready for review.
2. GitHub auto-assigns expert reviewers based on your changes.

</details>
"""
_SUMMARY = """## Summary

{summary}

## Test plan

- unit tests: `pytest tests/unit_tests -k {word}`
- functional test on 8 GPUs, loss curve unchanged
"""
_REASONS = ("long runs", "pipeline parallelism", "FP8 training", "checkpoint resumption", "MoE layers", "inference")


def description(title: str, rng: random.Random) -> str:
    """A PR body as people write them: the template with a summary (55 %), a short summary section (20 %), the
    template left unfilled (10 %) or nothing (15 %)."""
    summary = f"This PR makes {title.strip().rstrip('.')} work with {rng.choice(_REASONS)}. It also adds unit tests."
    roll = rng.random()
    if roll < 0.55:
        return _TEMPLATE.format(summary=summary)
    if roll < 0.75:
        return _SUMMARY.format(summary=summary, word=(title.split() or ["test"])[-1].lower())
    if roll < 0.85:
        return _TEMPLATE.format(summary="")
    return ""


def with_description(body: bytes, text: str) -> bytes:
    """A delivery's JSON with the PR's body set to `text`."""
    payload = json.loads(body)
    payload["pull_request"]["body"] = text
    return json.dumps(payload).encode()


def tell(plan: PullRequestPlan) -> list[StoredDelivery]:
    """The deliveries of one PR's life: opened, then pushes and labels (a retitle now and then), and
    an end: merged (60 %), closed unmerged (12 %) or still open; 6 % are closed and reopened first."""
    factory = _factory()
    rng = random.Random(plan.seed)
    start = month_start(plan.month)
    end = month_start(next_month(plan.month))
    if plan.previous_month:
        created = start - timedelta(seconds=rng.uniform(3_600, 20 * 86_400))
        last = start + timedelta(seconds=rng.uniform(3_600, 12 * 86_400))
    else:
        created = start + timedelta(seconds=rng.uniform(0, (end - start).total_seconds() - 3_600))
        last = created + timedelta(seconds=rng.uniform(600, 12 * 86_400))
    moments = sorted(rng.uniform(0, (last - created).total_seconds()) for _ in range(plan.budget - 1))
    times = [created.replace(microsecond=0)]
    for seconds in moments:  # strictly increasing whole seconds, as GitHub stamps them
        times.append(
            max(times[-1] + timedelta(seconds=1), (created + timedelta(seconds=seconds)).replace(microsecond=0))
        )

    story = factory.PullRequestStory(plan.number, times[0], repo=REPO, base=plan.base, title=plan.title)
    actions = ["opened"]
    heads = [0]  # bench.fixtures.factory numbers a PR's heads 0, 1, 2, ... one more on each push
    story.opened()
    ending = rng.random()
    middle = times[1:-1] if plan.budget >= 2 else []
    reopen_at = rng.randrange(len(middle) - 1) if len(middle) >= 3 and rng.random() < 0.06 else None
    labels: tuple[str, ...] = ()
    for index, moment in enumerate(middle):
        if reopen_at is not None and index == reopen_at:
            story.closed(moment)
            actions.append("closed")
        elif reopen_at is not None and index == reopen_at + 1:
            story.reopened(moment)
            actions.append("reopened")
        elif rng.random() < 0.15:
            labels = tuple(sorted({*labels, rng.choice(LABELS)}))
            story.labeled(moment, *labels)
            actions.append("labeled")
        elif rng.random() < 0.05:
            story.retitled(moment, f"{plan.title} (v{index})")
            actions.append("edited")
        else:
            story.pushed(moment)
            actions.append("synchronize")
        heads.append(heads[-1] + (actions[-1] == "synchronize"))
    if plan.budget >= 2:
        if ending < 0.60:
            story.merged(times[-1])
            actions.append("closed")
        elif ending < 0.72:
            story.closed(times[-1])
            actions.append("closed")
        else:
            story.pushed(times[-1])
            actions.append("synchronize")
        heads.append(heads[-1] + (actions[-1] == "synchronize"))
    body = description(plan.title, rng)
    return [
        StoredDelivery(
            d.delivery_id,
            action,
            with_description(d.body, body),
            int(moment.timestamp() * 1000),
            plan.number,
            hashlib.sha1(f"{REPO}#{plan.number}@{head}".encode()).hexdigest(),
            plan.title,
        )
        for d, action, moment, head in zip(story.deliveries, actions, times, heads, strict=True)
    ]


def tell_many(plans: Sequence[PullRequestPlan]) -> list[StoredDelivery]:
    return [delivery for plan in plans for delivery in tell(plan)]


def stories(plans: Sequence[PullRequestPlan], processes: int = 1, chunk: int = 50) -> Iterator[list[StoredDelivery]]:
    """The deliveries of `plans`, a chunk of PRs at a time; built in `processes` processes."""
    chunks = [plans[i : i + chunk] for i in range(0, len(plans), chunk)]
    if processes <= 1:
        for part in chunks:
            yield tell_many(part)
        return
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(processes) as pool:
        results = pool.imap(tell_many, chunks)
        for _ in chunks:
            # Bounded: a builder process that dies (killed from outside) would otherwise hang imap.
            try:
                yield results.next(timeout=600)
            except multiprocessing.TimeoutError:
                raise RuntimeError("building deliveries stalled for 10 minutes (a builder process died?)") from None


def ledger_row(delivery: StoredDelivery) -> dict[str, object]:
    """A row of tracker.schema.deliveries, as Ledger.store writes it."""
    return {
        "id": delivery.id,
        "event": "pull_request",
        "action": delivery.action,
        "repo": REPO,
        "hook_id": HOOK_ID,
        "content_type": "application/json",
        "headers": json.dumps({"User-Agent": "GitHub-Hookshot/bench", "X-GitHub-Hook-ID": HOOK_ID}, sort_keys=True),
        "body": delivery.body,
        "received_at": delivery.received_at,
        "status": "pending",
        "attempts": 0,
    }


def ledger_delivery(delivery: StoredDelivery) -> Any:
    """The tracker.store.ledger.Delivery the webhook would have stored."""
    from tracker.store.ledger import Delivery

    return Delivery(
        id=delivery.id,
        event="pull_request",
        action=delivery.action,
        repo=REPO,
        hook_id=HOOK_ID,
        content_type="application/json",
        headers={"User-Agent": "GitHub-Hookshot/bench", "X-GitHub-Hook-ID": HOOK_ID},
        body=delivery.body,
        received_at=delivery.received_at,
    )
