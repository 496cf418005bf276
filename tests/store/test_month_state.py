"""Unit tests of `tracker.store.month_state`: the derived per-month state (`MonthState`)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from bench.fixtures import factory
from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.clock import utc
from tracker.core.attributes import AttributeVersion
from tracker.core.classify import Category, ChangedFile, HeadVerdict, Rules
from tracker.core.derive import Derivation, derive
from tracker.core.timeline import Fact, FactKind
from tracker.store.heads import PULLS, UNAVAILABLE, HeadStore
from tracker.store.ledger import PENDING, PROCESSED, Delivery, DeliveryCounts, Ledger
from tracker.store.month_state import MonthInputs, MonthState
from tracker.store.schema import DERIVED_TABLES, deliveries, month_changes, pr_facts

REPO = "NVIDIA/Megatron-LM"
KEY = "nvidia/megatron-lm"


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    return Ledger(engine)


@pytest.fixture
def state(engine: Engine) -> MonthState:
    return MonthState(engine)


def as_ledger_delivery(delivery: factory.Delivery) -> Delivery:
    return delivery.as_ledger_delivery(received_at=1_790_000_000_000)


def derivation_of(delivery: factory.Delivery, timezone: str = "UTC") -> Derivation:
    return derive(delivery.delivery_id, "application/json", delivery.body, lambda _name: timezone)


def receive(ledger: Ledger, state: MonthState, delivery: factory.Delivery, timezone: str = "UTC") -> bool:
    """What the webhook and the worker do with one delivery: store it, derive it, apply it."""
    ledger.store(as_ledger_delivery(delivery))
    return state.apply(delivery.delivery_id, derivation_of(delivery, timezone))


def receive_all(ledger: Ledger, state: MonthState, items: Sequence[factory.Delivery]) -> None:
    for delivery in items:
        receive(ledger, state, delivery)


def head_of(delivery: factory.Delivery) -> str:
    sha: str = json.loads(delivery.body)["pull_request"]["head"]["sha"]
    return sha


def renamed(delivery: factory.Delivery, delivery_id: str) -> factory.Delivery:
    return dataclasses.replace(delivery, delivery_id=delivery_id)


def derived_rows(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every derived row; of `month_changes`, a log of which version changed what (versions come in the
    order deliveries are applied), the PRs each month recorded as changed at all."""
    with engine.connect() as conn:
        found = {table.name: sorted(tuple(row) for row in conn.execute(select(table))) for table in DERIVED_TABLES}
    found[month_changes.name] = sorted(
        {
            (repo, month, number)
            for repo, month, _version, numbers in found[month_changes.name]
            for number in json.loads(numbers)
        }
    )
    return found


def version(
    delivery: factory.Delivery, moment_text: str, *, labels: tuple[str, ...] = (), title: str
) -> AttributeVersion:
    """The attributes of a factory delivery on GitHub's example payload, written out."""
    return AttributeVersion(
        at=utc(moment_text),
        delivery_id=delivery.delivery_id,
        title=title,
        body="",
        base_ref="main",
        head_ref="changes",
        head_sha=head_of(delivery),
        labels=labels,
        draft=False,
        author="Codertocat",
    )


# --- apply -------------------------------------------------------------------------------------


@needs_shared
def test_apply_adds_the_rows_and_marks_the_delivery_processed(ledger: Ledger, state: MonthState) -> None:
    story = PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened()
    (opened,) = story.deliveries
    assert receive(ledger, state, opened) is True
    assert ledger.status_of(opened.delivery_id) == PROCESSED
    assert state.repository_names() == [REPO]
    assert state.month_versions(REPO) == {"2026-09": 1}
    inputs = state.month_inputs(REPO, "2026-09", utc("2026-10-01T00:00:00+00:00"))
    assert inputs.timelines == {1: [Fact(FactKind.OPENED, utc("2026-09-02T10:00:00+00:00"))]}
    assert inputs.versions == {1: version(opened, "2026-09-02T10:00:00+00:00", title="Change number 1")}


@needs_shared
def test_apply_twice_changes_nothing_and_says_so(engine: Engine, ledger: Ledger, state: MonthState) -> None:
    story = PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened()
    story.pushed(moment("2026-09-03T10:00:00+00:00"))
    opened, pushed = story.deliveries
    assert receive(ledger, state, opened) is True
    assert receive(ledger, state, pushed) is True
    before = derived_rows(engine)
    assert state.apply(pushed.delivery_id, derivation_of(pushed)) is False
    assert state.apply(opened.delivery_id, derivation_of(opened)) is False
    assert state.apply(opened.delivery_id, None) is False
    assert derived_rows(engine) == before
    assert state.month_versions(REPO) == {"2026-09": 2}


@needs_shared
def test_apply_of_an_unknown_delivery_writes_nothing(engine: Engine, state: MonthState) -> None:
    (opened,) = PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened().deliveries
    assert state.apply(opened.delivery_id, derivation_of(opened)) is False
    assert derived_rows(engine) == {table.name: [] for table in DERIVED_TABLES}


@needs_shared
def test_apply_without_a_derivation_only_marks_processed(engine: Engine, ledger: Ledger, state: MonthState) -> None:
    (opened,) = PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened().deliveries
    ledger.store(as_ledger_delivery(opened))
    assert state.apply(opened.delivery_id, None) is True
    assert ledger.status_of(opened.delivery_id) == PROCESSED
    assert derived_rows(engine) == {table.name: [] for table in DERIVED_TABLES}
    assert state.apply(opened.delivery_id, None) is False


@needs_shared
def test_apply_clears_the_error_of_earlier_attempts(ledger: Ledger, state: MonthState) -> None:
    (opened,) = PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened().deliveries
    ledger.store(as_ledger_delivery(opened))
    ledger.record_attempt_failed(opened.delivery_id, "OperationalError: database is locked", final=True)
    assert state.apply(opened.delivery_id, derivation_of(opened)) is True  # a failed delivery retried by hand
    assert ledger.counts() == DeliveryCounts(received=1, processed=1, failed=0, pending=0)
    assert ledger.failures() == []


@needs_shared
def test_deliveries_applied_in_any_order_give_the_same_rows(engine: Engine, ledger: Ledger, state: MonthState) -> None:
    story = PullRequestStory(5, moment("2026-09-28T09:00:00+00:00")).opened()
    story.pushed(moment("2026-09-29T09:00:00+00:00"))
    story.labeled(moment("2026-09-30T09:00:00+00:00"), "bug")
    story.retitled(moment("2026-10-01T09:00:00+00:00"), "Fix the MoE router")
    story.merged(moment("2026-10-02T09:00:00+00:00"))
    other = PullRequestStory(6, moment("2026-09-29T12:00:00+00:00")).opened()
    other.closed(moment("2026-09-29T12:00:00+00:00"))  # closed at the instant it was opened
    items = story.deliveries + other.deliveries

    receive_all(ledger, state, items)
    in_order = derived_rows(engine)

    state.drop_and_recreate()
    with engine.begin() as conn:
        conn.execute(update(deliveries).values(status=PENDING))
    shuffled = [items[i] for i in (6, 4, 0, 5, 2, 3, 1)]
    for delivery in shuffled + shuffled[:3]:
        state.apply(delivery.delivery_id, derivation_of(delivery))
    assert derived_rows(engine) == in_order

    with engine.connect() as conn:
        facts = sorted(
            (row.repo, row.number, row.kind, row.at)
            for row in conn.execute(select(pr_facts).where(pr_facts.c.source == "webhook", pr_facts.c.rank == 0))
        )
    assert facts == [
        (KEY, 5, "commit", utc("2026-09-29T09:00:00+00:00")),
        (KEY, 5, "merged", utc("2026-10-02T09:00:00+00:00")),
        (KEY, 5, "opened", utc("2026-09-28T09:00:00+00:00")),
        (KEY, 6, "closed", utc("2026-09-29T12:00:00+00:00")),
        (KEY, 6, "opened", utc("2026-09-29T12:00:00+00:00")),
    ]
    assert state.month_versions(REPO) == {"2026-09": 7, "2026-10": 2}


# --- the repository's name ---------------------------------------------------------------------


def test_repository_name_of_an_unknown_repository(state: MonthState) -> None:
    assert state.repository_name(REPO) is None
    assert state.repository_names() == []


@needs_shared
def test_repository_name_is_matched_without_regard_to_case(ledger: Ledger, state: MonthState) -> None:
    receive_all(ledger, state, PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened().deliveries)
    assert state.repository_name("NVIDIA/Megatron-LM") == "NVIDIA/Megatron-LM"
    assert state.repository_name("nvidia/megatron-lm") == "NVIDIA/Megatron-LM"
    assert state.repository_name("Nvidia/MEGATRON-lm") == "NVIDIA/Megatron-LM"
    assert state.repository_name("NVIDIA/Megatron") is None


@needs_shared
def test_repository_name_is_spelled_as_the_latest_delivery_spells_it(ledger: Ledger, state: MonthState) -> None:
    story = PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened()
    story.repo = "nvidia/MEGATRON-lm"  # renamed to another case on GitHub
    story.pushed(moment("2026-09-05T10:00:00+00:00"))
    opened, pushed = story.deliveries
    receive(ledger, state, pushed)  # the later delivery arrives first
    assert state.repository_name(REPO) == "nvidia/MEGATRON-lm"
    receive(ledger, state, opened)
    assert state.repository_name(REPO) == "nvidia/MEGATRON-lm"
    assert state.repository_names() == ["nvidia/MEGATRON-lm"]
    assert state.month_versions("NVIDIA/Megatron-LM") == {"2026-09": 2}


@needs_shared
def test_repository_name_at_one_instant_is_decided_by_delivery_id(ledger: Ledger, state: MonthState) -> None:
    when = moment("2026-09-02T10:00:00+00:00")

    def spelled(full_name: str, delivery_id: str) -> factory.Delivery:
        (opened,) = PullRequestStory(1, when, repo=full_name).opened().deliveries
        return renamed(opened, delivery_id)

    # Apache/Arrow: the larger id arrives first; Apache/Beam: it arrives last. Both keep its spelling.
    receive(ledger, state, spelled("APACHE/arrow", "same-instant-b1"))
    receive(ledger, state, spelled("Apache/Arrow", "same-instant-a1"))
    receive(ledger, state, spelled("Apache/Beam", "same-instant-a2"))
    receive(ledger, state, spelled("APACHE/beam", "same-instant-b2"))
    assert state.repository_name("apache/arrow") == "APACHE/arrow"
    assert state.repository_name("apache/beam") == "APACHE/beam"
    assert state.repository_names() == ["APACHE/arrow", "APACHE/beam"]


@needs_shared
def test_repository_names_are_sorted(ledger: Ledger, state: MonthState) -> None:
    when = moment("2026-09-02T10:00:00+00:00")
    for number, full_name in enumerate(["NVIDIA/Megatron-LM", "Apache/Arrow", "NVIDIA/TransformerEngine"], 1):
        receive_all(ledger, state, PullRequestStory(number, when, repo=full_name).opened().deliveries)
    assert state.repository_names() == ["Apache/Arrow", "NVIDIA/Megatron-LM", "NVIDIA/TransformerEngine"]


# --- month versions and the generation -------------------------------------------------------


def test_month_version_of_an_untouched_month(state: MonthState) -> None:
    assert state.month_version(REPO, "2026-09") == (0, "")
    assert state.month_versions(REPO) == {}


@needs_shared
def test_month_version_bumps_for_every_month_a_delivery_touches(ledger: Ledger, state: MonthState) -> None:
    story = PullRequestStory(10, moment("2026-09-28T10:00:00+00:00")).opened()
    story.labeled(moment("2026-10-02T10:00:00+00:00"), "bug")
    story.merged(moment("2026-10-05T10:00:00+00:00"))
    opened, labeled, merged = story.deliveries

    receive(ledger, state, opened)  # opened in September
    assert state.month_versions(REPO) == {"2026-09": 1}
    receive(ledger, state, labeled)  # proves the September opening again, and is an October version
    assert state.month_versions(REPO) == {"2026-09": 2, "2026-10": 1}
    receive(ledger, state, merged)  # opened in September, merged in October
    assert state.month_versions(REPO) == {"2026-09": 3, "2026-10": 2}
    assert state.month_version(REPO, "2026-09") == (3, "")
    assert state.month_version("nvidia/MEGATRON-LM", "2026-10") == (2, "")
    assert state.month_version(REPO, "2026-11") == (0, "")

    assert receive(ledger, state, merged) is False  # a redelivery touches nothing
    assert state.month_versions(REPO) == {"2026-09": 3, "2026-10": 2}

    other = PullRequestStory(1, moment("2026-10-05T10:00:00+00:00"), repo="Apache/Arrow").opened()
    receive_all(ledger, state, other.deliveries)  # another repository's months are its own
    assert state.month_versions(REPO) == {"2026-09": 3, "2026-10": 2}
    assert state.month_versions("apache/arrow") == {"2026-10": 1}


@needs_shared
def test_months_are_those_of_the_repository_time_zone(ledger: Ledger, state: MonthState) -> None:
    # 2026-08-31T16:30Z is 00:30 on September 1st in Asia/Shanghai (UTC+8).
    story = PullRequestStory(1, moment("2026-08-31T16:30:00+00:00")).opened()
    receive(ledger, state, story.deliveries[0], timezone="Asia/Shanghai")
    assert state.month_versions(REPO) == {"2026-09": 1}
    story = PullRequestStory(2, moment("2026-08-31T16:30:00+00:00")).opened()
    receive(ledger, state, story.deliveries[0], timezone="UTC")
    assert state.month_versions(REPO) == {"2026-08": 1, "2026-09": 1}


@needs_shared
def test_new_generation_changes_the_generation_and_not_the_counter(ledger: Ledger, state: MonthState) -> None:
    receive_all(ledger, state, PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened().deliveries)
    assert state.month_version(REPO, "2026-09") == (1, "")
    state.new_generation()
    counter, first = state.month_version(REPO, "2026-09")
    assert counter == 1
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert state.month_version(REPO, "2030-01") == (0, first)  # one generation for the whole ledger
    state.new_generation()
    counter, second = state.month_version(REPO, "2026-09")
    assert counter == 1
    assert re.fullmatch(r"[0-9a-f]{32}", second)
    assert second != first


# --- month inputs ------------------------------------------------------------------------------


END = "2026-09-15T00:00:00+00:00"  # the window of September 2026 up to the 14th, in UTC
NEW_FILES = [ChangedFile("megatron/core/router.py", additions=10, deletions=2)]
TEST_FILES = [ChangedFile("tests/unit/test_router.py", additions=5), ChangedFile("tests/unit/test_a.py", additions=1)]
LATER_FILES = [ChangedFile("megatron/core/moe.py", "added", additions=40)]


@dataclasses.dataclass
class Scene:
    first: list[factory.Delivery]  # PR 1: opened, pushed, labeled, pushed again, merged in October
    october: factory.Delivery  # PR 2: opened in October
    late: factory.Delivery  # PR 3: its only delivery is after the window end
    closed: list[factory.Delivery]  # PR 5: opened in August, closed in September, retitled at the end
    at_end: factory.Delivery  # PR 7: opened at the window end
    elsewhere: factory.Delivery  # PR 4 of another repository


def build_scene(ledger: Ledger, state: MonthState, engine: Engine) -> Scene:
    first = PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened()
    first.pushed(moment("2026-09-10T12:00:00+00:00"))
    first.labeled(moment("2026-09-16T09:00:00+00:00"), "bug")
    first.pushed(moment("2026-09-20T08:00:00+00:00"))
    first.merged(moment("2026-10-03T15:00:00+00:00"))
    october = PullRequestStory(2, moment("2026-10-05T10:00:00+00:00")).opened()
    late = PullRequestStory(3, moment("2026-09-03T10:00:00+00:00"))
    late.pushed(moment("2026-09-20T10:00:00+00:00"))  # the `opened` delivery was lost
    closed = PullRequestStory(5, moment("2026-08-28T10:00:00+00:00")).opened()
    closed.closed(moment("2026-09-12T10:00:00+00:00"))
    closed.retitled(moment(END), "Renamed at the window end")
    at_end = PullRequestStory(7, moment(END)).opened()
    elsewhere = PullRequestStory(4, moment("2026-09-05T10:00:00+00:00"), repo="Apache/Arrow").opened()
    scene = Scene(
        first.deliveries,
        october.deliveries[0],
        late.deliveries[0],
        closed.deliveries,
        at_end.deliveries[0],
        elsewhere.deliveries[0],
    )
    everything = [*scene.first, scene.october, scene.late, *scene.closed, scene.at_end, scene.elsewhere]
    receive_all(ledger, state, list(reversed(everything)))
    heads = HeadStore(engine)
    opened, pushed, _, pushed_again, _ = scene.first
    heads.store(KEY, 1, head_of(opened), NEW_FILES, truncated=False, source=PULLS, rules=Rules())
    heads.store(KEY, 1, head_of(pushed), TEST_FILES, truncated=False, source=PULLS, rules=Rules())
    heads.store(KEY, 1, head_of(pushed_again), LATER_FILES, truncated=False, source=PULLS, rules=Rules())
    heads.store(KEY, 3, head_of(scene.late), [], truncated=False, source=UNAVAILABLE, rules=Rules())
    heads.store("apache/arrow", 4, head_of(scene.elsewhere), NEW_FILES, truncated=False, source=PULLS, rules=Rules())
    return scene


def in_time_order(inputs: MonthInputs) -> dict[int, list[Fact]]:
    return {number: sorted(facts, key=lambda fact: fact.sort_key) for number, facts in inputs.timelines.items()}


@needs_shared
def test_month_inputs_of_a_month_without_activity(engine: Engine, ledger: Ledger, state: MonthState) -> None:
    build_scene(ledger, state, engine)
    assert state.month_inputs(REPO, "2026-07", utc("2026-08-01T00:00:00+00:00")) == MonthInputs({}, {}, {})
    assert state.month_inputs("Apache/Beam", "2026-09", utc(END)) == MonthInputs({}, {}, {})


@needs_shared
def test_month_inputs_at_a_cutoff(engine: Engine, ledger: Ledger, state: MonthState) -> None:
    scene = build_scene(ledger, state, engine)
    _, pushed, _, _, _ = scene.first
    inputs = state.month_inputs(REPO, "2026-09", utc(END))

    # The month's PRs are 1, 3, 5 and 7 (2 is October's, 4 another repository's); facts at or after
    # the end are left out, so PR 7, opened at the end, has no timeline.
    assert in_time_order(inputs) == {
        1: [
            Fact(FactKind.OPENED, utc("2026-09-02T10:00:00+00:00")),
            Fact(FactKind.COMMIT, utc("2026-09-10T12:00:00+00:00")),
        ],
        3: [Fact(FactKind.OPENED, utc("2026-09-03T10:00:00+00:00"))],
        5: [
            Fact(FactKind.OPENED, utc("2026-08-28T10:00:00+00:00")),
            Fact(FactKind.CLOSED, utc("2026-09-12T10:00:00+00:00")),
        ],
    }
    # The last version before the end; when every version is later, the earliest one.
    assert inputs.versions == {
        1: version(pushed, "2026-09-10T12:00:00+00:00", title="Change number 1"),
        3: version(scene.late, "2026-09-20T10:00:00+00:00", title="Change number 3"),
        5: version(scene.closed[1], "2026-09-12T10:00:00+00:00", title="Change number 5"),
        7: version(scene.at_end, END, title="Change number 7"),
    }
    # The verdict and files of the head PR 1 had at the end, not of its other heads.
    assert inputs.verdicts == {
        (1, head_of(pushed)): HeadVerdict(
            head_of(pushed),
            Category.TEST_ONLY,
            False,
            {
                "head_sha": head_of(pushed),
                "files": 2,
                "rule": "all_files_test",
                "matching_files": 2,
                "examples": ["tests/unit/test_a.py", "tests/unit/test_router.py"],
            },
        )
    }
    assert inputs.paths == {1: ["tests/unit/test_router.py", "tests/unit/test_a.py"]}  # in GitHub's order
    # PR 3's head is gone from GitHub: no verdict, no files, and said so.
    assert inputs.unavailable == frozenset({(3, head_of(scene.late))})


@needs_shared
def test_month_inputs_at_the_end_of_the_next_month(engine: Engine, ledger: Ledger, state: MonthState) -> None:
    scene = build_scene(ledger, state, engine)
    merged = scene.first[4]
    inputs = state.month_inputs("nvidia/megatron-lm", "2026-10", utc("2026-11-01T00:00:00+00:00"))
    assert in_time_order(inputs) == {
        1: [
            Fact(FactKind.OPENED, utc("2026-09-02T10:00:00+00:00")),
            Fact(FactKind.COMMIT, utc("2026-09-10T12:00:00+00:00")),
            Fact(FactKind.COMMIT, utc("2026-09-20T08:00:00+00:00")),
            Fact(FactKind.MERGED, utc("2026-10-03T15:00:00+00:00")),
        ],
        2: [Fact(FactKind.OPENED, utc("2026-10-05T10:00:00+00:00"))],
    }
    assert inputs.versions == {
        1: version(merged, "2026-10-03T15:00:00+00:00", title="Change number 1"),
        2: version(scene.october, "2026-10-05T10:00:00+00:00", title="Change number 2"),
    }
    assert head_of(merged) == head_of(scene.first[3])  # merged with the head of the second push
    assert inputs.verdicts == {
        (1, head_of(merged)): HeadVerdict(
            head_of(merged),
            Category.SUBSTANTIVE,
            False,
            {
                "head_sha": head_of(merged),
                "files": 1,
                "rule": "code_changed",
                "matching_files": 1,
                "examples": ["megatron/core/moe.py"],
                "all_examples": ["megatron/core/moe.py"],
            },
        )
    }
    assert inputs.paths == {1: ["megatron/core/moe.py"]}  # PR 2's head has no files yet: no entry
    assert inputs.unavailable == frozenset()


@needs_shared
def test_month_inputs_choose_among_versions_of_one_instant_by_delivery_id(
    engine: Engine, ledger: Ledger, state: MonthState
) -> None:
    when = moment("2026-09-04T10:00:00+00:00")
    story = PullRequestStory(6, moment("2026-09-02T10:00:00+00:00")).opened()
    story.labeled(when, "docs")
    story.retitled(when, "Document the router")
    opened = story.deliveries[0]
    labeled = renamed(story.deliveries[1], "tie-a")
    retitled = renamed(story.deliveries[2], "tie-b")
    receive_all(ledger, state, [retitled, opened, labeled])
    inputs = state.month_inputs(REPO, "2026-09", utc(END))
    assert inputs.versions == {6: version(retitled, "2026-09-04T10:00:00+00:00", title="Document the router")}
    # Just after the instant the same; at the instant itself, the version before it.
    assert state.month_inputs(REPO, "2026-09", utc("2026-09-04T10:00:01+00:00")).versions == inputs.versions
    assert state.month_inputs(REPO, "2026-09", utc("2026-09-04T10:00:00+00:00")).versions == {
        6: version(opened, "2026-09-02T10:00:00+00:00", title="Change number 6")
    }


@needs_shared
def test_month_inputs_without_stored_heads(ledger: Ledger, state: MonthState) -> None:
    story = PullRequestStory(8, moment("2026-09-02T10:00:00+00:00"), base="dev").opened()
    story.labeled(moment("2026-09-03T10:00:00+00:00"), "moe", "bug")
    opened, labeled = story.deliveries
    receive_all(ledger, state, story.deliveries)
    inputs = state.month_inputs(REPO, "2026-09", utc(END))
    expected = dataclasses.replace(
        version(labeled, "2026-09-03T10:00:00+00:00", title="Change number 8", labels=("bug", "moe")), base_ref="dev"
    )
    assert inputs == MonthInputs(
        timelines={8: [Fact(FactKind.OPENED, utc("2026-09-02T10:00:00+00:00"))]},
        versions={8: expected},
        verdicts={},
        unavailable=frozenset(),
        paths={},
    )
    assert head_of(opened) == head_of(labeled)


# --- drop and recreate -------------------------------------------------------------------------


@needs_shared
def test_drop_and_recreate_empties_the_derived_tables_and_keeps_the_deliveries(
    engine: Engine, ledger: Ledger, state: MonthState
) -> None:
    scene = build_scene(ledger, state, engine)
    counts = ledger.counts()
    assert counts == DeliveryCounts(received=12, processed=12, failed=0, pending=0)
    stored_heads = list(HeadStore(engine).stored())

    state.drop_and_recreate()

    assert derived_rows(engine) == {table.name: [] for table in DERIVED_TABLES}
    assert state.repository_names() == []
    assert state.repository_name(REPO) is None
    assert state.month_versions(REPO) == {}
    assert state.month_version(REPO, "2026-09")[0] == 0
    assert state.month_inputs(REPO, "2026-09", utc(END)) == MonthInputs({}, {}, {})
    assert HeadStore(engine).missing() == []
    # The source of truth stays, statuses included; so do the files fetched from GitHub.
    assert ledger.counts() == counts
    assert ledger.get(scene.october.delivery_id) == as_ledger_delivery(scene.october)
    assert [len(batch) for batch in ledger.iter_pull_request_deliveries()] == [12]
    assert list(HeadStore(engine).stored()) == stored_heads
    assert HeadStore(engine).known(KEY, 3, head_of(scene.late))
    # The tables work again at once.
    again = PullRequestStory(9, moment("2026-09-06T10:00:00+00:00")).opened()
    assert receive(ledger, state, again.deliveries[0]) is True
    assert state.month_versions(REPO) == {"2026-09": 1}


def test_drop_and_recreate_of_an_empty_ledger(engine: Engine, state: MonthState) -> None:
    state.drop_and_recreate()
    state.drop_and_recreate()
    assert derived_rows(engine) == {table.name: [] for table in DERIVED_TABLES}


@needs_shared
def test_apply_after_a_drop_does_not_process_a_delivery_twice(
    engine: Engine, ledger: Ledger, state: MonthState
) -> None:
    (opened,) = PullRequestStory(1, moment("2026-09-02T10:00:00+00:00")).opened().deliveries
    receive(ledger, state, opened)
    state.drop_and_recreate()
    # The delivery is still processed: only a rebuild (which writes derivations directly) restores its rows.
    assert state.apply(opened.delivery_id, derivation_of(opened)) is False
    assert state.month_versions(REPO) == {}
    assert ledger.status_of(opened.delivery_id) == PROCESSED
