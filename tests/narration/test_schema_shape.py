"""`tracker/narration/schema.py` in the report's shape (issue 32, item 8): a highlight is about one to three
changes, every other change of a theme is in its `others` (listed in the theme's fold), the model writes the
section's overview, the request says what matters, upkeep and reverted changes stay the report's own, and
ordinary identifiers are prose that the report shows as written.

The month (`PRS`, built as tests/core/test_report.py builds one, themes from the clustering): in Delivered,
DeepSeek-V4 attention on main and dev (#100, #101: `change-100`), a fused router kernel (#102), a typo (#103),
an overlapped all-to-all (#104), a rename (#105), Qwen3.5-VL (#106), a flaky checkpoint fix (#107), a torch
bump (#108) and a nightly sync (#109), upkeep both, and a change reverted in the window (#110, #111); in
In Progress, DeepSeek-V4 multi-token prediction (#120). `SHAPED` and the rest are a model's well-formed
answers, which tests/narration/test_narrator.py scripts for a fake endpoint.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import cmarkgfm
import pytest

from tests.core.test_report import MERGED, OPEN, PR, TELEMETRY, report
from tracker.core.report import DELIVERED, IN_PROGRESS, Report
from tracker.narration import schema as narration
from tracker.narration.schema import (
    MAX_THEMES,
    SectionProse,
    apply,
    kept_themes,
    narrated_changes,
    prompt_messages,
    section_input,
    translation_problems,
    validate,
)
from tracker.reports.render import render

ATTENTION = (
    "megatron/core/transformer/attention.py",
    "megatron/core/transformer/dsa.py",
    "megatron/core/models/deepseek.py",
)
MOE = "megatron/core/transformer/moe"
PRS = [
    PR(100, MERGED, "Add DeepSeek-V4 sparse attention", files=(*ATTENTION, "tests/unit_tests/test_dsa.py")),
    PR(101, MERGED, "[dev] Add DeepSeek-V4 sparse attention", "dev", files=ATTENTION),
    PR(102, MERGED, "Fuse the MoE router top-k kernel", files=(f"{MOE}/router.py", "megatron/core/fusions/topk.py")),
    PR(103, MERGED, "Fix a typo in the router docstring", files=(f"{MOE}/router.py",)),
    PR(
        104, MERGED, "Overlap the expert-parallel all-to-all", files=(f"{MOE}/token_dispatcher.py", f"{MOE}/experts.py")
    ),
    PR(105, MERGED, "Rename a helper of moe_utils", files=(f"{MOE}/moe_utils.py",)),
    PR(
        106,
        MERGED,
        "Qwen3.5-VL model support",
        files=("megatron/core/models/qwen/vl.py", "megatron/core/models/qwen/vit.py"),
    ),
    PR(107, MERGED, "Fix a flaky checkpoint save", files=("megatron/core/dist_checkpointing/save.py",)),
    PR(108, MERGED, "Bump torch from 2.3 to 2.4", files=("requirements.txt",)),
    PR(109, MERGED, "Nightly sync main into dev (13_07_2026)", "dev", files=("megatron/a.py", "megatron/b.py")),
    PR(110, MERGED, TELEMETRY, files=("megatron/telemetry.py",)),
    PR(111, MERGED, f'Revert "{TELEMETRY}"', files=("megatron/telemetry.py",)),
    PR(120, OPEN, "DeepSeek-V4 multi-token prediction", files=("megatron/core/models/deepseek_mtp.py",)),
]
NARRATED = ["change-100", "change-102", "change-103", "change-104", "change-105", "change-106", "change-107"]

SHAPED: dict[str, Any] = {
    "themes": [
        {
            "title": "New models: DeepSeek-V4 attention and Qwen3.5-VL",
            "summary": "DeepSeek-V4 gains its sparse attention on main and dev, and Qwen3.5-VL joins the models.",
            "highlights": [
                {
                    "change_ids": ["change-100"],
                    "sentence": "DeepSeek-V4 sparse attention lands on main and dev with its model definition.",
                },
                {"change_ids": ["change-106"], "sentence": "Qwen3.5-VL can be trained, vision encoder included."},
            ],
            "others": ["change-107"],
        },
        {
            "title": "Mixture of Experts: faster routing and overlapped dispatch",
            "summary": "Expert layers spend less time routing tokens and waiting for the all-to-all.",
            "highlights": [
                {
                    "change_ids": ["change-102", "change-104"],
                    "sentence": "A fused top-k kernel speeds up the router, and the expert-parallel all-to-all "
                    "now overlaps with compute.",
                }
            ],
            "others": ["change-103", "change-105"],
        },
    ],
    "overview": "The month brought DeepSeek-V4 sparse attention and Qwen3.5-VL, and faster Mixture of Experts "
    "layers through a fused router and an overlapped all-to-all.",
}
SHAPED_ZH: dict[str, Any] = {
    "themes": [
        {
            "title": "新模型：DeepSeek-V4 注意力与 Qwen3.5-VL",
            "summary": "DeepSeek-V4 的稀疏注意力在 main 和 dev 上落地，Qwen3.5-VL 加入支持的模型。",
            "highlights": [
                {"change_ids": ["change-100"], "sentence": "DeepSeek-V4 稀疏注意力及其模型定义在 main 和 dev 上落地。"},
                {"change_ids": ["change-106"], "sentence": "Qwen3.5-VL 可以训练，包括其视觉编码器。"},
            ],
            "others": ["change-107"],
        },
        {
            "title": "混合专家：更快的路由与重叠的分发",
            "summary": "专家层在路由和等待 all-to-all 上花的时间更少。",
            "highlights": [
                {
                    "change_ids": ["change-102", "change-104"],
                    "sentence": "融合的 top-k 内核加快了路由，专家并行的 all-to-all 现在与计算重叠。",
                }
            ],
            "others": ["change-103", "change-105"],
        },
    ],
    "overview": "本月带来了 DeepSeek-V4 稀疏注意力和 Qwen3.5-VL，并通过融合路由与重叠 all-to-all 加快了混合专家层。",
}
SHAPED_OPEN: dict[str, Any] = {
    "themes": [
        {
            "title": "DeepSeek-V4 multi-token prediction",
            "summary": "Multi-token prediction for DeepSeek-V4 is under way.",
            "highlights": [
                {"change_ids": ["change-120"], "sentence": "DeepSeek-V4 is gaining multi-token prediction."}
            ],
            "others": [],
        }
    ],
    "overview": "Work continues on multi-token prediction for DeepSeek-V4.",
}
SHAPED_OPEN_ZH: dict[str, Any] = {
    "themes": [
        {
            "title": "DeepSeek-V4 多 token 预测",
            "summary": "DeepSeek-V4 的多 token 预测正在推进。",
            "highlights": [{"change_ids": ["change-120"], "sentence": "DeepSeek-V4 正在加入多 token 预测。"}],
            "others": [],
        }
    ],
    "overview": "DeepSeek-V4 的多 token 预测工作仍在进行。",
}


def month() -> Report:
    return report(PRS)


def prose(document: dict[str, Any]) -> SectionProse:
    return SectionProse.model_validate(document)


def found(problems: list[narration.Problem]) -> list[tuple[str, str]]:
    return [(problem.code, problem.where) for problem in problems]


def narrated_month() -> Report:
    pairs = {
        DELIVERED: (prose(SHAPED), prose(SHAPED_ZH)),
        IN_PROGRESS: (prose(SHAPED_OPEN), prose(SHAPED_OPEN_ZH)),
    }
    return apply(month(), pairs, "test-model")


# --- what is sent --------------------------------------------------------------------------------------------


def test_upkeep_and_reverted_changes_are_not_sent() -> None:
    built = month()
    delivered = built.sections[0]
    # Premises: the torch bump and the sync are the upkeep theme, last; #110 and #111 are the Reverted line.
    assert delivered.themes[-1].en == "Build, CI and dependencies"
    assert sorted(c.id for c in delivered.themes[-1].changes) == ["change-108", "change-109"]
    assert [(undone.id, revert.id if revert else None) for undone, revert in delivered.reverted] == [
        ("change-110", "change-111")
    ]
    data = section_input(built, DELIVERED)
    assert sorted(data.change_ids) == NARRATED
    assert [c.id for c in narrated_changes(delivered)] == list(data.change_ids)
    outlined = sorted(i for theme in data.themes for highlight in theme.highlights for i in highlight.change_ids)
    assert outlined == NARRATED
    assert "build-ci-dependencies" not in [theme.id for theme in data.themes]
    # The upkeep theme is among the section's MAX_THEMES: the model may write one fewer.
    assert kept_themes(delivered) == (delivered.themes[-1],)
    assert data.max_themes == MAX_THEMES - 1 == 9
    assert "Write at most 9 themes." in prompt_messages(data)[0]["content"]
    assert section_input(built, IN_PROGRESS).max_themes == MAX_THEMES


def test_each_change_says_how_much_it_matters() -> None:
    data = section_input(month(), DELIVERED)
    sent = {group.id: (group.files, group.branches, group.bases, group.significance) for group in data.groups}
    assert sent == {
        # Three files of code (its test aside), on main and dev: the most significant.
        "change-100": (3, 2, ("main", "dev"), 1),
        "change-102": (2, 1, ("main",), 2),
        "change-104": (2, 1, ("main",), 3),
        "change-106": (2, 1, ("main",), 4),
        "change-103": (1, 1, ("main",), 5),
        "change-105": (1, 1, ("main",), 6),
        "change-107": (1, 1, ("main",), 7),
    }
    lines = prompt_messages(data)[1]["content"].split("\n")
    block = json.loads("\n".join(lines[lines.index(narration.DATA_START) + 1 : lines.index(narration.DATA_END)]))
    first = next(change for change in block["changes"] if change["id"] == "change-100")
    assert {key: first[key] for key in ("files", "branches", "bases", "significance")} == {
        "files": 3,
        "branches": 2,
        "bases": ["main", "dev"],
        "significance": 1,
    }


def test_a_section_of_upkeep_alone_is_not_narrated() -> None:
    only = report([PR(108, MERGED, "Bump torch from 2.3 to 2.4", files=("requirements.txt",))])
    assert only.sections[0].changes and narrated_changes(only.sections[0]) == ()
    assert section_input(only, DELIVERED).groups == ()


# --- validation ----------------------------------------------------------------------------------------------


def test_well_formed_prose_passes() -> None:
    built = month()
    assert validate(prose(SHAPED), section_input(built, DELIVERED)) == []
    assert validate(prose(SHAPED_OPEN), section_input(built, IN_PROGRESS)) == []
    assert translation_problems(prose(SHAPED), prose(SHAPED_ZH), ("DeepSeek-V4", "Qwen3.5-VL")) == []


def shaped(edit: Any) -> list[tuple[str, str]]:
    document = copy.deepcopy(SHAPED)
    edit(document)
    return found(validate(prose(document), section_input(month(), DELIVERED)))


def four(document: dict[str, Any]) -> None:
    document["themes"][1]["highlights"][0]["change_ids"] += ["change-103", "change-105"]
    document["themes"][1]["others"] = []


def test_a_highlight_of_four_changes_is_refused() -> None:
    assert shaped(four) == [("too_many_changes", "themes[1].highlights[0].change_ids")]

    def three(document: dict[str, Any]) -> None:
        document["themes"][1]["highlights"][0]["change_ids"].append("change-103")
        document["themes"][1]["others"] = ["change-105"]

    assert shaped(three) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # In a highlight and in its theme's others.
        (lambda d: d["themes"][0]["others"].append("change-100"), [("duplicate", "themes[0].others[1]")]),
        # In the others of two themes.
        (lambda d: d["themes"][1]["others"].append("change-107"), [("duplicate", "themes[1].others[2]")]),
        # Nowhere.
        (lambda d: d["themes"][1]["others"].remove("change-105"), [("missing", "change-105")]),
        # Upkeep is not the model's to place.
        (lambda d: d["themes"][1]["others"].append("change-108"), [("unknown", "themes[1].others[2]")]),
        # A theme of others alone has no highlight.
        (
            lambda d: d["themes"].append(
                {
                    "title": "Fixes",
                    "summary": "Small fixes.",
                    "highlights": [],
                    "others": [d["themes"][0]["others"].pop()],
                }
            ),
            [("empty", "themes[2].highlights")],
        ),
    ],
)
def test_a_change_in_two_places_or_none_is_refused(edit: Any, expected: list[tuple[str, str]]) -> None:
    assert shaped(edit) == expected


@pytest.mark.parametrize(
    ("overview", "code"),
    [
        ("DeepSeek-V4 attention is documented at https://example.com/dsa now.", "url"),
        ("DeepSeek-V4 attention is documented at nvidia.github.io now.", "url"),
        ("DeepSeek-V4 attention arrives, see javascript:alert(1) for more.", "url"),
        ("DeepSeek-V4 attention arrives with PR 100.", "pr_number"),
        ("DeepSeek-V4 attention arrives with #100.", "pr_number"),
        ("DeepSeek-V4 attention arrives with pull/100.", "pr_number"),
        ("DeepSeek-V4 attention arrives, thanks to @alice.", "mention"),
        ("DeepSeek-V4 attention arrives, ask dsa@nvidia for it.", "email"),
        ("DeepSeek-V4 attention arrives.\nQwen3.5-VL too.", "newline"),
        ("word " * 46, "too_long"),
        ("", "empty"),
    ],
)
def test_an_overview_with_an_address_or_a_number_is_refused(overview: str, code: str) -> None:
    assert shaped(lambda d: d.update(overview=overview)) == [(code, "overview")]


def test_the_chinese_keeps_the_others_and_translates_the_overview() -> None:
    glossary = ("DeepSeek-V4", "Qwen3.5-VL")
    moved = copy.deepcopy(SHAPED_ZH)
    moved["themes"][1]["others"] = ["change-105", "change-103"]
    assert found(translation_problems(prose(SHAPED), prose(moved), glossary)) == [("citations", "themes[1].others")]
    lossy = copy.deepcopy(SHAPED_ZH)
    lossy["overview"] = "本月带来了新的稀疏注意力，详见 example.com。"
    assert found(translation_problems(prose(SHAPED), prose(lossy), glossary)) == [
        ("url", "overview"),
        ("glossary", "overview"),
        ("glossary", "overview"),
    ]


# --- the report ----------------------------------------------------------------------------------------------


def test_the_prose_maps_onto_the_report_with_the_upkeep_theme_and_the_reverted_line_kept() -> None:
    before, after = month(), narrated_month()
    delivered = after.sections[0]
    assert [theme.en for theme in delivered.themes] == [
        "New models: DeepSeek-V4 attention and Qwen3.5-VL",
        "Mixture of Experts: faster routing and overlapped dispatch",
        "Build, CI and dependencies",
    ]
    assert delivered.themes[-1] == before.sections[0].themes[-1]
    assert delivered.reverted == before.sections[0].reverted
    assert (delivered.overview_en, delivered.overview_zh) == (SHAPED["overview"], SHAPED_ZH["overview"])
    models, moe = delivered.themes[:2]
    # Each highlight's line cites its own changes; the others are the theme's fold, by PR number.
    assert [[c.id for c in h.shown] for h in models.highlights] == [["change-100"], ["change-106"], []]
    assert [c.id for c in models.folded] == ["change-107"]
    assert [[c.id for c in h.shown] for h in moe.highlights] == [["change-102", "change-104"], []]
    assert [c.id for c in moe.folded] == ["change-103", "change-105"]
    placement = after.placement()
    assert sorted(placement) == sorted(before.placement())
    assert placement[107]["highlight"] == f"{models.id}/others"
    assert placement[110]["theme"] == "reverted" and placement[108]["theme"] == "build-ci-dependencies"
    document = json.loads(render(after, "json", "en"))["report"]["sections"][0]
    assert (document["overview_en"], document["overview_zh"]) == (SHAPED["overview"], SHAPED_ZH["overview"])
    assert [theme["folded"] for theme in document["themes"][:2]] == [["change-107"], ["change-103", "change-105"]]
    assert document["themes"][0]["summary_zh"] == SHAPED_ZH["themes"][0]["summary"]


def test_the_overview_is_the_models_for_the_sections_it_wrote() -> None:
    after = narrated_month()
    english, chinese = render(after, "md", "en"), render(after, "md", "zh-CN")
    assert f"## Overview\n\n{SHAPED['overview']} {SHAPED_OPEN['overview']}\n" in english
    assert f"## 概览\n\n{SHAPED_ZH['overview']}{SHAPED_OPEN_ZH['overview']}\n" in chinese
    # A section the model did not write keeps the overview built from its content.
    half = apply(month(), {IN_PROGRESS: (prose(SHAPED_OPEN), prose(SHAPED_OPEN_ZH))}, "test-model")
    said = render(half, "md", "en").split("## Overview\n\n", 1)[1].split("\n", 1)[0]
    assert said.startswith("Delivered 9 changes in 6 themes: ") and said.endswith(" " + SHAPED_OPEN["overview"])


# --- identifiers ---------------------------------------------------------------------------------------------

IDENTIFIERS = "3) The `__init__` of the router keeps a|b when x<y, and **kwargs stay as they are."
# What a reader sees of it in the HTML that GitHub makes of the Markdown, and in the report's own HTML.
SEEN = "3) The `__init__` of the router keeps a|b when x&lt;y, and **kwargs stay as they are."


def with_identifiers(document: dict[str, Any]) -> dict[str, Any]:
    written = copy.deepcopy(document)
    written["themes"][0]["highlights"][1]["sentence"] = IDENTIFIERS
    written["themes"][0]["summary"] = "1. " + IDENTIFIERS
    written["overview"] = "# " + IDENTIFIERS
    return written


def test_ordinary_identifiers_are_prose() -> None:
    assert shaped(lambda d: d.update(with_identifiers(d))) == []


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_ordinary_identifiers_render_as_written_with_no_structure(lang: str) -> None:
    pairs = {DELIVERED: (prose(with_identifiers(SHAPED)), prose(with_identifiers(SHAPED_ZH)))}
    after = apply(month(), pairs, "test-model")
    page = cmarkgfm.github_flavored_markdown_to_html(render(after, "md", lang))
    # The sentence (a list item), the summary and the overview (paragraphs) each show the text as written.
    assert f"<li>{SEEN} (" in page or f"<li>{SEEN}（" in page
    assert f"<p>1. {SEEN}</p>" in page
    assert f"<p># {SEEN}" in page
    # No code span, bold, table, nested or ordered list, heading or HTML from the prose.
    assert "<code>__init__" not in page and "<strong>__init__" not in page and "<strong>kwargs" not in page
    assert "<table>" not in page and "<ol" not in page and "<y" not in page
    assert not re.search(r"<h\d>[^<]*(?:__init__|1\.)", page)
    html = render(after, "html", lang)
    assert f"<li>{SEEN}{'（' if lang == 'zh-CN' else ' ('}" in html
    assert f'<span class="summary">1. {SEEN}</span>' in html
    assert f"<p># {SEEN}" in html
