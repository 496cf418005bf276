"""Untrusted text in the pure core takes linear time: every public function that reads a PR title,
body, label or path answers within a fixed time per call, whatever a PR author writes (issue 8).

Titles, bodies, labels and changed paths come from any PR author. `tracker.core.groups`,
`tracker.core.themes` and the format check of `tracker.core.classify` cut them (titles to 1,024
characters, bodies to 65,536, labels to 1,024, paths to 4,096) before any pattern sees them, and their
patterns cannot backtrack over a run more than once. Each test here feeds adversarial text (long
whitespace runs of several kinds, repeated cue words, nested and unbalanced brackets and backticks,
many `(#1)`, 65,536-character bodies, mixed scripts) to each function and asks that every call
returns (tests/support/watchdog.py): the slowest takes milliseconds, quadratic work on these inputs
seconds to minutes (before the fix, `display_title("a" + " " * 100_000 + "x")` took 70 s).
bench/hostile_inputs.py measures the times.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fixtures.paths import EXAMPLES
from tests.support.watchdog import finishes
from tracker.config import load_config
from tracker.core.classify import Category, ChangedFile, Rules, classify_head, classify_pull_request
from tracker.core.groups import (
    _CUED_REFERENCE,
    MAX_BODY,
    MAX_TITLE,
    GroupInput,
    body_references,
    change_groups,
    display_title,
    normalise_title,
    references,
    title_references,
)
from tracker.core.taxonomy import ThemeConfig
from tracker.core.themes import choose_theme, layout_theme, title_scope
from tracker.settings import load_settings

REPO = "NVIDIA/Megatron-LM"

WHITESPACE = [" ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\x0b", "\x1c", "\u200b"]
CUES = [
    "cherry-pick of ",
    "Cherry-picked from ",
    "cp ",
    "cp: ",
    "backport ",
    "back-ported of ",
    "port of ",
    "mirror of ",
    "counterpart of ",
    "copy to main ",
    "copy  to\tmain ",
    "into ",
    "into `dev`",
    "into dev ",
    "format ",
]
BRACKETS = ["[", "]", "[dev]", "[Dev][feat]", "(", ")", "`", "``", "(#1)", "(cherry-pick #12)", "(4089)", "((((", "{"]
MARKS = ["#", "#1", "#12345", "/pull/", "/pull/7", "https://github.com/NVIDIA/Megatron-LM/pull/101", '"', "'", "|"]
WORDS = ["Fix", "router", "修复路由负载均衡", "\U0001f680", "é", "ß", "\u202e", "x", "a", "_", "-", ":", ".", "/"]
PIECES = WHITESPACE + CUES + BRACKETS + MARKS + WORDS

# The known worst cases, always run (the property tests below search around them).
HOSTILE = {
    "100k-spaces": "a" + " " * 100_000 + "x",
    "100k-tabs": "a" + "\t" * 100_000 + "x into `dev`",
    "100k-no-break-spaces": "a" + "\u00a0" * 100_000 + "x",
    "ideographic-spaces": "a" + "\u3000" * 100_000 + "x",
    "newlines": "a" + "\n" * 100_000 + "#1",
    "cherry-pick-of": "cherry-pick of " * 5000,
    "cp": "cp " * 30_000,
    "cp-colon": "cp: " * 30_000,
    "into": "into " * 30_000 + "x",
    "tags": "[dev]" * 30_000 + " Fix",
    "spaced-tags": "x " + "[a] " * 30_000 + "y",
    "open-brackets": "Fix [" * 30_000,
    "parentheses": "(" * 100_000,
    "backticks": "`" * 100_000,
    "references": "(#1)" * 30_000,
    "spaced-references": "Fix " + "( cherry-pick  #1 " * 10_000,
    "cues-and-numbers": ("cp #1" + " cp" * 30) * 700,
    "cue-then-far-number": "cherry-pick of " + "x" * 59 + " " * 100_000 + "#1",
    "pull-links": "Copy to main: /pull/ " * 10_000,
    "prefix-colon": "a" * 39 + " " * 100_000 + ":",
    "conventional": "fix(" + "x" * 100_000,
    "keyword-separators": "cuda" + " -_" * 30_000 + "x",
    "mixed-scripts": "修复路由负载均衡 \U0001f680 emoji é " * 10_000,
}
# Paths a PR author can name (git allows any bytes but NUL and "/" in a name).
HOSTILE_PATHS = [
    "megatron/" + "moe/" * 1000 + "x.py",
    "a/" * 2500,
    "megatron/core/transformer/moe/" + "x/" * 2500,
    "tools/run_" + "text_generatio" * 300 + ".py",
    "megatron/core/" + "a" * 10_000,
    "/" * 5000 + "x",
    "./" * 5000 + "x",
    "x_test." + "a" * 5000 + "!",
    "docs/" + "*" * 5000,
]


@cache
def megatron_taxonomy() -> tuple[ThemeConfig, ...]:
    config = load_config(load_settings(config_path=EXAMPLES / "megatron-lm.yaml", timezone="UTC"))
    return config.themes_for(REPO)


# One call of each public function that reads untrusted text.
VERDICT = classify_head("f" * 40, [ChangedFile("megatron/core/a.py", patch="@@ -1 +1 @@\n-x=1\n+x = 1\n")], Rules())
# An operator's format pattern that backtracks quadratically on a run of whitespace: bounded by the cut.
QUADRATIC_RULES = Rules(format_pattern=r"\s+format(?:ting)?\s*$")


# choose_theme remembers its answers: each call gets a title of its own, so every try is timed afresh.
FRESH = itertools.count()


def calls(title: str, body: str, path: str) -> dict[str, Callable[[], Any]]:
    label = title[:5000]
    # Three PRs with the title (twins by title and by file set, one naming another), one with the body:
    # the bound is per text read.
    prs = [
        GroupInput(1, title, body, "main", frozenset({path, "a.py"})),
        GroupInput(2, title, "", "dev", frozenset({path, "a.py"})),
        GroupInput(3, "cp: " + title, "cherry-pick of #1", "core_r0.18.0", frozenset({path})),
    ]
    return {
        "display_title": lambda: display_title(title),
        "normalise_title": lambda: normalise_title(title),
        "references": lambda: references(title, body),
        "title_references": lambda: title_references(title),
        "body_references": lambda: body_references(body),
        "change_groups": lambda: change_groups(prs),
        "choose_theme": lambda: choose_theme(
            megatron_taxonomy(), f"{next(FRESH)} {title}", [label, "moe"], [path, "megatron/core/a.py"]
        ),
        "choose_theme-layout": lambda: choose_theme(
            (), f"{next(FRESH)} {title}", [label], [path, "megatron/core/a.py"]
        ),
        "layout_theme": lambda: layout_theme([path]),
        "title_scope": lambda: title_scope(title),
        "classify_pull_request": lambda: classify_pull_request(VERDICT, title, [label], Rules()),
        "classify_pull_request-operator-pattern": lambda: classify_pull_request(
            VERDICT, title, [label], QUADRATIC_RULES
        ),
    }


def assert_quick(title: str, body: str, path: str) -> None:
    for name, call in calls(title, body, path).items():
        finishes(call, what=name)


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_as_title_and_body(text: str) -> None:
    assert_quick(text, text, "megatron/core/a.py")


@pytest.mark.parametrize("path", HOSTILE_PATHS, ids=range(len(HOSTILE_PATHS)))
def test_hostile_paths(path: str) -> None:
    assert_quick("Fix the router", "", path)


def test_a_body_of_exactly_max_body_characters() -> None:
    for piece in ("cp ", "cherry-pick of ", "cp #1 ", "(#1)", " ", "#1\n"):
        body = (piece * (MAX_BODY // len(piece) + 1))[:MAX_BODY]
        assert len(body) == MAX_BODY
        assert_quick("Fix the router", body, "megatron/core/a.py")


def test_results_stay_bounded() -> None:
    for text in HOSTILE.values():
        assert len(display_title(text)) <= MAX_TITLE
        assert len(normalise_title(text)) <= MAX_TITLE


def test_a_cut_format_signal_beyond_the_bound_is_not_read() -> None:
    whitespace_only = classify_head("e" * 40, [ChangedFile("a.py", patch="@@ -1 +1 @@\n-x=1\n+x =1\n")], Rules())
    near = "x" * 1000 + " format"
    far = "x" * 1024 + " format"
    assert classify_pull_request(whitespace_only, near, [], Rules())[0] is Category.FORMAT_ONLY
    assert classify_pull_request(whitespace_only, far, [], Rules())[0] is Category.SUBSTANTIVE
    assert classify_pull_request(whitespace_only, "Tidy", [far], Rules())[0] is Category.SUBSTANTIVE


# --- properties -----------------------------------------------------------------------------------

PROPERTY = settings(
    max_examples=60,
    deadline=None,  # each call must return (assert_quick); how fast is bench/hostile_inputs.py's
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def adversarial(draw: st.DrawFn, limit: int = 150_000) -> str:
    """A few pieces, each repeated up to thousands of times, cut to `limit` characters."""
    segments = draw(st.lists(st.tuples(st.sampled_from(PIECES), st.integers(1, 20_000)), min_size=1, max_size=6))
    return "".join(piece * count for piece, count in segments)[:limit]


@PROPERTY
@given(title=adversarial(), body=adversarial(), full=st.booleans())
def test_adversarial_titles_and_bodies_take_bounded_time(title: str, body: str, full: bool) -> None:
    if full:  # a body of exactly the size GitHub allows
        body = (body * (MAX_BODY // max(len(body), 1) + 1))[:MAX_BODY]
    assert_quick(title, body, "megatron/core/transformer/moe/router.py")


@PROPERTY
@given(path=adversarial(limit=20_000))
def test_adversarial_paths_take_bounded_time(path: str) -> None:
    assert_quick("Fix the MoE router load balancing", "", path)


@pytest.mark.parametrize(
    "cue",
    [
        "copy" + " " * 8 + "to" + " " * 8 + "main",
        "cherry-picked" + " " * 8 + "from",
        "counterpart" + "\t" * 8 + "of",
        "cp",
    ],
)
def test_a_cue_of_the_longest_shape_reaches_60_characters(cue: str) -> None:
    # The stretch searched before a `#N` must hold the longest cue and its 60 characters.
    far = "#7 " + "y" * 200 + " "  # an earlier mark, out of reach
    assert body_references(far + cue + " " + "x" * 59 + "#12") == {12}  # 60 characters between
    assert body_references(far + cue + " " + "x" * 60 + "#12") == set()  # 61
    assert body_references(far + cue + " " + "x" * 59 + "/pull/12") == {12}


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(
        st.sampled_from([*CUES, *MARKS, " ", "\n", "x" * 30, "x" * 61, "1", "#1", "of", "cherry-pick"]),
        max_size=40,
    ).map("".join)
)
def test_cued_references_are_those_a_search_of_the_whole_body_finds(text: str) -> None:
    # body_references searches only the stretches near a `#N` or `/pull/N`; the result is the same.
    assert body_references(text) == {int(m.group(1)) for m in _CUED_REFERENCE.finditer(text)}
