"""Unit tests of tracker.reports.render, without the web app.

The untrusted-text helpers (`language`, `plain`, `markdown_text`, `code_span`, `github_url`) on
their own, then whole renders (Markdown in English and Chinese, HTML, JSON) of a small September 2026
built by hand: facts, attribute versions and head verdicts go through `build_snapshot` and
`build_report`, and every expected line below is written out by hand. The last test reads the
Markdown with GitHub's own parser (cmark-gfm, through its `cmarkgfm` bindings, a dev dependency).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.fixtures.paths import needs_shared
from tracker.core.attributes import AttributeVersion, version_at
from tracker.core.classify import ChangedFile, HeadVerdict, Rules, classify_head
from tracker.core.group_report import merge_group
from tracker.core.report import Report, build_report
from tracker.core.snapshot import build_snapshot
from tracker.core.taxonomy import HighlightConfig, ThemeConfig
from tracker.core.timeline import Fact, FactKind
from tracker.core.window import resolve_window
from tracker.reports.render import (
    MAX_TITLE,
    UnknownLanguage,
    bullet_markdown,
    code_span,
    github_url,
    language,
    markdown_text,
    member_document,
    plain,
    pull_url,
    render,
    report_document,
)

REPO = "NVIDIA/Megatron-LM"
TZ = "Asia/Shanghai"
TODAY = date(2026, 10, 5)
PARTIAL, FINAL = "2026-09-13", "2026-09-30"
HOSTILE = "x\n## Owned\n[click](javascript:alert(1)) <script>alert(1)</script> | table |"
# The hostile title as the Markdown must show it: one line, every structural character escaped.
HOSTILE_MD = r"x ## Owned \[click\](javascript:alert(1)) \<script\>alert(1)\</script\> \| table \|"
# The change's title (tracker.core.groups.display_title): whitespace runs are one space.
HOSTILE_ONE_LINE = "x ## Owned [click](javascript:alert(1)) <script>alert(1)</script> | table |"
# A title and a branch carrying what a reader cannot see: a right-to-left override, a zero-width
# space, an 8-bit CSI (C1), an isolate and a BOM.
SNEAKY_TITLE = "Fix \u202etxt.exe\u202c loader\u200b\x9b31m \u2066isolated\u2069\ufeff"
SNEAKY_SEEN = "Fix txt.exe loader 31m isolated"
SNEAKY_BASE = "rel\u202e_v1"
CITATION = re.compile(r"\[([^\[\]]+) #(\d+)\]\(https://github\.com/NVIDIA/Megatron-LM/pull/(\d+)\)")
HTML_CITATION = re.compile(
    r'<a class="cite" href="https://github\.com/NVIDIA/Megatron-LM/pull/(\d+)">([^<]+) #(\d+)</a>'
)


def shanghai(month: int, day: int, hour: int = 12) -> int:
    """Epoch seconds of a local time in Asia/Shanghai (UTC+8, no daylight saving)."""
    return int((datetime(2026, month, day, hour, tzinfo=UTC) - timedelta(hours=8)).timestamp())


# --- language ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        (None, "en"),
        ("", "en"),
        ("en", "en"),
        ("EN", "en"),
        ("en-US", "en"),
        ("en-us", "en"),
        ("zh", "zh-CN"),
        ("zh-CN", "zh-CN"),
        ("zh-cn", "zh-CN"),
        ("ZH-CN", "zh-CN"),
        ("zh-Hans", "zh-CN"),
    ],
)
def test_language_aliases(asked: str | None, expected: str) -> None:
    assert language(asked) == expected


@pytest.mark.parametrize("asked", ["fr", "zh-TW", "en_US", "english", " en"])
def test_unknown_language_names_what_was_asked_and_what_is_offered(asked: str) -> None:
    with pytest.raises(UnknownLanguage) as caught:
        language(asked)
    assert str(caught.value) == f"language {asked!r} is not offered: use en or zh-CN"
    assert isinstance(caught.value, ValueError)


# --- plain --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fix the loader", "Fix the loader"),
        ("line one\nline two\r\nline three", "line one line two line three"),
        ("tab\there", "tab here"),
        ("nul\x00bell\x07escape\x1b[31mdel\x7fend", "nul bell escape [31mdel end"),
        ("vertical\x0btab\x0cform feed", "vertical tab form feed"),
        ("line\u2028separator\u2029paragraph", "line separator paragraph"),
        ("next\x85line", "next line"),
        ("  many    spaces \t\n and  \u00a0 more  ", "many spaces and more"),
        ("\n\n\n", ""),
        ("中文标题：推理引擎", "中文标题：推理引擎"),
    ],
)
def test_plain_is_one_line_without_control_characters(text: str, expected: str) -> None:
    assert plain(text) == expected


_TRICKY = "ab #\t\n\x00\x1f\x7f\x85\u200b\u2028\u00a0中 "


@given(st.text(alphabet=st.sampled_from(_TRICKY), max_size=30) | st.text(max_size=30))
def test_plain_answers_an_ascii_title_as_it_answers_any_text(text: str) -> None:
    """Its shortcut for printable ASCII (most titles) gives what the full cleaning gives."""
    from tracker.reports.render import _CONTROL, _INVISIBLE, _SPACES

    assert plain.__wrapped__(text, None) == _SPACES.sub(" ", _CONTROL.sub(" ", _INVISIBLE.sub("", text)).strip())


def test_plain_keeps_a_title_of_exactly_the_cap() -> None:
    assert MAX_TITLE == 200
    title = "a" * 200
    assert plain(title) == title


def test_plain_cuts_a_longer_title_to_the_cap_with_an_ellipsis() -> None:
    assert plain("a" * 201) == "a" * 199 + "…"
    assert plain("b" * 1000) == "b" * 199 + "…"
    assert len(plain("c" * 5000)) == 200


def test_plain_cuts_after_collapsing_whitespace() -> None:
    # 150 words of "ab " collapse to 449 characters; the cut keeps 199 of them, then the ellipsis.
    assert plain("ab   " * 150) == ("ab " * 67)[:199] + "…"


def test_plain_drops_a_space_left_at_the_cut() -> None:
    # Character 199 is the space between the words: it goes, and the ellipsis follows the word.
    assert plain("a" * 198 + " " + "b" * 10) == "a" * 198 + "…"


def test_plain_takes_another_limit_or_none() -> None:
    assert plain("abcdefgh", limit=5) == "abcd…"
    assert plain("x" * 500, limit=None) == "x" * 500


def test_plain_removes_c1_control_characters() -> None:
    assert plain("red\x9b31mtext\x90end") == "red 31mtext end"
    assert plain("".join(chr(code) for code in range(0x80, 0xA0)) + "x") == "x"


# Every invisible character the report removes: bidirectional embeddings, overrides, isolates and
# marks; zero-width space, non-joiner, joiner, word joiner, BOM; the other invisible format
# characters of those blocks; the tag characters.
INVISIBLE = (
    [chr(code) for code in range(0x202A, 0x202F)]
    + [chr(code) for code in range(0x2066, 0x206A)]
    + ["\u200e", "\u200f", "\u061c"]
    + ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]
    + [chr(code) for code in (0x2061, 0x2064, 0x206A, 0x206F, 0xE0001, 0xE0041, 0xE007F)]
)


@pytest.mark.parametrize("character", INVISIBLE, ids=[f"U+{ord(c):04X}" for c in INVISIBLE])
def test_plain_removes_an_invisible_character_without_splitting_the_word(character: str) -> None:
    assert plain(f"ab{character}cd {character}ef{character}") == "abcd ef"


def test_plain_removes_a_right_to_left_override_that_would_reverse_what_a_reader_sees() -> None:
    # Trojan Source: "Fix \u202etxt.exe" shows as "Fix exe.txt" in a bidi-aware viewer.
    assert plain("Fix \u202etxt.exe\u202c and \u2067isolated\u2069") == "Fix txt.exe and isolated"


def test_plain_keeps_visible_non_ascii_text() -> None:
    # What is removed is only what cannot be seen: scripts, emoji, NBSP-as-space and symbols stay.
    assert plain("修复 KV 缓存 — état 👍 ∑ Ω") == "修复 KV 缓存 — état 👍 ∑ Ω"


# --- markdown_text ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain words", "plain words"),
        ("`code`", r"\`code\`"),
        ("*em* **strong**", r"\*em\* \*\*strong\*\*"),
        ("_em_ __strong__", r"\_em\_ \_\_strong\_\_"),
        ("[link](https://example.com)", r"\[link\](https\://example.com)"),
        ("![image](https://example.com/x.png)", r"\!\[image\](https\://example.com/x.png)"),
        ("<b>bold</b>", r"\<b\>bold\</b\>"),
        ("<https://example.com>", r"\<https\://example.com\>"),
        ("a | b | c", r"a \| b \| c"),
        ("~~struck~~", r"\~\~struck\~\~"),
        ("&lt;script&gt; &#x3C;", r"\&lt;script\&gt; \&#x3C;"),
        ("back\\slash", r"back\\slash"),
        ("x\n## Owned", "x ## Owned"),
        ("first\n\n- item\n> quote\n---", "first - item \\> quote ---"),
        ("1. one\n2) two", "1. one 2) two"),
    ],
)
def test_markdown_text_escapes_every_structural_character(text: str, expected: str) -> None:
    assert markdown_text(text) == expected


def test_markdown_text_of_the_hostile_title() -> None:
    assert markdown_text(HOSTILE) == HOSTILE_MD


def test_markdown_text_escapes_after_cutting() -> None:
    # The cut counts the title's own characters; escaping afterwards cannot leave a lone backslash.
    assert markdown_text("*" * 300, limit=200) == "\\*" * 199 + "…"
    assert markdown_text("a" * 199 + "_tail", limit=200) == "a" * 199 + "…"


def test_markdown_text_has_no_limit_unless_given() -> None:
    assert markdown_text("y" * 400) == "y" * 400


# GitHub makes links while it parses (URLs, www.): a backslash before the `:` or `.` stops it. It finds
# mentions, issue references and e-mail addresses afterwards, in the text, where escapes are gone:
# an empty HTML comment splits that text (tracker/reports/render.py says why, with the sources).
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see https://evil.example/x", r"see https\://evil.example/x"),
        ("HTTP://EVIL.EXAMPLE and ftp://files.example", r"HTTP\://EVIL.EXAMPLE and ftp\://files.example"),
        ("visit www.evil.example or WWW.EVIL.EXAMPLE", r"visit www\.evil.example or WWW\.EVIL.EXAMPLE"),
        ("_www.evil.example_", r"\_www\.evil.example\_"),
        ("mail me@evil.example", "mail me@<!-- -->evil.example"),
        ("mailto:me@evil.example xmpp:me@evil.example", "mailto:me@<!-- -->evil.example xmpp:me@<!-- -->evil.example"),
        ("thanks @alice and @nvidia/core-team", "thanks @<!-- -->alice and @<!-- -->nvidia/core-team"),
        ("(@alice)", "(@<!-- -->alice)"),
        ("alice@a5c3785ed8d6a35868bc169f07e40e889087fd2e", "alice@<!-- -->a5c3785ed8d6a35868bc169f07e40e889087fd2e"),
        ("revert #4306", "revert #<!-- -->4306"),
        ("fixes GH-26 and gh-27", "fixes GH-<!-- -->26 and gh-<!-- -->27"),
        ("see NVIDIA/Megatron-LM#12", "see NVIDIA/Megatron-LM#<!-- -->12"),
        ("C# and #hashtag stay", "C# and #hashtag stay"),
        ("ratio 3:1 and javascript:alert(1)", "ratio 3:1 and javascript:alert(1)"),
        ("escaped \\@alice", r"escaped \\@<!-- -->alice"),
        ("escaped https\\://x.example", r"escaped https\\\://x.example"),
    ],
)
def test_markdown_text_leaves_github_nothing_to_link_mention_or_reference(text: str, expected: str) -> None:
    assert markdown_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fix C #", r"Fix C \#"),
        ("Fix ##", r"Fix \##"),
        ("#", r"\#"),
        ("C#", "C#"),
        ("# at the start", "# at the start"),
    ],
)
def test_markdown_text_keeps_a_closing_hash_run_from_being_dropped_in_a_heading(text: str, expected: str) -> None:
    assert markdown_text(text) == expected


def test_markdown_text_removes_invisible_and_c1_characters() -> None:
    assert markdown_text("a\u202eb\u200bc\x9bd\u2066e") == "abc de"


# --- code_span ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("acme/my_repo", "`acme/my_repo`"),
        ("NVIDIA/Megatron-LM", "`NVIDIA/Megatron-LM`"),
        ("*not* [a](link) <b>", "`*not* [a](link) <b>`"),
        ("a`b", "``a`b``"),
        ("a``b`c", "```a``b`c```"),
        ("`starts", "`` `starts ``"),
        ("ends`", "`` ends` ``"),
        ("line\nbreak\u202e", "`line break`"),
    ],
)
def test_code_span_fences_the_text_instead_of_escaping_it(text: str, expected: str) -> None:
    assert code_span(text) == expected


# --- links --------------------------------------------------------------------------------------


def test_github_url_of_a_valid_name_is_the_name() -> None:
    assert github_url("NVIDIA/Megatron-LM") == "https://github.com/NVIDIA/Megatron-LM"
    assert github_url("acme/my_repo.js") == "https://github.com/acme/my_repo.js"
    assert pull_url("NVIDIA/Megatron-LM", 4306) == "https://github.com/NVIDIA/Megatron-LM/pull/4306"


@pytest.mark.parametrize(
    "repo",
    [
        "evil/x) [click](javascript:alert(1)) ![img](https:evil.example",
        "evil/x\n## heading",
        'evil/x" onmouseover="alert(1)',
        "x/../../user/repos",
        "../x",
        "javascript:alert(1)//x",
        "evil/x<script>",
        "no-slash",
    ],
)
def test_github_url_keeps_any_other_name_inside_one_github_path(repo: str) -> None:
    url = pull_url(repo, 7)
    assert url.startswith("https://github.com/") and url.endswith("/pull/7")
    owner, name = url.removeprefix("https://github.com/").removesuffix("/pull/7").split("/")
    assert re.fullmatch(r"[A-Za-z0-9._~%-]*", owner + name), url  # nothing that ends a link or an attribute
    assert owner not in {".", ".."} and name not in {".", ".."}


@pytest.mark.parametrize("number", [0, -1, True])
def test_pull_url_takes_only_a_pull_request_number(number: int) -> None:
    with pytest.raises(ValueError):
        pull_url("NVIDIA/Megatron-LM", number)


# --- a month built by hand ----------------------------------------------------------------------


@dataclass(frozen=True)
class PullRequest:
    number: int
    facts: tuple[Fact, ...]
    versions: tuple[AttributeVersion, ...]
    files: dict[str, tuple[str, ...]]  # head sha -> changed paths; a head not listed has no verdict yet


def version(number: int, at: int, title: str, base: str, sha: str) -> AttributeVersion:
    return AttributeVersion(
        at=at,
        delivery_id=f"delivery-{number}-{at}",
        title=title,
        body="",
        base_ref=base,
        head_ref=f"branch-{number}",
        head_sha=sha,
        labels=(),
        draft=False,
        author="octocat",
    )


def september() -> list[PullRequest]:
    """Seven PRs of September 2026 (Asia/Shanghai), with what each must become in the report:

    - 101 (dev) and 102 (main): one change landed on both branches, merged Sep 10 and 11: Delivered,
      one change citing both;
    - 103: the hostile title, open: In Progress;
    - 104: only a test file: test_only, neither counted nor narrated;
    - 105: closed without merge on Sep 8: counted, never narrated;
    - 106: open, pushed on Sep 9, retargeted from dev to main on Sep 20: In Progress, cited as dev
      through Sep 19 and as main from Sep 20;
    - 107: its files are not known: pending, neither counted nor narrated.
    """
    engine = ("megatron/core/inference/engines/dynamic_engine.py",)
    return [
        PullRequest(
            101,
            (Fact(FactKind.OPENED, shanghai(9, 2)), Fact(FactKind.MERGED, shanghai(9, 10))),
            (
                version(101, shanghai(9, 2), "Add dynamic batching to the inference engine", "dev", "a1" * 20),
                version(101, shanghai(9, 10), "Add dynamic batching to the inference engine", "dev", "a1" * 20),
            ),
            {"a1" * 20: engine},
        ),
        PullRequest(
            102,
            (Fact(FactKind.OPENED, shanghai(9, 3)), Fact(FactKind.MERGED, shanghai(9, 11))),
            (version(102, shanghai(9, 11), "[main] Add dynamic batching to the inference engine", "main", "b2" * 20),),
            {"b2" * 20: engine},
        ),
        PullRequest(
            103,
            (Fact(FactKind.OPENED, shanghai(9, 5)),),
            (version(103, shanghai(9, 5), HOSTILE, "main", "c3" * 20),),
            {"c3" * 20: ("megatron/training/arguments.py",)},
        ),
        PullRequest(
            104,
            (Fact(FactKind.OPENED, shanghai(9, 6)),),
            (version(104, shanghai(9, 6), "Cover the scheduler with unit tests", "main", "d4" * 20),),
            {"d4" * 20: ("tests/unit_tests/test_scheduler.py",)},
        ),
        PullRequest(
            105,
            (Fact(FactKind.OPENED, shanghai(9, 7)), Fact(FactKind.CLOSED, shanghai(9, 8))),
            (version(105, shanghai(9, 8), "Try a different allocator", "main", "e5" * 20),),
            {"e5" * 20: ("megatron/core/inference/engines/allocator.py",)},
        ),
        PullRequest(
            106,
            (Fact(FactKind.OPENED, shanghai(9, 4)), Fact(FactKind.COMMIT, shanghai(9, 9))),
            (
                version(106, shanghai(9, 4), "Paged KV cache for long prompts", "dev", "f6" * 20),
                version(106, shanghai(9, 9), "Paged KV cache for long prompts", "dev", "f7" * 20),
                version(106, shanghai(9, 20), "Paged KV cache for long prompts", "main", "f7" * 20),
            ),
            {
                "f6" * 20: ("megatron/core/inference/kv_cache/paged.py",),
                "f7" * 20: ("megatron/core/inference/kv_cache/paged.py", "megatron/core/inference/kv_cache/pool.py"),
            },
        ),
        PullRequest(
            107,
            (Fact(FactKind.OPENED, shanghai(9, 12)),),
            (version(107, shanghai(9, 12), "Speed up the data loader", "main", "a7" * 20),),
            {},
        ),
    ]


TAXONOMY = (
    ThemeConfig(
        id="inference",
        en="Inference engine and serving",
        zh="推理引擎与服务",
        paths=("megatron/core/inference/",),
        highlights=(
            HighlightConfig(
                id="engine", en="Dynamic engine", zh="动态引擎", paths=("megatron/core/inference/engines/",)
            ),
            HighlightConfig(id="kv-cache", en="KV cache", zh="KV 缓存", paths=("megatron/core/inference/kv_cache/",)),
        ),
    ),
    ThemeConfig(id="training", en="Training loop", zh="训练流程", paths=("megatron/training/",)),
)


def build(
    prs: Sequence[PullRequest], cutoff: str, repo: str = REPO, taxonomy: Sequence[ThemeConfig] = TAXONOMY
) -> Report:
    """The snapshot and report model of September 2026 at `cutoff`, each PR as it was at the window end."""
    window = resolve_window("2026-09", cutoff, TZ, TODAY)
    rules = Rules()
    versions: dict[int, AttributeVersion] = {}
    verdicts: dict[tuple[int, str], HeadVerdict] = {}
    paths: dict[int, list[str]] = {}
    for pr in prs:
        chosen = version_at(pr.versions, window.end)
        assert chosen is not None
        versions[pr.number] = chosen
        for sha, files in pr.files.items():
            verdicts[(pr.number, sha)] = classify_head(sha, [ChangedFile(path) for path in files], rules)
        if chosen.head_sha in pr.files:
            paths[pr.number] = list(pr.files[chosen.head_sha])
    snapshot = build_snapshot(
        repo, window, {pr.number: list(pr.facts) for pr in prs}, versions, verdicts, rules, frozenset()
    )
    return build_report(snapshot, paths, taxonomy)


def citations(markdown: str) -> list[tuple[str, int]]:
    """(base branch, number) of every citation, in order, the branch's Markdown escapes undone; the
    link text and the URL name the same PR."""
    found = []
    for base, number, linked in CITATION.findall(markdown):
        assert number == linked, f"[{base} #{number}] links to PR {linked}"
        found.append((re.sub(r"\\(.)", r"\1", base), int(number)))
    return found


def headings(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("#")]


# Themes of one size go by their first change: 103's before 106's.
PARTIAL_CITATIONS = [("dev", 101), ("main", 102), ("main", 103), ("dev", 106)]
FINAL_CITATIONS = [("dev", 101), ("main", 102), ("main", 103), ("main", 106)]


# --- titles -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cutoff", "lang", "expected"),
    [
        (PARTIAL, "en", "# Megatron-LM Monthly Activity Report — September 2026 (through September 13, 2026)"),
        (FINAL, "en", "# Megatron-LM Monthly Activity Report — September 2026 (Final, through September 30, 2026)"),
        (PARTIAL, "zh-CN", "# Megatron-LM 月度活动报告 — 2026年9月（截至2026-09-13）"),
        (FINAL, "zh-CN", "# Megatron-LM 月度活动报告 — 2026年9月（最终版，截至2026-09-30）"),
    ],
)
def test_markdown_title_line(cutoff: str, lang: str, expected: str) -> None:
    assert render(build(september(), cutoff), "md", lang).splitlines()[0] == expected


@pytest.mark.parametrize(
    ("cutoff", "lang", "expected"),
    [
        (PARTIAL, "en", "Megatron-LM Monthly Activity Report — September 2026 (through September 13, 2026)"),
        (FINAL, "zh-CN", "Megatron-LM 月度活动报告 — 2026年9月（最终版，截至2026-09-30）"),
    ],
)
def test_html_title(cutoff: str, lang: str, expected: str) -> None:
    html = render(build(september(), cutoff), "html", lang)
    assert f"<title>{expected}</title>" in html
    assert f"<h1>{expected}</h1>" in html


def sneaky_september() -> list[PullRequest]:
    """September with PR 106 renamed to SNEAKY_TITLE on the base SNEAKY_BASE."""
    return [
        PullRequest(
            pr.number,
            pr.facts,
            tuple(replace(v, title=SNEAKY_TITLE, base_ref=SNEAKY_BASE) for v in pr.versions),
            pr.files,
        )
        if pr.number == 106
        else pr
        for pr in september()
    ]


INVISIBLE_OR_C1 = re.compile("[\x80-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")


# --- Markdown -----------------------------------------------------------------------------------


def test_english_markdown_at_the_partial_cutoff() -> None:
    text = render(build(september(), PARTIAL), "md", "en")
    lines = text.splitlines()
    assert lines[2] == "> Chinese version: [中文版本](2026-09.md?lang=zh-CN&cutoff=2026-09-13)"
    assert lines[4] == (
        "> Reporting window: 2026-09-01 through 2026-09-13 (Asia/Shanghai); "
        "source: [`NVIDIA/Megatron-LM`](https://github.com/NVIDIA/Megatron-LM)."
    )
    assert headings(text) == [
        "# Megatron-LM Monthly Activity Report — September 2026 (through September 13, 2026)",
        "## Overview",
        "## Delivered",
        "### Inference engine and serving",
        "## In Progress",
        "### Training loop",
        "### Inference engine and serving",
        "## Scope and Method",
    ]
    for line in [
        # Each section's themes, largest first, each with its headline change, uncited.
        "Delivered 1 change in 1 theme: Inference engine and serving (1, led by Add dynamic batching to the "
        f"inference engine). 2 changes in 2 themes are in progress: Training loop (1, led by X{HOSTILE_MD[1:]}); "
        "Inference engine and serving (1, led by Paged KV cache for long prompts).",
        # 101, 102, 103, 105, 106 opened; 101, 102 merged; 105 closed; 103, 106 open (104 test-only, 107 pending).
        "- Substantive PR activity after filtering: opened 5; merged 2; closed without merge 1; active at cutoff 2.",
        "- Excluded from the report and statistics: test-only 1, CI-only 0, test/CI-only 0, format-only 0.",
        "- Awaiting file classification (not yet counted): 1.",
        "1 change delivered, on dynamic engine (1).",
        # Each change cited right after its title; the title cleaned (first letter up).
        "- **Dynamic engine**: Add dynamic batching to the inference engine "
        "([dev #101](https://github.com/NVIDIA/Megatron-LM/pull/101), "
        "[main #102](https://github.com/NVIDIA/Megatron-LM/pull/102)).",
        "1 change in progress, on KV cache (1).",
        "- **KV cache**: Paged KV cache for long prompts ([dev #106](https://github.com/NVIDIA/Megatron-LM/pull/106)).",
        f"- **Training loop**: X{HOSTILE_MD[1:]} ([main #103](https://github.com/NVIDIA/Megatron-LM/pull/103)).",
    ]:
        assert line in lines, line


def test_chinese_markdown_at_the_partial_cutoff() -> None:
    text = render(build(september(), PARTIAL), "md", "zh-CN")
    lines = text.splitlines()
    assert lines[2] == "> English version: [English](2026-09.md?lang=en&cutoff=2026-09-13)"
    assert headings(text) == [
        "# Megatron-LM 月度活动报告 — 2026年9月（截至2026-09-13）",
        "## 概览",
        "## 已交付成果",
        "### 推理引擎与服务",
        "## 进行中的方向",
        "### 训练流程",
        "### 推理引擎与服务",
        "## 口径说明",
    ]
    for line in [
        "已交付 1 项变更，分 1 个方向：推理引擎与服务（1 项，以“Add dynamic batching to the inference engine”为首）。"
        f"进行中 2 项变更，分 2 个方向：训练流程（1 项，以“X{HOSTILE_MD[1:]}”为首）；"
        "推理引擎与服务（1 项，以“Paged KV cache for long prompts”为首）。",
        "- 过滤后的实质性 PR 活动：新开 5；合并 2；关闭未合并 1；截止时仍在进行 2。",
        "- 不计入报告正文和统计：纯 UT 1，纯 CI 0，UT/CI-only 0，纯格式化 0。",
        "- 等待文件分类（暂未计入）：1。",
        # English words quoted, as a quotation in Chinese text.
        "- **动态引擎**：“Add dynamic batching to the inference engine”"
        "（[dev #101](https://github.com/NVIDIA/Megatron-LM/pull/101)、"
        "[main #102](https://github.com/NVIDIA/Megatron-LM/pull/102)）。",
        f"- **训练流程**：“X{HOSTILE_MD[1:]}”（[main #103](https://github.com/NVIDIA/Megatron-LM/pull/103)）。",
    ]:
        assert line in lines, line


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_hostile_title_is_one_inert_line(lang: str) -> None:
    text = render(build(september(), PARTIAL), "md", lang)
    carrying = [line for line in text.splitlines() if "Owned" in line]
    # Its highlight's line, and the overview, which names each theme's headline change.
    assert len(carrying) == 2
    assert all("X" + HOSTILE_MD[1:] in line for line in carrying)  # cleaned: first letter up
    assert carrying[0].startswith(("Delivered ", "已交付 ")) and carrying[1].startswith("- **")
    # Nothing of it escaped its line: no heading, no raw HTML, no link, no table cell.
    assert "## Owned" not in [line.strip() for line in text.splitlines()]
    assert "<script>" not in text
    assert "](javascript:" not in text.replace(r"\](javascript:", "")
    assert " | table |" not in text
    # The same document with a harmless title has as many lines.
    harmless = [
        PullRequest(pr.number, pr.facts, tuple(replace(v, title="Harmless") for v in pr.versions), pr.files)
        if pr.number == 103
        else pr
        for pr in september()
    ]
    assert len(render(build(harmless, PARTIAL), "md", lang).splitlines()) == len(text.splitlines())


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_markdown_shows_no_invisible_or_c1_character(lang: str) -> None:
    text = render(build(sneaky_september(), PARTIAL), "md", lang)
    assert not INVISIBLE_OR_C1.search(text)
    assert SNEAKY_SEEN in text
    assert "[rel\\_v1 #106](https://github.com/NVIDIA/Megatron-LM/pull/106)" in text


@pytest.mark.parametrize(("cutoff", "expected"), [(PARTIAL, PARTIAL_CITATIONS), (FINAL, FINAL_CITATIONS)])
def test_each_narrated_pr_is_cited_once_with_its_base_at_the_cutoff(
    cutoff: str, expected: list[tuple[str, int]]
) -> None:
    report = build(september(), cutoff)
    english = render(report, "md", "en")
    chinese = render(report, "md", "zh-CN")
    assert citations(english) == expected
    assert citations(chinese) == expected
    assert set(Counter(number for _, number in expected).values()) == {1}
    for text in (english, chinese):
        for number in (104, 105, 107):  # test-only, closed without merge, pending: never narrated
            assert f"/pull/{number})" not in text


def test_the_html_cites_the_same_prs_in_the_same_order() -> None:
    report = build(september(), PARTIAL)
    for lang in ("en", "zh-CN"):
        found = [(base, int(number)) for linked, base, number in HTML_CITATION.findall(render(report, "html", lang))]
        assert found == PARTIAL_CITATIONS


def test_a_branch_is_escaped_and_an_unknown_base_says_so() -> None:
    prs = [
        PullRequest(
            201,
            (Fact(FactKind.OPENED, shanghai(9, 2)), Fact(FactKind.MERGED, shanghai(9, 3))),
            (version(201, shanghai(9, 3), "Fix the async checkpoint import", "core_r0.17.0", "11" * 20),),
            {"11" * 20: ("megatron/core/dist_checkpointing/strategies/async_utils.py",)},
        ),
        PullRequest(
            202,
            (Fact(FactKind.OPENED, shanghai(9, 4)),),
            (version(202, shanghai(9, 4), "Mirror of a change with no base", "", "22" * 20),),
            {"22" * 20: ("megatron/training/training.py",)},
        ),
        PullRequest(
            203,
            (Fact(FactKind.OPENED, shanghai(9, 5)),),
            (version(203, shanghai(9, 5), "Work in progress", "release/_wip_", "33" * 20),),
            {"33" * 20: ("megatron/training/checkpointing.py",)},
        ),
        PullRequest(
            204,
            (Fact(FactKind.OPENED, shanghai(9, 6)),),
            (version(204, shanghai(9, 6), "Starred branch", "rel_v1*x*", "44" * 20),),
            {"44" * 20: ("megatron/training/initialize.py",)},
        ),
    ]
    text = render(build(prs, PARTIAL), "md", "en")
    assert citations(text) == [("core_r0.17.0", 201), ("unknown", 202), ("release/_wip_", 203), ("rel_v1*x*", 204)]
    # `release/_wip_` unescaped would be emphasis (a `_` after punctuation opens one): every `_`,
    # `*` and other structural character of a branch is escaped, like any untrusted text.
    assert r"[core\_r0.17.0 #201](https://github.com/NVIDIA/Megatron-LM/pull/201)" in text
    assert r"[release/\_wip\_ #203](https://github.com/NVIDIA/Megatron-LM/pull/203)" in text
    assert r"[rel\_v1\*x\* #204](https://github.com/NVIDIA/Megatron-LM/pull/204)" in text
    html = render(build(prs, PARTIAL), "html", "en")
    assert '<a class="cite" href="https://github.com/NVIDIA/Megatron-LM/pull/204">rel_v1*x* #204</a>' in html


def test_an_empty_month_says_so_in_both_languages() -> None:
    report = build([], PARTIAL)
    english = render(report, "md", "en").splitlines()
    assert (
        "No substantive change was delivered in this window. No substantive change is in progress at the cutoff."
        in english
    )
    assert "No substantive pull request was merged in this window." in english
    assert "No substantive pull request is open at the cutoff with activity in this window." in english
    assert (
        "- Substantive PR activity after filtering: opened 0; merged 0; closed without merge 0; active at cutoff 0."
        in english
    )
    assert not any(line.startswith("- Awaiting") for line in english)
    chinese = render(report, "md", "zh-CN").splitlines()
    assert "本统计窗口内没有交付实质性变更。截止时没有进行中的实质性变更。" in chinese
    assert "本统计窗口内没有合并实质性 PR。" in chinese
    assert "截止时没有在本窗口内有进展且仍在进行的实质性 PR。" in chinese


def test_a_repository_name_with_an_underscore_reads_right_in_code_spans() -> None:
    text = render(build([], PARTIAL, repo="acme/my_repo"), "md", "en")
    assert "[`acme/my_repo`](https://github.com/acme/my_repo)" in text
    assert "pull requests of `acme/my_repo` with activity" in text
    chinese = render(build([], PARTIAL, repo="acme/my_repo"), "md", "zh-CN")
    assert "[`acme/my_repo`](https://github.com/acme/my_repo)" in chinese
    assert "本报告统计 `acme/my_repo` 在" in chinese


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_hostile_repository_name_stays_in_its_code_span_and_links_to_github(lang: str) -> None:
    # The webhook refuses such names now; one stored before must still render inertly.
    repo = "evil/x`) [click](javascript:alert(1)) @alice"
    text = render(build(september(), PARTIAL, repo=repo), "md", lang)
    encoded = "https://github.com/evil/x%60%29%20%5Bclick%5D%28javascript%3Aalert%281%29%29%20%40alice"
    assert f"[``{repo}``]({encoded})" in text  # a fence longer than the name's backtick run
    assert f"``{repo}``" in text.split("\n")[-2]  # the Scope paragraph
    assert not re.search(r"(?<!\\)\]\(javascript", text.replace(f"``{repo}``", ""))
    assert r"x\`) \[click\](javascript:alert(1)) @<!-- -->alice" in text.splitlines()[0]  # the title
    assert f"]({encoded}/pull/103)" in text  # every citation is built from the same parts


# --- HTML ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_html_escapes_the_hostile_title(lang: str) -> None:
    html = render(build(september(), PARTIAL), "html", lang)
    assert "<script" not in html.lower()
    assert "javascript:alert(1)) &lt;script&gt;alert(1)&lt;/script&gt; | table |" in html
    assert 'href="javascript' not in html.lower()
    assert "X ## Owned [click]" in html  # one line: the newlines of the title are gone


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_html_loads_nothing_from_other_hosts(lang: str) -> None:
    html = render(build(september(), PARTIAL), "html", lang)
    lower = html.lower()
    assert (
        "<meta http-equiv=\"content-security-policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:; form-action 'self'\">" in lower
    )
    for loader in ("<script", "<link", "<img", "<iframe", "<object", "<embed", "<video", "<audio", "@import", "url("):
        assert loader not in lower, loader
    assert re.search(r"\s(src|srcset|poster|data)=", lower) is None
    # Links are fine (following one loads nothing into this page); they go to GitHub or stay on this host.
    for target in re.findall(r'href="([^"]*)"', html):
        assert target.startswith("https://github.com/NVIDIA/Megatron-LM") or "://" not in target, target
    # The chart is inline SVG drawn on the server.
    assert '<svg viewBox="0 0 720 220" role="img"' in html


def test_html_language_and_controls() -> None:
    report = build(september(), PARTIAL)
    english = render(report, "html", "en")
    chinese = render(report, "html", "zh-CN")
    assert '<html lang="en">' in english
    assert '<html lang="zh-CN">' in chinese
    assert '<a id="language-switch" href="2026-09.html?lang=zh-CN&amp;cutoff=2026-09-13">中文版本</a>' in english
    assert '<a id="language-switch" href="2026-09.html?lang=en&amp;cutoff=2026-09-13">English</a>' in chinese
    assert (
        '<input type="date" id="cutoff" name="cutoff" value="2026-09-13" min="2026-09-01" max="2026-09-30">' in english
    )


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_html_shows_no_invisible_or_c1_character(lang: str) -> None:
    html = render(build(sneaky_september(), PARTIAL), "html", lang)
    assert not INVISIBLE_OR_C1.search(html)
    assert SNEAKY_SEEN in html
    assert '<a class="cite" href="https://github.com/NVIDIA/Megatron-LM/pull/106">rel_v1 #106</a>' in html


def test_html_autoescapes_every_untrusted_field_and_links_only_to_github() -> None:
    # Title, branch, layout theme names (directory names) and the repository name, each hostile.
    quote = '" onmouseover="alert(1)" x="'
    prs = [
        PullRequest(
            301,
            (Fact(FactKind.OPENED, shanghai(9, 2)),),
            (version(301, shanghai(9, 2), f"<img src=x onerror=alert(1)>{quote}", f"<marquee>{quote}", "55" * 20),),
            {"55" * 20: (f"src/<svg onload=alert(1)>{quote}/a.py", f"src/<svg onload=alert(1)>{quote}/b.py")},
        )
    ]
    repo = f"evil/x{quote}<script>"
    html = render(build(prs, PARTIAL, repo=repo, taxonomy=()), "html", "en")
    for raw in ("<img", "<svg onload", "<marquee", "<script", quote):
        assert raw not in html, raw
    assert "&lt;img src=x onerror=alert(1)&gt;&#34; onmouseover=&#34;alert(1)&#34; x=&#34;" in html
    assert "&lt;marquee&gt;&#34; onmouseover=" in html  # the branch, in the citation's text
    assert "evil/x&#34; onmouseover=&#34;alert(1)&#34; x=&#34;&lt;script&gt;</a>" in html  # the source's text
    targets = re.findall(r'href="([^"]*)"', html)
    assert targets, "the page links its sources"
    for target in targets:
        assert target.startswith("https://github.com/") or "://" not in target, target
        assert not target.lower().startswith(("javascript:", "data:", "vbscript:")), target
    encoded = "https://github.com/evil/x%22%20onmouseover%3D%22alert%281%29%22%20x%3D%22%3Cscript%3E"
    assert f'<a href="{encoded}">' in html
    assert f'<a class="cite" href="{encoded}/pull/301">' in html


# --- JSON ---------------------------------------------------------------------------------------


def test_json_places_every_narrated_pr() -> None:
    document: dict[str, Any] = json.loads(render(build(september(), PARTIAL), "json", "en"))
    placed = {
        pr["number"]: (pr["section"], pr["theme"], pr["highlight"], pr["group"]) for pr in document["pull_requests"]
    }
    assert placed == {
        # Theme and highlight ids are their English names as slugs, unique in their section and theme.
        101: ("delivered", "inference-engine-and-serving", "inference-engine-and-serving/dynamic-engine", [101, 102]),
        102: ("delivered", "inference-engine-and-serving", "inference-engine-and-serving/dynamic-engine", [101, 102]),
        103: ("in_progress", "training-loop", "training-loop/training-loop", [103]),
        104: (None, None, None, None),
        105: (None, None, None, None),
        106: ("in_progress", "inference-engine-and-serving", "inference-engine-and-serving/kv-cache", [106]),
        107: (None, None, None, None),
    }
    categories = {pr["number"]: pr["category"] for pr in document["pull_requests"]}
    assert categories == {
        101: "substantive",
        102: "substantive",
        103: "substantive",
        104: "test_only",
        105: "substantive",
        106: "substantive",
        107: "pending",
    }
    by_number = {pr["number"]: pr for pr in document["pull_requests"]}
    assert by_number[103]["title"] == HOSTILE  # JSON carries the title as it is; JSON quoting is its escaping
    assert by_number[106]["base_ref"] == "dev"
    assert by_number[106]["head_sha"] == "f7" * 20
    assert document["stats"] == {"opened": 5, "merged": 2, "closed_unmerged": 1, "active_at_cutoff": 2}
    assert document["excluded"] == {"test_only": 1, "ci_only": 0, "test_ci_only": 0, "format_only": 0}
    assert document["pending_classification"] == 1
    assert (document["cutoff"], document["final"], document["timezone"]) == ("2026-09-13", False, "Asia/Shanghai")
    assert document["window"] == {"start": "2026-08-31T16:00:00Z", "end": "2026-09-13T16:00:00Z"}


def test_json_outline_and_daily_counts() -> None:
    document: dict[str, Any] = json.loads(render(build(september(), PARTIAL), "json", "en"))
    outline = [
        (
            section["id"],
            [
                (
                    theme["id"],
                    [(h["id"], [(c["id"], c["title"], c["group"]) for c in h["changes"]]) for h in theme["highlights"]],
                )
                for theme in section["themes"]
            ],
        )
        for section in document["report"]["sections"]
    ]
    assert outline == [
        (
            "delivered",
            [
                (
                    "inference-engine-and-serving",
                    [("dynamic-engine", [("change-101", "Add dynamic batching to the inference engine", [101, 102])])],
                )
            ],
        ),
        (
            "in_progress",
            [
                ("training-loop", [("training-loop", [("change-103", "X" + HOSTILE_ONE_LINE[1:], [103])])]),
                (
                    "inference-engine-and-serving",
                    [("kv-cache", [("change-106", "Paged KV cache for long prompts", [106])])],
                ),
            ],
        ),
    ]
    # Substantive PRs only: 101 opened Sep 2, 102 Sep 3, 106 Sep 4, 103 Sep 5, 105 Sep 7 (closed Sep 8);
    # merged Sep 10 and 11. 104 (test-only) and 107 (pending) are not drawn.
    busy = {
        2: (1, 0, 0),
        3: (1, 0, 0),
        4: (1, 0, 0),
        5: (1, 0, 0),
        7: (1, 0, 0),
        8: (0, 0, 1),
        10: (0, 1, 0),
        11: (0, 1, 0),
    }
    assert document["report"]["daily"] == [
        dict(zip(("day", "opened", "merged", "closed"), (f"2026-09-{day:02d}", *busy.get(day, (0, 0, 0))), strict=True))
        for day in range(1, 14)
    ]


def test_json_keeps_the_data_and_writes_invisible_characters_as_escapes() -> None:
    body = render(build(sneaky_september(), PARTIAL), "json", "en")
    # The bytes show nothing a terminal or a viewer would act on or hide...
    assert not INVISIBLE_OR_C1.search(body)
    assert "\\u202e" in body and "\\u200b" in body and "\\u009b" in body and "\\ufeff" in body
    # ...and the data is what GitHub sent: the snapshot is a record, a consumer may match on it.
    document: dict[str, Any] = json.loads(body)
    by_number = {pr["number"]: pr for pr in document["pull_requests"]}
    assert by_number[106]["title"] == SNEAKY_TITLE
    assert by_number[106]["base_ref"] == SNEAKY_BASE
    # The outline is the report's text: cleaned as the Markdown and the HTML show it.
    titles = [
        change["title"]
        for section in document["report"]["sections"]
        for theme in section["themes"]
        for highlight in theme["highlights"]
        for change in highlight["changes"]
    ]
    assert SNEAKY_SEEN in titles


def test_json_escapes_characters_beyond_the_bmp_as_surrogate_pairs() -> None:
    tagged = "hidden\U000e0041\U000e0042 text \U0001f600"
    prs = [
        PullRequest(pr.number, pr.facts, tuple(replace(v, title=tagged) for v in pr.versions), pr.files)
        if pr.number == 103
        else pr
        for pr in september()
    ]
    body = render(build(prs, PARTIAL), "json", "en")
    assert "\\udb40\\udc41\\udb40\\udc42" in body  # tag characters, escaped
    assert "\U0001f600" in body  # a visible emoji stays as it is
    assert {pr["title"] for pr in json.loads(body)["pull_requests"] if pr["number"] == 103} == {tagged}


def test_json_urls_are_built_like_the_report_links() -> None:
    repo = "evil/x) [click](javascript:alert(1))"
    document: dict[str, Any] = json.loads(render(build(september(), PARTIAL, repo=repo), "json", "en"))
    assert document["repo"] == repo  # the stored name, as data
    for pr in document["pull_requests"]:
        assert pr["url"] == pull_url(repo, pr["number"])
        assert pr["url"].startswith("https://github.com/evil/x%29%20%5Bclick%5D")


# --- determinism --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "lang"), [("md", "en"), ("md", "zh-CN"), ("html", "en"), ("html", "zh-CN"), ("json", "en")]
)
def test_two_renders_give_identical_bytes(fmt: str, lang: str) -> None:
    first = render(build(september(), PARTIAL), fmt, lang).encode("utf-8")
    again = render(build(list(reversed(september())), PARTIAL), fmt, lang).encode("utf-8")
    assert first == again
    report = build(september(), FINAL)
    assert render(report, fmt, lang) == render(report, fmt, lang)


# --- on GitHub's parser -------------------------------------------------------------------------


def test_github_flavoured_markdown_makes_no_link_but_the_reports_own() -> None:
    """Render the Markdown with cmark-gfm (GitHub's parser, with its autolink extension). Mentions
    and `#123` are GitHub's post-processing, not the parser's: the empty comments that stop them are
    checked above."""
    import cmarkgfm  # type: ignore[import-untyped]

    hostile = (
        "see https://evil.example/x www.evil.example me@evil.example mailto:a@evil.example "
        "@alice #12 <script>alert(1)</script> [x](javascript:alert(1)) _em_ *em*"
    )
    prs = [
        PullRequest(
            pr.number,
            pr.facts,
            tuple(replace(v, title=hostile, base_ref="release/_wip_") for v in pr.versions),
            pr.files,
        )
        if pr.number == 103
        else pr
        for pr in september()
    ]
    for lang in ("en", "zh-CN"):
        markdown = render(build(prs, PARTIAL), "md", lang)
        html = cmarkgfm.github_flavored_markdown_to_html(markdown, options=cmarkgfm.cmark.Options.CMARK_OPT_UNSAFE)
        targets = re.findall(r'<a href="([^"]*)"', html)
        allowed = re.compile(r"https://github\.com/NVIDIA/Megatron-LM(/pull/\d+)?|2026-09\.md\?lang=[^\"]+")
        assert all(allowed.fullmatch(target) for target in targets), targets
        line = next(line for line in html.splitlines() if "evil.example" in line)
        assert "<em>" not in line and "<script>" not in line
        assert "release/_wip_ #103</a>" in html


def test_a_line_of_a_fold_starting_like_a_list_or_heading_stays_one_item() -> None:
    """A title "1. …", "3) …", "+ …" or "# …" leads its fold line: escaped, not a nested list or a heading."""
    change = build(september(), PARTIAL).sections[0].changes[0]
    for title, expected in (
        ("1. Fix the router", "1\\. Fix the router ("),
        ("3) Fix it", "3\\) Fix it ("),
        ("+ Add x", "\\+ Add x ("),
        ("# Heading", "\\# Heading ("),
    ):
        line = bullet_markdown([replace(change, title=title)], "en", folded=True)
        assert line.startswith(expected), line


# --- what a group reads of a member ----------------------------------------------------------------------


def assert_member_document_is_the_documents_values(report: Report) -> None:
    """`member_document` holds the JSON document's values a group reads (the snapshot's numbers, each PR's number,
    title and base branch, each section's reverted lines and its themes' ids, names and changes), and a group
    merges it as it merges the document."""
    full, member = report_document(report), member_document(report)
    assert {key: value for key, value in member.items() if key not in ("pull_requests", "report")} == {
        key: value for key, value in full.items() if key not in ("pull_requests", "report")
    }
    rows = [{key: pr[key] for key in ("number", "title", "base_ref")} for pr in full["pull_requests"]]
    assert member["pull_requests"] == rows
    outline = [
        {
            "id": section["id"],
            "reverted": section["reverted"],
            "themes": [
                {
                    "id": theme["id"],
                    "en": theme["en"],
                    "zh": theme["zh"],
                    "highlights": [{"changes": highlight["changes"]} for highlight in theme["highlights"]],
                }
                for theme in section["themes"]
            ],
        }
        for section in full["report"]["sections"]
    ]
    assert member["report"] == {"sections": outline}
    cutoff = full["cutoff"]
    assert merge_group("g", full["month"], cutoff, [member]) == merge_group("g", full["month"], cutoff, [full])


@pytest.mark.parametrize("cutoff", [PARTIAL, FINAL])
def test_what_a_group_reads_of_a_member_is_its_documents_values(cutoff: str) -> None:
    assert_member_document_is_the_documents_values(build(september(), cutoff))


def test_what_a_group_reads_of_a_reverted_line_is_its_documents_values() -> None:
    """The group reads a reverted line's title from the rows of its PRs."""
    from tests.core.test_report import MERGED, PR, ROUTER, TELEMETRY, report

    month = report(
        [
            PR(10, MERGED, TELEMETRY, files=("megatron/telemetry.py",)),
            PR(11, MERGED, f'Revert "{TELEMETRY}"', files=("megatron/telemetry.py",)),
            PR(12, MERGED, ROUTER, files=("megatron/core/router.py",)),
        ]
    )
    assert month.sections[0].reverted
    assert_member_document_is_the_documents_values(month)


@needs_shared
@pytest.mark.parametrize("seed", [3, 17])
def test_what_a_group_reads_of_a_generated_member_is_its_documents_values(seed: int) -> None:
    from tests.core.test_clusters import generated_month, megatron_taxonomy

    for taxonomy in ((), megatron_taxonomy()):
        assert_member_document_is_the_documents_values(generated_month(200, seed, taxonomy))
