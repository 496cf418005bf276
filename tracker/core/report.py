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

Each section's changes are grouped into at most 10 themes by what they share (tracker.core.clusters:
files, title terms, labels, references; the taxonomy, when the repository has one, as a prior), each
theme into 1-4 highlights (sub-topics). A highlight's line names its most significant changes (`shown`:
at most `MAX_SHOWN`, within `MAX_LINE_WORDS`), and every other change of the theme is listed in its fold
(`Theme.folded`, one change a line), so that a reader scans a few lines a theme and every change is still
cited once. Themes and highlights are named by their distinctive title terms and their area (the
taxonomy's, else the code layout's): as plain data (`named_themes`: names and indexes into the section's
changes), which a caller can keep by content with the grouping (tracker.reports.groupings), and which
`_themes` makes the section's `Theme`s of. Titles are cleaned (tracker.core.titles).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import cached_property
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from tracker.core import clusters, memo, noise, vocabulary
from tracker.core.descriptions import summary_sentence
from tracker.core.groups import GroupInput, change_groups, references
from tracker.core.snapshot import MonthSnapshot, PullRequestSnapshot
from tracker.core.taxonomy import ThemeConfig
from tracker.core.themes import (
    LAYOUT_PREFIX,
    ThemeChoice,
    choose_theme,
    considered_files_of,
)
from tracker.core.timeline import PRState
from tracker.core.titles import clean_title, word_count
from tracker.core.window import local_midnight

DELIVERED, IN_PROGRESS = "delivered", "in_progress"
MAX_THEMES = clusters.MAX_THEMES
MAX_HIGHLIGHTS = clusters.MAX_TOPICS
MAX_SHOWN = 3  # changes a highlight's line names; the theme's others are in its fold
MAX_LINE_WORDS = 40  # of a highlight's line, its lead included, citations aside
MAX_TITLE_WORDS = 30  # a longer title is cut, with an ellipsis, so that a line with its lead stays within the limit
OTHER_THEME = ("other", "Other changes", "其他改进")
# The prior of every change of a repository without a taxonomy (which reads none).
NO_PRIOR = ThemeChoice(f"{LAYOUT_PREFIX}none", "", "", "none", "", "")
FURTHER = ("Further changes", "其他相关改进")
REVERTED = ("reverted", *noise.REVERTED_LEAD)


class Citation(NamedTuple):  # a tuple: a big month's report makes thousands of them
    number: int
    base_ref: str

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
    theme: ThemeChoice  # what the taxonomy says of the change, a prior for its theme (NO_PRIOR without one)
    group: tuple[int, ...] = ()  # the numbers of the whole group; the members' own numbers when empty
    labels: tuple[str, ...] = ()  # of every member of the group
    paths: tuple[str, ...] = ()  # changed by any member of the group
    raw_title: str = ""  # the first member's title as its author wrote it
    # The first sentence of the summary its first member's description gives (tracker.core.descriptions), else "".
    summary: str = ""
    upkeep: str | None = None  # a sync, version bump, dependency update or build change (tracker.core.noise)

    @property
    def text(self) -> str:
        """What a highlight's line says of it: its description's summary sentence, else its cleaned title."""
        return self.summary or self.title

    @cached_property  # sorting and grouping ask for it thousands of times in a big month
    def numbers(self) -> tuple[int, ...]:
        """The numbers of the PRs this change cites."""
        return tuple(pr.status.number for pr in self.members)

    @property
    def counterparts(self) -> tuple[int, ...]:
        """The numbers of every PR of the change group, cited here or in the other section."""
        return self.group or self.numbers

    @cached_property
    def citations(self) -> tuple[Citation, ...]:
        return tuple(Citation(pr.status.number, pr.version.base_ref if pr.version else "") for pr in self.members)


@dataclass(frozen=True)
class Highlight:
    """A sub-topic of a theme: one name, and its changes in bullets a reader can scan."""

    id: str
    en: str
    zh: str
    changes: tuple[Change, ...]
    # Prose from the language-model narrator (validated, tracker.narration.schema): one sentence about all
    # of the changes, which the report cites after it, in place of the name and the titles.
    sentence_en: str = ""
    sentence_zh: str = ""
    listed: bool = False  # its changes are only listed in the theme's fold (upkeep): no line of its own

    @cached_property  # read several times a render
    def shown(self) -> tuple[Change, ...]:
        """The changes its line names, the most significant first (`significance`): as many as fit in
        `MAX_SHOWN` and `MAX_LINE_WORDS` with its lead, at least one; every change when the narrator wrote its
        sentence (which is about all of them), none in "Further changes" (a lead that says nothing)."""
        if self.sentence_en:
            return self.changes
        if self.listed or self.en == FURTHER[0]:
            return ()
        shown: list[Change] = []
        # The lead, in the longer of its languages (two CJK characters a word).
        words = max(word_count(self.en), len(self.zh) // 2)
        for change in sorted(self.changes, key=significance):
            size = word_count(change.text)
            if shown and (len(shown) == MAX_SHOWN or words + size > MAX_LINE_WORDS):
                break
            shown.append(change)
            words += size
        return tuple(shown)


def significance(change: Change) -> tuple[int, int, int]:
    """How a change ranks in its highlight, first first: landed on more branches (dev/main twins), then more
    files of code changed (tests, CI and docs aside when there is code), then the older PR. What any
    repository's changes have, whatever their authors write."""
    return (-len(change.counterparts), -len(considered_files_of([change.paths])), change.numbers[0])


@dataclass(frozen=True)
class Theme:
    id: str
    en: str
    zh: str
    highlights: tuple[Highlight, ...]
    terms: tuple[str, ...] = ()  # what its changes are about, as their titles write it
    summary_en: str = ""  # the narrator's summary; the deterministic one is written at rendering
    summary_zh: str = ""

    @property
    def changes(self) -> tuple[Change, ...]:
        return tuple(change for highlight in self.highlights for change in highlight.changes)

    @cached_property  # read several times a render
    def folded(self) -> tuple[Change, ...]:
        """Its changes no highlight's line names, by PR number: the theme's fold, one change a line."""
        shown = {change.id for highlight in self.highlights for change in highlight.shown}
        return tuple(sorted((c for c in self.changes if c.id not in shown), key=_order))

    @cached_property  # read several times a render
    def headline(self) -> Change:
        """Its most significant change named in a line: what the overview says the theme is led by."""
        shown = [change for highlight in self.highlights for change in highlight.shown]
        return min(shown or self.changes, key=significance)


@dataclass(frozen=True)
class Section:
    id: str
    themes: tuple[Theme, ...]
    # Changes undone within the window, each (change, the revert that undid it; None when that revert is
    # itself cited in an earlier pair): not delivered work, said in one line (tracker.core.noise).
    reverted: tuple[tuple[Change, Change | None], ...] = ()
    # The language-model narrator's overview of the section (validated, tracker.narration.schema), in place of
    # the one the report writes from its content (tracker.reports.render.overview); "" without one.
    overview_en: str = ""
    overview_zh: str = ""

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
    themed: bool  # the repository has a taxonomy (a prior for themes and their names)
    # Who wrote the words: {"kind": "deterministic"}, or {"kind": "llm", "model", "fallbacks"}.
    narrator: Mapping[str, Any] = field(default_factory=lambda: {"kind": "deterministic"})

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
            for undone in (change for pair in section.reverted for change in pair if change is not None):
                for number in undone.numbers:
                    placed[number] = {
                        "section": section.id,
                        "theme": REVERTED[0],
                        "highlight": f"{REVERTED[0]}/{REVERTED[0]}",
                        "group": list(undone.counterparts),
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


class NamedHighlight(NamedTuple):
    """A highlight as plain data: its id, its names, and its changes as indexes into the section's items."""

    id: str
    en: str
    zh: str
    members: tuple[int, ...]  # ascending, as the items are ordered (by PR number)


class NamedTheme(NamedTuple):
    """A theme as plain data, from which `_themes` makes its `Theme` of the section's changes."""

    id: str
    en: str
    zh: str
    terms: tuple[str, ...]
    highlights: tuple[NamedHighlight, ...]


# Groups a section's changes into themes and names them (`named_section`: a function of the items and, with a
# taxonomy, each item's choice, names included), or a caller's stand-in that gives the same answer for the same
# items and priors (tracker.reports.groupings: remembered by content in Redis).
Themer = Callable[[Sequence[clusters.Item], Sequence[ThemeChoice]], tuple[NamedTheme, ...]]


def named_section(items: Sequence[clusters.Item], priors: Sequence[ThemeChoice]) -> tuple[NamedTheme, ...]:
    """A section's themes: its items grouped (tracker.core.clusters), then named (`named_themes`)."""
    return named_themes(items, priors, clusters.group(items))


def build_report(
    snapshot: MonthSnapshot,
    paths: Mapping[int, Sequence[str]],
    taxonomy: Sequence[ThemeConfig] = (),
    choose: Chooser = choose_theme,
    themer: Themer = named_section,
    known: memo.Known = memo.NOTHING,
) -> Report:
    """`paths`: the changed paths of each PR's head at the cutoff, by PR number. `themer`: how each section's
    themes are found and named (`named_section` by default). `known`: results of the memoised functions of PR
    text computed ahead for these PRs (tracker.core.memo; a month's digest carries them), used instead of
    computing them again."""
    with memo.using(known):
        return _build_report(snapshot, paths, taxonomy, choose, themer)


def _build_report(
    snapshot: MonthSnapshot,
    paths: Mapping[int, Sequence[str]],
    taxonomy: Sequence[ThemeConfig],
    choose: Chooser,
    themer: Themer,
) -> Report:
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
    undone = noise.reversions(
        [
            noise.NoiseInput(number, pr.version.title, pr.version.body, pr.version.base_ref, pr.merged_at)
            for number, pr in sorted(narrated.items())
            if sections[number] == DELIVERED and pr.version
        ],
        snapshot.repo,
    )
    changes, hidden = [], {}
    for numbers in groups:
        members = tuple(narrated[n] for n in numbers)
        # One theme for the whole group, from its first member's title and every member's labels and
        # paths, so that a change in progress on one branch and delivered on another reads as one story.
        # Only a taxonomy's choice is a prior: without one, themes and their names come from the month's
        # grouping and the code layout, and nothing reads a prior.
        labels = sorted({label for pr in members if pr.version for label in pr.version.labels})
        changed = sorted({path for n in numbers for path in paths.get(n, ())})
        theme = choose(taxonomy, _raw_title(members[0]), labels, changed) if taxonomy else NO_PRIOR
        upkeep = _upkeep(members, changed, labels)
        for pr in members:
            if pr.status.number in undone.hidden:  # described in the Reverted line, alone
                hidden[pr.status.number] = Change(
                    f"change-{pr.status.number}", snapshot.repo, _title(pr), (pr,), DELIVERED, theme, numbers
                )
        for section in (DELIVERED, IN_PROGRESS):
            part = tuple(
                pr for pr in members if sections[pr.status.number] == section and pr.status.number not in hidden
            )
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
                        labels=tuple(labels),
                        paths=tuple(changed),
                        raw_title=_raw_title(members[0]),  # the group's, as its theme prior
                        summary=_summary(part[0]),
                        upkeep=upkeep,
                    )
                )
    return Report(
        snapshot=snapshot,
        sections=tuple(
            Section(
                s,
                _themes([c for c in changes if c.section == s], bool(taxonomy), themer),
                _reverted(undone.pairs, hidden) if s == DELIVERED else (),
            )
            for s in (DELIVERED, IN_PROGRESS)
        ),
        days=_days(snapshot),
        themed=bool(taxonomy),
    )


def _upkeep(members: Sequence[PullRequestSnapshot], changed: Sequence[str], labels: Sequence[str]) -> str | None:
    """Whether a change is upkeep, from its first member's title and author and every member's labels and
    paths (`noise.maintenance_kind`); of a change of one PR, what the report was given when it was (its
    version's, `memo` kind `version_upkeep`)."""
    first = members[0]
    if len(members) == 1 and first.version is not None:
        given = memo.known("version_upkeep", (first.status.number, first.version.at))
        if given is not memo.MISSING:
            return str(given) if given is not None else None
    return noise.maintenance_kind(_raw_title(first), changed, first.version.author if first.version else None, labels)


def _raw_title(pr: PullRequestSnapshot) -> str:
    return pr.version.title if pr.version else f"#{pr.status.number}"


def _summary(pr: PullRequestSnapshot) -> str:
    """The first sentence of the summary its description gives, cut like a title, else ""."""
    sentence = summary_sentence(pr.version.body) if pr.version and pr.version.body else None
    return sentence or ""


def _reverted(
    pairs: Sequence[tuple[int, int]], hidden: Mapping[int, Change]
) -> tuple[tuple[Change, Change | None], ...]:
    """The Reverted line's pairs: each change undone in the window with the revert that undid it, every one
    of them cited once (a revert of a revert is the second pair's change; a change a pair already cites
    is not cited again)."""
    said: set[int] = set()
    lines: list[tuple[Change, Change | None]] = []
    for revert, undone in sorted(pairs, key=lambda pair: (pair[1], pair[0])):
        if undone in hidden and revert in hidden and undone not in said and revert not in said:
            lines.append((hidden[undone], hidden[revert]))
            said.update((undone, revert))
    lines.extend((hidden[number], None) for number in sorted(hidden) if number not in said)
    return tuple(lines)


def _title(pr: PullRequestSnapshot) -> str:
    words = clean_title(_raw_title(pr)).split()
    if len(words) > MAX_TITLE_WORDS:
        words = [*words[:MAX_TITLE_WORDS], "…"]
    return " ".join(words)


def _themes(changes: Sequence[Change], themed: bool, themer: Themer = named_section) -> tuple[Theme, ...]:
    """The section's changes in the themes `themer` finds and names; "Other", then upkeep, last."""
    changes = sorted(changes, key=_order)
    items = [
        clusters.Item(
            title=change.raw_title,
            labels=change.labels,
            paths=change.paths,
            references=tuple(sorted({*change.counterparts, *_references(change)})),
            prior=(change.theme.theme_id, change.theme.highlight_id) if themed else (),
            upkeep=change.upkeep is not None,
        )
        for change in changes
    ]
    named = themer(items, [change.theme for change in changes] if themed else ())
    themes = tuple(
        Theme(
            theme.id,
            theme.en,
            theme.zh,
            tuple(Highlight(h.id, h.en, h.zh, tuple(changes[i] for i in h.members)) for h in theme.highlights),
            theme.terms,
        )
        for theme in named
    )
    upkeep = [change for change in changes if change.upkeep]
    return (*themes, _upkeep_theme(upkeep)) if upkeep else themes


def named_themes(
    items: Sequence[clusters.Item], priors: Sequence[ThemeChoice], groups: Sequence[clusters.Group]
) -> tuple[NamedTheme, ...]:
    """The themes of a section's `items` the grouping found (`groups`), named by their distinctive terms and
    their area: the taxonomy's, from each item's choice (`priors`, names included; empty without a taxonomy),
    else the code layout's of the items' paths. Two of one name are one theme; upkeep is taken out (the report
    says it in its own last theme); "Other" last. Reads nothing else: what a caller keeps of it is keyed on the
    items, the priors and the code."""
    themes: list[NamedTheme] = []
    used: set[str] = set()
    for found in groups:
        terms: tuple[str, ...] = ()
        area = _area(found.members, items, priors) if found.other else None
        if found.other and area is None:
            en, zh = OTHER_THEME[1], OTHER_THEME[2]
        elif found.other and area is not None:  # alike to no theme, but all in one area: named by it
            en, zh = area
        else:
            topic_terms = [t.terms[0] for t in found.topics if t.terms]
            en, zh, terms = _theme_name(found.terms, topic_terms, found.members, items, priors)
        highlights = _highlights(found.topics, items, priors)
        if en == OTHER_THEME[1] and not found.other and highlights[0].en != FURTHER[0]:
            en, zh = highlights[0].en, highlights[0].zh  # nothing names the whole: its largest part does
        if len(highlights) == 1 and highlights[0].en == FURTHER[0]:  # nothing names a part: the theme's name does
            highlights = (highlights[0]._replace(id=_slug(en) or "topic", en=_short(en), zh=_short(zh)),)
        same = next((i for i, theme in enumerate(themes) if theme.en == en), None)
        if same is not None:  # two communities one name says (the taxonomy's area, alone): one theme
            themes[same] = themes[same]._replace(highlights=_merged(themes[same].highlights, highlights))
            continue
        mixed = found.other and en == OTHER_THEME[1]
        theme_id = OTHER_THEME[0] if mixed else unique_id(en, used, "theme")
        themes.append(NamedTheme(theme_id, en, zh, terms, highlights))
    # Upkeep is grouped with the rest (what it touches tells the grouping about the others), then taken out
    # of its theme into the last one.
    kept = [_without_upkeep(theme, items) for theme in themes]
    return tuple(
        sorted(
            (theme for theme in kept if theme.highlights),
            key=lambda theme: (theme.id == OTHER_THEME[0], -sum(len(h.members) for h in theme.highlights)),
        )
    )


def _without_upkeep(theme: NamedTheme, items: Sequence[clusters.Item]) -> NamedTheme:
    highlights = (h._replace(members=tuple(i for i in h.members if not items[i].upkeep)) for h in theme.highlights)
    return theme._replace(highlights=tuple(h for h in highlights if h.members))


# The parts of the upkeep theme, by kind (tracker.core.noise).
UPKEEP_KINDS = {
    noise.DEPENDENCIES: ("Dependency updates", "依赖更新"),
    noise.BUILD: ("Build and CI", "构建与 CI"),
    noise.VERSION: ("Version bumps", "版本号更新"),
    noise.SYNC: ("Branch syncs", "分支同步"),
}


def _upkeep_theme(changes: Sequence[Change]) -> Theme:
    """The last theme of a section: syncs, version bumps, dependency updates and build changes, listed in its
    fold (nothing of it leads), in parts by kind, the largest first."""
    kinds = sorted(
        UPKEEP_KINDS, key=lambda kind: (-sum(c.upkeep == kind for c in changes), list(UPKEEP_KINDS).index(kind))
    )
    highlights = tuple(
        Highlight(kind, *UPKEEP_KINDS[kind], tuple(c for c in changes if c.upkeep == kind), listed=True)
        for kind in kinds
        if any(c.upkeep == kind for c in changes)
    )
    return Theme(noise.MAINTENANCE_THEME[0], noise.MAINTENANCE_THEME[1], noise.MAINTENANCE_THEME[2], highlights)


def _merged(first: Sequence[NamedHighlight], second: Sequence[NamedHighlight]) -> tuple[NamedHighlight, ...]:
    """The highlights of two themes of one name: one of each name, at most `MAX_HIGHLIGHTS`, the smallest
    beyond that in "Further changes"."""
    by_name: dict[str, NamedHighlight] = {}
    for highlight in (*first, *second):
        known = by_name.get(highlight.en)
        by_name[highlight.en] = (
            known._replace(members=tuple(sorted((*known.members, *highlight.members)))) if known else highlight
        )
    ranked = sorted(by_name.values(), key=lambda h: (h.en == FURTHER[0], -len(h.members)))
    if len(ranked) <= MAX_HIGHLIGHTS:
        return tuple(ranked)
    kept, rest = ranked[: MAX_HIGHLIGHTS - 1], ranked[MAX_HIGHLIGHTS - 1 :]
    folded = tuple(sorted(i for h in rest for i in h.members))
    ids = {h.id for h in kept}
    return (*kept, NamedHighlight(unique_id(FURTHER[0], ids, "topic"), *FURTHER, folded))


def _references(change: Change) -> set[int]:
    return {n for pr in change.members if pr.version for n in references(pr.version.title, pr.version.body)}


def _theme_name(
    terms: Sequence[str],
    topic_terms: Sequence[str],
    members: Sequence[int],
    items: Sequence[clusters.Item],
    priors: Sequence[ThemeChoice],
) -> tuple[str, str, tuple[str, ...]]:
    """Its distinctive terms, then its area: "GTP and CUDA graphs · Tensor Parallel"."""
    area = _area(members, items, priors)
    if area is not None:
        # A term the area's name already says ("MoE" in "Mixture of Experts (MoE)") is said once.
        terms = [t for t in terms if t.casefold() not in _words(area[0])]
    if not terms:
        if area is not None:
            return area[0], area[1], ()
        if not topic_terms:  # nothing names it: where its code is (never a fragment of a title)
            return (*(vocabulary.area_name([p for i in members for p in items[i].paths]) or OTHER_THEME[1:]), ())
        terms = list(topic_terms[:2])  # no term for the whole theme: its two largest sub-topics
    zh = vocabulary.spaced("、".join(vocabulary.chinese(t) for t in terms))  # before a capital says a name
    terms = [_capitalised(terms[0]), *terms[1:]]
    en = _join(terms, " and ")
    if area is None:
        return en, zh, tuple(terms)
    return f"{en} · {area[0]}", f"{zh} · {area[1]}", tuple(terms)


def _area(
    members: Sequence[int], items: Sequence[clusters.Item], priors: Sequence[ThemeChoice], highlight: bool = False
) -> tuple[str, str] | None:
    """The taxonomy's area (or sub-area) of most of the members (when there are `priors`), else the code
    layout's area of their files."""
    if priors:
        counts: dict[str, int] = defaultdict(int)
        names: dict[str, tuple[str, str]] = {}
        for i in members:
            prior = priors[i]
            if not prior.theme_id.startswith(LAYOUT_PREFIX):
                key = f"{prior.theme_id}/{prior.highlight_id}" if highlight else prior.theme_id
                counts[key] += 1
                names[key] = (prior.highlight_en, prior.highlight_zh) if highlight else (prior.theme_en, prior.theme_zh)
        if counts:
            best = min(counts, key=lambda key: (-counts[key], key))
            if 2 * counts[best] > len(members):
                return names[best]
    # The layout's area, or its folder when the layout would say one generic word ("Training").
    return vocabulary.area_name(considered_files_of([items[i].paths for i in members]))


def _highlights(
    topics: Sequence[clusters.Topic], items: Sequence[clusters.Item], priors: Sequence[ThemeChoice]
) -> tuple[NamedHighlight, ...]:
    """Each sub-topic named by its distinctive term when most of its changes say it, else by the taxonomy's
    sub-area of most of them, else by the term, else by its area; two of one name are one highlight."""
    named: dict[str, tuple[str, list[int]]] = {}
    for topic in topics:
        members = list(topic.members)
        prior = _area(members, items, priors, highlight=True) if priors else None
        # One title's word, or a word a minority of the titles say, names less than the taxonomy's sub-area.
        if topic.terms and (prior is None or (len(members) > 1 and topic.share >= 0.5)):
            en, zh = _capitalised(topic.terms[0]), vocabulary.chinese(topic.terms[0])
        else:
            en, zh = (prior if priors else _area(members, items, priors, highlight=True)) or FURTHER
        if en in named:
            named[en][1].extend(members)
        else:
            named[en] = (zh, members)
    used: set[str] = set()
    ordered = sorted(named.items(), key=lambda item: item[0] == FURTHER[0])  # "Further changes" last
    return tuple(
        NamedHighlight(unique_id(en, used, "topic"), en, zh, tuple(sorted(members))) for en, (zh, members) in ordered
    )


def _short(name: str) -> str:
    """A theme's name as its only highlight's: without the area it ends with ("GTP · Tensor Parallel")."""
    return name.split(" · ")[0]


def _capitalised(term: str) -> str:
    """A name's first letter up: "Layer config", but "mHC" and "vLLM" as their authors spell them."""
    first = term.split()[0]
    plain = first.isalpha() or first.replace("-", "").isalpha()  # not `core_r0.17.0`, `v2` or `fp8`
    return term[:1].upper() + term[1:] if first.islower() and plain else term


def _join(terms: Sequence[str], conjunction: str) -> str:
    return terms[0] if len(terms) == 1 else ", ".join(terms[:-1]) + conjunction + terms[-1]


def _words(name: str) -> set[str]:
    return {word.casefold() for word in re.findall(r"[\w.+-]+", name)}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60].strip("-")


def unique_id(name: str, used: set[str], fallback: str) -> str:
    """An id for `name` (its slug, or `fallback`), not yet in `used`, which it joins."""
    slug = _slug(name) or fallback
    candidate, index = slug, 2
    while candidate in used:
        candidate, index = f"{slug}-{index}", index + 1
    used.add(candidate)
    return candidate


def _order(change: Change) -> int:
    return change.numbers[0]


def _days(snapshot: MonthSnapshot) -> tuple[Day, ...]:
    """Substantive PRs opened, merged and closed without merge, per local day of the window."""
    window = snapshot.window
    tz = ZoneInfo(window.timezone)
    first = window.month.first_day
    count = (window.cutoff - first).days + 1
    opened, merged, closed = [0] * count, [0] * count, [0] * count
    ends = [local_midnight(first + timedelta(days=i + 1), tz) for i in range(count)]  # of each day

    def index(instant: int) -> int:
        return bisect_right(ends, instant)

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
