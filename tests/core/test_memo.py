"""tracker.core.memo: a result another process offers is what the memoised function answers when it has
not computed it itself; nothing offered, it computes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tracker.core import memo
from tracker.core.groups import display_title
from tracker.core.themes import is_auxiliary
from tracker.core.titles import clean_title

MEMOISED = (display_title, clean_title, is_auxiliary)


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    def clear() -> None:
        memo.forget()
        for function in MEMOISED:
            function.cache_clear()

    clear()
    yield
    clear()


def test_an_offered_result_is_answered_without_computing() -> None:
    title = "[dev] fix(fsdp): AUT-1142 Speed up the loader (#4321)"
    assert clean_title(title) == "Speed up the loader"  # computed
    clean_title.cache_clear()
    memo.offer("clean_title", {title: "Offered by a worker"})
    memo.offer("display_title", {"Add x": "Offered too"})
    memo.offer("is_auxiliary", {"megatron/core/model.py": True, "tests/unit/test_x.py": False})
    assert clean_title(title) == "Offered by a worker"
    assert display_title("Add x") == "Offered too"
    assert is_auxiliary("megatron/core/model.py") is True
    assert is_auxiliary("tests/unit/test_x.py") is False
    assert clean_title("chore: Bump the versions") == "Bump the versions"  # not offered: computed


def test_an_offer_replaces_the_one_before() -> None:
    memo.offer("display_title", {"Add x": "First"})
    memo.offer("display_title", {"Add y": "Second"})
    assert display_title("Add x") == "Add x"
    assert display_title("Add y") == "Second"
    memo.forget()
    display_title.cache_clear()
    assert display_title("Add y") == "Add y"
