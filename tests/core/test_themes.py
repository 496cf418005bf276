"""`tracker/themes.py`: theme and highlight choice from a taxonomy (paths, labels, title keywords), the
layout default, the shipped examples/megatron-lm.yaml, and real merged Megatron-LM PRs
(../shared/data/megatron) themed with it.

Every expected theme is written by hand; none is computed by the code under test.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.fixtures.paths import EXAMPLES, SHARED, needs_shared
from tracker.config import TrackerConfig, load_config
from tracker.core import memo
from tracker.core.classify import Category, ChangedFile, Rules, classify_head
from tracker.core.taxonomy import HighlightConfig, ThemeConfig
from tracker.core.themes import (
    LAYOUT_PREFIX,
    ThemeChoice,
    choose_theme,
    cleaned_path,
    is_auxiliary,
    layout_theme,
    sorted_files,
    title_scope,
)
from tracker.settings import load_settings

EXAMPLE = EXAMPLES / "megatron-lm.yaml"
MEGATRON = SHARED / "data/megatron/merged-prs-2026-03-to-06.jsonl"
REPO = "NVIDIA/Megatron-LM"
ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
CJK = re.compile(r"[\u4e00-\u9fff]")


def theme(
    id: str,
    paths: Sequence[str] = (),
    labels: Sequence[str] = (),
    keywords: Sequence[str] = (),
    highlights: Sequence[HighlightConfig] = (),
) -> ThemeConfig:
    return ThemeConfig(
        id=id,
        en=f"{id} en",
        zh=f"{id} 中文",
        paths=tuple(paths),
        labels=tuple(labels),
        keywords=tuple(keywords),
        highlights=tuple(highlights),
    )


def highlight(
    id: str, paths: Sequence[str] = (), labels: Sequence[str] = (), keywords: Sequence[str] = ()
) -> HighlightConfig:
    return HighlightConfig(
        id=id, en=f"{id} en", zh=f"{id} 中文", paths=tuple(paths), labels=tuple(labels), keywords=tuple(keywords)
    )


def theme_id(taxonomy: Sequence[ThemeConfig], title: str = "", labels: Sequence[str] = (), *paths: str) -> str:
    return choose_theme(taxonomy, title, labels, paths).theme_id


# --- taxonomy scoring ---------------------------------------------------------------------------------

MOE = theme("moe", paths=["megatron/core/transformer/moe/"], labels=["moe"], keywords=["MoE", "expert"])
FSDP = theme("fsdp", paths=["megatron/core/distributed/fsdp/**"], keywords=["FSDP", "M-FSDP"])
GRAPHS = theme("cuda-graphs", paths=["megatron/core/transformer/cuda_graphs.py"], keywords=["CUDA graph"])
CP = theme("context-parallel", keywords=["CP", "context parallel"])
RL = theme("rl", paths=["megatron/rl/"], keywords=["RL"])
TRAINING = theme("training", paths=["megatron/training/**"])
CHECKPOINTS = theme("checkpointing", paths=["megatron/training/checkpointing.py"], keywords=["checkpoint"])
TAXONOMY = (MOE, FSDP, GRAPHS, CP, RL, TRAINING, CHECKPOINTS)


def test_paths_beat_nothing() -> None:
    assert theme_id(TAXONOMY, "Tidy up", (), "megatron/core/transformer/moe/router.py") == "moe"
    assert theme_id(TAXONOMY, "Tidy up", (), "megatron/core/distributed/fsdp/src/buffer.py") == "fsdp"


def test_no_match_falls_back_to_the_layout() -> None:
    choice = choose_theme(TAXONOMY, "Tidy up", (), ["megatron/core/tokenizers/text/a.py"])
    assert choice.theme_id == "layout-megatron-core-tokenizers-text"
    assert choice == layout_theme(["megatron/core/tokenizers/text/a.py"])


def test_the_larger_share_of_files_wins() -> None:
    paths = (
        "megatron/core/distributed/fsdp/a.py",
        "megatron/core/distributed/fsdp/b.py",
        "megatron/core/transformer/moe/c.py",
    )
    assert theme_id(TAXONOMY, "Tidy up", (), *paths) == "fsdp"
    assert theme_id(TAXONOMY, "Tidy up", (), *paths[1:], "megatron/core/transformer/moe/d.py") == "moe"


def test_test_ci_and_docs_files_do_not_count_when_code_changed() -> None:
    aux = theme("aux", paths=["tests/", ".github/", "docs/", "*.md"])
    taxonomy = (aux, MOE)
    code_and_aux = (
        "tests/unit_tests/test_router.py",
        "tests/unit_tests/test_dispatch.py",
        ".github/workflows/ci.yml",
        "docs/moe.md",
        "megatron/core/transformer/moe/router.py",
    )
    assert theme_id(taxonomy, "Tidy up", (), *code_and_aux) == "moe"
    # With no code file at all, the other files are all there is to go by.
    assert theme_id(taxonomy, "Tidy up", (), *code_and_aux[:-1]) == "aux"


@pytest.mark.parametrize(
    ("path", "auxiliary"),
    [
        pytest.param("tests/unit_tests/test_a.py", True, id="tests-root"),
        pytest.param("experimental/lite/tests/unit/a.py", True, id="nested-tests-dir"),
        pytest.param("megatron/core/test_utils.py", True, id="test-file-name"),
        pytest.param(".github/workflows/a.yml", True, id="github"),
        pytest.param("tools/ci/run.sh", True, id="tools-ci"),
        pytest.param("docs/user-guide/a.md", True, id="docs"),
        pytest.param("megatron/core/transformer/moe/README.md", True, id="markdown"),
        pytest.param("megatron/core/transformer/moe/router.py", False, id="code"),
        pytest.param("megatron/core/testing_utils.py", False, id="testing-is-not-test"),
        pytest.param("tools/checkpoint/convert.py", False, id="tools-not-ci"),
    ],
)
def test_auxiliary_files(path: str, auxiliary: bool) -> None:
    assert is_auxiliary(path) is auxiliary


def test_the_most_specific_pattern_takes_the_file() -> None:
    # `megatron/training/**` is the training theme's catch-all; checkpointing names the file itself.
    assert theme_id(TAXONOMY, "Tidy up", (), "megatron/training/checkpointing.py") == "checkpointing"
    assert theme_id(TAXONOMY, "Tidy up", (), "megatron/training/training.py") == "training"
    # The broad pattern listed first does not change that.
    assert theme_id((TRAINING, CHECKPOINTS), "Tidy up", (), "megatron/training/checkpointing.py") == "checkpointing"


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        pytest.param("megatron/rl/", "megatron/rl/agent/a.py", True, id="prefix-dir"),
        pytest.param("megatron/rl", "megatron/rl/a.py", True, id="prefix-without-slash"),
        pytest.param("megatron/rl", "megatron/rlhf/a.py", False, id="prefix-is-not-a-string-prefix"),
        pytest.param("pretrain_gpt.py", "pretrain_gpt.py", True, id="prefix-file"),
        pytest.param("./megatron/rl/", "megatron/rl/a.py", True, id="dot-slash"),
        pytest.param("megatron/*.py", "megatron/core/deep/a.py", True, id="star-crosses-slash"),
        pytest.param("megatron/**/moe/*", "megatron/core/transformer/moe/a.py", True, id="double-star"),
        pytest.param("**/moe/**", "moe/a.py", True, id="double-star-slash-matches-no-directory"),
        pytest.param("pretrain_*.py", "pretrain_gpt.py", True, id="star-in-file-name"),
        pytest.param("pretrain_*.py", "tools/pretrain_gpt.py", False, id="glob-is-anchored"),
        pytest.param("megatron/fp?_utils.py", "megatron/fp8_utils.py", True, id="question-mark"),
        pytest.param("megatron/fp?_utils.py", "megatron/fp/_utils.py", False, id="question-mark-not-slash"),
        pytest.param("megatron/fp[48]_utils.py", "megatron/fp4_utils.py", True, id="class"),
        pytest.param("megatron/fp[!48]_utils.py", "megatron/fp4_utils.py", False, id="negated-class"),
        pytest.param("*.md", "megatron/core/README.md", True, id="suffix"),
    ],
)
def test_path_patterns(pattern: str, path: str, matches: bool) -> None:
    got = theme_id((theme("t", paths=[pattern]),), "", (), path)
    assert (got == "t") is matches, got


def test_labels_are_case_insensitive_and_beat_paths() -> None:
    assert theme_id(TAXONOMY, "Tidy up", ("MoE",)) == "moe"
    assert theme_id(TAXONOMY, "Tidy up", (" moe ",), "megatron/core/distributed/fsdp/a.py") == "moe"
    assert theme_id(TAXONOMY, "Tidy up", ("bug",), "megatron/core/distributed/fsdp/a.py") == "fsdp"


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        pytest.param("Fix moe router", "moe", id="case-insensitive"),
        pytest.param("Shard experts evenly", "moe", id="plural"),
        pytest.param("Add CUDA graph capture", "cuda-graphs", id="multi-word"),
        pytest.param("Make CUDA graphs safe", "cuda-graphs", id="multi-word-plural"),
        pytest.param("Refactor cuda_graph scope", "cuda-graphs", id="underscore-separator"),
        pytest.param("Cudagraphs: fix segfault", "cuda-graphs", id="no-separator"),
        pytest.param("Fix M-FSDP buffers", "fsdp", id="hyphenated-keyword"),
        pytest.param("Fix MFSDP buffers", "fsdp", id="hyphenated-keyword-without-hyphen"),
        pytest.param("Support inference_optimized CP=2", "context-parallel", id="equals-is-a-boundary"),
        pytest.param("Move CPU offload", None, id="CP-not-in-CPU"),
        pytest.param("Fix URL parsing", None, id="RL-not-in-URL"),
        pytest.param("Remove expertise", None, id="expert-not-in-expertise"),
        pytest.param("Fix FP8GlobalStateManager", None, id="no-match-inside-identifier"),
        pytest.param("Thread process groups through RL_utils", "rl", id="underscore-is-a-boundary"),
    ],
)
def test_title_keywords_are_word_bounded(title: str, expected: str | None) -> None:
    got = theme_id(TAXONOMY, title, (), "somewhere/else.py")
    if expected is None:
        assert got.startswith(LAYOUT_PREFIX), got
    else:
        assert got == expected


def test_a_title_keyword_outweighs_a_whole_path_share() -> None:
    # The title says what the change is about; the files may sit in another area's directory.
    assert theme_id(TAXONOMY, "Fix FSDP buffers", (), "megatron/rl/a.py") == "fsdp"
    # Keyword and paths together beat a keyword alone.
    assert theme_id(TAXONOMY, "Fix FSDP and RL handoff", (), "megatron/rl/a.py") == "rl"


def test_a_cherry_pick_marker_is_not_context_parallelism() -> None:
    assert title_scope("cp: `Fix expert bias (#4846)` into `core_r0.18.0`")[0].startswith("`Fix expert")
    assert theme_id(TAXONOMY, "cp: `Fix expert bias (#4846)` into `core_r0.18.0`") == "moe"
    assert theme_id(TAXONOMY, "Fix CP: expert bias") != "moe"  # "CP" mid-title is the keyword


@pytest.mark.parametrize(
    ("title", "scope"),
    [
        pytest.param("[MoE] Fix router", "[MoE]", id="tag"),
        pytest.param("[dev] [DeepSeek-v4] Part 1: attention", "[dev] [DeepSeek-v4] Part 1", id="tags-then-prefix"),
        pytest.param("fix(fsdp): handle DTensor", "fsdp", id="conventional-commit"),
        pytest.param("Inference | Prefix caching", "Inference", id="bar-prefix"),
        pytest.param("Megatron-FSDP: Fix buffers", "Megatron-FSDP", id="colon-prefix"),
        pytest.param("Fix the thing that breaks when a: b", "", id="long-prefix-is-no-scope"),
        pytest.param("Add support", "", id="none"),
    ],
)
def test_title_scope(title: str, scope: str) -> None:
    assert title_scope(title)[1] == scope


def test_a_declared_scope_tips_a_tie() -> None:
    assert theme_id(TAXONOMY, "Fix MoE and FSDP buffers") == "moe"  # a tie: listed first
    assert theme_id(TAXONOMY, "FSDP: fix MoE buffers") == "fsdp"
    assert theme_id(TAXONOMY, "[FSDP] fix MoE buffers") == "fsdp"


def test_ties_go_to_the_theme_listed_first() -> None:
    first = theme("first", paths=["megatron/core/"], keywords=["kernel"])
    second = theme("second", paths=["megatron/core/"], keywords=["kernel"])
    assert theme_id((first, second), "Fuse kernel", (), "megatron/core/a.py") == "first"
    assert theme_id((second, first), "Fuse kernel", (), "megatron/core/a.py") == "second"
    assert theme_id([second, first], "Fuse kernel", (), "megatron/core/a.py") == "second"  # a list, too


def test_highlights_are_chosen_the_same_way() -> None:
    moe = theme(
        "moe",
        paths=["megatron/core/transformer/moe/"],
        keywords=["MoE"],
        highlights=[
            highlight("routing", paths=["megatron/core/transformer/moe/router.py"], keywords=["router", "aux loss"]),
            highlight("dispatch", paths=["megatron/core/transformer/moe/token_dispatcher.py"], keywords=["DeepEP"]),
            highlight("perf", labels=["performance"]),
        ],
    )
    taxonomy = (moe,)

    def highlight_of(title: str, labels: Sequence[str] = (), *paths: str) -> str:
        return choose_theme(taxonomy, title, labels, paths).highlight_id

    assert highlight_of("Fix MoE", (), "megatron/core/transformer/moe/router.py") == "routing"
    assert highlight_of("Fix MoE", (), "megatron/core/transformer/moe/token_dispatcher.py") == "dispatch"
    assert highlight_of("Fix MoE aux loss", (), "megatron/core/transformer/moe/token_dispatcher.py") == "routing"
    assert highlight_of("Fix MoE", ("Performance",)) == "perf"
    # Nothing matches, and the last highlight is not a catch-all: a generic "other" highlight.
    other = choose_theme(taxonomy, "Fix MoE", (), ["megatron/core/transformer/moe/experts.py"])
    assert (other.highlight_id, other.highlight_en, other.highlight_zh) == (
        "other",
        "Other moe en work",
        "moe 中文：其他改进",
    )


def test_a_last_highlight_without_matchers_takes_the_rest() -> None:
    moe = theme("moe", keywords=["MoE"], highlights=[highlight("routing", keywords=["router"]), highlight("rest")])
    assert choose_theme((moe,), "Fix MoE experts", (), ()).highlight_id == "rest"
    assert choose_theme((moe,), "Fix MoE router", (), ()).highlight_id == "routing"


def test_a_theme_without_highlights_is_its_own_highlight() -> None:
    choice = choose_theme(TAXONOMY, "Fix FSDP", (), ())
    assert choice == ThemeChoice("fsdp", "fsdp en", "fsdp 中文", "fsdp", "fsdp en", "fsdp 中文")


def test_the_choice_is_deterministic() -> None:
    paths = [
        "megatron/core/transformer/moe/router.py",
        "megatron/core/distributed/fsdp/a.py",
        "megatron/training/training.py",
        "tests/unit_tests/test_router.py",
    ]
    first = choose_theme(TAXONOMY, "Fix buffers", ("bug",), paths)
    shuffled = random.Random(7)
    for _ in range(20):
        again = paths[:]
        shuffled.shuffle(again)
        assert choose_theme(list(TAXONOMY), "Fix buffers", ("bug",), again) == first
        assert choose_theme((), "Fix buffers", (), again) == choose_theme((), "Fix buffers", (), paths)


# --- the layout default ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        pytest.param(
            ["megatron/core/transformer/moe/router.py"],
            ("layout-megatron-core-transformer-moe", "Transformer MoE", "Transformer MoE 模块", "router", "Router"),
            id="moe-acronym-generic-prefix-dropped",
        ),
        pytest.param(
            [
                "megatron/core/inference/contexts/a.py",
                "megatron/core/inference/contexts/b.py",
                "megatron/core/inference/engines/c.py",
            ],
            ("layout-megatron-core-inference-contexts", "Inference Contexts", "Inference Contexts 模块", "a", "A"),
            id="majority-directory",
        ),
        pytest.param(
            ["megatron/core/inference/contexts/a.py", "megatron/core/inference/engines/b.py"],
            ("layout-megatron-core-inference", "Inference", "Inference 模块", "contexts", "Contexts"),
            id="shared-directory-next-level-highlight",
        ),
        pytest.param(
            ["megatron/core/inference/text_generation_server/dynamic_text_gen_server/endpoints/chat.py"],
            (
                "layout-megatron-core-inference-text-generation-server",
                "Inference Text Generation Server",
                "Inference Text Generation Server 模块",
                "dynamic-text-gen-server",
                "Dynamic Text Gen Server",
            ),
            id="at-most-two-meaningful-levels",
        ),
        pytest.param(
            ["megatron/core/distributed/fsdp/src/megatron_fsdp/fully_shard.py"],
            (
                "layout-megatron-core-distributed-fsdp",
                "Distributed FSDP",
                "Distributed FSDP 模块",
                "megatron-fsdp",
                "Megatron FSDP",
            ),
            id="fsdp-acronym-src-skipped",
        ),
        pytest.param(
            ["megatron/rl/rl_utils.py"],
            ("layout-megatron-rl", "RL", "RL 模块", "rl-utils", "RL Utils"),
            id="rl-acronym-file-stem",
        ),
        pytest.param(
            ["app/api/kv_cache/ci_fp8.py"],
            ("layout-app-api-kv-cache", "API KV Cache", "API KV Cache 模块", "ci-fp8", "CI FP8"),
            id="api-kv-ci-fp8",
        ),
        pytest.param(
            ["megatron/core/models/gpt/gpt_model.py"],
            ("layout-megatron-core-models-gpt", "GPT", "GPT 模块", "gpt-model", "GPT Model"),
            id="models-is-generic",
        ),
        pytest.param(
            ["examples/inference/gpt/run.py"],
            ("layout-examples-inference", "Inference examples", "Inference 示例", "gpt", "GPT"),
            id="examples-category",
        ),
        pytest.param(
            ["tools/checkpoint/convert.py"],
            ("layout-tools-checkpoint", "Checkpoint tools", "Checkpoint 工具", "convert", "Convert"),
            id="tools-category",
        ),
        pytest.param(
            ["experimental/lite/megatron/lite/primitive/a.py"],
            ("layout-experimental-lite", "Lite (experimental)", "Lite（实验性）", "megatron", "Megatron"),
            id="experimental-category",
        ),
        pytest.param(
            ["pyproject.toml", "uv.lock"],
            ("layout-root", "Top-level files", "仓库顶层文件", "pyproject", "Pyproject"),
            id="root-files-tie-by-name",
        ),
        pytest.param(
            ["megatron/core/utils.py"],
            ("layout-megatron-core", "Megatron Core", "Megatron Core 模块", "utils", "Utils"),
            id="only-generic-levels-named-in-full",
        ),
        pytest.param(
            [".gitlab/stages/01.test.yml"],
            ("layout-gitlab-stages", "GitLab Stages", "GitLab Stages 模块", "01", "01"),
            id="dot-folder-names-the-area",
        ),
        pytest.param(
            ["docs/user-guide/a.md", "docs/user-guide/b.md"],
            ("layout-docs-user-guide", "User Guide documentation", "User Guide 文档", "a", "A"),
            id="docs-only-change",
        ),
    ],
)
def test_layout_names(paths: list[str], expected: tuple[str, str, str, str, str]) -> None:
    choice = layout_theme(paths)
    theme_id_, theme_en, theme_zh, highlight_id, highlight_en = expected
    assert (choice.theme_id, choice.theme_en, choice.theme_zh) == (theme_id_, theme_en, theme_zh)
    assert (choice.highlight_id, choice.highlight_en) == (highlight_id, highlight_en)
    assert choice.highlight_zh == f"{highlight_en} 相关改进"
    assert choose_theme((), "Any title", ("any-label",), paths) == choice


def test_layout_ignores_tests_ci_and_docs() -> None:
    code = ["megatron/core/transformer/moe/router.py"]
    noise = [
        "tests/unit_tests/transformer/moe/test_router.py",
        "tests/functional_tests/a.json",
        ".github/workflows/ci.yml",
        "docs/user-guide/moe.md",
        "tools/ci/check.sh",
    ]
    assert layout_theme(code + noise) == layout_theme(code)
    assert layout_theme(noise + code) == layout_theme(code)


def test_layout_of_no_files() -> None:
    choice = layout_theme([])
    assert (choice.theme_id, choice.theme_en, choice.theme_zh) == ("layout-general", "General changes", "综合改进")


@pytest.mark.parametrize(
    "paths",
    [
        ["megatron/core/__init__.py"],
        ["a/b/c/d/e/f/g.py", "x.py"],
        ["weird name/ünïcode dir/fïle.py"],
        [".hidden"],
        ["___/---.py"],
    ],
)
def test_layout_ids_are_valid_config_ids(paths: list[str]) -> None:
    choice = layout_theme(paths)
    assert ID.match(choice.theme_id) and choice.theme_id.startswith(LAYOUT_PREFIX)
    assert ID.match(choice.highlight_id)
    assert all((choice.theme_en, choice.theme_zh, choice.highlight_en, choice.highlight_zh))


# --- the shipped Megatron-LM configuration ------------------------------------------------------------


@cache
def megatron_config() -> TrackerConfig:
    return load_config(load_settings(config_path=EXAMPLE, timezone="UTC"))


@cache
def megatron_taxonomy() -> tuple[ThemeConfig, ...]:
    return megatron_config().themes_for(REPO)


def test_the_example_config_loads() -> None:
    config = megatron_config()
    assert config.timezone_for(REPO) == "Asia/Shanghai"
    assert config.timezone_for("nvidia/megatron-lm") == "Asia/Shanghai"
    assert config.rules_for(REPO) == Rules()  # the published exclusion rules


def test_the_example_taxonomy_covers_the_real_areas() -> None:
    taxonomy = megatron_taxonomy()
    ids = [t.id for t in taxonomy]
    assert len(ids) == len(set(ids))
    for wanted in (
        "moe",
        "inference",
        "checkpointing",
        "fsdp",
        "cuda-graphs",
        "hybrid-models",
        "attention",
        "context-parallel",
        "multimodal",
        "rl",
        "optimizers",
        "tooling",
        "low-precision",
        "pipeline-parallel",
        "data",
        "tokenizers",
        "model-conversion",
        "training",
        "communication",
        "parallelism",
        "post-training",
    ):
        assert wanted in ids
    for item in taxonomy:
        assert item.en.strip() and item.zh.strip() and CJK.search(item.zh), item.id
        assert item.paths and item.keywords, item.id
        assert 2 <= len(item.highlights) <= 4, item.id
        assert len({h.id for h in item.highlights}) == len(item.highlights), item.id
        for sub in item.highlights:
            assert sub.en.strip() and sub.zh.strip() and CJK.search(sub.zh), (item.id, sub.id)


# --- real merged Megatron-LM PRs ----------------------------------------------------------------------


@cache
def megatron_prs() -> dict[int, dict[str, Any]]:
    with MEGATRON.open(encoding="utf-8") as lines:
        prs = [json.loads(line) for line in lines if line.strip()]
    return {pr["pr_number"]: pr for pr in prs}


def paths_of(pr: dict[str, Any]) -> list[str]:
    return [f["path"] for f in pr["files"]]


@cache
def substantive() -> dict[int, ThemeChoice]:
    """Every PR the report would narrate by its files (test-only and CI-only ones are excluded), themed."""
    themed = {}
    for number, pr in megatron_prs().items():
        files = [ChangedFile(path) for path in paths_of(pr)]
        if classify_head("head", files, Rules()).category is Category.SUBSTANTIVE:
            themed[number] = choose_theme(megatron_taxonomy(), pr["title"], [], paths_of(pr))
    return themed


@needs_shared
@pytest.mark.parametrize(
    ("number", "expected_theme", "expected_highlight"),
    [
        pytest.param(5047, "moe", "routing", id="5047-moe-aux-loss"),
        pytest.param(4846, "moe", "dispatch", id="5047-deepep"),
        pytest.param(4835, "fsdp", "sharding", id="4835-dbuffer"),
        pytest.param(4802, "fsdp", "precision", id="4802-fsdp-fix-in-optimizer-code"),
        pytest.param(4698, "cuda-graphs", "full-iteration", id="4698-optimizer-cg"),
        pytest.param(4552, "cuda-graphs", "inference", id="4552-graphable-logits"),
        pytest.param(3198, "attention", "mla", id="3198-absorbed-mla"),
        pytest.param(3553, "attention", "sparse", id="3553-dsa-ported-to-mamba"),
        pytest.param(3535, "hybrid-models", "mamba", id="3535-gdn-in-mamba"),
        pytest.param(2000, "context-parallel", "dynamic-cp", id="2000-dynamic-cp"),
        pytest.param(4019, "multimodal", "mimo", id="4019-mimo-optimizer"),
        pytest.param(3517, "rl", "training", id="3517-rl-forced-lag"),
        pytest.param(3063, "inference", "caching", id="3063-kv-prefix-caching"),
        pytest.param(4063, "inference", "serving", id="4063-chat-completions"),
        pytest.param(5019, "post-training", "distillation", id="5019-distillation"),
        pytest.param(4358, "low-precision", "nvfp4", id="4358-nvfp4-across-directories"),
        pytest.param(3927, "optimizers", "muon", id="3927-muon"),
        pytest.param(4305, "checkpointing", "integrity", id="4305-integrity"),
        pytest.param(4482, "model-conversion", "converters", id="4482-gpt-hybrid-conversion"),
        pytest.param(4692, "memory", "offloading", id="4692-offloading"),
        pytest.param(4909, "pipeline-parallel", "overlap-schedules", id="4909-combined-1f1b"),
        pytest.param(3520, "communication", "refit", id="3520-refit"),
        pytest.param(4585, "parallelism", "tensor-parallel", id="4585-nonuniform-tp"),
        pytest.param(3458, "model-architecture", "mtp", id="3458-mtp"),
        pytest.param(3384, "kernels", "fusions", id="3384-fused-dln"),
        pytest.param(4080, "data", "datasets", id="4080-dataset-cache"),
        pytest.param(5302, "tokenizers", "parsers", id="5302-tool-call-parser"),
        pytest.param(4885, "megatron-lite", "agentic", id="4885-megatron-lite"),
        pytest.param(4014, "training", "loop", id="4014-eval-batch-size"),
        pytest.param(5066, "tooling", "skills", id="5066-skills"),
        pytest.param(4682, "build-release", "dependencies", id="4682-te-bump"),
        pytest.param(4716, "build-release", "branches", id="4716-nightly-sync"),
        pytest.param(4431, "docs", "developer", id="4431-security-md"),
        pytest.param(4204, "legacy-cleanup", "legacy-models", id="4204-legacy-bert"),
        pytest.param(5126, "moe", "dispatch", id="5126-cherry-pick-is-not-cp"),
    ],
)
def test_real_prs(number: int, expected_theme: str, expected_highlight: str) -> None:
    pr = megatron_prs()[number]
    choice = choose_theme(megatron_taxonomy(), pr["title"], [], paths_of(pr))
    assert (choice.theme_id, choice.highlight_id) == (expected_theme, expected_highlight)


@needs_shared
def test_few_real_prs_fall_back_to_the_layout() -> None:
    themed = substantive()
    assert len(themed) == 782
    fallback = [n for n, choice in themed.items() if choice.theme_id.startswith(LAYOUT_PREFIX)]
    assert len(fallback) / len(themed) < 0.02, fallback  # measured: 1 of 782 (0.1 %)


@needs_shared
def test_every_real_pr_gets_named_theme_and_highlight() -> None:
    for number, choice in substantive().items():
        assert ID.match(choice.theme_id) and ID.match(choice.highlight_id), number
        assert choice.theme_en.strip() and choice.theme_zh.strip(), number
        assert choice.highlight_en.strip() and choice.highlight_zh.strip(), number


@needs_shared
def test_every_shipped_theme_is_used_and_none_dominates_a_month() -> None:
    by_month: dict[str, Counter[str]] = defaultdict(Counter)
    for number, choice in substantive().items():
        by_month[megatron_prs()[number]["month_shanghai"]][choice.theme_id] += 1
    used = set().union(*by_month.values())
    assert {t.id for t in megatron_taxonomy()} <= used
    for month, counts in by_month.items():
        total = sum(counts.values())
        assert len(counts) >= 15, month  # measured: 26 to 27 themes a month
        assert max(counts.values()) / total < 0.25, (month, counts.most_common(3))  # measured: at most 20 %


@needs_shared
def test_dev_and_main_twins_land_in_the_same_theme() -> None:
    themed = substantive()
    pairs = same = 0
    for number, pr in megatron_prs().items():
        for twin in pr["counterparts"]:
            other = twin["pr_number"]
            if number < other and number in themed and other in themed:
                pairs += 1
                same += themed[number].theme_id == themed[other].theme_id
    assert pairs >= 40
    assert same / pairs >= 0.95  # measured: 47 of 47


_PATH_PARTS = st.sampled_from(["megatron", "core", "tests", "docs", "README.md", "x.py", ".", "./", "/", " ", "\t", ""])


@given(
    st.lists(st.lists(_PATH_PARTS, max_size=4).map("/".join) | st.text(max_size=12), max_size=6),
    st.dictionaries(st.sampled_from(["megatron/core/x.py", "tests/x.py", "x.py", "docs/README.md"]), st.booleans()),
)
def test_sorted_files_answers_as_cleaning_and_judging_each_path_does(paths: list[str], judged: dict[str, bool]) -> None:
    """Its shortcuts (paths that need no cleaning; judgements given as a whole) give what cleaning each path
    and asking `is_auxiliary` of each file gives, with and without the given judgements."""
    files = tuple(dict.fromkeys(p for p in (cleaned_path(path) for path in paths) if p))
    for told in ({}, judged):
        with memo.using({"is_auxiliary": told}):
            code = tuple(p for p in files if not (told[p] if p in told else is_auxiliary.__wrapped__(p)))
            assert sorted_files.__wrapped__(tuple(paths)) == (files, code)
