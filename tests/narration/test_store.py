"""`tracker/narration/store.py` on each test database: the cache of the narrator's validated prose, keyed
by (repository, month, section, content digest, prompt version, model), its usage per month, its pruning,
and `content_digest`, which decides when a section is asked again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from sqlalchemy import Engine, inspect, update

from tracker.core.report import DELIVERED, IN_PROGRESS
from tracker.narration.schema import (
    GroupText,
    HighlightOutline,
    HighlightProse,
    SectionInput,
    SectionProse,
    ThemeOutline,
    ThemeProse,
)
from tracker.narration.store import NarrationStore, Spent, StoredNarration, Usage, content_digest, narrations
from tracker.store.schema import metadata

REPO = "Octo-Org/Octo-Repo"
KEY = "octo-org/octo-repo"
MONTH = "2026-09"
DIGEST_A, DIGEST_B, DIGEST_C = "a" * 64, "b" * 64, "c" * 64

ENGLISH = SectionProse(
    themes=[
        ThemeProse(
            title="Faster expert routing",
            summary="The router spends less time per token.",
            highlights=[HighlightProse(change_ids=["change-7", "change-9"], sentence="Routing got faster.")],
        )
    ]
)
CHINESE = SectionProse(
    themes=[
        ThemeProse(
            title="更快的专家路由",
            summary="路由器每个 token 耗时更少。",
            highlights=[HighlightProse(change_ids=["change-7", "change-9"], sentence="路由变快了。")],
        )
    ]
)


@pytest.fixture
def store(engine: Engine) -> NarrationStore:
    return NarrationStore(engine)


def stored(**changes: object) -> StoredNarration:
    record = StoredNarration(
        repo=KEY,
        month=MONTH,
        section=DELIVERED,
        content=DIGEST_A,
        prompt_version="1",
        model="gpt-test",
        english=ENGLISH,
        chinese=CHINESE,
        fallbacks=(),
        prompt_tokens=1200,
        completion_tokens=300,
        requests=2,
        created_at=1_790_000_000,
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def lookup(store: NarrationStore, record: StoredNarration) -> StoredNarration | None:
    return store.get(record.repo, record.month, record.section, record.content, record.prompt_version, record.model)


# --- put and get -----------------------------------------------------------------------------------------


def test_prose_in_both_languages_comes_back_as_it_was_put(store: NarrationStore) -> None:
    record = stored()
    store.put(record)
    found = lookup(store, record)
    assert found == record
    assert found is not None and found.chinese is not None
    assert found.chinese.themes[0].title == "更快的专家路由"


def test_a_section_left_to_the_deterministic_text_comes_back_with_its_fallbacks(store: NarrationStore) -> None:
    fallbacks = (
        {"section": DELIVERED, "stage": "english", "reason": "timeout"},
        {"section": DELIVERED, "stage": "chinese", "reason": "invalid: glossary"},
    )
    record = stored(english=None, chinese=None, fallbacks=fallbacks)
    store.put(record)
    found = lookup(store, record)
    assert found == record
    assert found is not None and found.english is None and found.chinese is None
    assert found.fallbacks == fallbacks


def test_any_spelling_of_the_repository_finds_the_record(store: NarrationStore) -> None:
    store.put(stored(repo=REPO))
    found = store.get(REPO.upper(), MONTH, DELIVERED, DIGEST_A, "1", "gpt-test")
    assert found == stored(repo=KEY)


def test_a_second_put_of_the_same_key_replaces_the_first(store: NarrationStore) -> None:
    store.put(stored())
    newer = stored(
        english=None, chinese=None, prompt_tokens=50, completion_tokens=5, requests=1, created_at=1_790_000_100
    )
    store.put(newer)
    assert lookup(store, stored()) == newer
    assert store.usage(REPO, MONTH) == Usage(prompt_tokens=50, completion_tokens=5, requests=1, sections=1)


@pytest.mark.parametrize(
    "other",
    [
        {"prompt_version": "2"},
        {"model": "gpt-other"},
        {"content": DIGEST_B},
        {"section": IN_PROGRESS},
        {"month": "2026-10"},
        {"repo": "octo-org/other-repo"},
    ],
)
def test_any_other_part_of_the_key_is_a_miss(store: NarrationStore, other: dict[str, str]) -> None:
    store.put(stored())
    assert lookup(store, stored(**other)) is None


def test_prose_that_no_longer_parses_is_a_miss(store: NarrationStore, engine: Engine) -> None:
    store.put(stored())
    with engine.begin() as conn:
        conn.execute(update(narrations).values(english='{"themes": "not a list"}'))
    assert lookup(store, stored()) is None


def test_the_ledger_has_the_table_from_the_start(engine: Engine) -> None:
    # Declared with the others (tracker.store.schema), so every ledger the tracker opens has it.
    assert inspect(engine).has_table("narrations")
    assert narrations.name in metadata.tables


# --- usage and pruning -------------------------------------------------------------------------------------


def test_usage_sums_the_months_records(store: NarrationStore) -> None:
    store.put(stored())
    store.put(stored(section=IN_PROGRESS, content=DIGEST_B, prompt_tokens=800, completion_tokens=200, requests=3))
    store.put(stored(model="gpt-other", prompt_tokens=10, completion_tokens=1, requests=1))
    store.put(stored(month="2026-10", prompt_tokens=99_999, completion_tokens=9_999, requests=9))
    store.put(stored(repo="octo-org/other-repo", prompt_tokens=99_999, completion_tokens=9_999, requests=9))
    assert store.usage(REPO, MONTH) == Usage(prompt_tokens=2010, completion_tokens=501, requests=6, sections=3)


def test_usage_by_month_is_each_months_sum(store: NarrationStore) -> None:
    store.put(stored())
    store.put(stored(section=IN_PROGRESS, content=DIGEST_B, prompt_tokens=800, completion_tokens=200, requests=3))
    store.put(stored(month="2026-10", prompt_tokens=7, completion_tokens=3, requests=1))
    store.put(stored(repo="octo-org/other-repo", prompt_tokens=99_999, completion_tokens=9_999, requests=9))
    assert store.usage_by_month(REPO) == {
        MONTH: Usage(prompt_tokens=2000, completion_tokens=500, requests=5, sections=2),
        "2026-10": Usage(prompt_tokens=7, completion_tokens=3, requests=1, sections=1),
    }
    assert store.usage_by_month("nobody/nothing") == {}


def test_a_month_without_records_used_nothing(store: NarrationStore) -> None:
    assert store.usage(REPO, MONTH) == Usage(prompt_tokens=0, completion_tokens=0, requests=0, sections=0)


def test_prune_keeps_only_the_named_inputs_of_the_month(store: NarrationStore) -> None:
    kept = [
        stored(),
        stored(prompt_version="0"),  # a kept input keeps every prompt version and model
        stored(section=IN_PROGRESS, content=DIGEST_C),
    ]
    dropped = [
        stored(content=DIGEST_B),  # the month's older prose of the section
        stored(section=IN_PROGRESS, content=DIGEST_A),  # the pair counts, not the digest alone
    ]
    elsewhere = [stored(month="2026-10", content=DIGEST_B), stored(repo="octo-org/other-repo", content=DIGEST_B)]
    for record in kept + dropped + elsewhere:
        store.put(record)

    removed = store.prune(REPO, MONTH, [(DELIVERED, DIGEST_A), (IN_PROGRESS, DIGEST_C)])

    assert removed == 2
    assert all(lookup(store, record) == record for record in kept + elsewhere)
    assert all(lookup(store, record) is None for record in dropped)
    assert store.prune(REPO, MONTH, iter([(DELIVERED, DIGEST_A), (IN_PROGRESS, DIGEST_C)])) == 0


def test_prune_with_nothing_kept_empties_the_month(store: NarrationStore) -> None:
    store.put(stored())
    store.put(stored(section=IN_PROGRESS, content=DIGEST_B))
    store.put(stored(month="2026-10"))
    assert store.prune(REPO, MONTH, []) == 2
    assert store.usage(REPO, MONTH).sections == 0
    assert store.usage(REPO, "2026-10").sections == 1


# --- the content digest ------------------------------------------------------------------------------------


def section_input() -> SectionInput:
    return SectionInput(
        repo=REPO,
        month=MONTH,
        section=DELIVERED,
        themes=(
            ThemeOutline(
                id="moe",
                title="Mixture of Experts",
                highlights=(HighlightOutline(id="h1", title="Routing", change_ids=("change-7", "change-9")),),
            ),
        ),
        groups=(
            GroupText(
                id="change-7",
                title="Faster router",
                body="Fuses the top-k kernel. 路由",
                labels=("moe",),
                paths=("megatron/core/router.py",),
                commits=("fuse top-k",),
            ),
            GroupText(
                id="change-9",
                title="Router tests",
                body="",
                labels=(),
                paths=("tests/unit/test_router.py",),
                commits=(),
            ),
        ),
    )


def test_the_digest_is_stable_for_equal_data() -> None:
    digest = content_digest(section_input())
    assert digest == content_digest(section_input())
    assert len(digest) == 64 and set(digest) <= set("0123456789abcdef")


def changed_group(**changes: object) -> SectionInput:
    data = section_input()
    return replace(data, groups=(replace(data.groups[0], **changes), data.groups[1]))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(lambda: changed_group(title="Faster router!"), id="title"),
        pytest.param(lambda: changed_group(body="Fuses the top-k kernel. 路由器"), id="body"),
        pytest.param(lambda: changed_group(paths=("megatron/core/router2.py",)), id="path"),
        pytest.param(lambda: changed_group(labels=("moe", "perf")), id="label"),
        pytest.param(lambda: changed_group(commits=("fuse top-k", "fix")), id="commit"),
        pytest.param(lambda: changed_group(id="change-8"), id="group id"),
        pytest.param(
            lambda: replace(
                section_input(),
                themes=(replace(section_input().themes[0], title="MoE"),),
            ),
            id="theme title",
        ),
        pytest.param(lambda: replace(section_input(), section=IN_PROGRESS), id="section"),
        pytest.param(lambda: replace(section_input(), month="2026-10"), id="month"),
    ],
)
def test_the_digest_changes_with_the_data(changed: Callable[[], SectionInput]) -> None:
    assert content_digest(changed()) != content_digest(section_input())


def test_the_bill_adds_up_and_pruning_leaves_it(store: NarrationStore) -> None:
    store.spend(REPO, MONTH, "test-model", Spent(requests=2, prompt_tokens=1000, completion_tokens=100))
    store.spend(REPO, MONTH, "test-model", Spent(requests=1, prompt_tokens=500, completion_tokens=0))
    store.spend(REPO, MONTH, "gpt-other", Spent(requests=1, prompt_tokens=10, completion_tokens=1))
    store.spend(REPO, "2026-10", "test-model", Spent(requests=4, prompt_tokens=7, completion_tokens=3))
    store.spend("octo-org/other-repo", MONTH, "test-model", Spent(requests=9, prompt_tokens=9, completion_tokens=9))
    store.spend(REPO, MONTH, "test-model", Spent())  # nothing asked: no row, no change
    store.put(stored())
    assert store.prune(REPO, MONTH, []) == 1
    assert store.spent_by_month(REPO) == {
        MONTH: Spent(requests=4, prompt_tokens=1510, completion_tokens=101),
        "2026-10": Spent(requests=4, prompt_tokens=7, completion_tokens=3),
    }
    assert store.spent_by_month("nobody/nothing") == {}


def _spend_many(database_url: str, times: int) -> None:
    from tracker.store.database import connect

    engine = connect(database_url)
    try:
        store = NarrationStore(engine)
        for _ in range(times):
            store.spend(REPO, MONTH, "test-model", Spent(requests=1, prompt_tokens=3, completion_tokens=2))
    finally:
        engine.dispose()


@pytest.mark.system
def test_narrators_in_several_processes_each_add_their_spend(store: NarrationStore, database_url: str) -> None:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_spend_many, args=(database_url, 40)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    assert store.spent_by_month(REPO) == {MONTH: Spent(requests=160, prompt_tokens=480, completion_tokens=320)}
