"""tracker.core.memo: a result given to a report (`memo.using`, as `build_report(..., known=...)` does) is what
the memoised function answers when it has not computed it itself, within the call only; nothing given, it
computes."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tracker.core import memo
from tracker.core.descriptions import summary_sentence
from tracker.core.groups import body_references, display_title
from tracker.core.themes import is_auxiliary
from tracker.core.titles import clean_title

MEMOISED = (display_title, clean_title, is_auxiliary, body_references)


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    def clear() -> None:
        for function in MEMOISED:
            function.cache_clear()

    clear()
    yield
    clear()


def test_a_given_result_is_answered_without_computing() -> None:
    title = "[dev] fix(fsdp): AUT-1142 Speed up the loader (#4321)"
    assert clean_title(title) == "Speed up the loader"  # computed
    clean_title.cache_clear()
    body = "## What does this PR do?\n\nCherry-pick of #12 to dev."
    given = {
        "clean_title": {title: "Given by a worker"},
        "display_title": {"Add x": "Given too"},
        "is_auxiliary": {"megatron/core/model.py": True, "tests/unit/test_x.py": False},
        "summary_sentence": {body: "A sentence the worker found."},
        "body_references": {body: [7, 9]},
    }
    with memo.using(given):
        assert clean_title(title) == "Given by a worker"
        assert display_title("Add x") == "Given too"
        assert is_auxiliary("megatron/core/model.py") is True
        assert is_auxiliary("tests/unit/test_x.py") is False
        assert summary_sentence(body) == "A sentence the worker found."
        assert body_references(body) == frozenset({7, 9})
        assert clean_title("chore: Bump the versions") == "Bump the versions"  # not given: computed


def test_what_is_given_is_known_within_the_call_only() -> None:
    with memo.using({"display_title": {"Add x": "First"}}):
        with memo.using({"display_title": {"Add y": "Second"}}):
            assert memo.known("display_title", "Add x") is memo.MISSING
            assert memo.known("display_title", "Add y") == "Second"
        assert memo.known("display_title", "Add x") == "First"
    assert memo.known("display_title", "Add x") is memo.MISSING
    assert display_title("Add y") == "Add y"  # computed


def test_two_threads_each_see_what_their_own_call_was_given() -> None:
    def answer(value: str) -> object:
        with memo.using({"clean_title": {"t": value}}):
            return memo.known("clean_title", "t")

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(answer, ["one", "two", "three", "four"])) == ["one", "two", "three", "four"]
    assert memo.known("clean_title", "t") is memo.MISSING
