"""Each section's themes, grouped and named, kept in Redis by content (tracker.reports.groupings): read instead of
computed, never stale when the data or the taxonomy's names change, and the same as a computation from nothing.
A real ledger (SQLite), a real Redis, real Megatron-LM titles and paths (bench/fixtures/scenario.py), applied the
way the worker applies them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import fields, replace
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
import yaml
from redis import Redis

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import EXAMPLES, needs_shared
from bench.fixtures.scenario import REPO, megatron_month
from tests.support.months import copy_sqlite
from tests.support.tracking import Tracker
from tracker.config import TrackerConfig
from tracker.core import clusters
from tracker.core.noise import MAINTENANCE_THEME
from tracker.core.report import NamedTheme, Report, named_section
from tracker.core.themes import ThemeChoice
from tracker.queue import connect_redis
from tracker.reports import groupings
from tracker.reports.loading import report_for, resolve
from tracker.reports.render import render
from tracker.reports.request import MonthRequest
from tracker.store.database import connect
from tracker.store.heads import HeadStore
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState

pytestmark = needs_shared

TODAY = date(2026, 6, 10)
CUTOFF = "2026-05-20"


def tracker(path: Path, config: TrackerConfig | None = None) -> Tracker:
    engine = connect(f"sqlite:///{path}")
    return Tracker(Ledger(engine), MonthState(engine), HeadStore(engine), config or TrackerConfig())


@pytest.fixture(scope="module")
def ledger_of_may(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 real PRs of May 2026, their files as fetched: a ledger made once for the module."""
    path = tmp_path_factory.mktemp("may") / "l.sqlite3"
    made = tracker(path)
    scenario = megatron_month(count=40, still_open=8)
    made.deliver([d for story in scenario.stories for d in story.deliveries])
    made.give_files({number: paths for (number, _), paths in scenario.files.items()})
    made.state.engine.dispose()
    return path


@pytest.fixture
def may(ledger_of_may: Path, tmp_path: Path) -> Iterator[Tracker]:
    """The 40 PRs of May 2026, in a copy of the module's ledger of them for each test."""
    copy_sqlite(ledger_of_may, tmp_path / "l.sqlite3")
    copied = tracker(tmp_path / "l.sqlite3")
    try:
        yield copied
    finally:
        copied.state.engine.dispose()


def _day(day: int) -> datetime:
    return datetime(2026, 5, day, 4, tzinfo=UTC)


def grouping_keys(redis: Redis) -> set[bytes]:
    return set(redis.scan_iter(match=f"{groupings.PREFIX}*"))


def request(tracker: Tracker) -> MonthRequest:
    return resolve(tracker, REPO, "2026-05", CUTOFF, today=TODAY)


def from_nothing(tracker: Tracker, asked: MonthRequest | None = None) -> Report:
    """A real computation: no Redis, no grouping remembered in the process."""
    clusters.forget()
    return report_for(tracker, asked or request(tracker))


def themes(report: Report) -> list[tuple[str, list[list[int]]]]:
    return [
        (theme.en, [[n for change in h.changes for n in change.numbers] for h in theme.highlights])
        for section in report.sections
        for theme in section.themes
    ]


def test_each_sections_grouping_is_kept_and_equals_a_computation_from_nothing(may: Tracker, redis: Redis) -> None:
    clusters.forget()
    cached = report_for(may, request(may), cache=redis)
    assert len(grouping_keys(redis)) == sum(1 for section in cached.sections if section.changes) == 2
    for key in grouping_keys(redis):
        assert 0 < redis.ttl(key) <= groupings.GROUPING_SECONDS
    # Another process (nothing remembered in this one) reads it, and gets what a computation gives.
    clusters.forget()
    again = report_for(may, request(may), cache=redis)
    first, second = from_nothing(may), from_nothing(may)  # two real computations
    assert render(first, "json", "en") == render(second, "json", "en")
    for report in (cached, again):
        assert render(report, "json", "en") == render(first, "json", "en")
        assert render(report, "md", "zh-CN") == render(first, "md", "zh-CN")


def test_a_stored_grouping_is_read_instead_of_computed(may: Tracker, redis: Redis) -> None:
    clusters.forget()
    report_for(may, request(may), cache=redis)
    assert len(grouping_keys(redis)) == 2
    # Plant named themes of the same items: every change in one theme.
    for key in grouping_keys(redis):
        stored = json.loads(redis.get(key) or b"[]")
        members = sorted(m for theme in stored for highlight in theme[4] for m in highlight[3])
        planted = [["planted", "Planted", "种植", ["planted"], [["planted", "Planted", "种植", members]]]]
        redis.set(key, json.dumps(planted), keepttl=True)
    clusters.forget()
    read = report_for(may, request(may), cache=redis)
    # Every change the grouping saw in one theme (upkeep is apart: it is not grouped).
    grouped = [[theme for theme in section.themes if theme.id != MAINTENANCE_THEME[0]] for section in read.sections]
    assert [len(themes) for themes in grouped] == [1, 1]
    assert all(theme.en.startswith("Planted") for themes in grouped for theme in themes)


def test_a_grouping_that_does_not_fit_its_items_is_computed_again(may: Tracker, redis: Redis) -> None:
    clusters.forget()
    report_for(may, request(may), cache=redis)
    for key in grouping_keys(redis):
        redis.set(key, b'[{"members": [0], "terms": [], "topics": [], "other": false}]', keepttl=True)
    clusters.forget()
    again = report_for(may, request(may), cache=redis)
    assert render(again, "json", "en") == render(from_nothing(may), "json", "en")


def test_new_data_is_a_new_grouping_never_a_stale_one(may: Tracker, redis: Redis) -> None:
    clusters.forget()
    before = report_for(may, request(may), cache=redis)
    keys_before = grouping_keys(redis)
    # Three new PRs of one story, opened in the window and still open: In Progress changes, Delivered not.
    titles = {9101: "Add MXFP8 grouped GEMM", 9102: "MXFP8 grouped GEMM for MoE", 9103: "Tune MXFP8 GEMM"}
    for number, title in titles.items():
        story = PullRequestStory(number, _day(12), repo=REPO, title=title).opened()
        may.deliver(story.deliveries)
    may.give_files({n: ["megatron/core/fusions/mxfp8_gemm.py"] for n in (9101, 9102, 9103)})
    after = report_for(may, request(may), cache=redis)
    keys_after = grouping_keys(redis)
    assert len(keys_after - keys_before) == 1  # In Progress grouped anew; Delivered's content is the same
    new_numbers = {n for section in after.sections for change in section.changes for n in change.numbers}
    assert {9101, 9102, 9103} <= new_numbers
    assert themes(after) != themes(before)
    assert render(after, "json", "en") == render(from_nothing(may), "json", "en")
    # A retitle changes the items again.
    story = PullRequestStory(9103, _day(12), repo=REPO, title="Tune MXFP8 GEMM").opened()
    story.retitled(_day(13), "Document the release process")
    may.deliver(story.deliveries[1:])
    retitled = report_for(may, request(may), cache=redis)
    assert len(grouping_keys(redis) - keys_after) == 1
    assert render(retitled, "md", "en") == render(from_nothing(may), "md", "en")
    assert "Document the release process" in render(retitled, "md", "en")


def test_a_redis_that_fails_costs_a_grouping_nothing_more(may: Tracker) -> None:
    # The client the app makes (its short timeouts and retries), of a Redis that is not there: a client with
    # redis-py's own retries waited 10 s and more for its back-offs, which only made the test slow.
    dead = connect_redis("redis://127.0.0.1:1/0")
    clusters.forget()
    report = report_for(may, request(may), cache=dead)
    assert render(report, "json", "en") == render(from_nothing(may), "json", "en")


# --- the naming kept with the grouping ----------------------------------------------------------------------

MONTHS = ("2026-03", "2026-04", "2026-06")
AFTER = date(2026, 7, 10)  # after every month of the data: each month whole
DOCUMENTS = (("json", "en"), ("md", "en"), ("md", "zh-CN"), ("html", "zh-CN"))
Computed = list[tuple[list[clusters.Item], list[ThemeChoice], tuple[NamedTheme, ...]]]


def megatron_config(renamed: str = "") -> TrackerConfig:
    """The example configuration of Megatron-LM, with its taxonomy. `renamed`: before the names of every area and
    sub-area, their ids the same (a taxonomy whose names were edited)."""
    document = yaml.safe_load((EXAMPLES / "megatron-lm.yaml").read_text())
    if renamed:
        for theme in document["repositories"][REPO]["themes"]:
            for part in (theme, *theme.get("highlights", ())):
                part["en"], part["zh"] = renamed + part["en"], renamed + part["zh"]
    return TrackerConfig.model_validate(document)


@pytest.fixture(scope="module", params=MONTHS)
def ledger_of_month(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """40 real PRs of a month of the data, 8 of them left open: a ledger made once for the module."""
    month = str(request.param)
    path = tmp_path_factory.mktemp(month) / "l.sqlite3"
    made = tracker(path)
    scenario = megatron_month(month, count=40, still_open=8)
    made.deliver([d for story in scenario.stories for d in story.deliveries])
    made.give_files({number: paths for (number, _), paths in scenario.files.items()})
    made.state.engine.dispose()
    return month, path


def computing(monkeypatch: pytest.MonkeyPatch) -> Computed:
    """Every section themed from now on by a computation, recorded: its items, priors and named themes."""
    computed: Computed = []

    def recorded(items: Sequence[clusters.Item], priors: Sequence[ThemeChoice]) -> tuple[NamedTheme, ...]:
        themes = named_section(items, priors)
        computed.append((list(items), list(priors), themes))
        return themes

    monkeypatch.setattr(groupings, "named_section", recorded)
    return computed


def refusing(items: Sequence[clusters.Item], priors: Sequence[ThemeChoice]) -> tuple[NamedTheme, ...]:
    raise AssertionError("a section themed by a computation, not read from Redis")


@pytest.mark.parametrize("themed", [False, True], ids=["layout", "taxonomy"])
def test_named_themes_read_from_redis_are_the_ones_computed(
    ledger_of_month: tuple[str, Path], themed: bool, tmp_path: Path, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    month, path = ledger_of_month
    copy_sqlite(path, tmp_path / "l.sqlite3")
    made = tracker(tmp_path / "l.sqlite3", megatron_config() if themed else None)
    try:
        whole = resolve(made, REPO, month, None, today=AFTER)
        clusters.forget()
        computed = computing(monkeypatch)
        kept = report_for(made, whole, cache=redis)
        assert len(computed) == len(grouping_keys(redis)) == sum(1 for s in kept.sections if s.changes) == 2
        assert all(len(priors) == (len(items) if themed else 0) for items, priors, _ in computed)
        # Another process reads each section's themes, named, and computes nothing.
        monkeypatch.setattr(groupings, "named_section", refusing)
        clusters.forget()
        for items, priors, themes in computed:
            assert groupings.SharedGroupings(redis)(items, priors) == themes
        read = report_for(made, whole, cache=redis)
        monkeypatch.undo()
        again = from_nothing(made, whole)
        for document in DOCUMENTS:
            assert render(read, *document) == render(kept, *document) == render(again, *document)
    finally:
        made.state.engine.dispose()


def test_a_taxonomy_renamed_is_named_anew_not_from_the_names_stored(may: Tracker, redis: Redis) -> None:
    may.config = megatron_config()
    clusters.forget()
    before = report_for(may, request(may), cache=redis)
    kept = grouping_keys(redis)
    # The same ids, other names: the same items (their priors are ids), so only the names' part of the key says it.
    may.config = megatron_config(renamed="Renamed ")
    after = report_for(may, request(may), cache=redis)
    assert len(grouping_keys(redis) - kept) == len(kept) == 2
    names = [name for section in after.sections for theme in section.themes for name in (theme.en, theme.zh)]
    assert any(name.startswith("Renamed ") for name in names)
    assert not any("Renamed " in theme.en for section in before.sections for theme in section.themes)
    again = from_nothing(may)
    for document in DOCUMENTS:
        assert render(after, *document) == render(again, *document)


def test_a_path_changed_is_named_anew(may: Tracker, redis: Redis) -> None:
    story = PullRequestStory(9101, _day(12), repo=REPO, title="Tune the MXFP8 grouped GEMM").opened()
    may.deliver(story.deliveries)
    may.give_files({9101: ["megatron/core/fusions/mxfp8_gemm.py"]})
    clusters.forget()
    report_for(may, request(may), cache=redis)
    kept = grouping_keys(redis)
    story.pushed(_day(13))  # its new head changes other files
    may.deliver(story.deliveries[1:])
    may.give_files({9101: ["megatron/rl/agent/rollout.py"]})
    after = report_for(may, request(may), cache=redis)
    assert len(grouping_keys(redis) - kept) == 1  # In Progress, where it is; Delivered's content is the same
    change = next(change for section in after.sections for change in section.changes if 9101 in change.numbers)
    assert change.paths == ("megatron/rl/agent/rollout.py",)
    again = from_nothing(may)
    for document in DOCUMENTS:
        assert render(after, *document) == render(again, *document)


def test_the_key_covers_all_that_grouping_and_naming_read() -> None:
    items = [
        clusters.Item("Fix GTP overlap", ("bug",), ("megatron/core/gtp.py",), (11, 12), ("parallel", "tp"), False),
        clusters.Item("Autotune RL lag", ("rl",), ("megatron/rl/rl_utils.py",), (13,), ("rl", "agent"), True),
    ]
    priors = [ThemeChoice("parallel", "Parallelism", "并行", "tp", "Tensor Parallel", "张量并行")] * 2
    keys = {groupings.grouping_key(items, priors), groupings.grouping_key(items, ())}
    first = items[0]
    for changed in (
        replace(first, title="Fix GTP overlap again"),
        replace(first, labels=()),
        replace(first, paths=("megatron/core/gtp_api.py",)),
        replace(first, references=(11,)),
        replace(first, prior=("parallel", "pp")),
        replace(first, upkeep=True),
    ):
        keys.add(groupings.grouping_key([changed, items[1]], priors))
    for field in fields(ThemeChoice):
        keys.add(groupings.grouping_key(items, [replace(priors[0], **{field.name: "other"}), priors[1]]))
    keys.add(groupings.grouping_key(items[::-1], priors))
    assert len(keys) == 2 + 6 + len(fields(ThemeChoice)) + 1


SPOILED = (
    "a change left out",
    "a change twice",
    "an index past the items",
    "a highlight of no change",
    "a theme of no highlight",
    "another shape",
    "not JSON",
)


def spoiled(stored: bytes, size: int, how: str) -> bytes:
    """Named themes of `size` items as stored, spoiled `how`."""
    if how == "not JSON":
        return b"\xff{"
    document = json.loads(stored)
    first = document[0][4][0]  # the first theme's first highlight: [id, en, zh, members]
    if how == "a change left out":
        first[3] = first[3][1:]
    elif how == "a change twice":
        document.append(["twice", "Twice", "两次", [], [["twice", "Twice", "两次", first[3][:1]]]])
    elif how == "an index past the items":
        first[3] = [*first[3], size]
    elif how == "a highlight of no change":
        document[0][4].append(["none", "None", "无", []])
    elif how == "a theme of no highlight":
        document.append(["none", "None", "无", [], []])
    else:
        document = {"members": list(range(size))}
    return json.dumps(document).encode()


@pytest.mark.parametrize("how", SPOILED)
def test_named_themes_that_do_not_fit_are_computed_again_and_overwritten(
    may: Tracker, redis: Redis, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    clusters.forget()
    computed = computing(monkeypatch)
    report_for(may, request(may), cache=redis)
    assert len(computed) == 2
    for items, priors, themes in list(computed):
        key = groupings.grouping_key(items, priors)
        stored = redis.get(key)
        assert stored is not None
        redis.set(key, spoiled(stored, len(items), how), keepttl=True)
        count = len(computed)
        assert groupings.SharedGroupings(redis)(items, priors) == themes
        assert len(computed) == count + 1  # computed, not read
        assert redis.get(key) == stored
