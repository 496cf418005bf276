"""`tracker/core/titles.py`: `clean_title` (a PR title as a report's bullet names the change) and
`title_terms` (the words a title is about), with `Term`, `term_key`, `is_named` and `word_count`.

`clean_title` builds on `tracker.core.groups.display_title` (tags, `cp:`, `(#N)` and "into `branch`"
removed; tests/core/test_groups.py) and takes off conventional-commit prefixes (`fix(fsdp):`,
`chore:`, `Perf:`, any scoped `word(scope):`), ticket ids (`AUT-1142`, `[JIRA-12345]`, not `GPT-3` or
`H100`) and chains of them, then capitalises the first letter only when the first word is a plain
lower-case word, spelling it as the project's table does (`rl` is "RL"). `title_terms` drops the words
every title has, keeps the author's spelling in `.text`, compares by `.key` (lower case, without a
plural `s`), marks name-like words `named`, keeps a conventional-commit scope as a term, each term once
and in order. Both take linear time on hostile input.

Every expected value is written by hand, from what a reader of the report should see; most titles are
copied from ../shared/data/megatron. Where the code disagrees with what a reader would want, the case
keeps the reader's expectation and is a strict xfail saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.watchdog import finishes
from tracker.core.groups import MAX_TITLE
from tracker.core.titles import Term, clean_title, is_named, term_key, title_terms, word_count

TITLE = "Fix the MoE router load balancing"
HUGE = 1_000_000


def keys(title: str) -> list[str]:
    return [term.key for term in title_terms(title)]


# --- clean_title ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        # Conventional-commit prefixes: a type, with or without a scope and `!`, in any case.
        ("chore: bump x", "Bump x"),
        ("fix(fsdp): support y", "Support y"),
        ("feat(moe)!: z", "Z"),
        ("Perf: skip foo", "Skip foo"),
        ("FIX: update y", "Update y"),
        ("build: bump transformer-engine to release_v2.16.post", "Bump transformer-engine to release_v2.16.post"),
        ("ci(unit-tests): split slow unit-test buckets over 15min SLA", "Split slow unit-test buckets over 15min SLA"),
        ("Refactor: Move paged stashing Triton kernels", "Move paged stashing Triton kernels"),
        ("fix(gtp+dcp): handle uneven ranks", "Handle uneven ranks"),
        # Any word with a scope is a prefix too.
        ("moe(perf): Refactor CP layout", "Refactor CP layout"),
        ("nightly(ci): Update golden values for functional t5 tests", "Update golden values for functional t5 tests"),
    ],
)
def test_clean_title_removes_conventional_commit_prefixes(title: str, expected: str) -> None:
    assert clean_title(title) == expected


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("[dev] Fix the MoE router load balancing", TITLE),
        ("[Dev] Fix the MoE router load balancing", TITLE),
        ("[Main] Fix the MoE router load balancing", TITLE),
        (
            "[main] feat(moe): Support packed sequence for gated delta net (GDN)",
            "Support packed sequence for gated delta net (GDN)",
        ),
        ("[Main] fix(moe): Fix several bugs for DSA rope and spec.", "Fix several bugs for DSA rope and spec"),
        (
            "[ci] fix: treat cancelled run-main-script step as failure",
            "Treat cancelled run-main-script step as failure",
        ),
        ("cp: `fix the MoE router load balancing` into `dev`", TITLE),
        (
            "cp: `fix(optimizer): gate ChainedOptimizer MXFP8 defer-sync (#4982)` into `dev`",
            "Gate ChainedOptimizer MXFP8 defer-sync",
        ),
        ("[Dev] cp: `fix(moe): add router (#4089)` into `dev`", "Add router"),
        ("Fix the MoE router load balancing (#1234)", TITLE),
        ("build(deps): bump nvidia-modelopt to 0.43 (#5521)", "Bump nvidia-modelopt to 0.43"),
    ],
)
def test_clean_title_removes_tags_cp_and_pr_numbers(title: str, expected: str) -> None:
    assert clean_title(title) == expected


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("AUT-1142 fix the MoE router load balancing", TITLE),
        ("AUT-1142: fix the MoE router load balancing", TITLE),
        ("[JIRA-12345] Fix the MoE router load balancing", TITLE),
        (
            "[OMNIML-3721] Fix tokenizer unwrapping for nested Megatron-Core tokenizer",
            "Fix tokenizer unwrapping for nested Megatron-Core tokenizer",
        ),
        ("build: AUT-1615 add torch-memory-saver dev dependency", "Add torch-memory-saver dev dependency"),
        ("fix(transformer): AUT-1497 support dual RoPE full recompute", "Support dual RoPE full recompute"),
        (
            "cp: `test(inference): MCORE-561 trust FP8 metadata in DeepSeek checkpoints (#6049)` into `core_r0.19.0`",
            "Trust FP8 metadata in DeepSeek checkpoints",
        ),
        # Model and hardware names look a little like tickets but are kept.
        ("Support GPT-3 on H100", "Support GPT-3 on H100"),
        ("build: Switch DSv3 on H100 to HybridEP", "Switch DSv3 on H100 to HybridEP"),
        ("fix: GPT-3 support on H100 (#12)", "GPT-3 support on H100"),
        (
            "fix: Replace polynomial rolling hash with SHA-256 for prefix caching",
            "Replace polynomial rolling hash with SHA-256 for prefix caching",
        ),
    ],
)
def test_clean_title_removes_ticket_ids_but_keeps_names(title: str, expected: str) -> None:
    assert clean_title(title) == expected


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        (
            "[dev] fix(deps): AUT-1323 use released dev dependency sources (#6273)",
            "Use released dev dependency sources",
        ),
        ("[dev] chore(ci): AUT-1298 bump community workflow to v1.8.7 (#6001)", "Bump community workflow to v1.8.7"),
        ("cp: fix: AUT-1501 abort when SSO list download fails (#5990)", "Abort when SSO list download fails"),
        ("fix: AUT-1142: chore: bump x", "Bump x"),
    ],
)
def test_clean_title_removes_chained_prefixes(title: str, expected: str) -> None:
    assert clean_title(title) == expected


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        # A plain lower-case first word is capitalised, and only its first letter.
        ("fix: set DATA_PATH for moe-dynamic-inference recipe", "Set DATA_PATH for moe-dynamic-inference recipe"),
        ("test: re-enable paged stashing MoE tests", "Re-enable paged stashing MoE tests"),
        ("feat: add moe router", "Add moe router"),
        # A first word with its own spelling keeps it.
        ("mHC fused kernels", "mHC fused kernels"),
        ("vLLM backend", "vLLM backend"),
        ("cuDNN attention for GB200", "cuDNN attention for GB200"),
        ("fix(ci): t5 dataloader stall", "t5 dataloader stall"),
        ("fix: `mHC` kernel", "`mHC` kernel"),
        # A lower-case technical term is written as the project's spelling table writes it.
        ("rl: add durable rollout bank for completed groups", "RL: add durable rollout bank for completed groups"),
        ("fix: pytorch 2.9 compatibility", "PyTorch 2.9 compatibility"),
        ("fix: nccl timeout", "NCCL timeout"),
        ("fix: pretrain_hybrid.py --help", "pretrain_hybrid.py --help"),
        ("fix: moe_layer config", "moe_layer config"),
    ],
)
def test_clean_title_capitalises_only_a_plain_lower_case_first_word(title: str, expected: str) -> None:
    assert clean_title(title) == expected


@pytest.mark.parametrize("title", ["chore:", "fix:", "[dev] chore:", "Perf:"])
def test_a_title_that_is_only_a_prefix_is_not_emptied(title: str) -> None:
    cleaned = clean_title(title)
    assert cleaned.strip()
    assert cleaned.lower().startswith(title.removeprefix("[dev] ")[:-1].lower())


def test_a_title_that_is_only_a_prefix_reads_as_its_word() -> None:
    assert clean_title("chore:") == "Chore"
    assert clean_title("[dev] chore:") == "Chore"


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("fix:   shard  the\toptimizer\n state ", "Shard the optimizer state"),
        ("  Fix   the \t MoE  router\u00a0load balancing  ", TITLE),
        ("docs: fix contributor guide typo.", "Fix contributor guide typo"),
        ("Fix the MoE router load balancing.", TITLE),
        (
            "ci: Disable a few gb200 test cases to support 2 branches.",
            "Disable a few gb200 test cases to support 2 branches",
        ),
    ],
)
def test_clean_title_collapses_whitespace_and_drops_a_trailing_period(title: str, expected: str) -> None:
    assert clean_title(title) == expected


@pytest.mark.parametrize(
    "title",
    [
        "revert: replace rampup batch size scheduler with custom step batch size schedules (#3779)",
        "revert(dist_checkpointing): AUT-1325 remove streaming checkpoint dequantization",
    ],
)
def test_a_revert_still_says_it_is_a_revert(title: str) -> None:
    assert clean_title(title).lower().startswith("revert")


def test_a_revert_in_quotes_is_kept() -> None:
    title = 'Revert "Remove checkpoint-time GPU cache reclaim workaround (#5170)"'
    assert clean_title(title) == 'Revert "Remove checkpoint-time GPU cache reclaim workaround"'


@pytest.mark.xfail(
    strict=True,
    reason="display_title (groups.py) takes a trailing `[tool.uv]` for a tag like `[dev]` and removes it, "
    "leaving 'Add managed = true to' (a real Megatron title)",
)
def test_a_trailing_bracketed_name_that_is_not_a_tag_is_kept() -> None:
    assert clean_title("build: add managed = true to [tool.uv]") == "Add managed = true to [tool.uv]"


# --- title_terms, term_key, is_named ----------------------------------------------------------------


def test_title_terms_drop_stop_words_and_keep_the_authors_spelling() -> None:
    assert title_terms("Fix the CUDA graphs") == (Term("cuda", "CUDA", True), Term("graph", "graphs", False))
    assert title_terms("Add support for the CUDA graph") == (Term("cuda", "CUDA", True), Term("graph", "graph", False))
    assert title_terms("Fix the fix, add the add, support the support") == ()


def test_title_terms_of_a_real_title() -> None:
    assert keys("fix(optimizer): gate ChainedOptimizer MXFP8 defer-sync on DDP-level overlap_param_gather") == [
        "optimizer",
        "gate",
        "chainedoptimizer",
        "mxfp8",
        "defer-sync",
        "ddp-level",
        "overlap_param_gather",
    ]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("graphs", "graph"),
        ("graph", "graph"),
        ("Graphs", "graph"),
        ("GPUs", "gpu"),
        ("kernels", "kernel"),
        ("CUDA", "cuda"),
        ("class", "class"),
        ("status", "status"),
        ("analysis", "analysis"),
        ("bus", "bus"),
    ],
)
def test_term_key_is_lower_case_without_a_plural_s(word: str, expected: str) -> None:
    assert term_key(word) == expected


def test_graphs_and_graph_are_one_term_with_the_first_spelling() -> None:
    assert title_terms("CUDA graphs: capture the CUDA graph once") == (
        Term("cuda", "CUDA", True),
        Term("graph", "graphs", False),
        Term("capture", "capture", False),
        Term("once", "once", False),
    )


def test_class_keeps_its_s() -> None:
    assert title_terms("Fix the class") == (Term("class", "class", False),)


@pytest.mark.parametrize("word", ["GTP", "mHC", "Qwen3", "v2", "DeepSeek-V4", "MFSDP", "H100"])
def test_names_are_named(word: str) -> None:
    assert is_named(word)


@pytest.mark.parametrize("word", ["Basic", "pytorch", "router", "Fix"])
def test_plain_words_are_not_named(word: str) -> None:
    assert not is_named(word)


def test_title_terms_mark_named_terms() -> None:
    assert title_terms("Basic pytorch GTP mHC Qwen3 v2 DeepSeek-V4") == (
        Term("basic", "Basic", False),
        Term("pytorch", "pytorch", False),
        Term("gtp", "GTP", True),
        Term("mhc", "mHC", True),
        Term("qwen3", "Qwen3", True),
        Term("v2", "v2", True),
        Term("deepseek-v4", "DeepSeek-V4", True),
    )


def test_a_conventional_commit_scope_is_a_term() -> None:
    assert keys("fix(fsdp): x") == ["fsdp"]
    assert keys("fix(fsdp): shard the optimizer state") == ["fsdp", "shard", "optimizer", "state"]
    assert keys("moe(perf): Refactor CP layout") == ["moe", "cp", "layout"]


def test_title_terms_leave_out_tags_tickets_and_numbers() -> None:
    title = "[dev] fix(fsdp): AUT-1323 use released dependency sources (#6273)"
    assert keys(title) == ["fsdp", "released", "dependency", "source"]
    assert keys("AUT-1142 fix GPT-3 on H100") == ["gpt-3", "h100"]


def test_each_term_once_in_order() -> None:
    assert keys("MoE router: MoE router load balancing for the MoE layer") == [
        "moe",
        "router",
        "load",
        "balancing",
        "layer",
    ]
    assert [t.text for t in title_terms("moe MoE MOE router")] == ["moe", "router"]


def test_stop_words_with_a_plural_s_are_dropped_too() -> None:
    assert keys("Fixes the MoE router and applies the aux loss") == ["moe", "router", "aux", "loss"]


@pytest.mark.parametrize(("text", "expected"), [("", 0), ("Bump x", 2), ("  Fix \t the\nMoE  router ", 4)])
def test_word_count(text: str, expected: int) -> None:
    assert word_count(text) == expected


# --- linear time on hostile input ----------------------------------------------------------------

HOSTILE = {
    "brackets": "[" * HUGE,
    "a-dash": "a-" * (HUGE // 2),
    "fix-paren": "fix(" * (HUGE // 4),
    "spaces": " " * HUGE,
    "spaces-between": "a" + " " * HUGE + "x",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("function", [clean_title, title_terms], ids=["clean_title", "title_terms"])
def test_hostile_titles_take_linear_time(name: str, function: Callable[[str], Any]) -> None:
    title = HOSTILE[name]
    assert len(title) >= HUGE
    title_terms.cache_clear()  # an answer from the cache would show nothing
    finishes(lambda: function(title))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_titles_give_bounded_answers(name: str) -> None:
    title = HOSTILE[name]
    assert len(clean_title(title)) <= MAX_TITLE
    assert sum(len(term.text) for term in title_terms(title)) <= MAX_TITLE
