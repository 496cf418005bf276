"""Unit tests of `tracker.store.heads` (`HeadStore`: changed files per PR head and their verdicts) and
`tracker.store.http_cache` (`SqlResponseCache`: ETags and bodies for conditional requests)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from sqlalchemy import Engine, select

from bench.fixtures import factory
from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tracker.core.classify import Category, ChangedFile, HeadVerdict, Rules
from tracker.core.derive import derive
from tracker.store.heads import COMPARE, PULLS, UNAVAILABLE, DeferredHeads, HeadStore, WantedHead, verdict_from_row
from tracker.store.http_cache import SqlResponseCache
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState
from tracker.store.schema import head_verdicts

REPO = "NVIDIA/Megatron-LM"
KEY = "nvidia/megatron-lm"
# The base commit of GitHub's example payload, which every factory delivery carries.
BASE_SHA = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
SHA_A = "a" * 40
SHA_B = "b" * 40
SHA_C = "c" * 40

CODE = [
    ChangedFile("megatron/core/router.py", "modified", None, 10, 2, "@@ -1 +1 @@\n-a = 1\n+a = 2"),
    ChangedFile("tests/unit/test_router.py", "added", None, 30, 0, None),
]
RENAMED = [ChangedFile("megatron/core/moe/experts.py", "renamed", "megatron/core/experts.py", 0, 0, None)]
CI = [ChangedFile(".github/workflows/ci.yml", additions=1, deletions=1, patch="@@ -1 +1 @@\n-x\n+y")]


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.fixture
def store(engine: Engine) -> HeadStore:
    return HeadStore(engine)


def receive(engine: Engine, delivery: factory.Delivery) -> None:
    """Store a delivery in the ledger and apply what it proves (UTC months)."""
    Ledger(engine).store(delivery.as_ledger_delivery(received_at=1_790_000_000_000))
    derivation = derive(delivery.delivery_id, "application/json", delivery.body, lambda _name: "UTC")
    assert MonthState(engine).apply(delivery.delivery_id, derivation) is True


def head_of(delivery: factory.Delivery) -> str:
    sha: str = json.loads(delivery.body)["pull_request"]["head"]["sha"]
    return sha


def verdicts(engine: Engine) -> dict[tuple[str, int, str], HeadVerdict]:
    with engine.connect() as conn:
        return {
            (row.repo, row.number, row.head_sha): verdict_from_row(row) for row in conn.execute(select(head_verdicts))
        }


# --- store and known ---------------------------------------------------------------------------


def test_a_head_is_unknown_until_stored(store: HeadStore) -> None:
    assert store.known(KEY, 1, SHA_A) is False
    assert store.store(KEY, 1, SHA_A, CODE, truncated=False, source=PULLS, rules=Rules()) is True
    assert store.known(KEY, 1, SHA_A) is True
    assert store.known(KEY, 2, SHA_A) is False  # the same commit in another PR
    assert store.known(KEY, 1, SHA_B) is False
    assert store.known("apache/arrow", 1, SHA_A) is False


def test_a_head_is_stored_once_and_its_first_files_kept(engine: Engine, store: HeadStore) -> None:
    assert store.store(KEY, 1, SHA_A, CODE, truncated=False, source=PULLS, rules=Rules()) is True
    assert store.store(KEY, 1, SHA_A, CI, truncated=True, source=COMPARE, rules=Rules()) is False
    assert store.store(KEY, 1, SHA_A, [], truncated=False, source=UNAVAILABLE, rules=Rules()) is False
    assert list(store.stored()) == [(KEY, 1, SHA_A, False, CODE)]
    assert list(verdicts(engine).values())[0].category is Category.SUBSTANTIVE


def test_store_keeps_the_verdict_of_the_files(engine: Engine, store: HeadStore) -> None:
    store.store(KEY, 1, SHA_A, CODE, truncated=False, source=PULLS, rules=Rules())
    store.store(KEY, 2, SHA_B, CI, truncated=True, source=COMPARE, rules=Rules())
    store.store(KEY, 3, SHA_C, [], truncated=False, source=PULLS, rules=Rules())
    assert verdicts(engine) == {
        (KEY, 1, SHA_A): HeadVerdict(
            SHA_A,
            Category.SUBSTANTIVE,
            False,
            {
                "head_sha": SHA_A,
                "files": 2,
                "rule": "code_changed",
                "matching_files": 1,
                "examples": ["megatron/core/router.py"],
                "all_examples": ["megatron/core/router.py", "tests/unit/test_router.py"],
            },
        ),
        (KEY, 2, SHA_B): HeadVerdict(
            SHA_B,
            Category.CI_ONLY,
            False,
            {
                "head_sha": SHA_B,
                "files": 1,
                "files_truncated": True,
                "rule": "all_files_ci",
                "matching_files": 1,
                "examples": [".github/workflows/ci.yml"],
            },
        ),
        (KEY, 3, SHA_C): HeadVerdict(
            SHA_C, Category.SUBSTANTIVE, False, {"head_sha": SHA_C, "files": 0, "rule": "no_files"}
        ),
    }


def test_store_classifies_under_the_rules_given(engine: Engine, store: HeadStore) -> None:
    rules = Rules(ci_paths=(), test_paths=("megatron/core/*.py", "tests/"))
    store.store(KEY, 1, SHA_A, CODE, truncated=False, source=PULLS, rules=rules)
    (verdict,) = verdicts(engine).values()
    assert verdict.category is Category.TEST_ONLY
    assert verdict.evidence["rule"] == "all_files_test"


def test_a_head_github_no_longer_has_is_known_without_a_verdict(engine: Engine, store: HeadStore) -> None:
    assert store.store(KEY, 1, SHA_A, [], truncated=False, source=UNAVAILABLE, rules=Rules()) is True
    assert store.known(KEY, 1, SHA_A) is True
    assert verdicts(engine) == {}
    assert list(store.stored()) == []  # nothing to classify again in a rebuild


# --- missing -----------------------------------------------------------------------------------


@needs_shared
def test_moved_on_names_the_heads_the_ledger_shows_a_later_head_for(engine: Engine, store: HeadStore) -> None:
    story = (
        PullRequestStory(1, moment("2026-09-02T01:00:00+00:00")).opened().pushed(moment("2026-09-05T01:00:00+00:00"))
    )
    first, second = head_of(story.deliveries[0]), head_of(story.deliveries[1])
    for delivery in reversed(story.deliveries):  # the push's delivery arrives first: GitHub's time decides
        receive(engine, delivery)
    wanted = [(KEY, 1, first), (KEY, 1, second), (KEY, 2, SHA_A)]  # PR 2: no version at all
    assert store.moved_on(wanted) == {(KEY, 1, first)}
    assert store.moved_on([]) == set()


def test_two_versions_at_one_instant_leave_either_head_current(engine: Engine, store: HeadStore) -> None:
    from tracker.store.database import insert_ignoring_duplicates
    from tracker.store.schema import pr_versions

    rows = [
        {
            "repo": KEY,
            "number": 3,
            "at": 1_790_000_000_000,
            "delivery_id": name,
            "observed": observed,
            "title": "t",
            "body": "",
            "base_ref": "main",
            "head_ref": "f",
            "head_sha": sha,
            "labels": "[]",
            "draft": False,
            "author": "a",
        }
        for name, sha, observed in (("d1", SHA_A, 1), ("obs-1", SHA_B, 0))
    ]
    with engine.begin() as conn:
        insert_ignoring_duplicates(conn, pr_versions, rows)
    assert store.moved_on([(KEY, 3, SHA_A), (KEY, 3, SHA_B)]) == set()
    assert store.moved_on([(KEY, 3, SHA_C)]) == set()  # the ledger is unsure which head is current


def test_missing_lists_the_wanted_heads_without_files(engine: Engine, store: HeadStore) -> None:
    first = PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened()
    first.labeled(moment("2026-09-03T10:00:00+00:00"), "bug")  # a label costs no request
    first.pushed(moment("2026-09-04T10:00:00+00:00"))
    first.merged(moment("2026-09-05T10:00:00+00:00"))  # merged with the pushed head: wanted once
    second = PullRequestStory(2, moment("2026-09-02T11:00:00+00:00")).opened()
    second.closed(moment("2026-09-03T11:00:00+00:00"))  # closed without merge: wants nothing new
    other = PullRequestStory(3, moment("2026-09-02T12:00:00+00:00"), repo="Apache/Arrow").opened()
    for delivery in first.deliveries + second.deliveries + other.deliveries:
        receive(engine, delivery)
    opened, _, pushed, merged = first.deliveries
    assert head_of(merged) == head_of(pushed)

    first_heads = sorted([head_of(opened), head_of(pushed)])
    wanted = [
        WantedHead("Apache/Arrow", 3, head_of(other.deliveries[0]), BASE_SHA),  # "apache/arrow" sorts first
        WantedHead(REPO, 1, first_heads[0], BASE_SHA),
        WantedHead(REPO, 1, first_heads[1], BASE_SHA),
        WantedHead(REPO, 2, head_of(second.deliveries[0]), BASE_SHA),
    ]
    assert store.missing() == wanted
    assert store.missing(limit=2) == wanted[:2]

    store.store(KEY, 1, head_of(pushed), CODE, truncated=False, source=PULLS, rules=Rules())
    store.store(KEY, 2, head_of(second.deliveries[0]), [], truncated=False, source=UNAVAILABLE, rules=Rules())
    assert store.missing() == [wanted[0], WantedHead(REPO, 1, head_of(opened), BASE_SHA)]
    store.store("apache/arrow", 3, head_of(other.deliveries[0]), CI, truncated=False, source=PULLS, rules=Rules())
    store.store(KEY, 1, head_of(opened), [], truncated=False, source=PULLS, rules=Rules())
    assert store.missing() == []


def test_missing_of_an_empty_ledger(store: HeadStore) -> None:
    assert store.missing() == []
    store.store(KEY, 1, SHA_A, CODE, truncated=False, source=PULLS, rules=Rules())  # stored, never wanted
    assert store.missing() == []


# --- stored ------------------------------------------------------------------------------------


def test_stored_streams_heads_with_their_files_in_order(store: HeadStore) -> None:
    many = [ChangedFile(f"megatron/core/module_{i:02d}.py", additions=i) for i in (3, 1, 2, 0)]
    store.store(KEY, 2, SHA_A, CI, truncated=False, source=PULLS, rules=Rules())
    store.store(KEY, 1, SHA_C, many, truncated=True, source=COMPARE, rules=Rules())
    store.store(KEY, 1, SHA_B, [], truncated=False, source=PULLS, rules=Rules())
    store.store(KEY, 1, SHA_A, [], truncated=False, source=UNAVAILABLE, rules=Rules())
    store.store("apache/arrow", 9, SHA_B, RENAMED, truncated=False, source=PULLS, rules=Rules())
    assert list(store.stored()) == [
        ("apache/arrow", 9, SHA_B, False, RENAMED),
        (KEY, 1, SHA_B, False, []),
        (KEY, 1, SHA_C, True, many),  # files in the order GitHub listed them
        (KEY, 2, SHA_A, False, CI),
    ]


def test_stored_of_an_empty_store(store: HeadStore) -> None:
    assert list(store.stored()) == []


def test_stored_keeps_every_field_of_a_file(store: HeadStore) -> None:
    files = [
        ChangedFile("docs/guide.md", "renamed", "docs/old guide.md", 3, 1, "@@ -1 +1 @@\n-é\n+ü\n"),
        ChangedFile("megatron/core/weights.bin", "removed", None, 0, 0, None),
    ]
    store.store(KEY, 1, SHA_A, files, truncated=False, source=PULLS, rules=Rules())
    ((*_, stored_files),) = store.stored()
    assert stored_files == files


# --- months ------------------------------------------------------------------------------------


@needs_shared
def test_a_store_bumps_the_versions_of_the_pr_months(engine: Engine, store: HeadStore) -> None:
    state = MonthState(engine)
    story = PullRequestStory(1, moment("2026-09-28T10:00:00+00:00")).opened()
    story.merged(moment("2026-10-05T10:00:00+00:00"))
    story.labeled(moment("2026-11-02T10:00:00+00:00"), "bug")  # an attribute version in November
    neighbour = PullRequestStory(2, moment("2026-12-01T10:00:00+00:00")).opened()
    same_number = PullRequestStory(1, moment("2026-09-28T10:00:00+00:00"), repo="Apache/Arrow").opened()
    for delivery in story.deliveries + neighbour.deliveries + same_number.deliveries:
        receive(engine, delivery)
    assert state.month_versions(REPO) == {"2026-09": 3, "2026-10": 2, "2026-11": 1, "2026-12": 1}
    assert state.month_versions("Apache/Arrow") == {"2026-09": 1}

    head = head_of(story.deliveries[0])
    assert store.store(KEY, 1, head, CODE, truncated=False, source=PULLS, rules=Rules()) is True
    # The months PR 1 is active in read its verdict; November only holds a version of it.
    assert state.month_versions(REPO) == {"2026-09": 4, "2026-10": 3, "2026-11": 1, "2026-12": 1}
    assert state.month_versions("Apache/Arrow") == {"2026-09": 1}

    assert store.store(KEY, 1, head, CODE, truncated=False, source=PULLS, rules=Rules()) is False
    assert state.month_versions(REPO) == {"2026-09": 4, "2026-10": 3, "2026-11": 1, "2026-12": 1}

    assert store.store(KEY, 1, SHA_B, [], truncated=False, source=UNAVAILABLE, rules=Rules()) is True
    assert state.month_versions(REPO) == {"2026-09": 5, "2026-10": 4, "2026-11": 1, "2026-12": 1}


@needs_shared
def test_a_store_for_a_pr_without_activity_bumps_nothing(engine: Engine, store: HeadStore) -> None:
    receive(engine, PullRequestStory(2, moment("2026-09-28T10:00:00+00:00")).opened().deliveries[0])
    assert store.store(KEY, 1, SHA_A, CODE, truncated=False, source=PULLS, rules=Rules()) is True
    assert MonthState(engine).month_versions(REPO) == {"2026-09": 1}


@needs_shared
def test_a_job_s_heads_are_kept_until_flushed_then_stored_in_one_transaction(engine: Engine, store: HeadStore) -> None:
    from sqlalchemy import event

    state = MonthState(engine)
    for number in (1, 2):
        receive(engine, PullRequestStory(number, moment("2026-09-28T10:00:00+00:00")).opened().deliveries[0])
    assert state.month_versions(REPO) == {"2026-09": 2}
    store.store(KEY, 2, SHA_C, CI, truncated=False, source=PULLS, rules=Rules())  # stored before the job
    deferred = DeferredHeads(store)
    assert deferred.store(KEY, 1, SHA_A, CODE, truncated=False, source=PULLS, rules=Rules()) is True
    assert deferred.store(KEY, 1, SHA_A, CI, truncated=False, source=COMPARE, rules=Rules()) is False  # kept already
    assert deferred.store(KEY, 1, SHA_B, CI, truncated=True, source=COMPARE, rules=Rules()) is True
    assert deferred.store(KEY, 2, SHA_C, CODE, truncated=False, source=PULLS, rules=Rules()) is True
    assert deferred.known(KEY, 1, SHA_A) and deferred.known(KEY, 2, SHA_C) and not deferred.known(KEY, 2, SHA_A)
    assert not store.known(KEY, 1, SHA_A)  # nothing written before the flush
    assert state.month_versions(REPO) == {"2026-09": 3}

    begun: list[object] = []

    def began(conn: object) -> None:
        begun.append(conn)

    event.listen(engine, "begin", began)
    try:
        # PR 2's head was stored before: its first files stay. Both PRs are in September, which it names once.
        assert deferred.flush() == (2, ((KEY, "2026-09"),))
    finally:
        event.remove(engine, "begin", began)
    assert len(begun) == 1
    assert deferred.flush() == (0, ()) and deferred.pending == {}
    assert list(store.stored()) == [(KEY, 1, SHA_A, False, CODE), (KEY, 1, SHA_B, True, CI), (KEY, 2, SHA_C, False, CI)]
    found = verdicts(engine)
    assert found[KEY, 1, SHA_A].category is Category.SUBSTANTIVE and found[KEY, 1, SHA_B].category is Category.CI_ONLY
    assert state.month_versions(REPO) == {"2026-09": 4}  # once for PR 1's two heads; PR 2 gained none


# --- the HTTP response cache ---------------------------------------------------------------------

PULL_FILES = "https://api.github.com/repos/NVIDIA/Megatron-LM/pulls/1/files?per_page=100"


@pytest.fixture
def cache(engine: Engine) -> SqlResponseCache:
    return SqlResponseCache(engine)


def test_cache_of_an_unknown_url(cache: SqlResponseCache) -> None:
    assert cache.get(PULL_FILES) is None


def test_cache_put_then_get(cache: SqlResponseCache) -> None:
    next_url = PULL_FILES + "&page=2"
    cache.put(PULL_FILES, 'W/"etag-1"', next_url, b'[{"filename": "a.py"}]')
    assert cache.get(PULL_FILES) == ('W/"etag-1"', next_url, b'[{"filename": "a.py"}]')
    assert cache.get(next_url) is None


def test_cache_put_again_overwrites(cache: SqlResponseCache) -> None:
    cache.put(PULL_FILES, 'W/"etag-1"', PULL_FILES + "&page=2", b"[1]")
    cache.put(PULL_FILES, '"etag-2"', None, b"\x00\xff binary")
    assert cache.get(PULL_FILES) == ('"etag-2"', None, b"\x00\xff binary")


def test_cache_keeps_urls_apart(cache: SqlResponseCache) -> None:
    second_page = PULL_FILES + "&page=2"
    cache.put(PULL_FILES, '"one"', second_page, b"first")
    cache.put(second_page, '"two"', None, b"second")
    assert cache.get(PULL_FILES) == ('"one"', second_page, b"first")
    assert cache.get(second_page) == ('"two"', None, b"second")


def test_cache_of_an_empty_body(cache: SqlResponseCache) -> None:
    cache.put(PULL_FILES, '"empty"', None, b"")
    assert cache.get(PULL_FILES) == ('"empty"', None, b"")


def test_cache_of_a_url_longer_than_its_column(cache: SqlResponseCache) -> None:
    long_url = "https://api.github.com/repos/NVIDIA/Megatron-LM/compare/" + "a" * 800 + "..." + "b" * 800
    assert len(long_url) > 1000
    cache.put(long_url, '"long"', long_url + "?page=2", b"compare")
    assert cache.get(long_url) == ('"long"', long_url + "?page=2", b"compare")
    cache.put(long_url, '"longer"', None, b"compare again")
    assert cache.get(long_url) == ('"longer"', None, b"compare again")
