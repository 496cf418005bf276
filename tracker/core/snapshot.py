"""`MonthSnapshot`: the month of one repository at a cutoff, assembled from plain data. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.core.attributes import AttributeVersion
from tracker.core.classify import EXCLUDED, Category, HeadVerdict, Rules, classify_pull_request
from tracker.core.coverage import Coverage
from tracker.core.stats import MonthStats, PullRequestStatus, assess
from tracker.core.timeline import Fact, FactKind
from tracker.core.window import Window, iso_utc


@dataclass(frozen=True)
class PullRequestSnapshot:
    status: PullRequestStatus
    version: AttributeVersion | None
    created_at: int
    merged_at: int | None
    closed_at: int | None  # the last close inside the window, when closed without merge at the cutoff
    category: Category
    evidence: dict[str, Any]

    @property
    def substantive(self) -> bool:
        return self.category is Category.SUBSTANTIVE


@dataclass(frozen=True)
class MonthSnapshot:
    repo: str
    window: Window
    stats: MonthStats
    excluded: dict[str, int]
    pending_classification: int
    pull_requests: tuple[PullRequestSnapshot, ...]
    coverage: Coverage = Coverage()

    def as_dict(self, *, pull_requests: bool = True) -> dict[str, Any]:
        """The snapshot as its JSON document holds it; without `pull_requests`, its numbers alone (no PR rows)."""
        window = self.window
        document = {
            "repo": self.repo,
            "month": str(window.month),
            "cutoff": window.cutoff.isoformat(),
            "timezone": window.timezone,
            "final": window.final,
            "window": {"start": iso_utc(window.start), "end": iso_utc(window.end)},
            "stats": self.stats.as_dict(),
            "excluded": self.excluded,
            "pending_classification": self.pending_classification,
            "coverage": self.coverage.as_dict(),
        }
        if pull_requests:
            document["pull_requests"] = [self._pull_request(pr) for pr in self.pull_requests]
        return document

    def _pull_request(self, pr: PullRequestSnapshot) -> dict[str, Any]:
        version = pr.version
        activity = pr.status.activity
        counted = pr.substantive
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
            "category": pr.category.value,
            "evidence": pr.evidence,
            "counted": {
                "opened": counted and pr.status.counts_opened,
                "merged": counted and pr.status.counts_merged,
                "closed_unmerged": counted and pr.status.counts_closed_unmerged,
                "active_at_cutoff": counted and pr.status.counts_active,
            },
        }


def build_snapshot(
    repo: str,
    window: Window,
    timelines: Mapping[int, Sequence[Fact]],
    versions: Mapping[int, AttributeVersion],
    verdicts: Mapping[tuple[int, str], HeadVerdict] | None = None,
    rules: Rules | None = None,
    unavailable: frozenset[tuple[int, str]] = frozenset(),
    coverage: Coverage | None = None,
) -> MonthSnapshot:
    """`timelines` holds every known fact of each candidate PR (before and after the window);
    PRs without activity inside the window are left out. Each PR is classified by the verdict of
    the head it had at the window end (`verdicts`, by number and head sha) and its title and labels
    then; a PR whose head has no verdict yet is `pending`."""
    verdicts = verdicts or {}
    rules = rules or Rules()
    pull_requests = []
    for number in sorted(timelines):
        version = versions.get(number)
        verdict = verdicts.get((number, version.head_sha)) if version is not None else None
        gone = version is not None and (number, version.head_sha) in unavailable
        pr = fold_pull_request(number, timelines[number], window, version, verdict, rules, gone)
        if pr is not None:
            pull_requests.append(pr)
    return assemble_snapshot(repo, window, pull_requests, coverage)


def fold_pull_request(
    number: int,
    facts: Sequence[Fact],
    window: Window,
    version: AttributeVersion | None,
    verdict: HeadVerdict | None,
    rules: Rules,
    unavailable: bool = False,
) -> PullRequestSnapshot | None:
    """One PR in the window: its facts (all of them, before and after the window), its version at the
    window end and that head's verdict (`unavailable`: GitHub no longer has the head's files). None when
    it has no activity inside the window."""
    status = assess(number, facts, window)
    if status is None:
        return None
    merged = [f.at for f in facts if f.kind is FactKind.MERGED and f.at < window.end]
    closed = [f.at for f in facts if f.kind is FactKind.CLOSED and window.contains(f.at)]
    category, evidence = classify_pull_request(
        verdict, version.title if version else "", version.labels if version else (), rules
    )
    if version is not None and unavailable:
        # GitHub no longer has this head's files (deleted fork, force-pushed away): say so.
        evidence = {"rule": "files_unavailable", "head_sha": version.head_sha}
    return PullRequestSnapshot(
        status=status,
        version=version,
        created_at=min(f.at for f in facts if f.kind is FactKind.OPENED),
        merged_at=min(merged) if merged else None,
        closed_at=max(closed) if closed and status.counts_closed_unmerged else None,
        category=category,
        evidence=evidence,
    )


def assemble_snapshot(
    repo: str, window: Window, pull_requests: Sequence[PullRequestSnapshot], coverage: Coverage | None = None
) -> MonthSnapshot:
    """The snapshot of the PRs `fold_pull_request` kept, in the order of their numbers."""
    categories = Counter(pr.category for pr in pull_requests)
    return MonthSnapshot(
        repo=repo,
        window=window,
        stats=MonthStats.of([pr.status for pr in pull_requests if pr.substantive]),
        excluded={category.value: categories[category] for category in EXCLUDED},
        pending_classification=categories[Category.PENDING],
        pull_requests=tuple(pull_requests),
        coverage=coverage if coverage is not None else Coverage(),
    )
