"""The monthly report model: narrated changes in sections, themes and highlights. Pure.

From a `MonthSnapshot` (and the changed paths of each PR's head at the cutoff): narrated PRs are
the substantive ones merged in the window (Delivered) or open at the cutoff with an opening, commit
or reopening in the window (In Progress). dev/main twins form one change group (tracker.groups).

Each PR is narrated in the section its own state puts it in, whatever its group: a group never moves
a PR, so an open PR is never reported as delivered because a merged PR shares its title or is named
in its body. A group whose members are all in one section is one change citing every member; a group
with merged and open members is described in each section by the members that belong there, each PR
cited once, in its own section. Both parts share the group's theme, and each PR's `group` lists every
member of its group (its counterparts in the other section too).

Changes go to themes and highlights (tracker.themes); at most 10 themes per section and 1-4
highlights per theme, the smallest merged into "Other".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from tracker.core.groups import GroupInput, change_groups, display_title
from tracker.core.snapshot import MonthSnapshot, PullRequestSnapshot
from tracker.core.taxonomy import ThemeConfig
from tracker.core.themes import ThemeChoice, choose_theme
from tracker.core.timeline import PRState

DELIVERED, IN_PROGRESS = "delivered", "in_progress"
MAX_THEMES = 10
MAX_HIGHLIGHTS = 4
OTHER_THEME = ("other", "Other changes", "其他改进")
OTHER_HIGHLIGHT = ("other", "Other work", "其他工作")


@dataclass(frozen=True)
class Citation:
    number: int
    base_ref: str
    url: str

    @property
    def label(self) -> str:
        return f"{self.base_ref or 'unknown'} #{self.number}"


@dataclass(frozen=True)
class Change:
    """One change as one section describes it: a PR, or dev/main twins described once. `members` are
    the PRs cited here (all in this section); `group` is every PR of the change group, in either
    section."""

    id: str  # "change-<smallest number of the members>"
    repo: str
    title: str
    members: tuple[PullRequestSnapshot, ...]
    section: str
    theme: ThemeChoice
    group: tuple[int, ...] = ()  # the numbers of the whole group; the members' own numbers when empty

    @property
    def numbers(self) -> tuple[int, ...]:
        """The numbers of the PRs this change cites."""
        return tuple(pr.status.number for pr in self.members)

    @property
    def counterparts(self) -> tuple[int, ...]:
        """The numbers of every PR of the change group, cited here or in the other section."""
        return self.group or self.numbers

    @property
    def citations(self) -> tuple[Citation, ...]:
        return tuple(
            Citation(
                pr.status.number,
                pr.version.base_ref if pr.version else "",
                f"https://github.com/{self.repo}/pull/{pr.status.number}",
            )
            for pr in self.members
        )


@dataclass(frozen=True)
class Highlight:
    id: str
    en: str
    zh: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class Theme:
    id: str
    en: str
    zh: str
    highlights: tuple[Highlight, ...]

    @property
    def changes(self) -> tuple[Change, ...]:
        return tuple(change for highlight in self.highlights for change in highlight.changes)


@dataclass(frozen=True)
class Section:
    id: str
    themes: tuple[Theme, ...]

    @property
    def changes(self) -> tuple[Change, ...]:
        return tuple(change for theme in self.themes for change in theme.changes)


@dataclass(frozen=True)
class Day:
    day: date
    opened: int
    merged: int
    closed: int


@dataclass(frozen=True)
class Report:
    snapshot: MonthSnapshot
    sections: tuple[Section, ...]
    days: tuple[Day, ...]
    themed: bool  # themes came from a taxonomy (else from the code layout)

    def placement(self) -> dict[int, dict[str, Any]]:
        """Where each narrated PR stands: its own section, theme id, highlight id and every member of its
        change group (counterparts in the other section included)."""
        placed = {}
        for section in self.sections:
            for theme in section.themes:
                for highlight in theme.highlights:
                    for change in highlight.changes:
                        for number in change.numbers:
                            placed[number] = {
                                "section": section.id,
                                "theme": theme.id,
                                "highlight": f"{theme.id}/{highlight.id}",
                                "group": list(change.counterparts),
                            }
        return placed


def narrated_section(pr: PullRequestSnapshot) -> str | None:
    if not pr.substantive:
        return None
    activity = pr.status.activity
    if activity.merged and pr.status.state is PRState.MERGED:
        return DELIVERED
    if pr.status.state is PRState.OPEN and (activity.opened or activity.committed or activity.reopened):
        return IN_PROGRESS
    return None


Chooser = Callable[[Sequence[ThemeConfig], str, Sequence[str], Sequence[str]], ThemeChoice]


def build_report(
    snapshot: MonthSnapshot,
    paths: Mapping[int, Sequence[str]],
    taxonomy: Sequence[ThemeConfig] = (),
    choose: Chooser = choose_theme,
) -> Report:
    """`paths`: the changed paths of each PR's head at the cutoff, by PR number."""
    sections = {pr.status.number: narrated_section(pr) for pr in snapshot.pull_requests}
    narrated = {pr.status.number: pr for pr in snapshot.pull_requests if sections[pr.status.number]}
    groups = change_groups(
        [
            GroupInput(
                number=number,
                title=pr.version.title if pr.version else "",
                body=pr.version.body if pr.version else "",
                base_ref=pr.version.base_ref if pr.version else "",
                files=frozenset(paths.get(number, ())),
            )
            for number, pr in sorted(narrated.items())
        ]
    )
    changes = []
    for numbers in groups:
        members = tuple(narrated[n] for n in numbers)
        # One theme for the whole group, from its first member's title and every member's labels and
        # paths, so that a change in progress on one branch and delivered on another reads as one story.
        labels = sorted({label for pr in members if pr.version for label in pr.version.labels})
        changed = sorted({path for n in numbers for path in paths.get(n, ())})
        theme = choose(taxonomy, _title(members[0]), labels, changed)
        for section in (DELIVERED, IN_PROGRESS):
            part = tuple(pr for pr in members if sections[pr.status.number] == section)
            if part:
                changes.append(
                    Change(
                        id=f"change-{part[0].status.number}",
                        repo=snapshot.repo,
                        title=_title(part[0]),
                        members=part,
                        section=section,
                        theme=theme,
                        group=numbers,
                    )
                )
    return Report(
        snapshot=snapshot,
        sections=tuple(Section(s, _themes([c for c in changes if c.section == s])) for s in (DELIVERED, IN_PROGRESS)),
        days=_days(snapshot),
        themed=bool(taxonomy),
    )


def _title(pr: PullRequestSnapshot) -> str:
    return display_title(pr.version.title if pr.version else f"#{pr.status.number}")


def _themes(changes: Sequence[Change]) -> tuple[Theme, ...]:
    by_theme: dict[str, list[Change]] = defaultdict(list)
    names: dict[str, tuple[str, str]] = {}
    for change in changes:
        by_theme[change.theme.theme_id].append(change)
        names.setdefault(change.theme.theme_id, (change.theme.theme_en, change.theme.theme_zh))
    ranked = sorted(by_theme, key=lambda theme_id: (-len(by_theme[theme_id]), names[theme_id][0], theme_id))
    themes = [_theme(theme_id, *names[theme_id], by_theme[theme_id]) for theme_id in ranked]
    if len(themes) <= MAX_THEMES:
        return tuple(themes)
    kept, rest = themes[: MAX_THEMES - 1], themes[MAX_THEMES - 1 :]
    # The smallest themes become the highlights of one "Other changes" theme.
    highlights = [Highlight(t.id, t.en, t.zh, t.changes) for t in rest]
    return (*kept, Theme(*OTHER_THEME, _cap(highlights)))


def _theme(theme_id: str, en: str, zh: str, changes: Sequence[Change]) -> Theme:
    by_highlight: dict[str, list[Change]] = defaultdict(list)
    names: dict[str, tuple[str, str]] = {}
    for change in changes:
        by_highlight[change.theme.highlight_id].append(change)
        names.setdefault(change.theme.highlight_id, (change.theme.highlight_en, change.theme.highlight_zh))
    ranked = sorted(by_highlight, key=lambda h: (-len(by_highlight[h]), names[h][0], h))
    highlights = [Highlight(h, *names[h], tuple(sorted(by_highlight[h], key=_order))) for h in ranked]
    return Theme(theme_id, en, zh, _cap(highlights))


def _cap(highlights: Sequence[Highlight]) -> tuple[Highlight, ...]:
    if len(highlights) <= MAX_HIGHLIGHTS:
        return tuple(highlights)
    kept, rest = list(highlights[: MAX_HIGHLIGHTS - 1]), highlights[MAX_HIGHLIGHTS - 1 :]
    merged = tuple(sorted((c for h in rest for c in h.changes), key=_order))
    return (*kept, Highlight(*OTHER_HIGHLIGHT, merged))


def _order(change: Change) -> int:
    return change.numbers[0]


def _days(snapshot: MonthSnapshot) -> tuple[Day, ...]:
    """Substantive PRs opened, merged and closed without merge, per local day of the window."""
    window = snapshot.window
    tz = ZoneInfo(window.timezone)
    first = window.month.first_day
    count = (window.cutoff - first).days + 1
    opened, merged, closed = [0] * count, [0] * count, [0] * count

    def index(instant: int) -> int:
        return (datetime.fromtimestamp(instant, tz).date() - first).days

    for pr in snapshot.pull_requests:
        if not pr.substantive:
            continue
        if pr.status.counts_opened:
            opened[index(pr.created_at)] += 1
        if pr.status.counts_merged and pr.merged_at is not None:
            merged[index(pr.merged_at)] += 1
        if pr.status.counts_closed_unmerged and pr.closed_at is not None:
            closed[index(pr.closed_at)] += 1
    return tuple(Day(first + timedelta(days=i), opened[i], merged[i], closed[i]) for i in range(count))
