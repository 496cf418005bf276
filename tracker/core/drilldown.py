"""Drill-down: the pull requests behind a number of the report, each with the evidence that puts it there. Pure.

Every number a report shows is a count over its month's PRs at the cutoff, and a drill-down lists exactly
the PRs it counted, so that its count is the number that linked to it:

- a statistic (`opened`, `merged`, `closed_unmerged`, `active_at_cutoff`): the substantive PRs whose status
  counts them (`PullRequestStatus.counts_*`, what `MonthStats.of` adds up), each with the facts and
  instants that put it there: its state at the cutoff, which kinds of fact fall inside the window, when it
  was opened, merged or closed, and its head at the cutoff;
- an exclusion (`test_only`, `ci_only`, `test_ci_only`, `format_only`) or `pending`: the PRs of that
  category (what `MonthSnapshot.excluded` and `pending_classification` count), each with the head sha and
  the files that decided the category (the classification's evidence, and every changed path of that head
  when the caller has them);
- a theme's count: the changes of that theme in its section (`len(Theme.changes)`), each with the PRs it
  cites (a change of dev/main twins cites two), so that its `count` is the number of changes and its PRs
  may be more.

The month is read in either of two forms, to the same rows: the snapshot a live request folds, with the
changed paths of each head (`view_of_snapshot`: the PRs, which a statistic or an exclusion reads), or the
report's JSON document (`view_of_document`: the PRs and the themes; a finalised month's record is one). The
document keeps no close instant and no changed paths: its rows say None for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from tracker.core.classify import EXCLUDED, Category
from tracker.core.report import DELIVERED, IN_PROGRESS
from tracker.core.snapshot import MonthSnapshot, PullRequestSnapshot
from tracker.core.window import iso_utc

STATISTICS = ("opened", "merged", "closed_unmerged", "active_at_cutoff")
EXCLUSIONS = tuple(category.value for category in EXCLUDED)
PENDING = Category.PENDING.value
# What `?stat=` may ask for: the report's four statistics, its four exclusion counts, and the PRs awaiting
# classification (the report shows that count beside the exclusions when there are any).
SELECTIONS = (*STATISTICS, *EXCLUSIONS, PENDING)
SECTIONS = (DELIVERED, IN_PROGRESS)


class UnknownSelection(ValueError):
    """A `stat` or `section` no report shows: its message says what is offered."""


class UnknownTheme(LookupError):
    """No theme of that id in that section of the report at that cutoff (theme ids are the month's, and
    a theme at one cutoff may not be there at another)."""


@dataclass(frozen=True)
class Entry:
    """One PR of the month at the cutoff, as a drill-down reads it (from either form of the month)."""

    number: int
    title: str  # as its author wrote it: the page cleans and escapes it
    base_ref: str
    head_sha: str  # at the cutoff
    state: str  # at the cutoff: open, closed or merged
    activity: Mapping[str, bool]  # which kinds of fact fall inside the window
    opened_at: str
    merged_at: str | None
    closed_at: str | None  # the last close inside the window of a PR closed without merge; None from a document
    classification: Mapping[str, Any]  # the evidence of its category (tracker.core.classify)
    paths: tuple[str, ...] | None  # every changed path of its head at the cutoff; None when not kept


@dataclass(frozen=True)
class ThemeOutline:
    """A theme of a section: its names and its changes (id, highlight id, the numbers each cites)."""

    section: str
    id: str
    en: str
    zh: str
    changes: tuple[tuple[str, str, tuple[int, ...]], ...]


class Candidate(NamedTuple):
    """A PR as a selection first reads it: what it counts in, and its `Entry`, made only for a PR listed
    (most of a big month's PRs are not: each `Entry` formats instants and copies evidence)."""

    category: str
    counted: frozenset[str]  # the statistics that count it
    entry: Callable[[], Entry]


@dataclass(frozen=True)
class MonthView:
    """The month at the cutoff as the drill-downs read it: its PRs by number, and its report's themes."""

    pull_requests: Mapping[int, Candidate]
    themes: tuple[ThemeOutline, ...]


@dataclass(frozen=True)
class Row:
    """A listed PR and its evidence; `change` names the change a theme's row belongs to."""

    number: int
    title: str
    base_ref: str
    evidence: Mapping[str, Any]
    change: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "title": self.title, "base_ref": self.base_ref, "evidence": dict(self.evidence)}


@dataclass(frozen=True)
class DrillDown:
    """What a number counts: `count` is that number (PRs, or a theme's changes), `rows` its PRs."""

    stat: str | None  # a SELECTIONS name, or None for a theme
    count: int
    rows: tuple[Row, ...]
    theme: ThemeOutline | None = None

    def as_dict(self, cutoff: str) -> dict[str, Any]:
        """The API's answer: `{"stat", "cutoff", "count", "prs"}`, and for a theme `"theme"` (its id, section
        and names) in place of `"stat"`, `count` its changes and `pull_requests` the PRs they cite."""
        head: dict[str, Any]
        if self.theme is None:
            head = {"stat": self.stat}
        else:
            theme = self.theme
            head = {"theme": {"id": theme.id, "section": theme.section, "en": theme.en, "zh": theme.zh}}
        body: dict[str, Any] = {**head, "cutoff": cutoff, "count": self.count}
        if self.theme is not None:
            body["pull_requests"] = len(self.rows)
        body["prs"] = [row.as_dict() for row in self.rows]
        return body


# --- the month, from its snapshot or from its report's JSON document -------------------------------


def view_of_snapshot(snapshot: MonthSnapshot, paths: Mapping[int, Sequence[str]] | None = None) -> MonthView:
    """The month's PRs as the snapshot has them, without themes (which a statistic does not need).
    `paths`: the changed paths of each PR's head at the cutoff, when the caller read them."""
    return MonthView({pr.status.number: _candidate(pr, paths) for pr in snapshot.pull_requests}, ())


NONE: frozenset[str] = frozenset()


def _candidate(pr: PullRequestSnapshot, paths: Mapping[int, Sequence[str]] | None) -> Candidate:
    status = pr.status
    counts = (status.counts_opened, status.counts_merged, status.counts_closed_unmerged, status.counts_active)
    counted = frozenset(stat for stat, yes in zip(STATISTICS, counts, strict=True) if yes) if pr.substantive else NONE
    return Candidate(pr.category.value, counted, partial(_entry, pr, paths))


def _entry(pr: PullRequestSnapshot, paths: Mapping[int, Sequence[str]] | None) -> Entry:
    version, status, activity = pr.version, pr.status, pr.status.activity
    number = status.number
    return Entry(
        number=number,
        title=version.title if version else "",
        base_ref=version.base_ref if version else "",
        head_sha=version.head_sha if version else "",
        state=status.state.value,
        activity={
            "opened": activity.opened,
            "committed": activity.committed,
            "closed": activity.closed,
            "reopened": activity.reopened,
            "merged": activity.merged,
        },
        opened_at=iso_utc(pr.created_at),
        merged_at=iso_utc(pr.merged_at) if pr.merged_at is not None else None,
        closed_at=iso_utc(pr.closed_at) if pr.closed_at is not None else None,
        classification=pr.evidence,
        paths=tuple(paths.get(number, ())) if paths is not None else None,
    )


def view_of_document(document: Mapping[str, Any]) -> MonthView:
    """The month as its report's JSON document has it (tracker.reports.render.report_document: what the
    report's JSON serves, and what a finalised month's record keeps and serves for its last day whatever
    arrived later), its themes with it."""
    pull_requests = {
        pr["number"]: Candidate(
            pr["category"],
            frozenset(stat for stat in STATISTICS if pr["counted"][stat]),
            partial(_document_entry, pr),
        )
        for pr in document["pull_requests"]
    }
    themes = tuple(
        ThemeOutline(
            section["id"],
            theme["id"],
            theme["en"],
            theme["zh"],
            tuple(
                (change["id"], highlight["id"], tuple(change["group"]))
                for highlight in theme["highlights"]
                for change in highlight["changes"]
            ),
        )
        for section in document["report"]["sections"]
        for theme in section["themes"]
    )
    return MonthView(pull_requests, themes)


def _document_entry(pr: Mapping[str, Any]) -> Entry:
    return Entry(
        number=pr["number"],
        title=pr["title"],
        base_ref=pr["base_ref"],
        head_sha=pr["head_sha"],
        state=pr["state_at_cutoff"],
        activity=dict(pr["activity"]),
        opened_at=pr["created_at"],
        merged_at=pr["merged_at"],
        closed_at=None,
        classification=pr["evidence"],
        paths=None,
    )


# --- what a number counts --------------------------------------------------------------------------


def drill_stat(view: MonthView, stat: str) -> DrillDown:
    """The PRs a statistic, an exclusion count or the pending count counts, by number. Raises
    UnknownSelection for a name the report does not show."""
    if stat in STATISTICS:
        entries = (pr.entry() for pr in view.pull_requests.values() if stat in pr.counted)
        rows = tuple(_row(entry, _facts(entry)) for entry in entries)
    elif stat in (*EXCLUSIONS, PENDING):
        entries = (pr.entry() for pr in view.pull_requests.values() if pr.category == stat)
        rows = tuple(_row(entry, _classification(entry)) for entry in entries)
    else:
        raise UnknownSelection(f"stat={stat!r} is not a number of the report: use one of {', '.join(SELECTIONS)}")
    ordered = tuple(sorted(rows, key=lambda row: row.number))
    return DrillDown(stat, len(ordered), ordered)


def drill_theme(view: MonthView, section: str, theme_id: str) -> DrillDown:
    """The changes of a theme of a section, and every PR they cite (in the order of the changes, then of
    the numbers). Raises UnknownSelection for a section the report does not have, UnknownTheme for a theme
    not in it."""
    if section not in SECTIONS:
        raise UnknownSelection(f"section={section!r} is not a section of the report: use {' or '.join(SECTIONS)}")
    theme = next((t for t in view.themes if t.section == section and t.id == theme_id), None)
    if theme is None:
        raise UnknownTheme(f"no theme {theme_id!r} in the section {section} at this cutoff")
    rows = []
    for change, highlight, numbers in sorted(theme.changes, key=lambda change: min(change[2])):
        for number in sorted(numbers):
            entry = view.pull_requests[number].entry()
            rows.append(_row(entry, {"change": change, "highlight": highlight, **_facts(entry)}, change))
    return DrillDown(None, len(theme.changes), tuple(rows), theme)


def _row(entry: Entry, evidence: Mapping[str, Any], change: str | None = None) -> Row:
    return Row(entry.number, entry.title, entry.base_ref, evidence, change)


def _facts(entry: Entry) -> dict[str, Any]:
    """What puts a PR in a statistic or a section: its state at the cutoff, which kinds of fact fall inside
    the window, its instants, and its head at the cutoff."""
    return {
        "state_at_cutoff": entry.state,
        "in_window": [kind for kind, inside in entry.activity.items() if inside],
        "opened_at": entry.opened_at,
        "merged_at": entry.merged_at,
        "closed_at": entry.closed_at,
        "head_sha": entry.head_sha,
    }


def _classification(entry: Entry) -> dict[str, Any]:
    """What decided an excluded (or pending) PR's category: its head's evidence (the head sha, the rule, how
    many files, some of them), and every changed path of that head when known."""
    evidence = dict(entry.classification)
    evidence.setdefault("head_sha", entry.head_sha)
    evidence["paths"] = list(entry.paths) if entry.paths is not None else None
    return evidence
