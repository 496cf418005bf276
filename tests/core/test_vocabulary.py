"""The month's project vocabulary and the names made of it (tracker/core/vocabulary.py, issue 32).

Hand-written cases for what is a term and what is not, and every theme and sub-topic name the Megatron-LM
months of the shared data produce (with and without the taxonomy), checked against the stop list: no name is
one generic word, starts with a commit verb, or is the repository's owner or package.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date, datetime
from functools import cache

import pytest
import yaml

from bench.fixtures.paths import EXAMPLES, SHARED, needs_shared
from tests.core.test_clusters import generated_month, megatron_taxonomy
from tracker.config import TrackerConfig
from tracker.core import clusters
from tracker.core.attributes import AttributeVersion
from tracker.core.classify import ChangedFile, Rules, classify_head
from tracker.core.noise import MAINTENANCE_THEME
from tracker.core.report import FURTHER, OTHER_THEME, UPKEEP_KINDS, Report, build_report
from tracker.core.snapshot import MonthSnapshot, build_snapshot
from tracker.core.taxonomy import ThemeConfig
from tracker.core.themes import choose_theme
from tracker.core.timeline import Fact, FactKind
from tracker.core.vocabulary import area_name, chinese, is_name, month_vocabulary, name, spaced, theme_terms
from tracker.core.window import Month, month_window

TITLES = [
    "Add prefix caching for Mamba models",
    "Fix prefix caching eviction with chunked prefill",
    "Extend DeepEP dispatcher of MoE to FP8",
    "Save checkpoint load path when resuming",
    "Fix error in API docs",
    "Thread pg_collection through the TE cross entropy",
    "Use pg_collection in GPT builder",
    "TE cross entropy for MTP loss",
    "Bump NVIDIA Megatron version",
    "MFSDP v2: fused buffers",
    "MFSDP v2 checkpoint resharding",
    "Add v2 of the data loader",
    'Revert "Remove checkpoint-time GPU cache reclaim workaround (#5170)"',
    "Remove checkpoint-time GPU cache reclaim workaround",
]
PATHS = [("megatron/core/inference/prefix_caching.py",), ("megatron/training/arguments.py",)]


def test_named_terms_and_recurring_phrases_are_the_vocabulary() -> None:
    vocabulary = month_vocabulary(TITLES, PATHS)
    texts = {term.text for term in vocabulary.terms.values()}
    assert {"prefix caching", "DeepEP", "FP8", "MoE", "pg_collection", "TE cross entropy", "MFSDP v2"} <= texts
    # Generic words, verbs, fragments, a version alone, the repository's owner and package are not.
    for word in ("Extend", "Save", "Path", "path", "Error", "API", "NVIDIA", "Megatron", "version", "v2", "TE cross"):
        assert word not in texts and word.lower() not in {t.lower() for t in texts}
    # A change and its revert say a phrase once: it recurs in no second title.
    assert "checkpoint-time GPU cache" not in texts


def test_a_phrase_in_one_title_is_a_term_when_the_code_layout_writes_it() -> None:
    titles = ["Speed up prefix caching lookups", "Fix CUDA graphs capture"]
    assert "prefix caching" in month_vocabulary(titles, [("megatron/inference/prefix_caching.py",)])
    assert "prefix caching" not in month_vocabulary(titles, [("megatron/inference/engine.py",)])


def test_a_proper_noun_is_a_term_when_titles_capitalise_it_inside() -> None:
    titles = ["Speed up Mamba state copies", "Fix Mamba chunked prefill", "Mamba layer spec"]
    assert "Mamba" in month_vocabulary(titles)
    assert "Chunked" not in month_vocabulary(titles)


def test_theme_terms_prefer_supported_names() -> None:
    vocabulary = month_vocabulary(TITLES, PATHS)
    assert theme_terms(TITLES[:2], vocabulary) == ("prefix caching",)
    assert theme_terms(TITLES[5:8], vocabulary) == ("TE cross entropy", "pg_collection")  # a name first
    assert theme_terms(["Fix error in API docs", "Fix path in API docs"], vocabulary) == ()


def test_name_takes_the_area_then_terms_then_the_layout() -> None:
    assert name(["MoE"], ("Mixture of Experts (MoE)", "MoE 混合专家模型")) == (
        "Mixture of Experts (MoE)",
        "MoE 混合专家模型",
    )
    assert name(["prefix caching", "DeepEP"]) == ("Prefix caching and DeepEP", "前缀缓存、DeepEP")
    files = ["megatron/training/training.py", "megatron/training/arguments.py"]
    assert name([], None, files) == ("megatron/training", "megatron/training 模块")  # not "Training"
    assert name([], None, ["megatron/core/inference/engine.py", "megatron/core/inference/context.py"]) == (
        "Inference",
        "Inference 模块",
    )
    assert name([], None, ["setup.py"]) is None


def test_area_name_never_a_generic_word() -> None:
    area = area_name(["megatron/core/transformer/attention.py", "megatron/core/transformer/mlp.py"])
    assert area is not None and is_name(area[0])


def test_chinese_translates_known_words_and_keeps_project_terms() -> None:
    assert chinese("prefix caching") == "前缀缓存"
    assert chinese("Mamba inference") == "Mamba 推理"
    assert chinese("CUDA graphs") == "CUDA Graph"
    assert chinese("pipeline parallel") == "流水线并行"
    assert chinese("MTP loss") == "MTP 损失"
    assert chinese("DeepEP") == "DeepEP"
    assert chinese("circular import hooks") == "circular import hooks"  # a word it does not know: as written


def test_spaced_puts_a_space_between_cjk_and_latin() -> None:
    assert spaced("MoE混合专家模型") == "MoE 混合专家模型"
    assert spaced("分布式Checkpoint格式") == "分布式 Checkpoint 格式"
    assert spaced("多 Token 预测（MTP）") == "多 Token 预测（MTP）"


@pytest.mark.parametrize(
    "text",
    [
        "Graphs",
        "Skills",
        "Path",
        "Extend",
        "Save",
        "Error",
        "NVIDIA",
        "API",
        "PR",
        "Version",
        "Training",
        "Transformer",
    ],
)
def test_generic_words_are_no_names(text: str) -> None:
    assert not is_name(text)


@pytest.mark.parametrize("text", ["MoE and DeepEP", "Prefix caching", "CUDA graphs", "DeepSeek-V4", "Qwen3.5-VL"])
def test_project_terms_are_names(text: str) -> None:
    assert is_name(text)


# --- every name of the development months ---------------------------------------------------------

DATA = SHARED / "data" / "megatron"
REPO = "NVIDIA/Megatron-LM"
GENERIC_HERE = ("NVIDIA", "Megatron", "LM", "Megatron-LM")  # the owner and the repository


@cache
def _months() -> dict[str, tuple[list[dict], date]]:
    months: dict[str, list[dict]] = defaultdict(list)
    for line in (DATA / "merged-prs-2026-03-to-06.jsonl").read_text().splitlines():
        if line.strip():
            pr = json.loads(line)
            months[pr["month_shanghai"]].append(pr)
    august = [json.loads(x) for x in (DATA / "merged-prs-2026-08-01-to-22.jsonl").read_text().splitlines() if x]
    cases = {m: (prs, Month.parse(m).last_day) for m, prs in months.items()}
    cases["2026-08"] = (august, date(2026, 8, 22))
    return cases


def snapshot_of(prs: list[dict], month: str, cutoff: date) -> tuple[MonthSnapshot, dict[int, list[str]]]:
    """The month as bench/themes.py builds it: each merged PR opened an hour before its merge, its files
    classified by the published rules."""
    window = month_window(Month.parse(month), cutoff, "Asia/Shanghai")
    versions, verdicts, timelines, paths = {}, {}, {}, {}
    for pr in prs:
        number = pr["pr_number"]
        merged = int(datetime.fromisoformat(pr["committer_date"]).timestamp())
        if merged >= window.end:
            continue
        sha = f"{number:040x}"
        files = [f["path"] for f in pr["files"]]
        versions[number] = AttributeVersion(
            merged - 3600, f"d{number}", pr["title"], "", pr["branch"], f"b{number}", sha, (), False, "x"
        )
        verdicts[(number, sha)] = classify_head(sha, [ChangedFile(p) for p in files], Rules())
        timelines[number] = (Fact(FactKind.OPENED, merged - 3600), Fact(FactKind.MERGED, merged))
        paths[number] = files
    return build_snapshot(REPO, window, timelines, versions, verdicts), paths


def _parts(name: str) -> list[str]:
    """The parts a name joins: "GTP and CUDA graphs · Tensor Parallel" is three."""
    parts = []
    for piece in name.split(" · "):
        parts.extend(p for chunk in piece.split(", ") for p in chunk.split(" and "))
    return [p for p in parts if p]


@needs_shared
@pytest.mark.parametrize("themed", [True, False], ids=["taxonomy", "no taxonomy"])
def test_every_name_of_the_development_months_is_in_the_vocabulary(themed: bool) -> None:
    """The groups `clusters.group` makes of each month's changes (as the report builds its items, with the
    taxonomy's prior or without), each named by `vocabulary.name` from its terms (else its sub-topics'
    terms), else the code layout: no name is a generic word, a verb's phrase or the repository's name. A
    taxonomy's area is the configured name when most changes are in it; these are the names without it."""
    taxonomy = TrackerConfig.model_validate(yaml.safe_load((EXAMPLES / "megatron-lm.yaml").read_text()))
    themes = taxonomy.themes_for(REPO) if themed else ()
    bad, named = [], 0
    for month, (prs, cutoff) in sorted(_months().items()):
        snapshot, paths = snapshot_of(prs, month, cutoff)
        items = []
        for pr in snapshot.pull_requests:
            if pr.version is None or not pr.substantive:
                continue
            files = tuple(paths[pr.status.number])
            prior = choose_theme(themes, pr.version.title, (), files) if themed else None
            items.append(
                clusters.Item(
                    pr.version.title, paths=files, prior=(prior.theme_id, prior.highlight_id) if prior else ()
                )
            )
        for found in clusters.group(items):
            files = [p for m in found.members for p in items[m].paths]
            terms = found.terms or tuple(t.terms[0] for t in found.topics if t.terms)[:2]
            names = [name(terms, None, files)]
            names += [name(t.terms, None, [p for m in t.members for p in items[m].paths]) for t in found.topics]
            for pair in names:
                named += pair is not None
                if pair is not None and not all(is_name(p, GENERIC_HERE) for p in _parts(pair[0])):
                    bad.append((month, pair[0]))
    assert named > 100 and bad == []


@needs_shared
def test_group_terms_of_the_development_months_are_vocabulary_terms() -> None:
    for month, (prs, cutoff) in sorted(_months().items()):
        snapshot, paths = snapshot_of(prs, month, cutoff)
        items = [
            clusters.Item(pr.version.title, paths=tuple(paths[pr.status.number]))
            for pr in snapshot.pull_requests
            if pr.version and pr.substantive
        ]
        vocabulary = month_vocabulary([i.title for i in items], [i.paths for i in items])
        for found in clusters.group(items):
            for term in (*found.terms, *(t for topic in found.topics for t in topic.terms)):
                assert term in vocabulary and is_name(term, GENERIC_HERE), (month, term)


def test_a_release_branch_named_in_titles_is_no_term() -> None:
    titles = [
        "[core_r0.17.0] Import inspect in async_utils on core_r0.17.0",
        "cp: Fix checkpoint loading (core_r0.17.0)",
        "Bump release_v1.2 pins",
        "Cherry-pick to release_v1.2: fix MoE router",
    ]
    texts = {term.text.lower() for term in month_vocabulary(titles, []).terms.values()}
    assert "core_r0.17.0" not in texts and "release_v1.2" not in texts
    assert is_name("Qwen3.5-VL") and is_name("DeepSeek-V4")  # versioned names of things stay names


def _report_names(report: Report, taxonomy: tuple[ThemeConfig, ...]) -> list[str]:
    """The parts of every theme and highlight name of a report that are not a configured or fixed name
    (each piece of "Terms · Area" apart): the names the report made from the vocabulary or the layout."""
    configured = {theme.en for theme in taxonomy} | {h.en for theme in taxonomy for h in theme.highlights}
    fixed = {OTHER_THEME[1], FURTHER[0], MAINTENANCE_THEME[1], *(en for en, _ in UPKEEP_KINDS.values())}
    names = []
    for section in report.sections:
        for theme in section.themes:
            for name_ in (theme.en, *(h.en for h in theme.highlights)):
                for piece in name_.split(" · "):
                    if piece not in configured | fixed:
                        names.extend(_parts(piece))
    return names


@needs_shared
@pytest.mark.parametrize("themed", [True, False], ids=["taxonomy", "no taxonomy"])
def test_every_name_a_report_gives_is_in_the_vocabulary(themed: bool) -> None:
    """The names of the reports themselves (build_report), on every month of the data and on generated months
    of 50 to 1,500 changes: each part of each name is a configured name, a fixed one, or a name of the
    vocabulary (no generic word alone, no verb first, not the repository's name)."""
    taxonomy = megatron_taxonomy() if themed else ()
    reports = [build_report(*snapshot_of(prs, month, cutoff), taxonomy) for month, (prs, cutoff) in _months().items()]
    reports += [generated_month(size, seed, taxonomy) for size, seed in ((50, 1), (400, 2), (1500, 3))]
    names = [name_ for report in reports for name_ in _report_names(report, taxonomy)]
    assert len(names) > 200
    assert [n for n in names if not is_name(n, GENERIC_HERE)] == []


def test_a_file_named_in_titles_is_no_term() -> None:
    titles = [
        "Bump project.json/versions1.json",
        "Fix versions1.json picker",
        "Clean up pretrain_gpt.py",
        "pretrain_gpt.py args",
    ]
    texts = {term.text.lower() for term in month_vocabulary(titles, []).terms.values()}
    assert not {"versions1.json", "pretrain_gpt.py", "project.json"} & texts
