"""Retention (`workers.retention`, applied by `workers.jobs.due_work`): GitHub's cached answers unused for
TRACKER_HTTP_CACHE_RETENTION_DAYS and runs finished TRACKER_RUN_RETENTION_DAYS ago are dropped; what the
runs read, and the ledger, are kept."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select, update

from tracker.history.store import DONE, FAILED, RUNNING, HistoryStore
from tracker.services import Services
from tracker.settings import Settings
from tracker.store.http_cache import SqlResponseCache
from tracker.store.ledger import now_ms
from tracker.store.schema import coverage, history_done, history_runs, http_cache
from workers import runtime
from workers.jobs import due_work
from workers.retention import apply_retention

DAY = 86_400_000
REPO = "Octo-Org/Octo-Repo"


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    built = Services.from_settings(settings, redis=False)
    try:
        yield built
    finally:
        built.close()


def age_cache(services: Services, url: str, days: float) -> None:
    with services.state.engine.begin() as conn:
        conn.execute(update(http_cache).where(http_cache.c.url == url).values(used_at=now_ms() - int(days * DAY)))


def cached_urls(services: Services) -> set[str]:
    with services.state.engine.connect() as conn:
        return set(conn.execute(select(http_cache.c.url)).scalars())


def finished_run(history: HistoryStore, start: int, state: str, days_ago: float) -> str:
    run = history.open_run("reconciliation", REPO, start, start + 3600)
    history.finish_pull_request(run.id, 7, "recorded")
    history.update_run(run.id, state=state)
    with history.engine.begin() as conn:
        conn.execute(
            update(history_runs)
            .where(history_runs.c.id == run.id)
            .values(finished_at=None if state == RUNNING else now_ms() - int(days_ago * DAY))
        )
    history.add_coverage(REPO, "reconciliation", start, start + 3600)
    return run.id


def test_cached_answers_unused_past_the_retention_are_dropped(services: Services) -> None:
    cache = SqlResponseCache(services.state.engine)
    for url in ("https://api.github.com/old", "https://api.github.com/recent", "https://api.github.com/used"):
        cache.put(url, f'"{url}"', None, b"[]")
    age_cache(services, "https://api.github.com/old", 31)
    age_cache(services, "https://api.github.com/recent", 29)
    age_cache(services, "https://api.github.com/used", 40)
    assert cache.get("https://api.github.com/used") == ('"https://api.github.com/used"', None, b"[]")  # used again
    assert apply_retention(services) == "1 cached GitHub answers"
    assert cached_urls(services) == {"https://api.github.com/recent", "https://api.github.com/used"}
    assert apply_retention(services) == ""  # nothing older left


def test_a_cached_answer_is_marked_used_at_most_once_a_day(services: Services) -> None:
    cache = SqlResponseCache(services.state.engine)
    cache.put("https://api.github.com/x", '"e"', None, b"{}")
    age_cache(services, "https://api.github.com/x", 0.5)
    cache.get("https://api.github.com/x")
    with services.state.engine.connect() as conn:
        used = conn.execute(select(http_cache.c.used_at)).scalar_one()
    assert now_ms() - used > 0.4 * DAY  # half a day old: not written again


def test_runs_finished_past_the_retention_are_dropped_with_their_checkpoints(services: Services) -> None:
    history = services.history
    old_done = finished_run(history, 1_000_000, DONE, 91)
    old_failed = finished_run(history, 2_000_000, FAILED, 100)
    recent = finished_run(history, 3_000_000, DONE, 10)
    running = finished_run(history, 4_000_000, RUNNING, 0)
    assert apply_retention(services) == "2 finished history runs"
    assert {run.id for run in history.runs(REPO)} == {recent, running}
    with services.state.engine.connect() as conn:
        assert set(conn.execute(select(history_done.c.run_id)).scalars()) == {recent, running}
        assert conn.execute(select(func.count()).select_from(coverage)).scalar_one() == 4  # what they read stays
    assert old_done not in {run.id for run in history.runs()} and old_failed not in {run.id for run in history.runs()}


def test_zero_days_keeps_everything(settings: Settings) -> None:
    keep = settings.model_copy(update={"http_cache_retention_days": 0, "run_retention_days": 0})
    built = Services.from_settings(keep, redis=False)
    try:
        SqlResponseCache(built.state.engine).put("https://api.github.com/old", '"e"', None, b"{}")
        age_cache(built, "https://api.github.com/old", 3650)
        finished_run(built.history, 1_000_000, DONE, 3650)
        assert apply_retention(built) == ""
        assert cached_urls(built) == {"https://api.github.com/old"}
        assert len(built.history.runs()) == 1
    finally:
        built.close()


def test_the_settings_and_their_defaults(monkeypatch: pytest.MonkeyPatch, no_tracker_environment: None) -> None:
    assert (Settings().http_cache_retention_days, Settings().run_retention_days) == (30, 90)
    monkeypatch.setenv("TRACKER_HTTP_CACHE_RETENTION_DAYS", "7")
    monkeypatch.setenv("TRACKER_RUN_RETENTION_DAYS", "0")
    assert (Settings().http_cache_retention_days, Settings().run_retention_days) == (7, 0)
    monkeypatch.setenv("TRACKER_RUN_RETENTION_DAYS", "-1")
    with pytest.raises(ValueError, match="TRACKER_RUN_RETENTION_DAYS"):
        Settings()


def test_the_schedule_applies_the_retention(services: Services, github: Any) -> None:
    SqlResponseCache(services.state.engine).put("https://api.github.com/old", '"e"', None, b"{}")
    age_cache(services, "https://api.github.com/old", 60)
    runtime.install(services)
    try:
        summary = due_work()
    finally:
        runtime.install(None)
    assert summary.endswith("; dropped 1 cached GitHub answers")
    assert cached_urls(services) == set()
