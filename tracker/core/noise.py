"""Noise among delivered changes: reverts that cancel out within the window, and maintenance. Pure.

A change reverted within the window, and its revert, are not delivered work (`reversions`): the report
names them on one "Reverted" line instead. Automated syncs between branches, version bumps and
dependency updates (`maintenance_kind`) are delivered, but they are upkeep, not what the month was
about: the report puts them in one last theme, `MAINTENANCE_THEME`.

The rules hold for any repository: they read the shapes git, GitHub's revert button, Dependabot,
Renovate, release tools and conventional commits give titles, and file names every ecosystem uses.
False positives are worse than misses (a feature filed as upkeep is lost to a reader), so a title
that says more than "bump X to Y" is never upkeep, and a dependency title counts only when the change
touches a file where dependencies are declared.

Titles and bodies come from any PR author: titles are cut to `MAX_TITLE` and bodies to `MAX_BODY`
characters first, titles are read as lists of words rather than by patterns, and the few patterns are
anchored with possessive quantifiers, so that every function takes time linear in its input.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tracker.core import memo
from tracker.core.groups import MAX_BODY, MAX_TITLE, display_title, normalise_title
from tracker.core.themes import considered_files

# (id, English name, Chinese name) of the last theme of a section.
MAINTENANCE_THEME = ("build-ci-dependencies", "Build, CI and dependencies", "构建、CI 与依赖")
# The lead of the one line that names the changes reverted within the window and their reverts.
REVERTED_LEAD = ("Reverted", "已回退")

SYNC, VERSION, DEPENDENCIES, BUILD = "sync", "version", "dependencies", "build"


@dataclass(frozen=True)
class NoiseInput:
    """A PR of one section (merged in the window). `merged_at` orders a revert after what it reverts;
    without it the PR numbers do (a revert is opened after the change it reverts was merged)."""

    number: int
    title: str
    body: str = ""
    base_ref: str = ""
    merged_at: int | None = None


@dataclass(frozen=True)
class Reversions:
    # (revert, reverted) for each revert of a PR of the input, by revert number then reverted number.
    pairs: tuple[tuple[int, int], ...]
    # The PRs that are not delivered work: every revert in `pairs`, and every PR whose revert stands
    # (a revert of a revert re-lands the original: the original is delivered, both reverts are not).
    hidden: frozenset[int]


# --- reverts -----------------------------------------------------------------------------------------

# `Revert "x"`: git's `git revert` subject and GitHub's revert button (curly quotes from editors that
# replace them).
_QUOTED_REVERT = re.compile(r"\s*+revert\s*+[\"“]", re.IGNORECASE)
# `revert: x`, `revert(scope): x`, `Revert: x`: conventional commits.
_CONVENTIONAL_REVERT = re.compile(r"\s*+revert(?:\([^()]{0,40}+\))?+!?+\s*+:\s*+", re.IGNORECASE)
# `Revert #123`, `revert of #123`, `Reverts PR #123`: a number, no title.
_NUMBERED_REVERT = re.compile(r"\s*+revert(?:s|ed)?+\s++(?:of\s++)?+(?:pr\s*+|pull request\s*+)?+#\d", re.IGNORECASE)
# `Revert x` without quotes: a revert of the PR titled exactly x, or of the PR a number names.
_PLAIN_REVERT = re.compile(r"\s*+revert\s++", re.IGNORECASE)
_CLOSING_QUOTES = '"”'
# GitHub cuts a long squash subject with an ellipsis, and the closing quote goes with it.
_ELLIPSES = ("…", "...")
# A cut title is matched by its beginning only when that says enough to tell two titles apart.
_MIN_PREFIX = 20
# How many earlier PRs with the quoted title (or beginning) a revert looks at: the latest are the ones
# a revert undoes, and a bound keeps a month of many same-titled PRs linear.
_MAX_CANDIDATES = 50
# `#123` in a revert's title: the squash subject of the reverted PR carries its number.
_TITLE_NUMBER = re.compile(r"#(\d{1,19}+)\b")
# Lines of a body that say what the PR reverts: GitHub's revert button writes `Reverts owner/repo#123`;
# people write `This reverts #123` or the PR's address. A sentence in the middle of a line ("partly
# reverts #1 and adds ...") is not read: a revert says so first.
_BODY_REVERTS = re.compile(
    r"^[ \t>*-]*+(?:this\s++)?+reverts?+\s++(?:pr\s++|pull request\s++)?+"
    r"(?:(?:https?://github\.com/)?+([\w.-]{1,100}+/[\w.-]{1,100}+)(?:#|/pull/)|#)(\d{1,19}+)\b",
    re.IGNORECASE | re.MULTILINE,
)
# Conventional-commit types that stand before the title of the change itself (`feat: x` reverted as
# `revert: x`), and a ticket id at the start (`AUT-1325 remove ...`).
_TYPE_PREFIX = re.compile(
    r"\s*+(?:fix|fixes|bugfix|hotfix|feat|feature|chore|docs|doc|refactor|perf|test|tests|ci|build|style"
    r"|deps|dep|misc|infra|cleanup)(?:\([^()]{0,40}+\))?+!?+\s*+:\s*+",
    re.IGNORECASE,
)
_LEADING_TICKET = re.compile(r"\s*+[A-Z]{2,10}+-\d{3,8}+\b:?+")


@dataclass(frozen=True)
class _Parsed:
    depth: int  # how many reverts deep: 0 for a change, 1 for its revert, 2 for a revert of that
    key: str  # the innermost title, normalised ("" when the title names only a number)
    cut: bool  # the innermost title ends in an ellipsis: compare its beginning only


def reversions(items: Sequence[NoiseInput], repo: str = "") -> Reversions:
    """Which PRs of `items` revert which others of `items`, and which are therefore not delivered work.

    A PR is a revert when its title says so (`Revert "x"`, `revert: x`, `revert(scope): x`, `Revert #N`,
    `Revert x`). It reverts the PRs its title or body names by number (`Revert "x (#N)"`, a line
    `Reverts owner/repo#N` or `This reverts #N`; an address in another repository than `repo` is not
    one), else the PR whose title it quotes (tags, `cp:` and conventional types aside; the beginning
    of it for a title GitHub cut with an ellipsis): the latest such PR not reverted yet. Either way only
    a PR of the same base branch merged before it: a revert on main undoes a commit of main. A revert
    whose original is not in `items` (merged before the window) changes behaviour: it stays delivered.
    """
    ordered = sorted(items, key=lambda item: (item.merged_at is None, item.merged_at or 0, item.number))
    position = {item.number: index for index, item in enumerate(ordered)}
    by_number = {item.number: item for item in ordered}
    parsed = {item.number: _parse(item.title) for item in ordered}
    # Titles by depth and key, in merge order (for a quoted title) and in key order (for a cut one).
    by_key: dict[tuple[int, str], list[NoiseInput]] = {}
    for item in ordered:
        found = parsed[item.number]
        if found.key and not found.cut:
            by_key.setdefault((found.depth, found.key), []).append(item)
    sorted_keys: dict[int, list[tuple[str, int]]] = {}
    for (depth, key), members in by_key.items():
        sorted_keys.setdefault(depth, []).extend((key, position[m.number]) for m in members)
    for entries in sorted_keys.values():
        entries.sort()
    reverted_by: dict[int, list[int]] = {}
    pairs: list[tuple[int, int]] = []
    for item in ordered:
        found = parsed[item.number]
        if found.depth == 0:
            continue
        named = sorted(
            number
            for number in _named_numbers(item, repo)
            if number in by_number
            and position[number] < position[item.number]
            and _same_branch(by_number[number], item)
        )
        if named:
            targets = named
        elif found.cut:
            targets = _by_beginning(item, found, sorted_keys, ordered, position, reverted_by)
        else:
            targets = _by_title(item, by_key.get((found.depth - 1, found.key), []), position, reverted_by)
        for target in targets:
            pairs.append((item.number, target))
            reverted_by.setdefault(target, []).append(item.number)
    return Reversions(tuple(sorted(pairs)), _hidden(pairs, reverted_by, position))


def _by_title(
    revert: NoiseInput, candidates: list[NoiseInput], position: dict[int, int], reverted_by: dict[int, list[int]]
) -> list[int]:
    """The latest PR with the quoted title merged before the revert on its branch and not reverted yet,
    else the latest one. Only the `_MAX_CANDIDATES` latest of them are looked at, so that a month of
    many PRs with one title and as many reverts of it takes linear time."""
    end = bisect_left(candidates, position[revert.number], key=lambda candidate: position[candidate.number])
    latest = None
    for candidate in reversed(candidates[max(0, end - _MAX_CANDIDATES) : end]):
        if not _same_branch(candidate, revert):
            continue
        if candidate.number not in reverted_by:
            return [candidate.number]
        latest = latest or candidate.number
    return [latest] if latest is not None else []


def _by_beginning(
    revert: NoiseInput,
    found: _Parsed,
    sorted_keys: dict[int, list[tuple[str, int]]],
    ordered: Sequence[NoiseInput],
    position: dict[int, int],
    reverted_by: dict[int, list[int]],
) -> list[int]:
    """The PR whose title begins with a cut quoted title, when the beginning says enough (`_MIN_PREFIX`
    characters) and few titles share it (`_MAX_CANDIDATES`): a beginning many titles share names none."""
    if len(found.key) < _MIN_PREFIX:
        return []
    entries = sorted_keys.get(found.depth - 1, [])
    start = bisect_left(entries, (found.key, -1))
    end = bisect_left(entries, (found.key + "\U0010ffff", -1))
    if end - start > _MAX_CANDIDATES:
        return []
    candidates = sorted(
        (ordered[index] for _, index in entries[start:end] if index < position[revert.number]),
        key=lambda item: position[item.number],
    )
    return _by_title(revert, candidates, position, reverted_by)


def _hidden(
    pairs: Sequence[tuple[int, int]], reverted_by: dict[int, list[int]], position: dict[int, int]
) -> frozenset[int]:
    """Every revert of a PR of the window, and every PR a standing revert undoes. A revert stands when
    no standing revert undoes it; a revert comes after what it reverts, so deciding from the last PR
    back decides each revert before what it reverts."""
    standing: dict[int, bool] = {}
    for number in sorted({n for pair in pairs for n in pair}, key=lambda n: -position[n]):
        standing[number] = not any(standing[revert] for revert in reverted_by.get(number, ()))
    reverts = {revert for revert, _ in pairs}
    return frozenset(reverts | {number for number, stands in standing.items() if not stands})


def _same_branch(first: NoiseInput, second: NoiseInput) -> bool:
    return not first.base_ref or not second.base_ref or first.base_ref == second.base_ref


def _named_numbers(item: NoiseInput, repo: str) -> set[int]:
    """The PR number a revert's title names (`Revert "x (#N)"`, `revert of #N`) and the numbers its
    body's revert lines name in this repository."""
    # The last number of the title: `Revert "Revert "x (#1)" (#2)"` reverts #2, which reverted #1.
    in_title = _TITLE_NUMBER.findall(item.title[:MAX_TITLE])
    numbers = {int(in_title[-1])} if in_title else set()
    for match in _BODY_REVERTS.finditer(item.body[:MAX_BODY]):
        named_repo = match.group(1)
        if named_repo and repo and named_repo.lower() != repo.lower():
            continue  # a PR of another repository with the same number is another change
        numbers.add(int(match.group(2)))
    return numbers


def revert_facts(title: str) -> list[Any]:
    """What `reversions` reads of a title, as plain data (the month's digest keeps it: tracker.core.memo)."""
    parsed = _parse(title)
    return [parsed.depth, parsed.key, parsed.cut]


@lru_cache(maxsize=16_384)  # every report of a month parses the same titles again
def _parse(title: str) -> _Parsed:
    """How many reverts deep a title is, and the title of the change at the bottom. Each step takes at
    least `revert` off the front of a title of at most `MAX_TITLE` characters, so this ends soon."""
    offered = memo.known("revert_facts", title)
    if offered is not memo.MISSING:
        return _Parsed(*offered)
    text = display_title(title[:MAX_TITLE]).strip()
    depth = 0
    cut = False
    while True:
        quoted = _QUOTED_REVERT.match(text)
        if quoted:
            text = text[quoted.end() :].rstrip()
            if text and text[-1] in _CLOSING_QUOTES:
                text = text[:-1]
            elif text.endswith(_ELLIPSES):
                # Only the innermost title can be cut: the quotes of every outer one went with its end.
                cut = True
                text = text.removesuffix("…").removesuffix("...")
            depth += 1
            continue
        if _NUMBERED_REVERT.match(text):
            return _Parsed(depth + 1, "", False)
        conventional = _CONVENTIONAL_REVERT.match(text) or _PLAIN_REVERT.match(text)
        if conventional:
            text = text[conventional.end() :]
            depth += 1
            continue
        break
    return _Parsed(depth, _title_key(text), cut)


def _title_key(text: str) -> str:
    """A change's title compared with the title its revert quotes: normalised, without conventional
    types and a leading ticket (`feat: x` is reverted as `revert: x`)."""
    for _ in range(3):
        before = text
        text = _TYPE_PREFIX.sub("", text, count=1)
        text = _LEADING_TICKET.sub("", text, count=1)
        if text == before:
            break
    return normalise_title(text) if text.strip() else ""


# --- maintenance ---------------------------------------------------------------------------------------

# Apps whose only job is to propose dependency (or pinned tool) updates. Other bots are not enough: a
# coding agent's or a cherry-pick bot's PR is ordinary work.
DEPENDENCY_BOTS = frozenset(
    {
        "dependabot[bot]",
        "dependabot-preview[bot]",
        "renovate[bot]",
        "renovate-bot",
        "pre-commit-ci[bot]",
        "depfu[bot]",
        "pyup-bot",
        "snyk-bot",
        "greenkeeper[bot]",
    }
)
# Dependabot's and Renovate's default label, and the names teams give it.
DEPENDENCY_LABELS = frozenset(
    {"dependencies", "dependency", "deps", "dependency-update", "dependency-updates", "dependency update"}
)
# Files that only pin what a project is built from: lock files, requirement lists, submodules.
_LOCK_FILES = frozenset(
    {
        "uv.lock",
        "poetry.lock",
        "pdm.lock",
        "pipfile.lock",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lockb",
        "go.sum",
        "cargo.lock",
        "gemfile.lock",
        "composer.lock",
        "conda-lock.yml",
        "flake.lock",
        ".gitmodules",
    }
)
# Manifests declare dependencies but also hold the package's metadata, scripts and tool settings: one of
# them alone can be a real change (an entry point, a linter rule), so they count as dependency files
# only beside a lock file or requirement list, or under a dependency label.
_MANIFESTS = frozenset(
    {
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "pipfile",
        "package.json",
        "cargo.toml",
        "go.mod",
        "gemfile",
        "composer.json",
        "pom.xml",
        "build.gradle",
        "build.gradle.kts",
        "environment.yml",
        "environment.yaml",
        "meta.yaml",
    }
)
# Files that only say which version the project itself is.
_VERSION_FILES = frozenset(
    {"version", "version.txt", "version.py", "_version.py", "__version__.py", "version.json", "package_info.py"}
)

_VERBS = frozenset(
    [
        "bump",
        "bumps",
        "bumped",
        "bumping",
        "update",
        "updates",
        "updated",
        "upgrade",
        "upgrades",
        "upgraded",
        "downgrade",
        "downgrades",
        "pin",
        "pins",
        "pinned",
        "unpin",
        "repin",
        "widen",
        "relax",
        "cap",
    ]
)
# What a dependency update says it changes: `Update dependency x`, `x version`, `x docker tag to v2`.
_DEPENDENCY_WORDS = frozenset(
    [
        "dependency",
        "dependencies",
        "deps",
        "dep",
        "version",
        "versions",
        "requirement",
        "requirements",
        "pin",
        "pins",
        "revision",
        "commit",
        "digest",
        "image",
        "tag",
        "submodule",
        "action",
        "actions",
        "package",
        "packages",
        "module",
        "wheel",
    ]
)
# The words of a bump of the project's own version (`Bump version to 1.2.0`, `Update MINOR version to 19`).
_OWN_VERSION_WORDS = frozenset(
    ["the", "version", "versions", "major", "minor", "patch", "package", "project", "release", "number"]
)
# English words that make a title a sentence about something else: "Bump version of the API", "Upgrade
# GitHub Actions for Node 24 compatibility", "Bump FLA to 0.5.1 and integrate GDN2 kernels".
_SENTENCE_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "or",
        "of",
        "for",
        "with",
        "without",
        "by",
        "when",
        "if",
        "so",
        "that",
        "which",
        "as",
        "but",
        "not",
        "no",
        "at",
        "into",
        "onto",
        "via",
        "support",
        "supports",
        "fix",
        "fixes",
        "add",
        "adds",
        "remove",
        "removes",
        "use",
        "uses",
    ]
)
# A bump's title is short: a longer one says more than "bump x to y".
_MAX_WORDS = 14
_MAX_OBJECT = 4
_SYNC_ADJECTIVES = frozenset(
    ["nightly", "daily", "weekly", "hourly", "automated", "automatic", "auto", "scheduled", "manual", "periodic"]
)
_SYNC_VERBS = frozenset(["sync", "syncs", "synced", "syncing", "synchronize", "synchronise", "merge", "merges"])
_KNOWN_BRANCHES = frozenset(
    [
        "main",
        "master",
        "dev",
        "develop",
        "development",
        "trunk",
        "staging",
        "stable",
        "next",
        "nightly",
        "upstream",
        "origin",
        "default",
    ]
)
_RELEASE_BRANCH = re.compile(r"(?:release|releases|rel|hotfix|core_r|r|v)[\w./-]{0,40}+\d[\w./-]{0,40}+", re.IGNORECASE)
_DATE = re.compile(r"\d{1,4}+[-_./]\d{1,2}+[-_./]\d{1,4}+")
_STRICT_VERSION = re.compile(r"v?+\d{1,6}+(?:\.\d{1,6}+){1,3}+(?:[-.+]?+[a-z0-9]{1,20}+)?+", re.IGNORECASE)
_HEX = re.compile(r"[0-9a-f]{7,40}+", re.IGNORECASE)
_ANY_TYPE = re.compile(r"\s*+([A-Za-z][\w-]{0,20}+)(?:\(([^()]{0,40}+)\))?+!?+\s*+:\s*+")


def is_maintenance(title: str, paths: Sequence[str], author: str | None = None, labels: Sequence[str] = ()) -> bool:
    """True for an automated sync, a version bump or a dependency update (`maintenance_kind`)."""
    return maintenance_kind(title, paths, author, labels) is not None


def maintenance_kind(
    title: str, paths: Sequence[str], author: str | None = None, labels: Sequence[str] = ()
) -> str | None:
    """`_kind`, remembered: a month's changes are judged again at each of its reports."""
    return _kind(title, tuple(paths), author, tuple(labels))


@lru_cache(maxsize=16_384)
def _kind(title: str, paths: tuple[str, ...], author: str | None, labels: tuple[str, ...]) -> str | None:
    """`SYNC`, `VERSION`, `DEPENDENCIES` or `BUILD` when a change is upkeep, else None.

    `paths`: the files the change touches; `author`: its author's login; `labels`: its labels.
    - a sync: the title is only "sync a into b" or "merge branch a into b" (a date aside), whoever
      wrote it and whatever it touches (a sync of a busy branch touches hundreds of files);
    - a version bump: the title is only "bump version to 1.2.3", "release 1.2.3" or
      `chore(release): ...`, or every file it judges by is a version file;
    - a dependency update: the author is a dependency bot; or the title is only "bump x (from a) to b"
      (or `deps:` / `chore(deps): ...`) and the change touches a lock file, requirement list, manifest,
      Dockerfile or version file; or every file it judges by is a lock file or requirement list
      (manifests beside them); or it carries a dependency label and every file it judges by is one of
      those or a manifest;
    - build: every file it judges by is a Dockerfile or lives in a `docker/` directory.
    The files a change is judged by are its code files, or all its files when it has none
    (`tracker.core.themes.considered_files`): tests and CI beside a lock file do not make it a feature.
    """
    subject, types = _subject(title)
    words = subject.split()
    if _is_sync(words):
        return SYNC
    files = considered_files(paths)
    names = [path.rsplit("/", 1)[-1].lower() for path in files]
    if _is_release(words, types):
        return VERSION
    if author and author.lower() in DEPENDENCY_BOTS:
        return DEPENDENCIES

    def touches() -> bool:  # asked only of a title that says a bump: most changes have many files
        return any(_declares_dependencies(path) for path in paths)

    bump = _bump_object(words)
    if bump is not None:
        if bump and all(word in _OWN_VERSION_WORDS for word in bump) and "version" in " ".join(bump):
            return VERSION  # `Bump version to 1.2.0` says all there is to say, wherever the version lives
        if touches():
            return DEPENDENCIES
    if types & {"deps", "dep", "dependencies"} and touches():
        return DEPENDENCIES
    if types & {"ci", "build"}:
        # Conventional commits: `build:` "affects the build system or external dependencies", `ci:` "our
        # CI configuration files and scripts"; `fix(ci):` and `feat(build):` say the same by their scope.
        return BUILD
    if not names:
        return None
    if all(name in _VERSION_FILES for name in names):
        return VERSION
    # Beside a lock file or requirement list, a manifest or a Dockerfile declares dependencies too. (`all`
    # stops at the first file of code: what most changes are.)
    declared = all(
        name in _LOCK_FILES or _is_requirements(name) or name in _MANIFESTS or _is_docker(path)
        for name, path in zip(names, files, strict=True)
    )
    if declared and any(name in _LOCK_FILES or _is_requirements(name) for name in names):
        return DEPENDENCIES
    labelled = any(label.strip().lower() in DEPENDENCY_LABELS for label in labels)
    if labelled and declared:
        return DEPENDENCIES
    if all(_is_docker(path) for path in files):
        return BUILD
    return None


def upkeep_facts(title: str) -> list[Any]:
    """What `maintenance_kind` reads of a title, as plain data (the month's digest keeps it: tracker.core.memo)."""
    subject, types = _subject(title)
    return [subject, sorted(types)]


def _subject(title: str) -> tuple[str, frozenset[str]]:
    """The title's words as a bump is read: tags, `cp:`, `(#N)`, tickets, backticks, quotes and trailing
    parenthesised notes (`(core_r0.17.0) (2026-05-04)`) removed, lower case; and the conventional-commit
    types and scopes it began with (`chore(deps):` gives chore and deps)."""
    offered = memo.known("upkeep_facts", title)
    if offered is not memo.MISSING:
        return offered[0], frozenset(offered[1])
    text = display_title(title[:MAX_TITLE])
    types: set[str] = set()
    for _ in range(3):  # `[dev] build(deps): AUT-1353 chore: ...`
        before = text
        conventional = _ANY_TYPE.match(text)
        if conventional:
            types.add(conventional.group(1).lower())
            if conventional.group(2):
                types.update(part.strip().lower() for part in conventional.group(2).split(","))
            text = text[conventional.end() :]
        text = _LEADING_TICKET.sub("", text, count=1)
        if text == before:
            break
    text = _without_trailing_notes(text.replace("`", " ").replace('"', " ").replace("'", " "))
    return " ".join(text.lower().split()), frozenset(types)


def _without_trailing_notes(text: str) -> str:
    """`x (a) (b)` → `x`: parenthesised notes taken off the end, each found by its `(`, scanning back."""
    text = text.rstrip()
    while text.endswith(")"):
        start = text.rfind("(", max(0, len(text) - 42), len(text) - 1)
        if start == -1 or ")" in text[start + 1 : -1]:
            break
        text = text[:start].rstrip()
    return text


def _is_sync(words: Sequence[str]) -> bool:
    """`nightly sync main into dev 13_07_2026`, `sync with upstream`, `merge branch main into dev`."""
    if len(words) > _MAX_WORDS:
        return False
    rest = list(words)
    if rest and rest[-1].strip("()") and _DATE.fullmatch(rest[-1].strip("()")):
        rest.pop()
    while rest and rest[0] in _SYNC_ADJECTIVES:
        rest.pop(0)
    if not rest or rest[0] not in _SYNC_VERBS:
        return False
    verb, rest = rest[0], rest[1:]
    if rest[:1] == ["remote-tracking"]:
        rest = rest[1:]
    if rest[:1] == ["branch"]:
        rest = rest[1:]
    if len(rest) == 1 and _is_branch(rest[0]):
        return True  # `sync main`, `merge branch main`: the title cleaned of "into dev" (`display_title`)
    if verb.startswith("sync") and len(rest) == 2 and rest[0] in ("with", "from") and _is_branch(rest[1]):
        return True  # `sync with upstream`, `sync from main`
    if len(rest) >= 3 and rest[0] == "of":  # `merge branch main of https://... into dev`
        return False
    for index, word in enumerate(rest):
        if word in ("into", "to", "with") and index >= 1:
            source = [w for w in rest[:index] if w != "branch"]
            target = [w for w in rest[index + 1 :] if w != "branch"]
            return len(source) == len(target) == 1 and _is_branch(source[0]) and _is_branch(target[0])
    return False


def _is_branch(word: str) -> bool:
    word = word.strip("`'\"")
    return bool(word) and (
        word in _KNOWN_BRANCHES
        or word.startswith(("origin/", "upstream/"))
        or _RELEASE_BRANCH.fullmatch(word) is not None
    )


def _is_release(words: Sequence[str], types: frozenset[str]) -> bool:
    """`release 1.2.3`, `prepare release v1.2.3`, `v1.2.3`, `chore(release): ...`, `release: 1.2.3`."""
    if "release" in types and types & {"chore", "build"}:
        return True
    rest = list(words)
    for lead in (["prepare", "for", "release"], ["prepare", "release"], ["cut", "release"], ["release"]):
        if rest[: len(lead)] == lead:
            rest = rest[len(lead) :]
            break
    return len(rest) == 1 and _STRICT_VERSION.fullmatch(rest[0]) is not None


def _bump_object(words: Sequence[str]) -> list[str] | None:
    """What a title bumps, when it is only a bump: `bump x`, `bump x version`, `update x to 1.2`,
    `bump x from 1 to 2 in /dir`, `upgrade a to 1, b to 2`, `bump to ngc pytorch 26.02`; else None."""
    if not words or len(words) > _MAX_WORDS or words[0] not in _VERBS:
        return None
    verb = words[0]
    parts = " ".join(words[1:]).split(",")
    objects: list[str] = []
    for index, part in enumerate(parts):
        found = _one_bump(part.split(), verb if index == 0 else "update")
        if found is None:
            return None
        objects.extend(found)
    return objects


def _one_bump(words: list[str], verb: str) -> list[str] | None:
    if words[:1] == ["the"] and "group" in words:  # Dependabot: `bump the pip group across 1 directory ...`
        return words
    if len(words) >= 2 and (words[-2] == "on" or (words[-2] == "in" and "/" in words[-1])):
        words = words[:-2]  # `on dev`, `in /docs`: where, not what
    if "to" in words:
        at = words.index("to")
        obj, target = words[:at], words[at + 1 :]
        if "from" in obj:
            obj = obj[: obj.index("from")]
        if target[:1] in (["version"], ["revision"], ["commit"], ["latest"]) and len(target) > 1:
            target = target[1:]  # `to version 2.7.0`, `to latest 2.14`
        if len(target) >= 3 and target[-2] == "in" and target[-1].endswith((".toml", ".lock", ".txt", ".cfg")):
            target = target[:-2]  # `to 9.1.1 in pyproject.toml and uv.lock` (one `and` joins the files)
        elif len(target) >= 5 and target[-4] == "in" and target[-2] == "and":
            target = target[:-4]
        if not obj:  # `bump to ngc pytorch 26.02`: what it is on, then the version
            if not target or len(target) > _MAX_OBJECT or any(w in _SENTENCE_WORDS for w in target):
                return None
            return target if _versionish(target[-1]) else None
        if len(target) != 1 or not _versionish(target[0]):
            return None
    else:
        obj = words
        # `update x` alone is any change to x ("Update docs"): only `bump` means a version, or a word
        # that names what a dependency update changes (`update x version`, `update dependencies`).
        if verb not in ("bump", "bumps", "bumped", "bumping") and not (obj and obj[-1] in _DEPENDENCY_WORDS):
            return None
    if obj[:1] == ["the"]:
        obj = obj[1:]
    if not obj or len(obj) > _MAX_OBJECT or any(word in _SENTENCE_WORDS for word in obj):
        return None
    return obj


def _versionish(word: str) -> bool:
    """`1.2`, `v2`, `2.16.0`, `26.04-py3`, `release_v2.16.post`, `<0.7.0`, `34152ae`, `latest`: a word with
    a digit in it (or a commit), which prose rarely ends a sentence with."""
    word = word.strip("….")
    return word == "latest" or any(c.isdigit() for c in word) or _HEX.fullmatch(word) is not None


def _declares_dependencies(path: str) -> bool:
    """A file where a dependency's version is written: lock file, requirement list, manifest, Dockerfile,
    a `docker/` directory's files, a version file."""
    name = path.rsplit("/", 1)[-1].lower()
    return (
        name in _LOCK_FILES
        or name in _MANIFESTS
        or name in _VERSION_FILES
        or _is_requirements(name)
        or _is_docker(path)
    )


def _is_requirements(name: str) -> bool:
    """`requirements.txt`, `requirements-dev.txt`, `constraints.txt`, `dev-requirements.in`."""
    return name.endswith((".txt", ".in")) and ("requirements" in name or "constraints" in name)


def _is_docker(path: str) -> bool:
    lowered = path.lower()
    name = lowered.rsplit("/", 1)[-1]
    directories = lowered.split("/")[:-1]
    return (
        "dockerfile" in name
        or name in ("containerfile", ".dockerignore", "docker-compose.yml", "docker-compose.yaml")
        or "docker" in directories
    )
