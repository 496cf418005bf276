"""Backfill and reconciliation against the fake GitHub: a month read from the REST API is the month
received as webhooks, byte for byte; the two together are still that month; interruptions, rate
limits and deleted PRs neither lose nor repeat work; coverage is said exactly when it is missing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.fake_github import FakeGitHub, Scripted  # noqa: E402
from bench.fixtures.paths import ROOT  # noqa: E402
from bench.fixtures.scenario import REPO, MonthScenario, megatron_month  # noqa: E402
from bench.fixtures.world import publish_world  # noqa: E402
from tests.support.app import SECRET, post, run_jobs, running_app  # noqa: E402
from tests.support.months import Months  # noqa: E402
from tracker.github.client import RateLimited  # noqa: E402
from tracker.github.fetch import fetch_and_store  # noqa: E402
from tracker.history.derive import BACKFILL, RECONCILIATION, history_range  # noqa: E402
from tracker.history.github import END, Target, read_history  # noqa: E402
from tracker.history.jobs import target  # noqa: E402
from tracker.history.store import DONE, WAITING  # noqa: E402
from tracker.reports.loading import report_for, resolve  # noqa: E402
from tracker.reports.render import render  # noqa: E402
from tracker.services import Services  # noqa: E402
from tracker.settings import Settings  # noqa: E402
from tracker.web.context import services  # noqa: E402
from workers.jobs import read_history_job  # noqa: E402

EXAMPLE_CONFIG = ROOT / "examples" / "megatron-lm.yaml"
CUTOFFS = ("2026-05-09", "2026-05-15", "2026-05-31")
FORMATS = (("json", "en"), ("md", "en"), ("md", "zh-CN"), ("html", "en"))
# In one test process: two processes asking for a month at once would leave one waiting for the other's
# delivery (tests/support/months.py).
pytestmark = pytest.mark.xdist_group("backfill")


def documents(s: Services, cutoffs: tuple[str, ...] = CUTOFFS) -> dict[tuple[str, str, str], str]:
    """Every format of May 2026 at each cutoff, rendered afresh (no cache)."""
    found = {}
    for cutoff in cutoffs:
        report = report_for(s, resolve(s, REPO, "2026-05", cutoff))
        for fmt, lang in FORMATS:
            found[(cutoff, fmt, lang)] = render(report, fmt, lang)
    return found


def may(s: Services) -> Target:
    start, end = history_range("2026-05", None, s.config.timezone_for(REPO), int(time.time()))
    return target(s, REPO, start, end)


def backfill(s: Services, **options: Any) -> Any:
    with s.github(REPO) as client:
        return read_history(client, s.history, s.heads, may(s), BACKFILL, **options)


@pytest.fixture
def scenario() -> MonthScenario:
    return megatron_month()


def late_stories(scenario: MonthScenario) -> MonthScenario:
    """The month's PRs that began after May 5 alone: the days before are not covered."""
    late = [
        s
        for s in scenario.stories
        if min(json.loads(d.body)["pull_request"]["updated_at"] for d in s.deliveries) >= "2026-05-05"
    ]
    return MonthScenario(late, scenario.files)


@pytest.fixture
def webhooks(
    months: Months, settings: Settings, github: FakeGitHub, scenario: MonthScenario
) -> Iterator[tuple[Flask, FlaskClient]]:
    """May 2026 received as webhooks (files from the fake GitHub; a copy, for each test, of the month
    delivered once in the session: tests/support/months.py), and its REST view on the fake."""
    shipped = settings.model_copy(update={"config_path": EXAMPLE_CONFIG})
    with running_app(months.copy("may", scenario, shipped, github)) as app:
        heads = {(number, sha): paths for number, sha, paths in scenario.head_files()}
        publish_world(github, scenario.stories, heads)
        yield app, app.test_client()


@pytest.fixture
def world(github: FakeGitHub, scenario: MonthScenario) -> None:
    """May 2026's REST view on the fake GitHub only: what a backfill into `fresh` reads (no webhooks)."""
    publish_world(github, scenario.stories, {(number, sha): paths for number, sha, paths in scenario.head_files()})


@pytest.fixture
def fresh(settings: Settings, tmp_path: Path) -> Iterator[Services]:
    """A second ledger, empty, on SQLite: where the backfill goes."""
    other = settings.model_copy(
        update={
            "config_path": EXAMPLE_CONFIG,
            "database_url": f"sqlite:///{tmp_path / 'backfill.sqlite3'}",
            "data_dir": tmp_path / "backfill",
        }
    )
    built = Services.from_settings(other, redis=False)
    try:
        yield built
    finally:
        built.close()


def test_a_backfilled_month_is_the_month_received_as_webhooks(
    webhooks: tuple[Flask, FlaskClient], fresh: Services, github: FakeGitHub, scenario: MonthScenario
) -> None:
    app, _ = webhooks
    with app.app_context():
        expected = documents(services())
    run = backfill(fresh)
    assert run.state == DONE and run.done == run.total > 0
    got = documents(fresh)
    for key, text in expected.items():
        assert got[key] == text, f"{key} differs between the backfill and the webhooks"
    # Independent of the code under test: the month's PRs are those the scenario merged or opened.
    final = json.loads(got[("2026-05-31", "json", "en")])
    assert final["coverage"] == {"complete": True, "missing": []}
    assert {pr["number"] for pr in final["pull_requests"]} >= {s.number for s in scenario.stories if s._merged_at}


def test_costs_and_a_repeat_is_nearly_all_304(world: None, fresh: Services, github: FakeGitHub) -> None:
    first = backfill(fresh)
    per_pr = first.requests / first.total
    assert per_pr <= 3, f"{per_pr:.2f} requests per PR"
    before = documents(fresh, ("2026-05-31",))
    again = backfill(fresh)
    assert again.state == DONE and again.total == first.total
    assert again.not_modified >= 0.9 * again.requests, (again.requests, again.not_modified)
    assert documents(fresh, ("2026-05-31",)) == before


def test_files_at_the_end_only_complete_the_final_report_and_leave_the_rest_to_the_head_fetcher(
    webhooks: tuple[Flask, FlaskClient], fresh: Services, github: FakeGitHub
) -> None:
    app, _ = webhooks
    with app.app_context():
        expected = documents(services())
    daily_cost = backfill(fresh).requests
    end_only = fresh.settings.model_copy(update={"database_url": fresh.settings.database_url + "-end"})
    other = Services.from_settings(end_only, redis=False)
    try:
        with other.github(REPO) as client:
            run = read_history(client, other.history, other.heads, replace(may(other), files=END), BACKFILL)
        assert run.requests < daily_cost
        final = documents(other, ("2026-05-31",))
        assert final == {key: text for key, text in expected.items() if key[0] == "2026-05-31"}
        missing = other.heads.missing()
        assert missing, "earlier days' heads are left wanted"
        days = tuple(f"2026-05-{day:02d}" for day in range(1, 10))
        earlier = documents(other, days)
        pending = [json.loads(earlier[(day, "json", "en")])["pending_classification"] for day in days]
        assert any(pending), "a report at an earlier day waits for its heads' files"
        # What the service's head fetcher (queued by the sweep) does with them:
        with other.github(REPO) as client:
            rules = other.config.rules_for(REPO)
            for head in missing:
                fetch_and_store(client, other.heads, head.full_name, head.number, head.head_sha, head.base_sha, rules)
        assert documents(other) == expected
    finally:
        other.close()


def test_backfill_then_webhooks_or_webhooks_then_backfill_change_nothing(
    webhooks: tuple[Flask, FlaskClient], fresh: Services, github: FakeGitHub, scenario: MonthScenario, tmp_path: Path
) -> None:
    app, _ = webhooks
    with app.app_context():
        s = services()
        expected = documents(s)
        backfill(s)  # after the webhooks
        assert documents(s) == expected
    # Webhooks after a backfill: the same deliveries into the backfilled ledger.
    backfill(fresh)
    with running_app(fresh.settings) as other:
        client = other.test_client()
        for story in scenario.stories:
            for d in story.deliveries:
                assert post(client, d.body, d.event, d.delivery_id).status_code == 202
        run_jobs(other)
        with other.app_context():
            assert documents(services()) == expected


def test_an_interrupted_backfill_resumes_without_refetching_finished_prs(
    world: None, fresh: Services, github: FakeGitHub
) -> None:
    # GitHub fails for good on the 6th timeline asked for: the run stops there.
    asked: list[str] = []
    original = github._answer

    def failing(request: Any) -> Any:
        if "/timeline" in request.path:
            asked.append(request.path)
            if len(asked) == 6:
                return github._json(request, {"message": "Validation Failed"}, 422)
        return original(request)

    github._answer = failing  # type: ignore[method-assign]
    try:
        with pytest.raises(Exception, match="422"):
            backfill(fresh)
    finally:
        github._answer = original  # type: ignore[method-assign]
    run = fresh.history.runs(REPO)[0]
    assert run.done == 5 and run.state != DONE
    finished = {int(p.split("/")[-2]) for p in asked[:5]}
    github.requests.clear()
    resumed = backfill(fresh)
    assert resumed.state == DONE and resumed.done == resumed.total
    refetched = {int(p.split("/")[-2]) for p in github.requests if "/timeline" in p}
    assert not refetched & finished, "finished PRs were read again"


@pytest.mark.parametrize(
    "answer",
    [
        Scripted(
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 1)},
            {"message": "API rate limit exceeded"},
        ),
        Scripted(429, {"retry-after": "1"}, {"message": "You have exceeded a secondary rate limit"}),
    ],
    ids=["primary", "secondary"],
)
def test_rate_limits_pause_and_resume(world: None, fresh: Services, github: FakeGitHub, answer: Scripted) -> None:
    github.script(r"/issues/\d+/timeline", answer)
    waits: list[RateLimited] = []
    run = backfill(fresh, wait=waits.append)
    assert [w.kind for w in waits] == ["primary" if answer.status == 403 else "secondary"]
    assert run.state == DONE and run.done == run.total
    # Without a way to wait (a worker's job), the run is left waiting and the limit raised.
    github.script(r"/issues/\d+/timeline", answer)
    with pytest.raises(RateLimited), fresh.github(REPO) as client:
        start, end = history_range(None, "2026-05-05", "Asia/Shanghai", int(time.time()))
        read_history(client, fresh.history, fresh.heads, target(fresh, REPO, start, end), BACKFILL)
    assert fresh.history.runs(REPO)[0].state == WAITING


def test_a_queued_run_waits_out_rate_limits_without_spending_its_tries_and_gives_up_on_a_long_outage(
    settings: Settings, world: None, github: FakeGitHub
) -> None:
    from rq.registry import ScheduledJobRegistry

    from tracker.github.client import Unavailable

    outage = [Scripted(502) for _ in range(3)]  # past the client's own tries
    with running_app(settings.model_copy(update={"config_path": EXAMPLE_CONFIG})) as app, app.app_context():
        s = services()
        registry = ScheduledJobRegistry(queue=s.github_queue)  # type: ignore[no-untyped-call]
        start, end = history_range("2026-05", None, "Asia/Shanghai", int(time.time()))
        github.script(r"/pulls$", *outage)
        said = read_history_job(BACKFILL, REPO, start, end, 2, "daily", 3)
        assert said.startswith("GitHub unavailable; trying again in ")
        github.script(r"/pulls$", *outage)
        with pytest.raises(Unavailable):  # the 8th outage in a row: the job fails, and nothing is re-scheduled
            read_history_job(BACKFILL, REPO, start, end, 5, "daily", 7)
        assert len(registry.get_job_ids()) == 1
        limited = Scripted(429, {"retry-after": "60"}, {"message": "You have exceeded a secondary rate limit"})
        github.script(r"/pulls$", limited)
        assert read_history_job(BACKFILL, REPO, start, end, 3, "daily", 4) == "waiting for the secondary rate limit"
        assert read_history_job(BACKFILL, REPO, start, end, 4, "daily", 4) == "waiting for the rate limit"
        runs = [s.github_queue.fetch_job(job_id) for job_id in registry.get_job_ids()]
        # (its run, its outages in a row): an outage counts towards giving up, a rate limit does not.
        assert sorted((job.args[4], job.args[6]) for job in runs if job is not None) == [(3, 4), (4, 4), (5, 4)]
        assert s.history.runs(REPO)[0].state == WAITING


def test_a_deleted_pr_is_recorded_and_does_not_stop_the_backfill(
    world: None, fresh: Services, github: FakeGitHub, scenario: MonthScenario
) -> None:
    # Deleted after the listing named it: its timeline answers 404.
    gone = scenario.stories[3].number
    github.script(rf"/issues/{gone}/timeline$", Scripted(404, body={"message": "Not Found"}))
    run = backfill(fresh)
    assert run.state == DONE and run.done == run.total
    assert fresh.history.outcomes(run.id)[gone] == "gone"
    assert f"#{gone}" in (run.detail or "")


def test_coverage_notice_appears_exactly_when_the_window_is_not_covered(
    months: Months, settings: Settings, github: FakeGitHub, scenario: MonthScenario, fresh: Services
) -> None:
    # Only the PRs that began after May 5 arrive as webhooks: the days before are not covered.
    shipped = settings.model_copy(update={"config_path": EXAMPLE_CONFIG})
    with running_app(months.copy("may-late", late_stories(scenario), shipped, github)) as app, app.app_context():
        s = services()
        docs = documents(s, ("2026-05-31",))
        final = json.loads(docs[("2026-05-31", "json", "en")])
        assert final["coverage"]["complete"] is False
        missing = final["coverage"]["missing"]
        assert missing[0]["from"] == "2026-05-01"
        command = f"tracker backfill --repo {REPO} --month 2026-05"
        assert "Incomplete history" in docs[("2026-05-31", "md", "en")].splitlines()[2]
        assert command in docs[("2026-05-31", "md", "en")]
        assert "历史记录不完整" in docs[("2026-05-31", "md", "zh-CN")].splitlines()[2]
        assert command in docs[("2026-05-31", "md", "zh-CN")]
        assert 'class="notice"' in docs[("2026-05-31", "html", "en")]
        # A backfill of the month covers it: the notice goes.
        publish_world(github, scenario.stories, {(n, sha): p for n, sha, p in scenario.head_files()})
        backfill(s)
        docs = documents(s, ("2026-05-31",))
        assert json.loads(docs[("2026-05-31", "json", "en")])["coverage"] == {"complete": True, "missing": []}
        assert "Incomplete history" not in docs[("2026-05-31", "md", "en")]
        assert "历史记录不完整" not in docs[("2026-05-31", "md", "zh-CN")]
        assert 'class="notice"' not in docs[("2026-05-31", "html", "en")]


def test_reconciliation_recovers_dropped_deliveries_and_asks_github_to_redeliver(
    months: Months,
    settings: Settings,
    github: FakeGitHub,
    scenario: MonthScenario,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The client spaces its writes (the redelivery requests) a second apart by sleeping: here the waits it asks
    # for are recorded instead of slept, for this test (tests/github/test_issues.py holds the spacing itself).
    from tracker.github import client as client_module

    waits: list[float] = []
    monkeypatch.setattr(client_module.time, "sleep", waits.append)
    heads = {(n, sha): p for n, sha, p in scenario.head_files()}
    # The month as it should be: every delivery received, into a ledger of its own (a copy of the month
    # delivered once in the session).
    complete = settings.model_copy(
        update={"config_path": EXAMPLE_CONFIG, "database_url": f"sqlite:///{tmp_path / 'complete.sqlite3'}"}
    )
    with running_app(months.copy("may", scenario, complete, github)) as full, full.app_context():
        expected = documents(services())
    # Every fifth delivery was lost in transit: GitHub recorded its attempt as failed.
    everything = [d for story in scenario.stories for d in story.deliveries]
    dropped = {d.delivery_id for d in everything[::5]}
    publish_world(github, scenario.stories, heads, hook_id=77)
    for delivery_id in dropped:
        github.set_delivery_status(REPO, 77, delivery_id, 502)
    config = tmp_path / "tracker.yaml"
    config.write_text(
        EXAMPLE_CONFIG.read_text().replace("  NVIDIA/Megatron-LM:\n", "  NVIDIA/Megatron-LM:\n    hook_id: 77\n", 1)
    )
    with running_app(settings.model_copy(update={"config_path": config})) as app:
        client = app.test_client()
        for d in everything:
            if d.delivery_id not in dropped:
                assert post(client, d.body, d.event, d.delivery_id).status_code == 202
        run_jobs(app)
        with app.app_context():
            s = services()
            assert s.config.hook_id_for(REPO) == 77
            assert documents(s) != expected, "the lost deliveries matter to the report"
            github.webhook_secret = SECRET
            github.webhook_target = lambda headers, body: (
                client.post("/webhook", data=body, headers=headers).status_code
            )
            start, end = history_range("2026-05", None, "Asia/Shanghai", int(time.time()))
            outcome = read_history_job(RECONCILIATION, REPO, start - 15 * 86400, end)
            assert f"asked GitHub to redeliver {len(dropped)} deliveries" in outcome
            assert len(waits) >= len(dropped) - 1 and all(0 < wait <= 1.0 for wait in waits)
            run_jobs(app)
            # The redeliveries arrived under their original ids, and changed nothing more.
            assert all(s.ledger.get(delivery_id) is not None for delivery_id in dropped)
            assert documents(s) == expected
            # A second reconciliation asks for nothing: every delivery is in the ledger now.
            assert "redeliver" not in read_history_job(RECONCILIATION, REPO, start - 15 * 86400, end)


def test_a_cached_report_loses_its_notice_once_a_backfill_covers_the_month(
    months: Months, settings: Settings, github: FakeGitHub, scenario: MonthScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the PRs begun after May 5 arrive as webhooks: the days before are not covered.
    late = late_stories(scenario)
    shipped = settings.model_copy(update={"config_path": EXAMPLE_CONFIG})
    with running_app(months.copy("may-late", late, shipped, github)) as app:
        client = app.test_client()
        publish_world(github, late.stories, {(n, sha): p for n, sha, p in scenario.head_files()})
        with app.app_context():
            s = services()
            # A backfill that read every PR and stopped just before recording its coverage (a crash).
            crash = RuntimeError("killed")
            monkeypatch.setattr(type(s.history), "add_coverage", lambda *args, **kwargs: (_ for _ in ()).throw(crash))
            with pytest.raises(RuntimeError):
                backfill(s)
            monkeypatch.undo()
            url = f"/reports/{REPO}/2026-05.md?cutoff=2026-05-31"
            first = client.get(url).get_data(as_text=True)
            assert "Incomplete history" in first
            assert client.get(url).get_data(as_text=True) == first  # served from the cache now
            github.requests.clear()
            run = backfill(s)  # resumed: every PR was finished, only the coverage is new
            assert run.state == DONE and not [p for p in github.requests if "/timeline" in p]
        assert "Incomplete history" not in client.get(url).get_data(as_text=True)
