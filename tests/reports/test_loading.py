"""Unit tests of tracker.reports.loading (what was asked, read from a real ledger) and
tracker.reports.cache (rendered reports kept in a real Redis), without the web app.

Deliveries are built with bench/fixtures/factory.py, stored in a SQLite ledger and applied to the derived
state the way the worker does (`Ledger.store`, then `MonthState.apply` of `derive`); files arrive
through `HeadStore.store`, as the GitHub fetch job stores them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from redis import Redis

from bench.fixtures import factory
from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.clock import utc
from tests.support.tracking import Tracker
from tracker.config import RepositoryConfig, TrackerConfig
from tracker.core.report import Report
from tracker.core.snapshot import build_snapshot
from tracker.core.window import WindowError
from tracker.reports.cache import rendered
from tracker.reports.coverage import window_coverage_of
from tracker.reports.loading import (
    MonthRequest,
    UnknownRepository,
    load_snapshot,
    report_for,
    resolve,
    snapshot_for,
    snapshot_json,
)
from tracker.reports.render import Document, render
from tracker.store.database import connect
from tracker.store.heads import HeadStore
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState

REPO = "NVIDIA/Megatron-LM"
TODAY = date(2026, 10, 5)
FILES = {
    1: ["megatron/core/inference/kv_cache.py"],
    2: ["megatron/core/dist_checkpointing/load.py"],
    3: ["megatron/core/allocator.py"],
    4: ["tests/unit_tests/test_scheduler.py"],
    5: ["megatron/core/datasets/loader.py"],
}


def shanghai(month: int, day: int, hour: int = 12) -> datetime:
    """A local time in Asia/Shanghai (UTC+8, no daylight saving), as a UTC datetime."""
    return datetime(2026, month, day, hour, tzinfo=UTC) - timedelta(hours=8)


@pytest.fixture
def tracker(tmp_path: Path) -> Iterator[Tracker]:
    engine = connect(f"sqlite:///{tmp_path / 'l.sqlite3'}")
    try:
        yield Tracker(Ledger(engine), MonthState(engine), HeadStore(engine), TrackerConfig())
    finally:
        engine.dispose()


def september() -> list[factory.Delivery]:
    """Four PRs of September 2026 (Asia/Shanghai):

    1. opened Sep 2 on dev, pushed Sep 5, retargeted to main on Sep 20: open, active;
    2. opened Sep 3 on main, merged Sep 10;
    3. opened Sep 4, closed without merge Sep 8;
    4. opened Sep 6, only a test file: test_only.
    """
    first = PullRequestStory(1, shanghai(9, 2), repo=REPO, base="dev", title="Add a paged KV cache")
    first.opened().pushed(shanghai(9, 5))
    first.base = "main"
    first.retitled(shanghai(9, 20), "Add a paged KV cache")
    stories = [
        first,
        PullRequestStory(2, shanghai(9, 3), repo=REPO, title="Fix checkpoint loading").opened().merged(shanghai(9, 10)),
        PullRequestStory(3, shanghai(9, 4), repo=REPO, title="Try another allocator").opened().closed(shanghai(9, 8)),
        PullRequestStory(4, shanghai(9, 6), repo=REPO, title="Cover the scheduler with tests").opened(),
    ]
    return [d for story in stories for d in story.deliveries]


@pytest.fixture
def filled(tracker: Tracker) -> Tracker:
    tracker.deliver(september())
    tracker.give_files(FILES)
    return tracker


def cited(report: Report) -> list[str]:
    return [c.label for section in report.sections for change in section.changes for c in change.citations]


# --- resolve ------------------------------------------------------------------------------------


def test_an_unknown_repository_is_named(tracker: Tracker) -> None:
    with pytest.raises(UnknownRepository) as caught:
        resolve(tracker, "acme/widgets", "2026-09", None, today=TODAY)
    assert "acme/widgets" in str(caught.value)
    assert str(caught.value).startswith("no deliveries have been received for acme/widgets")
    assert "ledger" in str(caught.value)  # where it looked
    assert isinstance(caught.value, LookupError)


@needs_shared
def test_another_repository_stays_unknown_once_one_is_known(filled: Tracker) -> None:
    with pytest.raises(UnknownRepository, match="NVIDIA/Megatron"):
        resolve(filled, "NVIDIA/Megatron", "2026-09", None, today=TODAY)


@needs_shared
@pytest.mark.parametrize("month", ["2026-13", "26-09", "current-ish", "2026-00", "2026-9", "September", ""])
def test_a_bad_month_is_a_window_error(filled: Tracker, month: str) -> None:
    with pytest.raises(WindowError, match="is not a month"):
        resolve(filled, REPO, month, None, today=TODAY)


@needs_shared
@pytest.mark.parametrize(
    ("cutoff", "message"),
    [
        ("2026-10-01", "cutoff 2026-10-01 is outside 2026-09: give a day from 2026-09-01 to 2026-09-30"),
        ("2026-08-31", "cutoff 2026-08-31 is outside 2026-09: give a day from 2026-09-01 to 2026-09-30"),
        ("2026-09-31", "cutoff '2026-09-31' is not a real day"),
        ("13/09/2026", "cutoff '13/09/2026' is not a day: use YYYY-MM-DD, for example 2026-09-13"),
    ],
)
def test_a_cutoff_outside_the_month_is_a_window_error(filled: Tracker, cutoff: str, message: str) -> None:
    with pytest.raises(WindowError) as caught:
        resolve(filled, REPO, "2026-09", cutoff, today=TODAY)
    assert str(caught.value) == message


@needs_shared
def test_a_month_or_cutoff_in_the_future_is_a_window_error(filled: Tracker) -> None:
    with pytest.raises(WindowError, match="has not started yet"):
        resolve(filled, REPO, "2026-11", None, today=TODAY)
    with pytest.raises(WindowError, match="is in the future"):
        resolve(filled, REPO, "2026-10", "2026-10-06", today=TODAY)


@needs_shared
@pytest.mark.parametrize(
    "asked", ["NVIDIA/Megatron-LM", "nvidia/megatron-lm", "NVIDIA/MEGATRON-LM", "nViDiA/MeGaTrOn-Lm"]
)
def test_a_repository_resolves_to_its_stored_spelling_whatever_the_case(filled: Tracker, asked: str) -> None:
    request = resolve(filled, asked, "2026-09", "2026-09-13", today=TODAY)
    assert request.repo == "NVIDIA/Megatron-LM"
    assert request.window.cutoff == date(2026, 9, 13)
    assert request.window.timezone == "Asia/Shanghai"
    # Local midnight of Sep 1 to local midnight after Sep 13, Asia/Shanghai being UTC+8.
    assert (request.window.start, request.window.end) == (utc(2026, 8, 31, 16), utc(2026, 9, 13, 16))
    assert request.window.final is False


@needs_shared
def test_a_past_month_defaults_to_its_final_day(filled: Tracker) -> None:
    request = resolve(filled, REPO, "2026-09", None, today=TODAY)
    assert request.window.cutoff == date(2026, 9, 30)
    assert request.window.final is True
    assert (request.window.start, request.window.end) == (utc(2026, 8, 31, 16), utc(2026, 9, 30, 16))


@needs_shared
def test_current_is_the_month_of_today_up_to_today(filled: Tracker) -> None:
    request = resolve(filled, REPO, "current", None, today=date(2026, 9, 13))
    assert str(request.window.month) == "2026-09"
    assert request.window.cutoff == date(2026, 9, 13)
    assert request.window.final is False
    assert (request.window.start, request.window.end) == (utc(2026, 8, 31, 16), utc(2026, 9, 13, 16))


@needs_shared
def test_current_with_an_explicit_cutoff(filled: Tracker) -> None:
    request = resolve(filled, REPO, "current", "2026-09-02", today=date(2026, 9, 13))
    assert request.window.cutoff == date(2026, 9, 2)
    assert request.window.end == utc(2026, 9, 2, 16)


@needs_shared
def test_current_uses_the_time_zone_configured_for_the_repository(filled: Tracker) -> None:
    config = TrackerConfig(repositories={"nvidia/megatron-lm": RepositoryConfig(timezone="UTC")})
    request = resolve(replace(filled, config=config), REPO, "current", None, today=date(2026, 10, 1))
    assert str(request.window.month) == "2026-10"
    assert request.window.timezone == "UTC"
    assert (request.window.start, request.window.end) == (utc(2026, 10, 1), utc(2026, 10, 2))


@needs_shared
def test_current_on_the_last_day_while_it_runs_is_partial(filled: Tracker) -> None:
    request = resolve(filled, REPO, "current", None, today=date(2026, 9, 30))
    assert request.window.cutoff == date(2026, 9, 30)
    assert request.window.final is False


def test_the_last_day_at_noon_is_titled_through_and_final_the_next_day(filled: Tracker) -> None:
    # Noon on September 30 in Shanghai: the day has not ended, so the report is not final yet.
    noon = resolve(filled, REPO, "current", None, today=date(2026, 9, 30))
    report = report_for(filled, noon)
    english = render(report, "md", "en").splitlines()[0]
    chinese = render(report, "md", "zh-CN").splitlines()[0]
    assert english.endswith("— September 2026 (through September 30, 2026)"), english
    assert chinese.endswith("（截至2026-09-30）") and "最终版" not in chinese, chinese
    assert json.loads(render(report, "json", "en"))["final"] is False
    # October 1: the same month through the same day is the final report.
    after = resolve(filled, REPO, "2026-09", "2026-09-30", today=date(2026, 10, 1))
    final = report_for(filled, after)
    assert render(final, "md", "en").splitlines()[0].endswith("(Final, through September 30, 2026)")
    assert render(final, "md", "zh-CN").splitlines()[0].endswith("（最终版，截至2026-09-30）")


# --- snapshots and reports from the ledger ------------------------------------------------------


@needs_shared
def test_load_snapshot_at_a_partial_cutoff(filled: Tracker) -> None:
    snapshot = load_snapshot(filled, "nvidia/megatron-lm", "2026-09", "2026-09-13", today=TODAY)
    document = snapshot.as_dict()
    assert document["repo"] == "NVIDIA/Megatron-LM"
    assert (document["month"], document["cutoff"], document["final"]) == ("2026-09", "2026-09-13", False)
    # Opened: 1, 2, 3 (4 is test-only); merged: 2; closed without merge: 3; active: 1.
    assert document["stats"] == {"opened": 3, "merged": 1, "closed_unmerged": 1, "active_at_cutoff": 1}
    assert document["excluded"] == {"test_only": 1, "ci_only": 0, "test_ci_only": 0, "format_only": 0}
    assert document["pending_classification"] == 0
    prs = {pr["number"]: pr for pr in document["pull_requests"]}
    assert sorted(prs) == [1, 2, 3, 4]
    assert {n: pr["state_at_cutoff"] for n, pr in prs.items()} == {1: "open", 2: "merged", 3: "closed", 4: "open"}
    assert {n: pr["category"] for n, pr in prs.items()} == {
        1: "substantive",
        2: "substantive",
        3: "substantive",
        4: "test_only",
    }
    assert prs[1]["base_ref"] == "dev"  # retargeted to main only on Sep 20
    assert prs[1]["activity"] == {
        "opened": True,
        "committed": True,
        "closed": False,
        "reopened": False,
        "merged": False,
    }
    assert prs[2]["merged_at"] == "2026-09-10T04:00:00Z"
    assert prs[4]["evidence"]["rule"] == "all_files_test"


@needs_shared
def test_load_snapshot_of_the_final_day(filled: Tracker) -> None:
    snapshot = load_snapshot(filled, REPO, "2026-09", None, today=TODAY)
    document = snapshot.as_dict()
    assert (document["cutoff"], document["final"]) == ("2026-09-30", True)
    assert {pr["number"]: pr["base_ref"] for pr in document["pull_requests"]} == {
        1: "main",
        2: "main",
        3: "main",
        4: "main",
    }


@needs_shared
def test_a_month_without_activity_is_empty(filled: Tracker) -> None:
    snapshot = load_snapshot(filled, REPO, "2026-08", None, today=TODAY)
    assert snapshot.pull_requests == ()
    assert snapshot.stats.as_dict() == {"opened": 0, "merged": 0, "closed_unmerged": 0, "active_at_cutoff": 0}


@needs_shared
def test_snapshot_for_is_load_snapshot_of_the_resolved_request(filled: Tracker) -> None:
    request = resolve(filled, "NVIDIA/megatron-LM", "2026-09", "2026-09-13", today=TODAY)
    by_request = snapshot_for(filled, request)
    by_name = load_snapshot(filled, REPO, "2026-09", "2026-09-13", today=TODAY)
    assert by_request == by_name
    assert snapshot_json(by_request) == snapshot_json(by_name)
    assert json.loads(snapshot_json(by_request))["repo"] == "NVIDIA/Megatron-LM"


@pytest.mark.parametrize("cutoff", ["2026-09-05", "2026-09-13", None])
def test_the_numbers_read_without_bodies_and_paths_are_those_of_the_whole_read(
    filled: Tracker, cutoff: str | None
) -> None:
    """`snapshot_for` reads no body and no changed path (the numbers need neither): its snapshot is the one
    the report's whole read folds, but for the bodies it left empty."""
    body = "## What does this PR do?\n\nAdds a paged KV cache, as #2 began."
    opened = factory.pr_payload("opened", 9, created_at=shanghai(9, 3), repo=REPO, body=body, head_sha="9" * 40)
    filled.deliver([factory.delivery("pull_request", opened, "described-9")])
    filled.give_files({9: ["megatron/core/inference/kv_cache.py"]})
    request = resolve(filled, REPO, "2026-09", cutoff, today=TODAY)
    whole = filled.state.month_inputs(REPO, "2026-09", request.window.end)
    assert any(version.body for version in whole.versions.values()) and whole.paths
    folded = build_snapshot(
        REPO, request.window, whole.timelines, whole.versions, whole.verdicts, filled.config.rules_for(REPO),
        whole.unavailable, window_coverage_of(filled.history, REPO, request.window),
    )  # fmt: skip
    numbers = snapshot_for(filled, request)
    assert snapshot_json(numbers) == snapshot_json(folded)
    assert [pr.version.body if pr.version else "" for pr in numbers.pull_requests] == [""] * len(numbers.pull_requests)


@needs_shared
def test_report_for_cites_the_base_branch_at_the_cutoff(filled: Tracker) -> None:
    partial = report_for(filled, resolve(filled, REPO, "2026-09", "2026-09-13", today=TODAY))
    final = report_for(filled, resolve(filled, REPO, "2026-09", None, today=TODAY))
    # Delivered: 2; In Progress: 1. Neither 3 (closed without merge) nor 4 (test-only) is narrated.
    assert [section.id for section in partial.sections] == ["delivered", "in_progress"]
    assert [[change.id for change in section.changes] for section in partial.sections] == [["change-2"], ["change-1"]]
    assert cited(partial) == ["main #2", "dev #1"]
    assert cited(final) == ["main #2", "main #1"]
    assert [change.title for section in partial.sections for change in section.changes] == [
        "Fix checkpoint loading",
        "Add a paged KV cache",
    ]
    assert partial.themed is False
    assert len(partial.days) == 13 and len(final.days) == 30


@needs_shared
def test_report_for_renders_the_same_bytes_each_time(filled: Tracker) -> None:
    request = resolve(filled, REPO, "2026-09", "2026-09-13", today=TODAY)
    for fmt, lang in [("md", "en"), ("md", "zh-CN"), ("html", "en"), ("json", "en")]:
        first = render(report_for(filled, request), fmt, lang)
        assert first == render(report_for(filled, request), fmt, lang)
    markdown = render(report_for(filled, request), "md", "en")
    assert "([dev #1](https://github.com/NVIDIA/Megatron-LM/pull/1))" in markdown
    assert "([main #2](https://github.com/NVIDIA/Megatron-LM/pull/2))" in markdown


@needs_shared
def test_pending_files_then_their_arrival(tracker: Tracker) -> None:
    tracker.deliver(PullRequestStory(7, shanghai(9, 9), repo=REPO, title="Tune the loader").opened().deliveries)
    before = load_snapshot(tracker, REPO, "2026-09", "2026-09-13", today=TODAY)
    assert before.pending_classification == 1
    assert before.stats.opened == 0
    assert before.pull_requests[0].category.value == "pending"
    tracker.give_files({7: ["megatron/core/datasets/loader.py"]})
    after = load_snapshot(tracker, REPO, "2026-09", "2026-09-13", today=TODAY)
    assert after.pending_classification == 0
    assert after.stats.opened == 1


# --- the render cache ---------------------------------------------------------------------------


def render_keys(redis: Redis) -> set[bytes]:
    return set(redis.scan_iter(match="tracker:render:*"))


@needs_shared
def test_a_rendered_report_is_cached_and_served_from_the_cache(filled: Tracker, redis: Redis) -> None:
    request = resolve(filled, REPO, "2026-09", "2026-09-13", today=TODAY)
    assert render_keys(redis) == set()
    first = rendered(filled, request, Document("md", "en"), cache=redis)
    assert first == render(report_for(filled, request), "md", "en")
    (key,) = render_keys(redis)
    assert redis.get(key) == first.encode("utf-8")
    assert 0 < redis.ttl(key) <= 24 * 3600

    # The second answer comes from that key: put a marker there and it is what comes back.
    redis.set(key, b"served from the cache\n", keepttl=True)
    assert rendered(filled, request, Document("md", "en"), cache=redis) == "served from the cache\n"
    assert render_keys(redis) == {key}

    # Another format or language is another key.
    rendered(filled, request, Document("json", "en"), cache=redis)
    rendered(filled, request, Document("md", "zh-CN"), cache=redis)
    assert len(render_keys(redis)) == 3


@needs_shared
def test_a_new_delivery_for_the_month_is_never_served_stale(filled: Tracker, redis: Redis) -> None:
    request = resolve(filled, REPO, "2026-09", "2026-09-13", today=TODAY)
    first = rendered(filled, request, Document("md", "en"), cache=redis)
    assert (
        "- Substantive PR activity after filtering: opened 3; merged 1; closed without merge 1; active at cutoff 1."
        in (first.splitlines())
    )
    (key,) = render_keys(redis)
    redis.set(key, b"stale\n", keepttl=True)

    # A PR opened on Sep 9: the month changed, so the cached text is not served.
    filled.deliver(PullRequestStory(5, shanghai(9, 9), repo=REPO, title="Speed up the data loader").opened().deliveries)
    second = rendered(filled, request, Document("md", "en"), cache=redis)
    assert second != "stale\n"
    assert second != first
    assert second == rendered(filled, request, Document("md", "en"), cache=None)
    assert "- Awaiting file classification (not yet counted): 1." in second.splitlines()

    # Its files arrive: the month changed again.
    filled.give_files({5: FILES[5]})
    third = rendered(filled, request, Document("md", "en"), cache=redis)
    assert third not in (first, second)
    assert third == rendered(filled, request, Document("md", "en"), cache=None)
    assert (
        "- Substantive PR activity after filtering: opened 4; merged 1; closed without merge 1; active at cutoff 2."
        in (third.splitlines())
    )
    assert "[main #5](https://github.com/NVIDIA/Megatron-LM/pull/5)" in third
    assert not any(line.startswith("- Awaiting") for line in third.splitlines())


@needs_shared
def test_a_new_ledger_generation_is_never_served_stale(filled: Tracker, redis: Redis) -> None:
    request = resolve(filled, REPO, "2026-09", "2026-09-13", today=TODAY)
    first = rendered(filled, request, Document("json", "en"), cache=redis)
    (key,) = render_keys(redis)
    redis.set(key, b"stale\n", keepttl=True)
    filled.state.new_generation()  # what a rebuild does
    assert rendered(filled, request, Document("json", "en"), cache=redis) == first
    assert len(render_keys(redis)) == 2


@needs_shared
def test_another_cutoff_is_another_key(filled: Tracker, redis: Redis) -> None:
    partial = resolve(filled, REPO, "2026-09", "2026-09-13", today=TODAY)
    final = resolve(filled, REPO, "2026-09", None, today=TODAY)
    at_13th = rendered(filled, partial, Document("md", "en"), cache=redis)
    at_30th = rendered(filled, final, Document("md", "en"), cache=redis)
    assert at_13th.splitlines()[0].endswith("(through September 13, 2026)")
    assert at_30th.splitlines()[0].endswith("(Final, through September 30, 2026)")
    assert len(render_keys(redis)) == 2


@needs_shared
def test_without_a_cache_nothing_is_stored(filled: Tracker, redis: Redis) -> None:
    request = MonthRequest("NVIDIA/Megatron-LM", resolve(filled, REPO, "2026-09", None, today=TODAY).window)
    text = rendered(filled, request, Document("md", "zh-CN"))
    assert text.splitlines()[0] == "# Megatron-LM 月度活动报告 — 2026年9月（最终版，截至2026-09-30）"
    assert render_keys(redis) == set()


@needs_shared
def test_the_json_document_is_cached_once_for_every_language(filled: Tracker, redis: Redis) -> None:
    request = resolve(filled, REPO, "2026-09", "2026-09-13", today=TODAY)
    english = rendered(filled, request, Document("json", "en"), cache=redis)
    chinese = rendered(filled, request, Document("json", "zh-CN"), cache=redis)
    assert english == chinese
    assert len(render_keys(redis)) == 1


@needs_shared
def test_the_cache_keeps_at_most_its_bound_dropping_the_least_recently_used(
    filled: Tracker, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracker.reports import cache

    monkeypatch.setattr(cache, "MAX_ENTRIES", 3)
    requests = [resolve(filled, REPO, "2026-09", f"2026-09-{day:02d}", today=TODAY) for day in (1, 2, 3)]
    key_of = []
    for request in requests:
        before = render_keys(redis)
        rendered(filled, request, Document("md", "en"), cache=redis)
        (new,) = render_keys(redis) - before
        key_of.append(new)
    assert render_keys(redis) == set(key_of)
    # Use the 1st again, then render a 4th cutoff: the 2nd, least recently used, is dropped.
    rendered(filled, requests[0], Document("md", "en"), cache=redis)
    fourth = resolve(filled, REPO, "2026-09", "2026-09-04", today=TODAY)
    rendered(filled, fourth, Document("md", "en"), cache=redis)
    after = render_keys(redis)
    assert len(after) == 3
    assert set(key_of) - after == {key_of[1]}
    assert redis.zcard(cache.INDEX) == 3
    for key in render_keys(redis):
        assert 0 < redis.ttl(key) <= cache.CACHE_SECONDS  # every entry expires


@needs_shared
def test_an_entry_larger_than_the_bound_is_not_kept(
    filled: Tracker, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracker.reports import cache

    monkeypatch.setattr(cache, "MAX_ENTRY_BYTES", 100)
    request = resolve(filled, REPO, "2026-09", "2026-09-13", today=TODAY)
    text = rendered(filled, request, Document("md", "en"), cache=redis)
    assert len(text.encode()) > 100
    assert render_keys(redis) == set()


@needs_shared
def test_text_rendered_by_other_code_is_never_served(
    filled: Tracker, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracker.reports import cache

    request = resolve(filled, REPO, "2026-09", "2026-09-13", today=TODAY)
    rendered(filled, request, Document("md", "en"), cache=redis)
    (old,) = render_keys(redis)
    redis.set(old, b"rendered by the previous release", keepttl=True)
    monkeypatch.setattr(cache, "CODE", "the templates or the core changed")
    text = rendered(filled, request, Document("md", "en"), cache=redis)
    assert text == render(report_for(filled, request), "md", "en")
    assert len(render_keys(redis)) == 2


def test_the_code_fingerprint_covers_the_templates() -> None:
    from tracker.reports import cache, digests, fingerprint, groupings

    assert fingerprint.code_fingerprint() == fingerprint.CODE  # stable: computed from the files, nothing else
    assert cache.CODE == digests.CODE == groupings.CODE == fingerprint.CODE  # one fingerprint for every cache
    templates = {path.name for path in (Path(cache.__file__).parent / "templates").glob("*.j2")}
    languages = ("en.md", "zh-CN.md", "html")
    assert templates == {f"{kind}.{language}.j2" for kind in ("report", "group") for language in languages}


@pytest.mark.parametrize(
    "changed",
    [
        "reports/templates/report.en.md.j2",
        "reports/templates/group.html.j2",
        "core/titles.py",
        "store/month_digest.py",
        "history/store.py",
        "records/finalize.py",
        "narration/prose.py",
    ],
)
def test_a_change_to_any_source_of_a_report_changes_the_fingerprint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changed: str
) -> None:
    import shutil

    from tracker.reports import fingerprint

    copy = tmp_path / "tracker"
    shutil.copytree(Path(fingerprint.__file__).parent.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fingerprint, "_PACKAGE", copy)
    before = fingerprint.code_fingerprint()
    assert before == fingerprint.CODE
    with (copy / changed).open("a") as source:
        source.write("\n")
    assert fingerprint.code_fingerprint() != before
