"""A group's month: the reports of its member repositories merged into one. Pure.

Each member's report is read in the form a reader of it gets, its JSON document (a finalised month's record of
it), or the values of that document this module reads (tracker.reports.render.member_document), so that a group
report is the merge of what its members' own reports say, nothing recomputed:

- a row of statistics per member (opened, merged, closed without merge, active at cutoff, the four exclusions
  and the PRs awaiting classification), as the member's document counts them, and their totals;
- the themes across repositories: each section's member themes merged by their area, the part of a theme's name
  after its last ` · ` ("GTP and CUDA graphs · Tensor Parallel": Tensor Parallel), or its whole name when it has
  none ("Mixture of Experts", "Other changes"), compared without regard to case. A group theme names the
  repositories it spans and keeps each member theme as a part (its repository and its own name), with that
  theme's changes in the member's order, each change citing its PRs with their repository;
- each section's reverted changes, per member, with the revert that undid them.

So every PR a member narrates (a change of a theme, or a reverted line) is cited exactly once in the group, with
its repository. The themes are ordered by how many changes they hold, "Other changes" and the build/CI/dependency
theme last, as in a repository's report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from tracker.core.classify import EXCLUDED
from tracker.core.noise import MAINTENANCE_THEME
from tracker.core.report import DELIVERED, IN_PROGRESS, OTHER_THEME, unique_id

STATISTICS = ("opened", "merged", "closed_unmerged", "active_at_cutoff")
EXCLUSIONS = tuple(category.value for category in EXCLUDED)
SECTIONS = (DELIVERED, IN_PROGRESS)
# The themes a section lists last, in this order (a repository's report does the same).
_LAST = (OTHER_THEME[1].casefold(), MAINTENANCE_THEME[1].casefold())
_AREA = " · "


class Cited(NamedTuple):
    """A PR a group report cites: its repository, number and base branch (untrusted, as GitHub sent it)."""

    repo: str
    number: int
    base_ref: str


@dataclass(frozen=True)
class Member:
    """A member repository's row: its month at the cutoff, as its own report counts it."""

    repo: str
    cutoff: str
    timezone: str
    final: bool
    stats: Mapping[str, int]
    excluded: Mapping[str, int]
    pending: int
    coverage_complete: bool


@dataclass(frozen=True)
class GroupChange:
    """A change of a member's theme: its cleaned title and the PRs it cites."""

    id: str  # the member's change id: unique within the member's section
    title: str
    cited: tuple[Cited, ...]


@dataclass(frozen=True)
class Part:
    """A member's theme inside a group theme: the repository, the member theme's id and names, its changes."""

    repo: str
    theme: str
    en: str
    zh: str
    changes: tuple[GroupChange, ...]


@dataclass(frozen=True)
class GroupTheme:
    id: str
    en: str  # the area its parts share
    zh: str
    parts: tuple[Part, ...]

    @property
    def repos(self) -> tuple[str, ...]:
        """The repositories the theme spans, in the group's order of its members."""
        return tuple(dict.fromkeys(part.repo for part in self.parts))

    @property
    def changes(self) -> int:
        return sum(len(part.changes) for part in self.parts)

    @property
    def pull_requests(self) -> int:
        return sum(len(change.cited) for part in self.parts for change in part.changes)


@dataclass(frozen=True)
class Reverted:
    """A change undone within the window, of a member, and the revert that undid it (none when that revert is
    cited on an earlier line)."""

    repo: str
    title: str
    cited: tuple[Cited, ...]
    by: tuple[Cited, ...]


@dataclass(frozen=True)
class GroupSection:
    id: str
    themes: tuple[GroupTheme, ...]
    reverted: tuple[Reverted, ...]


@dataclass(frozen=True)
class GroupReport:
    """A group's month at a cutoff, over the members this reader may see (`hidden`: some are left out)."""

    name: str
    month: str
    cutoff: str
    members: tuple[Member, ...]
    sections: tuple[GroupSection, ...]
    hidden: bool = False
    waiting: tuple[str, ...] = ()  # members without any delivery yet, shown by name only

    @property
    def final(self) -> bool:
        """Every member's report is final (the month ended, at its last day)."""
        return bool(self.members) and all(member.final for member in self.members)

    @property
    def totals(self) -> Member:
        """The members' sums, as a row of the table."""
        return Member(
            repo="",
            cutoff=self.cutoff,
            timezone="",
            final=self.final,
            stats={key: sum(member.stats[key] for member in self.members) for key in STATISTICS},
            excluded={key: sum(member.excluded[key] for member in self.members) for key in EXCLUSIONS},
            pending=sum(member.pending for member in self.members),
            coverage_complete=all(member.coverage_complete for member in self.members),
        )


def member_of(document: Mapping[str, Any]) -> Member:
    """A member's row from its report's JSON document."""
    return Member(
        repo=document["repo"],
        cutoff=document["cutoff"],
        timezone=document["timezone"],
        final=bool(document["final"]),
        stats={key: int(document["stats"][key]) for key in STATISTICS},
        excluded={key: int(document["excluded"][key]) for key in EXCLUSIONS},
        pending=int(document["pending_classification"]),
        coverage_complete=bool(document["coverage"]["complete"]),
    )


def area(name: str) -> str:
    """The area a theme's name ends with ("GTP · Tensor Parallel": "Tensor Parallel"), else the whole name."""
    return name.rsplit(_AREA, 1)[-1].strip()


def merge_group(
    name: str,
    month: str,
    cutoff: str,
    documents: Sequence[Mapping[str, Any]],
    *,
    hidden: bool = False,
    waiting: Sequence[str] = (),
) -> GroupReport:
    """The group report of `documents` (the members' JSON documents, in the group's order of its members)."""
    members = tuple(member_of(document) for document in documents)
    sections = tuple(_section(section, documents) for section in SECTIONS)
    return GroupReport(name, month, cutoff, members, sections, hidden, tuple(waiting))


def _section(section: str, documents: Sequence[Mapping[str, Any]]) -> GroupSection:
    by_area: dict[str, list[Part]] = {}
    names: dict[str, tuple[str, str]] = {}
    reverted: list[Reverted] = []
    for document in documents:
        repo = document["repo"]
        rows = {pr["number"]: pr for pr in document["pull_requests"]}

        def cited(numbers: Sequence[int], repo: str = repo, rows: Mapping[int, Any] = rows) -> tuple[Cited, ...]:
            return tuple(Cited(repo, number, rows[number]["base_ref"] if number in rows else "") for number in numbers)

        own = next((s for s in document["report"]["sections"] if s["id"] == section), None)
        if own is None:
            continue
        for theme in own["themes"]:
            key = area(theme["en"]).casefold()
            names.setdefault(key, (area(theme["en"]), area(theme["zh"])))
            changes = tuple(
                GroupChange(change["id"], change["title"], cited(change["group"]))
                for highlight in theme["highlights"]
                for change in highlight["changes"]
            )
            by_area.setdefault(key, []).append(Part(repo, theme["id"], theme["en"], theme["zh"], changes))
        for line in own["reverted"]:
            first = rows.get(line["numbers"][0]) if line["numbers"] else None
            title = first["title"] if first is not None else ""
            reverted.append(Reverted(repo, title, cited(line["numbers"]), cited(line["by"])))
    order = {key: index for index, key in enumerate(by_area)}
    ranked = sorted(
        by_area,
        key=lambda key: (
            _LAST.index(key) if key in _LAST else -1,
            -sum(len(part.changes) for part in by_area[key]),
            order[key],
        ),
    )
    used: set[str] = set()
    themes = tuple(
        GroupTheme(unique_id(names[key][0], used, "theme"), *names[key], tuple(by_area[key])) for key in ranked
    )
    return GroupSection(section, themes, tuple(reverted))
