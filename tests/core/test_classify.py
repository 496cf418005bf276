"""`tracker/classify.py` (and `TrackerConfig.rules_for`): SEMANTICS "Exclusions", rule by rule, then
real merged Megatron-LM PRs (../shared/data/megatron) classified from their changed paths.

Every expected category is written by hand; none is computed by the code under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tracker.config import ClassificationConfig, TrackerConfig
from tracker.core.classify import (
    DEFAULT_CI_PATHS,
    DEFAULT_FORMAT_PATTERN,
    DEFAULT_TEST_PATHS,
    Category,
    ChangedFile,
    Rules,
    classify_head,
    classify_pull_request,
    matches,
    whitespace_only,
)

RULES = Rules()
SHA = "5e1f0c3a9b7d2e4f6a8c0b1d3e5f7a9c2b4d6e8f"
CI = DEFAULT_CI_PATHS
TESTS = DEFAULT_TEST_PATHS

# Patches as GitHub's files endpoint returns them: hunks only, no `---`/`+++` file headers.
REINDENT = "@@ -1,2 +1,2 @@\n def f():\n-  return 1\n+    return 1\n"
SPACING = "@@ -1 +1 @@\n-x=f(a,b)\n+x = f(a, b)\n"
REAL_CHANGE = "@@ -1 +1 @@\n-x = 1\n+x = 2\n"
REORDERED = "@@ -1,2 +1,2 @@\n-import a\n-import b\n+import b\n+import a\n"
BLANK_LINE_ADDED = "@@ -1,2 +1,3 @@\n x = 1\n+\n y = 2\n"
NO_CHANGED_LINES = "@@ -1,2 +1,2 @@\n x = 1\n y = 2\n"


def changed(path: str, patch: str | None = REINDENT, status: str = "modified") -> ChangedFile:
    return ChangedFile(path=path, status=status, patch=patch)


def renamed(old: str, new: str, patch: str | None = REINDENT) -> ChangedFile:
    return ChangedFile(path=new, status="renamed", previous_path=old, patch=patch)


def category_of(
    files: Sequence[ChangedFile],
    title: str = "",
    labels: Sequence[str] = (),
    rules: Rules = RULES,
    truncated: bool = False,
) -> tuple[Category, dict[str, Any]]:
    return classify_pull_request(classify_head(SHA, files, rules, truncated), title, labels, rules)


# --- Path matching ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        # A leading `./` is stripped, from the path and from the pattern.
        pytest.param("./ci/run.sh", CI, True, id="leading-dot-slash-ci"),
        pytest.param("./tests/unit_tests/test_a.py", TESTS, True, id="leading-dot-slash-tests"),
        pytest.param("ci/run.sh", ("./ci/",), True, id="leading-dot-slash-in-pattern"),
        # A path equal to the prefix without its trailing `/` matches; a longer name does not.
        pytest.param("ci", CI, True, id="ci-equals-prefix"),
        pytest.param("cix/a", CI, False, id="cix-not-ci"),
        pytest.param("cix", CI, False, id="cix-file-not-ci"),
        pytest.param("tests", TESTS, True, id="tests-equals-prefix"),
        pytest.param("test", TESTS, True, id="test-equals-prefix"),
        pytest.param("tests_old/a.py", TESTS, False, id="tests_old-not-tests"),
        pytest.param("testing/a.py", TESTS, False, id="testing-not-test"),
        pytest.param("tools/ci", CI, True, id="tools-ci-equals-prefix"),
        pytest.param("tests/test_utils/python_scripts", CI, True, id="python-scripts-equals-prefix"),
        # Every default CI prefix.
        pytest.param(".github/workflows/cicd-main.yml", CI, True, id="ci-github"),
        pytest.param("ci/build.sh", CI, True, id="ci-ci"),
        pytest.param("tools/ci/lint.sh", CI, True, id="ci-tools-ci"),
        pytest.param("tests/test_utils/python_scripts/launch.py", CI, True, id="ci-python-scripts"),
        pytest.param("tools/checkpoint/convert.py", CI, False, id="tools-other-not-ci"),
        pytest.param("tools/cix/a.sh", CI, False, id="tools-cix-not-ci"),
        pytest.param("tests/test_utils/recipes/h100/gpt.yaml", CI, False, id="test-utils-recipes-not-ci"),
        pytest.param("tests/test_utils/python_scriptsx/a.py", CI, False, id="python-scriptsx-not-ci"),
        pytest.param(".githubx/a.yml", CI, False, id="githubx-not-ci"),
        # Every default test prefix.
        pytest.param("tests/unit_tests/test_a.py", TESTS, True, id="tests-tests"),
        pytest.param("test/test_a.py", TESTS, True, id="tests-test"),
        pytest.param("tests/test_utils/python_scripts/launch.py", TESTS, True, id="python-scripts-also-under-tests"),
        # Root-relative: a prefix deeper in the tree does not count.
        pytest.param("megatron/core/ci/a.py", CI, False, id="nested-ci-not-root"),
        pytest.param("megatron/tests/a.py", TESTS, False, id="nested-tests-not-root"),
        pytest.param("docs/.github/a.md", CI, False, id="nested-github-not-root"),
        # A configured prefix without a trailing `/` is still a directory prefix.
        pytest.param("docs", ("docs",), True, id="bare-prefix-equal"),
        pytest.param("docs/guide.md", ("docs",), True, id="bare-prefix-under"),
        pytest.param("docsite/guide.md", ("docs",), False, id="bare-prefix-longer-name"),
        # Glob patterns, where `*` also crosses `/`.
        pytest.param(
            "tests/functional_tests/test_cases/gpt/gpt3_tp1/golden_values_dev_dgx_h100.json",
            ("*/golden_values*.json",),
            True,
            id="glob-golden-values-deep",
        ),
        pytest.param("megatron/golden_values.json", ("*/golden_values*.json",), True, id="glob-one-level"),
        pytest.param("./megatron/golden_values_a.json", ("*/golden_values*.json",), True, id="glob-dot-slash"),
        pytest.param("golden_values.json", ("*/golden_values*.json",), False, id="glob-needs-a-directory"),
        pytest.param("tests/x/golden_values.yaml", ("*/golden_values*.json",), False, id="glob-other-suffix"),
        pytest.param("docs/user-guide/intro.md", ("*.md",), True, id="glob-star-crosses-slash"),
        pytest.param("README.md", ("*.md",), True, id="glob-root-file"),
        pytest.param("README.rst", ("*.md",), False, id="glob-no-match"),
    ],
)
def test_matches(path: str, patterns: tuple[str, ...], expected: bool) -> None:
    assert matches(path, patterns) is expected


# --- Categories from paths, and the order of the rules ------------------------------------------------

PYTHON_SCRIPT = "tests/test_utils/python_scripts/x.py"
FORMAT_TITLE = "style: auto-format megatron/core"


@pytest.mark.parametrize(
    ("files", "title", "labels", "expected"),
    [
        # CI only, under each default CI prefix.
        pytest.param([changed(".github/workflows/cicd-main.yml")], "", (), Category.CI_ONLY, id="github-only"),
        pytest.param([changed("ci/run.sh")], "", (), Category.CI_ONLY, id="ci-only"),
        pytest.param([changed("tools/ci/lint.sh")], "", (), Category.CI_ONLY, id="tools-ci-only"),
        pytest.param([changed("ci")], "", (), Category.CI_ONLY, id="file-named-ci"),
        pytest.param([changed("./ci/run.sh")], "", (), Category.CI_ONLY, id="dot-slash-ci"),
        pytest.param([changed(PYTHON_SCRIPT)], "", (), Category.CI_ONLY, id="python-scripts-only"),
        pytest.param(
            [changed(PYTHON_SCRIPT), changed(".github/x")], "", (), Category.CI_ONLY, id="python-scripts-and-github"
        ),
        pytest.param(
            [changed(".github/a.yml"), changed("ci/b.sh"), changed("tools/ci/c.sh")],
            "",
            (),
            Category.CI_ONLY,
            id="all-ci-prefixes",
        ),
        # Tests only.
        pytest.param([changed("tests/unit_tests/test_a.py")], "", (), Category.TEST_ONLY, id="tests-only"),
        pytest.param([changed("test/test_a.py")], "", (), Category.TEST_ONLY, id="test-only"),
        pytest.param([changed("tests")], "", (), Category.TEST_ONLY, id="file-named-tests"),
        pytest.param(
            [changed("tests/unit_tests/test_a.py"), changed("test/test_b.py")],
            "",
            (),
            Category.TEST_ONLY,
            id="tests-and-test",
        ),
        pytest.param(
            [changed("tests/test_utils/recipes/h100/gpt.yaml")], "", (), Category.TEST_ONLY, id="test-utils-recipes"
        ),
        pytest.param(
            [changed("tests/unit_tests/test_old.py", patch=None, status="removed")],
            "",
            (),
            Category.TEST_ONLY,
            id="removed-test-file",
        ),
        # A python script is under the CI prefix and the tests/ prefix: beside another test file every
        # file is a test, so the second rule (every file a test) decides before the third.
        pytest.param(
            [changed(PYTHON_SCRIPT), changed("tests/unit_tests/test_a.py")],
            "",
            (),
            Category.TEST_ONLY,
            id="python-scripts-and-tests",
        ),
        # Tests and CI.
        pytest.param(
            [changed(PYTHON_SCRIPT), changed("tests/unit_tests/test_a.py"), changed(".github/x.yml")],
            "",
            (),
            Category.TEST_CI_ONLY,
            id="python-scripts-tests-and-github",
        ),
        pytest.param(
            [changed(".github/workflows/a.yml"), changed("tests/unit_tests/test_a.py")],
            "",
            (),
            Category.TEST_CI_ONLY,
            id="github-and-tests",
        ),
        pytest.param(
            [changed("./tests/a.py"), changed("./.github/x")], "", (), Category.TEST_CI_ONLY, id="dot-slash-both"
        ),
        # Renamed files count by their new path, both ways.
        pytest.param(
            [renamed("tests/unit_tests/helper.py", "megatron/core/helper.py")],
            "",
            (),
            Category.SUBSTANTIVE,
            id="renamed-from-tests-into-code",
        ),
        pytest.param(
            [renamed("megatron/core/helper.py", "tests/unit_tests/helper.py")],
            "",
            (),
            Category.TEST_ONLY,
            id="renamed-from-code-into-tests",
        ),
        pytest.param(
            [renamed("ci/run.sh", "megatron/run.sh")], "", (), Category.SUBSTANTIVE, id="renamed-from-ci-into-code"
        ),
        pytest.param([renamed("scripts/run.sh", "ci/run.sh")], "", (), Category.CI_ONLY, id="renamed-into-ci"),
        # Code, alone or with tests or CI.
        pytest.param([changed("cix/a.py")], "", (), Category.SUBSTANTIVE, id="cix-is-code"),
        pytest.param([changed("megatron/core/a.py")], "", (), Category.SUBSTANTIVE, id="code-only"),
        pytest.param(
            [changed("megatron/core/a.py"), changed("tests/unit_tests/test_a.py")],
            "",
            (),
            Category.SUBSTANTIVE,
            id="code-plus-tests",
        ),
        pytest.param(
            [changed("megatron/core/a.py"), changed(".github/workflows/a.yml")],
            "",
            (),
            Category.SUBSTANTIVE,
            id="code-plus-ci",
        ),
        pytest.param(
            [changed("megatron/core/a.py"), changed("tests/a.py"), changed("ci/a.sh")],
            "",
            (),
            Category.SUBSTANTIVE,
            id="code-plus-tests-plus-ci",
        ),
        # No files: substantive, whatever the title says.
        pytest.param([], "", (), Category.SUBSTANTIVE, id="no-files"),
        pytest.param([], FORMAT_TITLE, ("formatting",), Category.SUBSTANTIVE, id="no-files-format-title"),
        # Order CI -> test -> test/CI -> format -> substantive: whitespace-only patches and a formatting title
        # do not move a CI, test or test+CI PR to format_only.
        pytest.param([changed(".github/a.yml")], FORMAT_TITLE, (), Category.CI_ONLY, id="order-ci-before-format"),
        pytest.param([changed("tests/a.py")], FORMAT_TITLE, (), Category.TEST_ONLY, id="order-test-before-format"),
        pytest.param(
            [changed("tests/a.py"), changed("ci/a.sh")],
            FORMAT_TITLE,
            (),
            Category.TEST_CI_ONLY,
            id="order-test-ci-before-format",
        ),
        pytest.param([changed("megatron/a.py")], FORMAT_TITLE, (), Category.FORMAT_ONLY, id="order-format"),
        pytest.param(
            [changed("megatron/a.py", REAL_CHANGE)], FORMAT_TITLE, (), Category.SUBSTANTIVE, id="order-substantive"
        ),
        # The format rule.
        pytest.param([changed("megatron/a.py")], "", (), Category.SUBSTANTIVE, id="whitespace-without-signal"),
        pytest.param(
            [changed("megatron/a.py")], "Tidy up", ("formatting",), Category.FORMAT_ONLY, id="signal-in-label"
        ),
        pytest.param(
            [changed("megatron/a.py")], "Tidy up", ("bug", "style-only"), Category.FORMAT_ONLY, id="signal-second-label"
        ),
        pytest.param(
            [changed("megatron/a.py")], "Tidy up", ("bug", "reformatted"), Category.SUBSTANTIVE, id="label-not-signal"
        ),
        pytest.param(
            [changed("megatron/a.py", SPACING), changed("tests/unit_tests/test_a.py")],
            FORMAT_TITLE,
            (),
            Category.FORMAT_ONLY,
            id="code-and-tests-all-whitespace",
        ),
        pytest.param(
            [changed("megatron/a.py", REORDERED)], FORMAT_TITLE, (), Category.FORMAT_ONLY, id="reordered-lines"
        ),
        pytest.param(
            [changed("megatron/a.py", BLANK_LINE_ADDED)],
            FORMAT_TITLE,
            (),
            Category.SUBSTANTIVE,
            id="blank-line-added",
        ),
        pytest.param([changed("megatron/a.bin", None)], FORMAT_TITLE, (), Category.SUBSTANTIVE, id="no-patch-binary"),
        pytest.param(
            [changed("megatron/a.py", NO_CHANGED_LINES)],
            FORMAT_TITLE,
            (),
            Category.SUBSTANTIVE,
            id="no-changed-lines",
        ),
        pytest.param(
            [changed("megatron/a.py"), changed("megatron/b.py", REAL_CHANGE)],
            FORMAT_TITLE,
            (),
            Category.SUBSTANTIVE,
            id="one-whitespace-one-real",
        ),
        pytest.param(
            [changed("megatron/a.py"), changed("tests/unit_tests/test_a.py", REAL_CHANGE)],
            FORMAT_TITLE,
            (),
            Category.SUBSTANTIVE,
            id="code-whitespace-test-real",
        ),
        pytest.param(
            [changed("megatron/a.py"), changed("megatron/logo.png", None)],
            FORMAT_TITLE,
            (),
            Category.SUBSTANTIVE,
            id="one-whitespace-one-binary",
        ),
    ],
)
def test_category(files: list[ChangedFile], title: str, labels: tuple[str, ...], expected: Category) -> None:
    category, _ = category_of(files, title, labels)
    assert category is expected


# --- The formatting signal --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "signals"),
    [
        pytest.param("auto-format megatron/core", True, id="auto-format"),
        pytest.param("Autoformat", True, id="autoformat"),
        pytest.param("Fix formatting in the MoE layer", True, id="formatting"),
        pytest.param("format", True, id="format"),
        pytest.param("style-only: rename locals", True, id="style-only"),
        pytest.param("style only cleanup", True, id="style-space-only"),
        pytest.param("AUTO-FORMAT", True, id="upper-auto-format"),
        pytest.param("FORMATTING", True, id="upper-formatting"),
        pytest.param("Style Only", True, id="title-case-style-only"),
        pytest.param("Format code with black", True, id="format-code-with-black"),
        pytest.param("[format] megatron/core", True, id="bracketed"),
        pytest.param("chore(format): isort", True, id="conventional-commit-scope"),
        pytest.param("Run autoformat.", True, id="followed-by-dot"),
        # The signal alone is not enough (the patches decide); a title about a data format signals too.
        pytest.param("Add E2E support for THD format", True, id="data-format-signals"),
        # Word-bounded: a signal word inside a longer word does not count.
        pytest.param("reformatted files", False, id="reformatted"),
        pytest.param("Add formatter config", False, id="formatter"),
        pytest.param("formats", False, id="formats"),
        pytest.param("unformatted", False, id="unformatted"),
        pytest.param("Fix transformation of weights", False, id="transformation"),
        pytest.param("Log more information", False, id="information"),
        pytest.param("update format_utils.py", False, id="format-underscore"),
        pytest.param("style fixes", False, id="style-alone"),
        pytest.param("", False, id="empty"),
    ],
)
def test_formatting_signal(text: str, signals: bool) -> None:
    assert RULES.says_formatting(text) is signals
    # End to end: a whitespace-only code PR is format_only exactly when its title (or a label) signals.
    expected = Category.FORMAT_ONLY if signals else Category.SUBSTANTIVE
    assert category_of([changed("megatron/a.py")], title=text)[0] is expected
    assert category_of([changed("megatron/a.py")], title="Tidy up", labels=[text])[0] is expected


# --- Whitespace-only patches (the multiset rule) -----------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        pytest.param(REINDENT, True, id="reindent"),
        pytest.param(SPACING, True, id="spaces-inside-a-line"),
        pytest.param("@@ -1 +1 @@\n-\tx = 1\n+    x = 1\n", True, id="tab-to-spaces"),
        pytest.param("@@ -1 +1 @@\n-x = 1   \n+x = 1\n", True, id="trailing-whitespace"),
        pytest.param(REORDERED, True, id="reordered-lines"),
        pytest.param("@@ -1,3 +1,3 @@\n-\n x = 1\n+\n", True, id="blank-line-moved"),
        pytest.param("@@ -1 +1 @@\n-x = 1\n\\ No newline at end of file\n+x = 1\n", True, id="newline-at-eof"),
        pytest.param(BLANK_LINE_ADDED, False, id="blank-line-added"),
        pytest.param("@@ -1,3 +1,2 @@\n x = 1\n-\n y = 2\n", False, id="blank-line-removed"),
        pytest.param(REAL_CHANGE, False, id="real-change"),
        pytest.param("@@ -1,2 +1,1 @@\n-a\n-a\n+a\n", False, id="multiset-not-set"),
        pytest.param("@@ -1 +1,2 @@\n-x = f(a, b)\n+x = f(a,\n+      b)\n", False, id="line-split-in-two"),
        pytest.param(NO_CHANGED_LINES, False, id="context-only"),
        pytest.param("", False, id="empty-patch"),
        pytest.param(None, False, id="no-patch"),
    ],
)
def test_whitespace_only(patch: str | None, expected: bool) -> None:
    assert whitespace_only(patch) is expected


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param("@@ -1,2 +1 @@\n-x = 1\n--- drop me\n+x  =  1\n", id="removed-line-dash-dash-space"),
        pytest.param("@@ -1 +1,2 @@\n-x = 1\n+x  =  1\n+++ new line\n", id="added-line-plus-plus-space"),
    ],
)
def test_whitespace_only_counts_lines_that_look_like_file_headers(patch: str) -> None:
    assert whitespace_only(patch) is False


def test_whitespace_only_lines_end_at_newline_only() -> None:
    assert whitespace_only("@@ -1 +1 @@\n-x = 1\x0cy = 2\n+x = 1\n") is False


# --- Evidence ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "expected", "rule", "matching"),
    [
        pytest.param(
            [changed(".github/b.yml"), changed("ci/a.sh")],
            Category.CI_ONLY,
            "all_files_ci",
            [".github/b.yml", "ci/a.sh"],
            id="ci",
        ),
        pytest.param(
            [changed("tests/b.py"), changed("test/a.py")],
            Category.TEST_ONLY,
            "all_files_test",
            ["test/a.py", "tests/b.py"],
            id="test",
        ),
        pytest.param(
            [changed("tests/b.py"), changed(PYTHON_SCRIPT)],
            Category.TEST_ONLY,
            "all_files_test",
            ["tests/b.py", PYTHON_SCRIPT],
            id="test-with-a-python-script",
        ),
        pytest.param(
            [changed("tests/b.py"), changed(PYTHON_SCRIPT), changed(".github/a.yml")],
            Category.TEST_CI_ONLY,
            "all_files_test_or_ci",
            [".github/a.yml", "tests/b.py", PYTHON_SCRIPT],
            id="test-ci",
        ),
        pytest.param(
            [changed("tests/b.py"), changed("megatron/z.py"), changed("megatron/a.py", REAL_CHANGE)],
            Category.SUBSTANTIVE,
            "code_changed",
            ["megatron/a.py", "megatron/z.py"],
            id="substantive-names-the-code",
        ),
    ],
)
def test_evidence(files: list[ChangedFile], expected: Category, rule: str, matching: list[str]) -> None:
    category, evidence = category_of(files)
    assert category is expected
    assert evidence["rule"] == rule
    assert evidence["head_sha"] == SHA
    assert evidence["files"] == len(files)
    assert evidence["matching_files"] == len(matching)
    assert evidence["examples"] == matching
    assert "files_truncated" not in evidence


def test_a_python_script_beside_unit_tests_is_test_only() -> None:
    """Issue 7: the published rule asks each question of every file in order, so a file under both
    tests/test_utils/python_scripts/ (CI) and tests/ (tests) makes a PR test-only when every other
    file is a test, and CI-only when every other file is CI."""
    script, unit = "tests/test_utils/python_scripts/check_status.py", "tests/unit_tests/x.py"
    assert classify_head(SHA, [changed(script), changed(unit)], RULES).category is Category.TEST_ONLY
    assert classify_head(SHA, [changed(script), changed(".github/ci.yml")], RULES).category is Category.CI_ONLY
    assert classify_head(SHA, [changed(script)], RULES).category is Category.CI_ONLY
    mixed = [changed(script), changed(unit), changed("ci/run.sh")]
    assert classify_head(SHA, mixed, RULES).category is Category.TEST_CI_ONLY


def test_evidence_keeps_at_most_five_examples_sorted() -> None:
    names = ["tests/g.py", "tests/c.py", "tests/a.py", "tests/f.py", "tests/b.py", "tests/e.py", "tests/d.py"]
    category, evidence = category_of([changed(name) for name in names])
    assert category is Category.TEST_ONLY
    assert evidence["matching_files"] == 7
    assert evidence["examples"] == ["tests/a.py", "tests/b.py", "tests/c.py", "tests/d.py", "tests/e.py"]


def test_evidence_of_no_files() -> None:
    category, evidence = category_of([], title=FORMAT_TITLE)
    assert category is Category.SUBSTANTIVE
    assert evidence["rule"] == "no_files"
    assert evidence["head_sha"] == SHA
    assert evidence["files"] == 0


@pytest.mark.parametrize(
    ("title", "labels", "signal"),
    [
        pytest.param(FORMAT_TITLE, (), "title", id="title"),
        pytest.param("Tidy up", ("bug", "formatting"), "label:formatting", id="label"),
    ],
)
def test_evidence_of_format_only(title: str, labels: tuple[str, ...], signal: str) -> None:
    files = [changed("megatron/b.py"), changed("megatron/a.py", SPACING), changed("tests/test_a.py")]
    category, evidence = category_of(files, title, labels)
    assert category is Category.FORMAT_ONLY
    assert evidence["rule"] == "whitespace_only_with_format_signal"
    assert evidence["signal"] == signal
    assert evidence["head_sha"] == SHA
    assert evidence["matching_files"] == 3


def test_evidence_of_a_signal_without_whitespace_only_patches() -> None:
    category, evidence = category_of([changed("megatron/a.py", REAL_CHANGE)], FORMAT_TITLE)
    assert category is Category.SUBSTANTIVE
    assert evidence["rule"] == "code_changed"
    assert evidence["signal"] == "title"


@pytest.mark.parametrize(
    "files",
    [
        pytest.param([changed("megatron/a.py", REAL_CHANGE)], id="substantive"),
        pytest.param([changed("tests/a.py")], id="test-only"),
        pytest.param([changed("megatron/a.py")], id="format-only"),
        pytest.param([], id="no-files"),
    ],
)
def test_truncated_file_list_is_in_the_evidence(files: list[ChangedFile]) -> None:
    _, evidence = category_of(files, FORMAT_TITLE, truncated=True)
    assert evidence["files_truncated"] is True


def test_files_not_known_yet_are_pending() -> None:
    category, evidence = classify_pull_request(None, FORMAT_TITLE, ["formatting"], RULES)
    assert category is Category.PENDING
    assert evidence["rule"] == "files_not_known_yet"


# --- Custom rules -----------------------------------------------------------------------------------

GOLDEN_RULES = Rules(test_paths=("tests/", "*/golden_values*.json"))


@pytest.mark.parametrize(
    ("files", "rules", "expected"),
    [
        pytest.param(
            [changed("megatron/core/golden_values_dev.json")], GOLDEN_RULES, Category.TEST_ONLY, id="glob-test-path"
        ),
        pytest.param(
            [changed("examples/golden_values.json"), changed("tests/a.py")],
            GOLDEN_RULES,
            Category.TEST_ONLY,
            id="glob-and-prefix",
        ),
        pytest.param(
            [changed("examples/golden_values.json"), changed(".github/a.yml")],
            GOLDEN_RULES,
            Category.TEST_CI_ONLY,
            id="glob-test-and-ci",
        ),
        pytest.param(
            [changed("examples/golden_values.yaml")], GOLDEN_RULES, Category.SUBSTANTIVE, id="glob-does-not-match"
        ),
        # The list replaces the default: `test/` is no longer a test path.
        pytest.param([changed("test/test_a.py")], GOLDEN_RULES, Category.SUBSTANTIVE, id="list-replaces-default"),
        pytest.param([changed(".github/a.yml")], Rules(ci_paths=()), Category.SUBSTANTIVE, id="no-ci-paths"),
        pytest.param(
            [changed(".gitlab-ci.yml"), changed(".gitlab/stages/a.yml")],
            Rules(ci_paths=(".gitlab/", ".gitlab-ci.yml")),
            Category.CI_ONLY,
            id="custom-ci-paths",
        ),
    ],
)
def test_custom_paths(files: list[ChangedFile], rules: Rules, expected: Category) -> None:
    category, _ = category_of(files, rules=rules)
    assert category is expected


PRETTIER = Rules(format_pattern=r"(?:^|[^\w-])prettier(?:[^\w-]|$)")  # RE2: no lookaround


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        pytest.param("Run prettier", Category.FORMAT_ONLY, id="custom-word"),
        pytest.param("RUN PRETTIER", Category.FORMAT_ONLY, id="custom-word-case-insensitive"),
        pytest.param("auto-format", Category.SUBSTANTIVE, id="default-word-no-longer-signals"),
        pytest.param("Add prettierrc", Category.SUBSTANTIVE, id="custom-word-bounded"),
    ],
)
def test_custom_format_pattern(title: str, expected: Category) -> None:
    assert category_of([changed("web/app.js")], title, rules=PRETTIER)[0] is expected


def test_a_custom_format_pattern_reads_a_title_with_a_lone_surrogate() -> None:
    # json.loads (which reads GitHub's REST answers) keeps a lone `\ud800`; RE2 reads UTF-8.
    assert PRETTIER.says_formatting("Run prettier \ud800")
    assert not PRETTIER.says_formatting("\ud800")


# --- Configuration: repository over defaults over built-in ------------------------------------------


def test_rules_without_configuration_are_the_published_ones() -> None:
    rules = TrackerConfig().rules_for("NVIDIA/Megatron-LM")
    assert rules == Rules()
    assert rules.ci_paths == (".github/", "ci/", "tools/ci/", "tests/test_utils/python_scripts/")
    assert rules.test_paths == ("tests/", "test/")
    assert rules.format_pattern == DEFAULT_FORMAT_PATTERN


LAYERED = TrackerConfig.model_validate(
    {
        "defaults": {"classification": {"test_paths": ["tests/", "*/golden_values*.json"], "format_pattern": "lint"}},
        "repositories": {
            "NVIDIA/Megatron-LM": {"classification": {"ci_paths": [".github/"], "format_pattern": "black"}},
            "octo/Hello-World": {"timezone": "Europe/Berlin"},
            "octo/No-CI": {"classification": {"ci_paths": []}},
        },
    }
)


@pytest.mark.parametrize(
    ("repository", "ci_paths", "test_paths", "format_pattern"),
    [
        # Its own ci_paths and format_pattern, the defaults' test_paths.
        pytest.param("NVIDIA/Megatron-LM", (".github/",), ("tests/", "*/golden_values*.json"), "black", id="layered"),
        # GitHub treats owner/name case-insensitively.
        pytest.param("nvidia/megatron-lm", (".github/",), ("tests/", "*/golden_values*.json"), "black", id="lower"),
        pytest.param("NVIDIA/MEGATRON-LM", (".github/",), ("tests/", "*/golden_values*.json"), "black", id="upper"),
        # Listed without classification, or not listed: the defaults, then the built-in ci_paths.
        pytest.param("octo/Hello-World", DEFAULT_CI_PATHS, ("tests/", "*/golden_values*.json"), "lint", id="listed"),
        pytest.param("someone/else", DEFAULT_CI_PATHS, ("tests/", "*/golden_values*.json"), "lint", id="unlisted"),
        # An empty list replaces the default list too.
        pytest.param("octo/no-ci", (), ("tests/", "*/golden_values*.json"), "lint", id="empty-list"),
    ],
)
def test_rules_for_layers(
    repository: str, ci_paths: tuple[str, ...], test_paths: tuple[str, ...], format_pattern: str
) -> None:
    rules = LAYERED.rules_for(repository)
    assert rules.ci_paths == ci_paths
    assert rules.test_paths == test_paths
    assert rules.format_pattern == format_pattern


def test_rules_for_classifies_with_the_repository_rules() -> None:
    golden = [changed("megatron/core/golden_values_dev.json")]
    assert category_of(golden, rules=LAYERED.rules_for("nvidia/megatron-lm"))[0] is Category.TEST_ONLY
    assert category_of(golden)[0] is Category.SUBSTANTIVE
    # Megatron's own pattern says "black"; the defaults' "lint" does not apply to it.
    megatron = LAYERED.rules_for("NVIDIA/Megatron-LM")
    assert category_of([changed("megatron/a.py")], "Run black", rules=megatron)[0] is Category.FORMAT_ONLY
    assert category_of([changed("megatron/a.py")], "Run lint", rules=megatron)[0] is Category.SUBSTANTIVE
    assert category_of([changed("megatron/a.py")], "auto-format", rules=megatron)[0] is Category.SUBSTANTIVE


def test_format_pattern_must_compile() -> None:
    with pytest.raises(ValidationError, match="format_pattern is not a regular expression"):
        ClassificationConfig(format_pattern="(unclosed")
    # RE2 has no backtracking constructs: refused when the config loads, not when a title arrives.
    for pattern in (r"(?<!re)format", r"(format)\s+\1"):
        with pytest.raises(ValidationError, match="RE2 syntax: no backreferences or lookaround"):
            ClassificationConfig(format_pattern=pattern)


# Run in a child process: were the pattern run by a backtracking engine, the test would fail at the
# timeout instead of hanging the suite (no duration is asserted).
CATASTROPHIC = """
import sys
from pathlib import Path
from tracker.config import load_config
from tracker.core.classify import ChangedFile, classify_head, classify_pull_request
from tracker.settings import load_settings

rules = load_config(load_settings(config_path=Path(sys.argv[1]))).rules_for("acme/widgets")
verdict = classify_head("f" * 40, [ChangedFile("a.py", patch="@@ -1 +1 @@\\n-x=1\\n+x = 1\\n")], rules)
title = "a" * 1000 + "!"  # `^(a+)+$` tries every way to split the run of `a`s before the `!` fails it
print(classify_pull_request(verdict, title, [title], rules)[0], classify_pull_request(verdict, "AAA", [], rules)[0])
"""


@pytest.mark.system
def test_a_catastrophic_format_pattern_cannot_hang_classification(tmp_path: Path) -> None:
    config = tmp_path / "tracker.yaml"
    config.write_text("repositories:\n  acme/widgets:\n    classification:\n      format_pattern: '^(a+)+$'\n")
    done = subprocess.run(
        [sys.executable, "-c", CATASTROPHIC, str(config)], capture_output=True, text=True, timeout=20, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["substantive", "format_only"]  # the pattern still works, case-insensitive


# --- Real merged Megatron-LM PRs ---------------------------------------------------------------------

from bench.fixtures.paths import MEGATRON, needs_shared  # noqa: E402

# git's name-status letters to GitHub's file status; `T` (type change, one file in PR 4436) is GitHub's `changed`.
STATUS = {"A": "added", "M": "modified", "D": "removed", "R": "renamed", "T": "changed"}


@cache
def megatron_prs() -> dict[int, dict[str, Any]]:
    with MEGATRON.open(encoding="utf-8") as lines:
        prs = [json.loads(line) for line in lines if line.strip()]
    return {pr["pr_number"]: pr for pr in prs}


def files_of(pr: dict[str, Any]) -> list[ChangedFile]:
    # Metadata only: no patch, as for a binary file.
    return [
        ChangedFile(f["path"], STATUS[f["status"]], f.get("old_path"), f["added"], f["deleted"]) for f in pr["files"]
    ]


@needs_shared
def test_megatron_data_is_all_there() -> None:
    assert len(megatron_prs()) == 987


@needs_shared
@pytest.mark.parametrize(
    ("number", "prefixes", "expected"),
    [
        # Golden-value / baseline refreshes.
        pytest.param(5364, ("tests/performance_tests/test_cases/",), Category.TEST_ONLY, id="5364-perf-baseline"),
        pytest.param(5295, ("tests/performance_tests/test_cases/",), Category.TEST_ONLY, id="5295-perf-baseline"),
        pytest.param(5094, ("tests/functional_tests/test_cases/",), Category.TEST_ONLY, id="5094-golden-values"),
        pytest.param(5024, ("tests/functional_tests/test_cases/",), Category.TEST_ONLY, id="5024-golden-removed"),
        # A rename within tests/ (plus new golden values) stays test-only.
        pytest.param(4544, ("tests/functional_tests/test_cases/",), Category.TEST_ONLY, id="4544-renamed-in-tests"),
        # CI only.
        pytest.param(5520, (".github/workflows/",), Category.CI_ONLY, id="5520-workflow"),
        pytest.param(5566, (".github/",), Category.CI_ONLY, id="5566-pr-template"),
        pytest.param(5512, ("tests/test_utils/python_scripts/",), Category.CI_ONLY, id="5512-python-scripts"),
        pytest.param(
            5404, (".github/", "tests/test_utils/python_scripts/"), Category.CI_ONLY, id="5404-github-python-scripts"
        ),
        # Tests and CI.
        pytest.param(3947, (".github/workflows/", "tests/unit_tests/"), Category.TEST_CI_ONLY, id="3947-workflow-test"),
        pytest.param(
            4405,
            (".github/", "tests/functional_tests/", "tests/test_utils/python_scripts/", "tests/test_utils/recipes/"),
            Category.TEST_CI_ONLY,
            id="4405-golden-values-and-ci",
        ),
        pytest.param(5147, (".github/", "tests/test_utils/"), Category.TEST_CI_ONLY, id="5147-scripts-and-tests"),
        # Code with tests or CI.
        pytest.param(5383, ("megatron/core/", "tests/unit_tests/"), Category.SUBSTANTIVE, id="5383-code-and-tests"),
        pytest.param(4961, ("megatron/core/", "tests/unit_tests/"), Category.SUBSTANTIVE, id="4961-code-and-tests"),
        pytest.param(4212, (".github/workflows/", "megatron/core/"), Category.SUBSTANTIVE, id="4212-code-and-ci"),
        pytest.param(5545, ("megatron/core/ssm/",), Category.SUBSTANTIVE, id="5545-code-only"),
    ],
)
def test_megatron_pr(number: int, prefixes: tuple[str, ...], expected: Category) -> None:
    pr = megatron_prs()[number]
    paths = [f["path"] for f in pr["files"]]
    # The data is what the row says: every path under one of the prefixes, every prefix used.
    assert all(path.startswith(prefixes) for path in paths), paths
    assert all(any(path.startswith(prefix) for path in paths) for prefix in prefixes), paths
    category, evidence = category_of(files_of(pr), pr["title"])
    assert category is expected
    assert evidence["files"] == len(paths)


@needs_shared
def test_megatron_rename_from_the_root_into_tests_with_deletions_is_substantive() -> None:
    pr = megatron_prs()[5097]  # "Clean up top-level repository files"
    files = files_of(pr)
    [moved] = [f for f in files if f.status == "renamed"]
    assert moved.previous_path == "functional_tests.md"
    assert moved.path == "tests/functional_tests/dynamic_inference_functional_tests.md"
    assert {f.path for f in files if f.status == "removed"} == {".coderabbit.yaml", ".flake8", "greptile.json"}
    category, evidence = category_of(files, pr["title"])
    assert category is Category.SUBSTANTIVE
    assert evidence["examples"] == [".coderabbit.yaml", ".flake8", "greptile.json"]
    # The renamed file alone counts by its new path.
    assert category_of([moved])[0] is Category.TEST_ONLY


@needs_shared
def test_megatron_nightly_sync_keeps_five_examples() -> None:
    pr = megatron_prs()[4436]  # "chore: nightly sync main into dev (22_04_2026)", hundreds of files
    files = files_of(pr)
    category, evidence = category_of(files, pr["title"])
    assert category is Category.SUBSTANTIVE
    assert evidence["files"] == len(files) > 100
    assert len(evidence["examples"]) == 5
    assert evidence["examples"] == sorted(evidence["examples"])


@needs_shared
def test_megatron_title_about_a_data_format_is_not_format_only() -> None:
    pr = megatron_prs()[2924]  # "[Dev] Add E2E support for THD format": the title signals, the code changed
    category, evidence = category_of(files_of(pr), pr["title"])
    assert category is Category.SUBSTANTIVE
    assert evidence["signal"] == "title"


@needs_shared
def test_megatron_whole_data() -> None:
    prs = megatron_prs().values()
    overall: Counter[Category] = Counter()
    by_month: dict[str, Counter[Category]] = defaultdict(Counter)
    for pr in prs:
        verdict = classify_head(SHA, files_of(pr), RULES)  # never raises
        assert verdict.category in {Category.CI_ONLY, Category.TEST_ONLY, Category.TEST_CI_ONLY, Category.SUBSTANTIVE}
        assert verdict.whitespace_only is False  # no patches in the data
        category, _ = classify_pull_request(verdict, pr["title"], [], RULES)
        assert category is verdict.category  # without patches nothing is format_only
        overall[category] += 1
        by_month[pr["month_shanghai"]][category] += 1
    assert sum(overall.values()) == 987

    def excluded_share(counts: Counter[Category]) -> float:
        # The README: "10-30 % test-only or CI-only"; a little slack either side.
        return (counts[Category.TEST_ONLY] + counts[Category.CI_ONLY]) / sum(counts.values())

    assert 0.05 <= excluded_share(overall) <= 0.40, overall
    assert sorted(by_month) == ["2026-03", "2026-04", "2026-05", "2026-06"]
    for month, counts in by_month.items():
        assert 0.05 <= excluded_share(counts) <= 0.40, (month, counts)
    assert overall[Category.SUBSTANTIVE] > sum(overall.values()) / 2, overall
    assert overall[Category.TEST_CI_ONLY] > 0, overall
