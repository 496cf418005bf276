"""Which PRs are excluded from the report, from their changed files, per SEMANTICS ("Exclusions"). Pure.

A head's files get a verdict once (`classify_head`); the title and labels of the PR at the cutoff
then decide the format rule (`classify_pull_request`), since they are versioned and the files are not.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

import re2

EVIDENCE_EXAMPLES = 5
# GitHub's files endpoint lists at most 3,000 files ("List pull requests files", OpenAPI description).
FILES_ENDPOINT_CAP = 3000

DEFAULT_CI_PATHS = (".github/", "ci/", "tools/ci/", "tests/test_utils/python_scripts/")
DEFAULT_TEST_PATHS = ("tests/", "test/")
DEFAULT_FORMAT_PATTERN = r"\b(auto-format|autoformat|formatting|format|style-only|style only)\b"
# The format pattern reads a PR author's title and labels, their first MAX_FORMAT_TEXT characters
# (GitHub keeps titles to 256 and labels to 50; tracker.core.groups cuts titles the same way).
MAX_FORMAT_TEXT = 1024


class Category(StrEnum):
    SUBSTANTIVE = "substantive"
    CI_ONLY = "ci_only"
    TEST_ONLY = "test_only"
    TEST_CI_ONLY = "test_ci_only"
    FORMAT_ONLY = "format_only"
    PENDING = "pending"


EXCLUDED = (Category.TEST_ONLY, Category.CI_ONLY, Category.TEST_CI_ONLY, Category.FORMAT_ONLY)


@dataclass(frozen=True)
class ChangedFile:
    path: str
    status: str = "modified"
    previous_path: str | None = None
    additions: int = 0
    deletions: int = 0
    patch: str | None = None


@dataclass(frozen=True)
class Rules:
    """Path prefixes (`tests/`) or glob patterns (`*.md`, where `*` also crosses `/`), and the title
    or label pattern that signals a formatting change."""

    ci_paths: tuple[str, ...] = DEFAULT_CI_PATHS
    test_paths: tuple[str, ...] = DEFAULT_TEST_PATHS
    format_pattern: str = DEFAULT_FORMAT_PATTERN
    _search: Callable[[str], object] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        search: Callable[[str], object]
        if self.format_pattern == DEFAULT_FORMAT_PATTERN:
            search = re.compile(self.format_pattern, re.IGNORECASE).search
        else:
            search = compile_format_pattern(self.format_pattern)
        object.__setattr__(self, "_search", search)

    def says_formatting(self, text: str) -> bool:
        return self._search(text[:MAX_FORMAT_TEXT]) is not None


def compile_format_pattern(pattern: str) -> Callable[[str], object]:
    """An operator's format pattern, case-insensitive, as its `search`; ValueError if RE2 refuses it.

    RE2 (google-re2), not Python's `re`: `re` backtracks, so a pattern such as `^(a+)+$` takes
    exponential time on a title of a hundred `a`s and a `!`, and the worker or `tracker render` that
    classifies it never finishes. RE2 matches in time linear in the text, whatever the pattern, and
    refuses what needs backtracking (backreferences, lookaround). The built-in pattern stays with
    `re`, whose `\\b` also knows non-ASCII letters."""
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # RE2 writes its refusals to stderr otherwise; the ValueError says it
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"{reason} (RE2 syntax: no backreferences or lookaround)") from exc

    def search(text: str) -> object:
        # RE2 reads UTF-8: a lone surrogate (JSON can carry one, as `\\ud800`) is matched as `?`
        # rather than raising UnicodeEncodeError.
        return compiled.search(text.encode("utf-8", "replace").decode("utf-8"))

    return search


def normalise(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def matches(path: str, patterns: Sequence[str]) -> bool:
    """Root-relative; a prefix matches the path equal to it without its `/`, or any path under it."""
    path = normalise(path)
    for pattern in patterns:
        pattern = normalise(pattern)
        if any(char in pattern for char in "*?["):
            if fnmatchcase(path, pattern):
                return True
        elif path == pattern.rstrip("/") or path.startswith(pattern if pattern.endswith("/") else pattern + "/"):
            return True
    return False


def whitespace_only(patch: str | None) -> bool:
    """Added and removed lines are the same multiset once all whitespace is deleted, and at least one
    line changed. No patch (binary, or too large for GitHub to show) is not whitespace-only."""
    if patch is None:
        return False
    added: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    in_hunk = False
    # Diff lines end at "\n" only (str.splitlines would also split at form feeds and the like), and
    # "---"/"+++" are file headers only before the first hunk (GitHub's patches have none).
    for line in patch.split("\n"):
        if line.startswith("@@"):
            in_hunk = True
        elif not in_hunk:
            continue
        elif line.startswith("+"):
            added["".join(line[1:].split())] += 1
        elif line.startswith("-"):
            removed["".join(line[1:].split())] += 1
    return bool(added or removed) and added == removed


@dataclass(frozen=True)
class HeadVerdict:
    """What a head's files alone say: a path category, and whether every patch is whitespace-only."""

    head_sha: str
    category: Category  # ci_only, test_only, test_ci_only or substantive
    whitespace_only: bool
    evidence: dict[str, Any]


def classify_head(head_sha: str, files: Sequence[ChangedFile], rules: Rules, truncated: bool = False) -> HeadVerdict:
    # Renamed files count by their new path. The published rule asks each question of every file, in
    # order (SEMANTICS, "Exclusions"): all CI, else all tests, else all tests or CI. A file can be both
    # (tests/test_utils/python_scripts/ is under the CI and the test prefixes): with only CI files it is
    # CI, and beside other test files it is a test.
    ci = [f.path for f in files if matches(f.path, rules.ci_paths)]
    tests = [f.path for f in files if matches(f.path, rules.test_paths)]
    either = [f.path for f in files if f.path in set(ci) or f.path in set(tests)]
    base: dict[str, Any] = {"head_sha": head_sha, "files": len(files)}
    if truncated:
        base["files_truncated"] = True
    if not files:
        return HeadVerdict(head_sha, Category.SUBSTANTIVE, False, {**base, "rule": "no_files"})
    if len(ci) == len(files):
        category, rule, matching = Category.CI_ONLY, "all_files_ci", ci
    elif len(tests) == len(files):
        category, rule, matching = Category.TEST_ONLY, "all_files_test", tests
    elif len(either) == len(files):
        category, rule, matching = Category.TEST_CI_ONLY, "all_files_test_or_ci", either
    else:
        touched = set(either)
        other = [f.path for f in files if f.path not in touched]
        category, rule, matching = Category.SUBSTANTIVE, "code_changed", other
    evidence = {
        **base,
        "rule": rule,
        "matching_files": len(matching),
        "examples": sorted(matching)[:EVIDENCE_EXAMPLES],
    }
    if category is Category.SUBSTANTIVE:  # the format rule, if it applies, names every file
        evidence["all_examples"] = sorted(f.path for f in files)[:EVIDENCE_EXAMPLES]
    return HeadVerdict(head_sha, category, all(whitespace_only(f.patch) for f in files), evidence)


def classify_pull_request(
    verdict: HeadVerdict | None, title: str, labels: Sequence[str], rules: Rules
) -> tuple[Category, dict[str, Any]]:
    """The PR's category at a cutoff: its head's verdict, plus the format rule, which needs the title
    or a label to say formatting and every patch to be whitespace-only."""
    if verdict is None:
        return Category.PENDING, {"rule": "files_not_known_yet"}
    if verdict.category is not Category.SUBSTANTIVE or verdict.evidence["rule"] == "no_files":
        return verdict.category, verdict.evidence
    signal = (
        "title"
        if rules.says_formatting(title)
        else next((f"label:{label}" for label in labels if rules.says_formatting(label)), None)
    )
    evidence = {k: v for k, v in verdict.evidence.items() if k != "all_examples"}
    if signal is not None and verdict.whitespace_only:
        return Category.FORMAT_ONLY, {
            **evidence,
            "rule": "whitespace_only_with_format_signal",
            "signal": signal,
            "matching_files": verdict.evidence["files"],
            "examples": verdict.evidence.get("all_examples", verdict.evidence.get("examples", [])),
        }
    if signal is not None:
        note = "not every patch is whitespace-only"
        return Category.SUBSTANTIVE, {**evidence, "signal": signal, "note": note}
    return Category.SUBSTANTIVE, evidence
