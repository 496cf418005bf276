"""`tracker/history/store.py` (observations, runs and their checkpoints, coverage) on each test
database, with the fact identity of `tracker.store.month_state` and the derived-schema check of
`tracker.store.database` that makes `Services.from_settings` ask for `tracker rebuild`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete, select, update

from bench.fixtures.factory import delivery, pr_payload
from bench.fixtures.paths import needs_shared
from tests.support.clock import utc
from tracker.core.derive import derive
from tracker.history.derive import (
    BACKFILL,
    RECONCILIATION,
    History,
    derive_history,
    observation_document,
    observation_id,
)
from tracker.history.store import DONE, FAILED, QUEUED, RUNNING, WAITING, HistoryStore
from tracker.services import Services
from tracker.settings import SettingsError, load_settings
from tracker.store.database import derived_schema_outdated
from tracker.store.month_state import MonthState, write_derivations
from tracker.store.schema import DERIVED_TABLES, ledger_meta, observations, pr_facts

REPO = "Octo-Org/Octo-Repo"
KEY = "octo-org/octo-repo"
HEAD = "c" * 40
BASE = "b" * 40


MAY = (utc("2026-05-01T00:00:00Z"), utc("2026-06-01T00:00:00Z"))
CREATED, PUSHED, COMMITTED = "2026-05-04T02:00:00Z", "2026-05-06T10:00:00Z", "2026-05-06T09:00:00Z"


@pytest.fixture
def history(engine: Engine) -> HistoryStore:
    return HistoryStore(engine)


def observed(source: str = BACKFILL, title: str = "Faster data loader") -> tuple[str, bytes, History]:
    """PR #7 as a backfill reads it: opened May 4, one commit (HEAD) dated May 6 09:00."""
    pr = {
        "number": 7,
        "title": title,
        "created_at": CREATED,
        "updated_at": "2026-05-08T00:00:00Z",
        "user": {"login": "octocat"},
        "base": {"ref": "main", "sha": BASE},
        "head": {"ref": "loader", "sha": HEAD},
    }
    timeline = [{"event": "committed", "sha": HEAD, "committer": {"date": COMMITTED}}]
    document = observation_document(REPO, MAY, pr, timeline)
    oid = observation_id(source, REPO, 7, document)
    return oid, document, derive_history(oid, document, lambda _name: "UTC")


def record(history: HistoryStore, source: str = BACKFILL, title: str = "Faster data loader") -> bool:
    oid, document, found = observed(source, title)
    return history.record(oid, source, REPO, 7, document, found)


def receive_push(engine: Engine, pushed: str = PUSHED) -> None:
    """What the worker writes for a webhook `synchronize` delivery that pushed HEAD at `pushed`."""
    payload = pr_payload("synchronize", 7, created_at=CREATED, updated_at=pushed, repo=REPO, head_sha=HEAD)
    item = delivery("pull_request", payload, f"push-{pushed}")
    derived = derive(item.delivery_id, "application/json", item.body, lambda _name: "UTC")
    with engine.begin() as conn:
        write_derivations(conn, [(item.delivery_id, derived)])


def rows(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    with engine.connect() as conn:
        return {
            table.name: sorted(tuple(row) for row in conn.execute(select(table)))
            for table in (*DERIVED_TABLES, observations)
        }


def fact_rows(engine: Engine) -> set[tuple[str, str, int, int, str]]:
    with engine.connect() as conn:
        found = conn.execute(
            select(pr_facts.c.kind, pr_facts.c.ident, pr_facts.c.at, pr_facts.c.rank, pr_facts.c.source)
        )
        return {(row.kind, row.ident, row.at, row.rank, row.source) for row in found}


# --- observations ---------------------------------------------------------------------------------


def test_record_keeps_the_observation_and_its_facts_with_their_source(engine: Engine, history: HistoryStore) -> None:
    assert record(history) is True
    assert fact_rows(engine) == {
        ("opened", str(utc(CREATED)), utc(CREATED), 1, BACKFILL),
        ("commit", HEAD, utc(COMMITTED), 2, BACKFILL),
    }
    with engine.connect() as conn:
        stored = conn.execute(select(observations)).one()
    assert (stored.repo, stored.number, stored.source) == (KEY, 7, BACKFILL)
    assert json.loads(stored.document)["pull_request"]["title"] == "Faster data loader"
    assert history.observation_count() == 1
    assert MonthState(engine).repository_name(KEY) == REPO


def test_recording_the_same_document_twice_changes_nothing(engine: Engine, history: HistoryStore) -> None:
    assert record(history) is True
    before = rows(engine)
    assert record(history) is False
    assert rows(engine) == before  # not even a month's version moved


def test_a_changed_pr_is_a_new_observation(engine: Engine, history: HistoryStore) -> None:
    record(history)
    assert record(history, title="Faster data loader, v2") is True
    assert history.observation_count() == 2


@needs_shared
def test_a_webhooks_push_and_the_backfills_commit_are_two_reports_of_one_fact(
    engine: Engine, history: HistoryStore
) -> None:
    receive_push(engine)
    record(history)
    commits = {row for row in fact_rows(engine) if row[0] == "commit"}
    assert commits == {("commit", HEAD, utc(PUSHED), 0, "webhook"), ("commit", HEAD, utc(COMMITTED), 2, BACKFILL)}
    inputs = MonthState(engine).month_inputs(REPO, "2026-05", MAY[1])
    assert [(f.kind.value, f.at) for f in sorted(inputs.timelines[7], key=lambda f: f.at)] == [
        ("opened", utc(CREATED)),
        ("commit", utc(PUSHED)),  # the webhook's time, not the earlier commit date
    ]


# --- runs and their checkpoints -------------------------------------------------------------------


def test_a_new_run(history: HistoryStore) -> None:
    run = history.open_run(BACKFILL, REPO, *MAY)
    assert run.id == f"backfill:{KEY}:{MAY[0]}"  # named by its start: see the next test
    assert (run.full_name, run.kind, run.range_start, run.range_end) == (REPO, BACKFILL, *MAY)
    assert (run.state, run.total, run.done, run.requests, run.not_modified) == (RUNNING, 0, 0, 0, 0)
    assert run.finished_at is None
    assert history.open_run(BACKFILL, REPO, MAY[0] + 86400, MAY[1]).id != run.id  # another start, another run
    assert history.open_run(RECONCILIATION, REPO, *MAY).id != run.id


def test_a_range_that_ends_now_is_the_same_run_when_asked_again_later(history: HistoryStore) -> None:
    first = history.open_run(BACKFILL, REPO, MAY[0], MAY[1] - 60)
    history.finish_pull_request(first.id, 11, "recorded")
    again = history.open_run(BACKFILL, REPO, MAY[0], MAY[1])  # a minute later: resumed, reaching further
    assert again.id == first.id and again.range_end == MAY[1]
    assert history.finished_numbers(again.id) == {11}
    assert history.open_run(BACKFILL, REPO, MAY[0], MAY[1] - 3600).range_end == MAY[1]  # never shrinks


def test_an_interrupted_run_resumes_with_its_finished_prs(history: HistoryStore) -> None:
    run = history.open_run(BACKFILL, REPO, *MAY, state=QUEUED)
    assert run.state == QUEUED
    history.update_run(run.id, state=RUNNING, total=5, requests=4)
    history.finish_pull_request(run.id, 11, "recorded")
    history.finish_pull_request(run.id, 12, "unchanged")
    history.update_run(run.id, state=WAITING, detail="rate limited")
    resumed = history.open_run(BACKFILL, REPO, *MAY)
    assert resumed.id == run.id
    assert (resumed.state, resumed.total, resumed.done, resumed.requests) == (RUNNING, 5, 2, 4)
    assert history.finished_numbers(run.id) == {11, 12}


def test_a_finished_run_starts_again_from_nothing(history: HistoryStore) -> None:
    run = history.open_run(BACKFILL, REPO, *MAY)
    history.update_run(run.id, total=2, requests=3, not_modified=1)
    history.finish_pull_request(run.id, 11, "recorded")
    history.finish_pull_request(run.id, 12, "gone")
    history.update_run(run.id, state=DONE, detail="deleted on GitHub: #12")
    done = history.run(run.id)
    assert done is not None and done.state == DONE and done.finished_at is not None
    again = history.open_run(BACKFILL, REPO, *MAY, state=QUEUED)
    assert (again.state, again.total, again.done, again.requests, again.not_modified) == (QUEUED, 0, 0, 0, 0)
    assert (again.finished_at, again.detail) == (None, None)
    assert history.finished_numbers(run.id) == set() and history.outcomes(run.id) == {}


def test_a_pr_finished_twice_counts_once(history: HistoryStore) -> None:
    run = history.open_run(BACKFILL, REPO, *MAY)
    history.finish_pull_request(run.id, 11, "recorded")
    history.finish_pull_request(run.id, 11, "unchanged")
    history.finish_pull_request(run.id, 12, "gone")
    found = history.run(run.id)
    assert found is not None and found.done == 2
    assert history.outcomes(run.id) == {11: "recorded", 12: "gone"}


def test_update_run_adds_requests_and_sets_the_rest(history: HistoryStore) -> None:
    run = history.open_run(BACKFILL, REPO, *MAY)
    history.update_run(run.id, requests=3)
    history.update_run(run.id, requests=4, not_modified=2, total=9)
    history.update_run(run.id, requests=0, not_modified=1)
    found = history.run(run.id)
    assert found is not None
    assert (found.requests, found.not_modified, found.total, found.state) == (7, 3, 9, RUNNING)
    history.update_run(run.id, state=FAILED, detail="HTTPError: 422")
    failed = history.run(run.id)
    assert failed is not None and failed.finished_at is not None and failed.detail == "HTTPError: 422"
    assert failed.as_dict()["progress"] == {"done": 0, "total": 9}


def test_runs_are_listed_per_repository(history: HistoryStore) -> None:
    mine = history.open_run(BACKFILL, REPO, *MAY)
    history.open_run(BACKFILL, "someone/else", *MAY)
    assert [run.id for run in history.runs(KEY)] == [mine.id]
    assert len(history.runs()) == 2


# --- coverage -------------------------------------------------------------------------------------


def test_coverage_intervals_grow_and_say_what_read_them(history: HistoryStore) -> None:
    history.add_coverage(REPO, BACKFILL, MAY[0], utc("2026-05-10T00:00:00Z"))
    history.add_coverage(KEY, BACKFILL, MAY[0], utc("2026-05-20T00:00:00Z"))  # the same run, later
    history.add_coverage(REPO, BACKFILL, MAY[0], utc("2026-05-15T00:00:00Z"))  # never shrinks
    history.add_coverage(REPO, RECONCILIATION, utc("2026-05-25T00:00:00Z"), utc("2026-05-26T00:00:00Z"))
    history.add_coverage(REPO, RECONCILIATION, utc("2026-05-27T00:00:00Z"), utc("2026-05-27T00:00:00Z"))  # empty
    history.add_coverage("someone/else", BACKFILL, MAY[0], MAY[1])
    assert history.intervals(REPO, MAY[1]) == [
        (BACKFILL, MAY[0], utc("2026-05-20T00:00:00Z")),
        (RECONCILIATION, utc("2026-05-25T00:00:00Z"), utc("2026-05-26T00:00:00Z")),
    ]
    assert history.covered_until(REPO, BACKFILL) == utc("2026-05-20T00:00:00Z")
    assert history.covered_until(REPO, RECONCILIATION) == utc("2026-05-26T00:00:00Z")
    assert history.covered_until("nobody/here", RECONCILIATION) is None


@needs_shared
def test_webhooks_cover_from_the_first_instant_one_stamped_until_now(engine: Engine, history: HistoryStore) -> None:
    record(history)  # a backfill is not a webhook: no webhook interval
    now = utc("2026-06-10T00:00:00Z")
    assert history.intervals(REPO, now) == []
    receive_push(engine, "2026-05-12T00:00:00Z")
    receive_push(engine, "2026-05-11T00:00:00Z")  # an older one arriving late moves the start back
    receive_push(engine, "2026-05-13T00:00:00Z")
    history.add_coverage(REPO, BACKFILL, MAY[0], utc("2026-05-11T00:00:00Z"))
    assert history.intervals(REPO, now) == [
        (BACKFILL, MAY[0], utc("2026-05-11T00:00:00Z")),
        ("webhook", utc("2026-05-11T00:00:00Z"), now),
    ]
    assert history.intervals(REPO, utc("2026-05-11T00:00:00Z")) == [(BACKFILL, MAY[0], utc("2026-05-11T00:00:00Z"))]


# --- the derived tables' schema -------------------------------------------------------------------


def forget_schema(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(delete(ledger_meta).where(ledger_meta.c.key == "derived_schema"))


def test_a_fresh_ledger_is_up_to_date(engine: Engine) -> None:
    assert derived_schema_outdated(engine) is False


def test_a_ledger_without_the_mark_or_with_an_old_one_is_outdated_until_rebuilt(engine: Engine) -> None:
    forget_schema(engine)
    assert derived_schema_outdated(engine) is True
    MonthState(engine).drop_and_recreate()
    assert derived_schema_outdated(engine) is True  # emptied, not yet derived again
    MonthState(engine).mark_rebuilt()
    assert derived_schema_outdated(engine) is False
    with engine.begin() as conn:
        conn.execute(update(ledger_meta).where(ledger_meta.c.key == "derived_schema").values(value="0"))
    assert derived_schema_outdated(engine) is True


def test_services_refuse_an_outdated_ledger_and_say_to_rebuild(
    engine: Engine, database_url: str, tmp_path: Path, no_tracker_environment: None
) -> None:
    forget_schema(engine)
    settings = load_settings(data_dir=tmp_path / "var", database_url=database_url)
    with pytest.raises(SettingsError, match="tracker rebuild"):
        Services.from_settings(settings, redis=False)
    built = Services.from_settings(settings, redis=False, outdated_ok=True)  # what `tracker rebuild` opens
    try:
        assert derived_schema_outdated(built.state.engine) is True
    finally:
        built.close()
