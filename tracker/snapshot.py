"""`MonthSnapshot`: the month of one repository at a cutoff, assembled from plain data. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.attributes import AttributeVersion
from tracker.stats import MonthStats, PullRequestStatus, assess
from tracker.timeline import Fact, FactKind
from tracker.window import Window, iso_utc


@dataclass(frozen=True)
class PullRequestSnapshot:
    status: PullRequestStatus
    version: AttributeVersion | None
    created_at: int
    merged_at: int | None


@dataclass(frozen=True)
class MonthSnapshot:
    repo: str
    window: Window
    stats: MonthStats
    pull_requests: tuple[PullRequestSnapshot, ...]

    def as_dict(self) -> dict[str, Any]:
        window = self.window
        return {
            "repo": self.repo,
            "month": str(window.month),
            "cutoff": window.cutoff.isoformat(),
            "timezone": window.timezone,
            "final": window.final,
            "window": {"start": iso_utc(window.start), "end": iso_utc(window.end)},
            "stats": self.stats.as_dict(),
            "pull_requests": [self._pull_request(pr) for pr in self.pull_requests],
        }

    def _pull_request(self, pr: PullRequestSnapshot) -> dict[str, Any]:
        version = pr.version
        activity = pr.status.activity
        return {
            "number": pr.status.number,
            "url": f"https://github.com/{self.repo}/pull/{pr.status.number}",
            "title": version.title if version else "",
            "base_ref": version.base_ref if version else "",
            "head_sha": version.head_sha if version else "",
            "author": version.author if version else "",
            "labels": list(version.labels) if version else [],
            "draft": version.draft if version else False,
            "state_at_cutoff": pr.status.state.value,
            "created_at": iso_utc(pr.created_at),
            "merged_at": iso_utc(pr.merged_at) if pr.merged_at is not None else None,
            "activity": {
                "opened": activity.opened,
                "committed": activity.committed,
                "closed": activity.closed,
                "reopened": activity.reopened,
                "merged": activity.merged,
            },
            "counted": {
                "opened": pr.status.counts_opened,
                "merged": pr.status.counts_merged,
                "closed_unmerged": pr.status.counts_closed_unmerged,
                "active_at_cutoff": pr.status.counts_active,
            },
        }


def build_snapshot(
    repo: str,
    window: Window,
    timelines: Mapping[int, Sequence[Fact]],
    versions: Mapping[int, AttributeVersion],
) -> MonthSnapshot:
    """`timelines` holds every known fact of each candidate PR (before and after the window);
    PRs without activity inside the window are left out."""
    pull_requests = []
    for number in sorted(timelines):
        facts = timelines[number]
        status = assess(number, facts, window)
        if status is None:
            continue
        merged = [f.at for f in facts if f.kind is FactKind.MERGED and f.at < window.end]
        pull_requests.append(
            PullRequestSnapshot(
                status=status,
                version=versions.get(number),
                created_at=min(f.at for f in facts if f.kind is FactKind.OPENED),
                merged_at=min(merged) if merged else None,
            )
        )
    return MonthSnapshot(
        repo=repo,
        window=window,
        stats=MonthStats.of([pr.status for pr in pull_requests]),
        pull_requests=tuple(pull_requests),
    )
