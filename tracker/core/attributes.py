"""Versioned PR attributes (title, body, base branch, head, labels, draft, author).

Every delivery yields one version stamped with the payload's `pull_request.updated_at`; a report at
a cutoff shows each PR as the last version before the window end said.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tracker.core.payloads import PullRequestEvent
from tracker.core.window import epoch


@dataclass(frozen=True)
class AttributeVersion:
    at: int
    delivery_id: str
    title: str
    body: str
    base_ref: str
    head_ref: str
    head_sha: str
    labels: tuple[str, ...]
    draft: bool
    author: str
    # True when a webhook delivery carried the PR as it was; False when rebuilt from GitHub's
    # timeline by a backfill (which knows only today's body, and no earlier base branch).
    observed: bool = True

    @property
    def order_key(self) -> tuple[int, bool, str]:
        # Two versions with the same timestamp are told apart by what saw them (a delivery's is the
        # better record), then by id, so the choice is the same whatever order they arrived in.
        return (self.at, self.observed, self.delivery_id)


def version_of(event: PullRequestEvent, delivery_id: str) -> AttributeVersion:
    pr = event.pull_request
    return AttributeVersion(
        at=epoch(pr.updated_at),
        delivery_id=delivery_id,
        title=pr.title,
        body=pr.body or "",
        base_ref=pr.base.ref or "",
        head_ref=pr.head.ref or "",
        head_sha=pr.head.sha or "",
        labels=tuple(sorted(label.name for label in pr.labels)),
        draft=pr.draft,
        author=pr.user.login or "",
    )


def version_at(versions: Iterable[AttributeVersion], end: int) -> AttributeVersion | None:
    """The last version before `end`; if every known version is later (the early deliveries were
    never received), the earliest one known, which is the closest to the cutoff we have."""
    known = list(versions)
    before = [v for v in known if v.at < end]
    if before:
        return max(before, key=lambda v: v.order_key)
    return min(known, key=lambda v: v.order_key) if known else None
