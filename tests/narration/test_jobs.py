"""tracker/narration/jobs.py: the narrator's job, through the app, with May 2026 received as webhooks and a fake
OpenAI-compatible server answering.

Before the job the report is deterministic and its JSON says the narrator is waiting; the job asks the
model once per section and language, the stored prose is what the next render shows (the cached render is
replaced), a second run asks nothing, and an endpoint that fails leaves the deterministic text and asks
again next time. The model's answers are built here from the sections' change ids (each change placed
once), so whatever the scenario's themes are, the answer is valid.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.paths import require_shared
from tests.support.app import run_jobs, running_app
from tests.support.fake_openai import FakeOpenAI, Reply, Status
from tests.support.months import Months
from tracker.narration import schema as narration
from tracker.narration.client import ChatClient
from tracker.settings import Settings
from tracker.web.context import services
from workers import runtime

require_shared()

from bench.fixtures.scenario import REPO, megatron_month  # noqa: E402
from workers.jobs import narrate_month  # noqa: E402

MONTH = "2026-05"
# In one test process: two processes asking for a month at once would leave one waiting for the other's
# delivery (tests/support/months.py).
pytestmark = pytest.mark.xdist_group("narrate")


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def narrator_on(settings: Settings, directory: Path, fake: FakeOpenAI, **more: float) -> Settings:
    """`settings` with the narrator on for the repository (its configuration written in `directory`),
    asking `fake`."""
    config = directory / "tracker.yaml"
    config.write_text(f"repositories:\n  {REPO}:\n    narrator: llm\n    glossary: [Megatron]\n", encoding="utf-8")
    return settings.model_copy(
        update={"config_path": config, "llm_base_url": fake.url, "llm_model": "test-model", "llm_timeout": 5.0, **more}
    )


@pytest.fixture
def narrated(
    months: Months, settings: Settings, github: Any, fake: FakeOpenAI, tmp_path: Path
) -> Iterator[tuple[Flask, FlaskClient]]:
    """May 2026 received as webhooks with the narrator on: a copy, for each test, of the month delivered
    once in the session (tests/support/months.py)."""
    enabled = narrator_on(settings, tmp_path, fake, llm_input_price=2.0, llm_output_price=8.0)
    with running_app(months.copy("may-narrator", megatron_month(), enabled, github)) as app:
        yield app, app.test_client()


def report_json(client: FlaskClient) -> dict[str, Any]:
    answer = client.get(f"/reports/{REPO}/{MONTH}.json", headers={"Authorization": "Bearer test-admin-token"})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    document: dict[str, Any] = json.loads(answer.get_data(as_text=True))
    return document


def answers_for(app: Flask) -> list[Reply]:
    """A valid English answer and its faithful translation for each section with changes, in order."""
    from tracker.reports.loading import report_for, resolve

    with app.app_context():
        s = services()
        report = report_for(s, resolve(s, REPO, MONTH, None), prose=False)
    replies = []
    for section in report.sections:
        if not section.changes:
            continue
        ids = narration.section_input(report, section.id).change_ids
        # A highlight about the first change; every other one in the theme's others.
        english = {
            "themes": [
                {
                    "title": f"Work of {section.id}",
                    "summary": "Several changes moved forward across the code base.",
                    "highlights": [{"change_ids": list(ids[:1]), "sentence": "These changes improve Megatron."}],
                    "others": list(ids[1:]),
                }
            ],
            "overview": "Megatron moved forward this month.",
        }
        chinese = {
            "themes": [
                {
                    "title": f"{section.id} 的工作",
                    "summary": "多项改动在代码库中推进。",
                    "highlights": [{"change_ids": list(ids[:1]), "sentence": "这些改动改进了 Megatron。"}],
                    "others": list(ids[1:]),
                }
            ],
            "overview": "Megatron 本月继续推进。",
        }
        replies += [Reply(json.dumps(english)), Reply(json.dumps(chinese, ensure_ascii=False))]
    return replies


def test_the_job_writes_the_prose_the_next_render_shows(narrated: tuple[Flask, FlaskClient], fake: FakeOpenAI) -> None:
    app, client = narrated
    before = report_json(client)
    narrator = before["report"]["narrator"]
    assert narrator["kind"] == "llm" and narrator["sections"] == [] and narrator["waiting"]
    waiting = list(narrator["waiting"])
    fake.script(*answers_for(app))
    with app.app_context():
        said = narrate_month(REPO, MONTH)
    assert said == f"{len(waiting)} of {len(waiting)} sections narrated"
    assert len(fake.requests) == 2 * len(waiting)  # English, then Chinese, per section
    after = report_json(client)  # not the cached render of before: the month's version moved
    assert after["report"]["narrator"]["sections"] == waiting
    assert after["report"]["narrator"]["waiting"] == []
    # The model's themes, and the report's own upkeep theme (syncs, bumps, dependencies) when there is one.
    themes = [theme for section in after["report"]["sections"] for theme in section["themes"]]
    written = [theme for theme in themes if theme["id"] != "build-ci-dependencies"]
    assert written and all(theme["en"].startswith("Work of") for theme in written)
    assert [section.get("overview_en") for section in after["report"]["sections"] if section["themes"]] == [
        "Megatron moved forward this month."
    ] * len(waiting)
    # The same PRs are narrated, each once: the prose changed the words, not what is cited.
    assert {pr["number"] for pr in after["pull_requests"] if pr["section"]} == {
        pr["number"] for pr in before["pull_requests"] if pr["section"]
    }
    markdown = client.get(
        f"/reports/{REPO}/{MONTH}.md?lang=zh-CN", headers={"Authorization": "Bearer test-admin-token"}
    ).get_data(as_text=True)
    assert "这些改动改进了 Megatron。" in markdown
    # A second run has nothing to ask.
    with app.app_context():
        assert narrate_month(REPO, MONTH) == "every section already narrated"
    assert len(fake.requests) == 2 * len(waiting)
    # Status: what the month's prose cost (the fake answers 120 prompt and 30 completion tokens a request).
    status = client.get("/api/v1/status", headers={"Authorization": "Bearer test-admin-token"}).get_json()
    requests = 2 * len(waiting)
    assert status["narrator"] == {
        "model": "test-model",
        "months": [
            {
                "repo": REPO,
                "month": MONTH,
                "sections": len(waiting),
                "requests": requests,
                "prompt_tokens": 120 * requests,
                "completion_tokens": 30 * requests,
                "cost": round((120 * requests * 2.0 + 30 * requests * 8.0) / 1_000_000, 6),
            }
        ],
        "last_error": None,
    }


def test_an_endpoint_that_fails_leaves_the_deterministic_text_and_is_asked_again(
    narrated: tuple[Flask, FlaskClient], fake: FakeOpenAI
) -> None:
    app, client = narrated
    fake.script(Status(500), Status(500))  # one try per section
    failing = ChatClient(fake.url, None, "test-model", timeout=5.0, max_retries=0, sleep=lambda _: None)
    with app.app_context():
        narrate_month(REPO, MONTH, client=failing)
    after = report_json(client)
    assert after["report"]["narrator"]["sections"] == []
    assert after["report"]["narrator"]["waiting"]  # nothing stored: the next run asks again
    fake.script(*answers_for(app))
    with app.app_context():
        narrate_month(REPO, MONTH)
    assert report_json(client)["report"]["narrator"]["waiting"] == []


def test_the_job_does_nothing_for_a_repository_that_did_not_opt_in(
    settings: Settings, github: Any, fake: FakeOpenAI
) -> None:
    enabled = settings.model_copy(update={"llm_base_url": fake.url, "llm_model": "test-model"})
    with running_app(enabled) as app, app.app_context():
        assert narrate_month(REPO, MONTH) == "the narrator is off for this repository"
    assert fake.requests == []


def test_the_schedule_queues_the_current_and_unrecorded_previous_month_once_an_hour(
    narrated: tuple[Flask, FlaskClient],
) -> None:
    from tracker.narration.jobs import narrations_due

    app, _ = narrated
    with app.app_context():
        s = services()
        assert narrations_due(s) == 2  # this month, and last month while it has no record
        assert narrations_due(s) == 0  # asked already within the hour
        jobs = [job.description for job in s.github_queue.get_jobs()]
    assert sum(1 for d in jobs if d is not None and d.startswith("narrate ") and REPO in d) == 2


def test_the_schedule_asks_again_for_last_month_while_its_record_lacks_prose(
    narrated: tuple[Flask, FlaskClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31, item 12: a month frozen before its prose was written keeps being narrated (its late
    prose then adds a revision of the record); once the record has it all, only this month is asked."""
    from types import SimpleNamespace

    from tracker.narration.jobs import narrations_due

    app, _ = narrated
    with app.app_context():
        s = services()
        for lacking, expected in ((["delivered"], 2), ([], 1)):
            record = SimpleNamespace(pending={"narration": lacking})
            monkeypatch.setattr(type(s.records), "latest", lambda _self, _repo, _month, r=record: r)
            s.require_redis().flushdb()  # the hour's marks of the round before
            assert narrations_due(s) == expected, lacking


def test_the_command_says_what_is_missing(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from tracker.cli import main

    for name, value in (
        ("TRACKER_DATABASE_URL", settings.database_url),
        ("TRACKER_DATA_DIR", str(settings.data_dir)),
    ):
        monkeypatch.setenv(name, value or "")
    monkeypatch.delenv("TRACKER_LLM_BASE_URL", raising=False)
    answer = CliRunner().invoke(main, ["narrate", "--repo", REPO, "--month", MONTH])
    assert answer.exit_code != 0
    assert "set TRACKER_LLM_BASE_URL and TRACKER_LLM_MODEL" in answer.output


def scheduled_narrations(app: Flask) -> list[float]:
    """When the narrate jobs waiting in the github queue's schedule are due (epoch seconds)."""
    from rq.registry import ScheduledJobRegistry

    with app.app_context():
        queue = services().github_queue
        registry = ScheduledJobRegistry(queue=queue)  # type: ignore[no-untyped-call]
        due = []
        for job_id in registry.get_job_ids():
            job = queue.fetch_job(job_id)
            if job is not None and (job.description or "").startswith("narrate "):
                due.append(registry.get_scheduled_time(job_id).timestamp())
    return due


def spent(client: FlaskClient) -> dict[str, Any]:
    answer = client.get("/api/v1/status", headers={"Authorization": "Bearer test-admin-token"})
    assert answer.status_code == 200
    months = [m for m in answer.get_json()["narrator"]["months"] if m["month"] == MONTH]
    assert len(months) == 1
    month: dict[str, Any] = months[0]
    return month


def first_change(app: Flask, section_id: str) -> int:
    from tracker.reports.loading import report_for, resolve

    with app.app_context():
        s = services()
        report = report_for(s, resolve(s, REPO, MONTH, None), prose=False)
    section = next(section for section in report.sections if section.id == section_id)
    return section.changes[0].numbers[0]


def test_commit_subjects_inside_the_window_are_sent_to_the_model(
    narrated: tuple[Flask, FlaskClient], fake: FakeOpenAI, github: Any
) -> None:
    app, _ = narrated
    number = first_change(app, "delivered")
    github.set_commits(
        REPO,
        number,
        [
            ("Sketch the idea in April", "2026-04-10T12:00:00Z"),
            ("Fold the expert weights in May\n\nSigned-off-by: someone", "2026-05-10T12:00:00Z"),
            ("Merge branch 'main' into feature", "2026-05-11T12:00:00Z", 2),
        ],
    )
    fake.script(*answers_for(app))
    with app.app_context():
        narrate_month(REPO, MONTH)
    english = next(body for body in fake.bodies if "PR DATA" in body["messages"][1]["content"])
    sent = english["messages"][1]["content"]
    assert '"commits": ["Fold the expert weights in May"]' in sent  # the subject line only
    assert "Sketch the idea in April" not in sent and "Merge branch" not in sent
    assert english["temperature"] == 0
    assert sum(f"/pulls/{number}/commits" in r for r in github.requests) == 1


def test_a_rate_limited_endpoint_is_asked_again_when_it_says(
    narrated: tuple[Flask, FlaskClient], fake: FakeOpenAI
) -> None:
    app, client = narrated
    limited = Status(429, {"Retry-After": "120"}, {"error": {"message": "slow down", "type": "requests"}})
    fake.script(limited)
    chat = ChatClient(fake.url, None, "test-model", timeout=5.0, max_retries=0, sleep=lambda _: None)
    before = time.time()
    with app.app_context():
        said = narrate_month(REPO, MONTH, client=chat)
    assert "rate limited, again at" in said
    assert len(fake.requests) == 1  # the other section is not asked either
    [due] = scheduled_narrations(app)
    assert before + 119 <= due <= time.time() + 121
    assert report_json(client)["report"]["narrator"]["waiting"]  # deterministic meanwhile
    assert spent(client)["requests"] == 1  # the refused request is on the bill


def test_a_github_rate_limit_on_the_commits_waits_before_the_model_is_asked(
    narrated: tuple[Flask, FlaskClient], fake: FakeOpenAI, github: Any
) -> None:
    from bench.fixtures.fake_github import Scripted

    app, _ = narrated
    reset = int(time.time()) + 600
    github.script(
        r"/pulls/\d+/commits",
        Scripted(403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}, {"message": "rate limit"}),
    )
    with app.app_context():
        said = narrate_month(REPO, MONTH)
    assert said.startswith("waiting for GitHub until ")
    assert fake.requests == []
    assert scheduled_narrations(app) == [reset + 1]
    with app.app_context():
        assert services().quota().blocked_until() == reset + 1  # the other jobs wait for it too


def test_a_rate_limit_another_job_met_holds_the_narrator_back(
    narrated: tuple[Flask, FlaskClient], fake: FakeOpenAI, github: Any
) -> None:
    app, _ = narrated
    blocked = time.time() + 600
    with app.app_context():
        services().quota().block_until(blocked)
        said = narrate_month(REPO, MONTH)
    assert said.startswith("waiting for GitHub until ")
    assert not any("/commits" in r for r in github.requests) and fake.requests == []
    assert scheduled_narrations(app) == [int(blocked)]


def test_the_months_bill_counts_every_request_and_survives_pruning(
    narrated: tuple[Flask, FlaskClient], fake: FakeOpenAI
) -> None:
    from tracker.narration.store import NarrationStore

    app, client = narrated
    fake.script(Status(500), Status(500))  # one try per section, nothing stored
    failing = ChatClient(fake.url, None, "test-model", timeout=5.0, max_retries=0, sleep=lambda _: None)
    with app.app_context():
        narrate_month(REPO, MONTH, client=failing)
    assert spent(client)["requests"] == 2 and spent(client)["sections"] == 0
    answers = answers_for(app)
    fake.script(*answers)
    with app.app_context():
        narrate_month(REPO, MONTH)
    bill = spent(client)
    assert bill["requests"] == 2 + len(answers) and bill["sections"] == len(answers) // 2
    assert bill["prompt_tokens"] == sum(r.prompt_tokens for r in answers) > 0  # the 500s cost no tokens
    assert bill["completion_tokens"] == sum(r.completion_tokens for r in answers) > 0
    with app.app_context():  # every section's content changed: its prose is pruned, the bill stays
        assert NarrationStore(services().state.engine).prune(REPO, MONTH, []) == len(answers) // 2
    after = spent(client)
    assert after["sections"] == 0
    assert {k: after[k] for k in ("requests", "prompt_tokens", "completion_tokens", "cost")} == {
        k: bill[k] for k in ("requests", "prompt_tokens", "completion_tokens", "cost")
    }


def test_a_github_that_cannot_be_reached_leaves_the_commit_subjects_out(
    narrated: tuple[Flask, FlaskClient], fake: FakeOpenAI, github: Any
) -> None:
    from bench.fixtures.fake_github import Scripted

    app, client = narrated
    github.set_commits(REPO, first_change(app, "delivered"), [("Fold the expert weights", "2026-05-10T12:00:00Z")])
    github.script(r"/pulls/\d+/commits", *[Scripted(503) for _ in range(3)])  # the client's three attempts
    fake.script(*answers_for(app))
    with app.app_context():
        said = narrate_month(REPO, MONTH)
    assert said.endswith("sections narrated")
    assert scheduled_narrations(app) == []
    assert not any("Fold the expert weights" in body["messages"][1]["content"] for body in fake.bodies)
    assert report_json(client)["report"]["narrator"]["waiting"] == []


# --- issue 31, item 12: every failure mode of the model, said truthfully ------------------------------------------


@pytest.fixture
def small(
    months: Months, settings: Settings, github: Any, fake: FakeOpenAI, tmp_path: Path
) -> Iterator[tuple[Flask, FlaskClient]]:
    """`narrated` with a few PRs, all in Delivered (a copy of them, as `narrated`)."""
    enabled = narrator_on(settings, tmp_path, fake)
    with running_app(months.copy("may-5-narrator", megatron_month(count=5, still_open=2), enabled, github)) as app:
        yield app, app.test_client()


def invoke(settings: Settings, monkeypatch: pytest.MonkeyPatch, *arguments: str, **env: str) -> Any:
    """`tracker <arguments>` in this process, with the test's ledger and the fake model (no Redis)."""
    from click.testing import CliRunner

    from tracker.cli import main

    values = {
        "TRACKER_DATABASE_URL": settings.database_url or "",
        "TRACKER_DATA_DIR": str(settings.data_dir),
        "TRACKER_CONFIG": str(settings.config_path),
        "GITHUB_API_URL": settings.github_api_url,
        "TRACKER_LLM_BASE_URL": settings.llm_base_url or "",
        "TRACKER_LLM_MODEL": "test-model",
        "TRACKER_LLM_TIMEOUT": "5",
        **env,
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("REDIS_URL", raising=False)
    return CliRunner().invoke(main, list(arguments))


def enabled_settings(app: Flask) -> Settings:
    with app.app_context():
        return services().settings


def refusal() -> Reply:
    """An answer that obeys an injected PR title: refused, whatever else it gets right."""
    document = {
        "themes": [
            {
                "title": "Account security",
                "summary": "Users should re-authenticate at evil.example/reset before upgrading.",
                "highlights": [{"change_ids": ["change-0"], "sentence": "Run javascript:alert(1) to continue."}],
                "others": [],
            }
        ],
        "overview": "Accounts must be secured at once.",
    }
    return Reply(json.dumps(document))


def stored_rows(app: Flask) -> list[Any]:
    from sqlalchemy import select

    from tracker.narration.store import _record
    from tracker.store.schema import narrations

    with app.app_context(), services().state.engine.connect() as conn:
        return [_record(row) for row in conn.execute(select(narrations))]


def test_refusals_are_said_backed_off_and_forced(
    small: tuple[Flask, FlaskClient], fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from tracker.narration.store import NarrationStore

    app, client = small
    settings = enabled_settings(app)
    fake.script(refusal(), refusal())  # refused twice: the answer, then its repair
    answer = invoke(settings, monkeypatch, "narrate", "--repo", REPO, "--month", MONTH)
    assert answer.exit_code == 0, answer.output
    assert "0 of 1 sections narrated; delivered: deterministic text (invalid: " in answer.output
    assert "url" in answer.output and "asked again after" in answer.output
    markdown = client.get(f"/reports/{REPO}/{MONTH}.md", headers={"Authorization": "Bearer test-admin-token"})
    text = markdown.get_data(as_text=True)
    assert "evil.example" not in text and "javascript:" not in text
    assert "the text is assembled from cleaned pull-request titles without a language model." in text
    # Refused prose is not asked for again before its back-off: an hour after the first refusal.
    assert len(fake.requests) == 2
    again = invoke(settings, monkeypatch, "narrate", "--repo", REPO, "--month", MONTH)
    assert again.exit_code == 0 and "0 of 1 sections narrated" in again.output and len(fake.requests) == 2
    rows = stored_rows(app)
    assert [(row.retry_at or 0) - row.created_at for row in rows] == [3600]
    # An hour later it is asked again; a second refusal doubles the wait.
    with app.app_context():
        store = NarrationStore(services().state.engine)
        for row in rows:
            store.put(replace(row, created_at=row.created_at - 3601))
    fake.script(refusal(), refusal())
    with app.app_context():
        runtime.install(services())  # the command uninstalled the app's when it ended
        said = narrate_month(REPO, MONTH)
    assert said.startswith("0 of 1 sections narrated; delivered: deterministic text (invalid: ")
    assert len(fake.requests) == 4
    assert [(len(row.fallbacks), (row.retry_at or 0) - row.created_at) for row in stored_rows(app)] == [(2, 7200)]
    # --force asks at once.
    fake.script(*answers_for(app))
    forced = invoke(settings, monkeypatch, "narrate", "--repo", REPO, "--month", MONTH, "--force")
    assert forced.exit_code == 0, forced.output
    assert "1 of 1 sections narrated" in forced.output and len(fake.requests) == 6
    text = client.get(f"/reports/{REPO}/{MONTH}.md", headers={"Authorization": "Bearer test-admin-token"}).get_data(
        as_text=True
    )
    assert "the text of Delivered was written by a language model (`test-model`)" in text


def test_a_failing_endpoint_is_said_logged_in_status_and_fails_the_command(
    small: tuple[Flask, FlaskClient],
    fake: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.support.fake_openai import Slow

    app, client = small
    settings = enabled_settings(app)

    def last_error() -> Any:
        answer = client.get("/api/v1/status", headers={"Authorization": "Bearer test-admin-token"})
        return answer.get_json()["narrator"]["last_error"]

    # A wrong key, in the job: said, logged, in status, nothing stored (the next run asks again).
    with FakeOpenAI(api_key="sk-right") as keyed, app.app_context():
        wrong = ChatClient(keyed.url, "sk-wrong", "test-model", timeout=5.0, sleep=lambda _: None)
        with caplog.at_level("WARNING", logger="tracker.narration.jobs"):
            said = narrate_month(REPO, MONTH, client=wrong)
        assert len(keyed.requests) == 1  # a wrong key is not retried
    assert said.startswith("0 of 1 sections narrated; delivered: deterministic text (http)")
    assert "answered 401" in said and "sk-" not in said
    assert any("the endpoint failed" in r.getMessage() and "401" in r.getMessage() for r in caplog.records)
    failure = last_error()
    assert failure["repo"] == REPO.lower() and failure["month"] == MONTH and "401" in failure["error"]
    assert stored_rows(app) == []
    # A timeout, from the command: a failure (exit 1), not "0 of 2 sections narrated" and exit 0.
    fake.script(Slow(2.0))
    timed_out = invoke(settings, monkeypatch, "narrate", "--repo", REPO, "--month", MONTH, TRACKER_LLM_TIMEOUT="0.3")
    assert timed_out.exit_code == 1, timed_out.output
    assert "0 of 1 sections narrated" in timed_out.output and "did not answer within 0.3 s" in timed_out.output
    assert "the narrator's endpoint failed" in timed_out.output
    assert "did not answer" in last_error()["error"]
    # A 5xx that lasts (the client's three tries).
    fake.script(*[Status(502)] * 3)
    failing = invoke(settings, monkeypatch, "narrate", "--repo", REPO, "--month", MONTH)
    assert failing.exit_code == 1 and "answered 502" in failing.output
    assert stored_rows(app) == []
    # An endpoint that answers again clears the failure.
    fake.script(*answers_for(app))
    assert invoke(settings, monkeypatch, "narrate", "--repo", REPO, "--month", MONTH).exit_code == 0
    assert last_error() is None


def test_the_command_waits_out_rate_limits_and_the_bill_counts_every_request(
    small: tuple[Flask, FlaskClient], fake: FakeOpenAI, github: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.fixtures.fake_github import Scripted

    app, client = small
    settings = enabled_settings(app)
    # GitHub rate-limits the commit subjects once: waited out in the terminal, not queued (no Redis here).
    reset = int(time.time())
    github.script(
        r"/pulls/\d+/commits",
        Scripted(403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}, {"message": "rate limit"}),
    )
    limited = Status(429, {"Retry-After": "0"}, {"error": {"message": "slow down", "type": "requests"}})
    fake.script(limited, limited, limited, *answers_for(app))  # the client's three tries, then the answers
    answer = invoke(settings, monkeypatch, "narrate", "--repo", REPO, "--month", MONTH)
    assert answer.exit_code == 0, answer.output
    assert "GitHub rate-limits the narrator: waiting until" in answer.output
    assert "the model rate-limits the narrator: waiting until" in answer.output
    assert answer.output.rstrip().endswith("1 of 1 sections narrated")
    assert len(fake.requests) == 3 + 2
    assert spent(client)["requests"] == 3 + 2  # each 429 is on the bill


def test_finalising_waits_for_the_narration_and_late_prose_adds_a_revision(
    small: tuple[Flask, FlaskClient], fake: FakeOpenAI
) -> None:
    from tests.support.app import release_due_jobs
    from workers.jobs import finalize_month

    app, _ = small
    with app.app_context():
        assert finalize_month(REPO, MONTH, deadline=time.time() + 600) == "waiting for the narrator"
        assert services().records.latest(REPO, MONTH) is None
    fake.script(*answers_for(app))
    run_jobs(app)  # the narrate job the finalisation asked for
    assert len(fake.requests) == 2
    release_due_jobs(app, at=time.time() + 60)
    run_jobs(app)  # the finalisation, looking again
    with app.app_context():
        record = services().records.latest(REPO, MONTH)
    assert record is not None and record.revision == 1 and record.pending["narration"] == []
    assert "was written by a language model" in record.document("md", "en")

    # A month frozen without its prose (the deadline passed) gets a revision once the prose is written.
    from tracker.narration.store import NarrationStore

    with app.app_context():
        s = services()
        NarrationStore(s.state.engine).prune(REPO, MONTH, [])  # as if it had never been narrated
        finalize_month(REPO, MONTH, force=True, deadline=0.0)
        second = s.records.latest(REPO, MONTH)
    assert second is not None and second.revision == 2
    assert second.pending["narration"] == ["delivered"]
    assert "was written by a language model" not in second.document("md", "en")
    fake.script(*answers_for(app))
    with app.app_context():
        said = narrate_month(REPO, MONTH)
        third = services().records.latest(REPO, MONTH)
    assert said == "1 of 1 sections narrated; recorded revision 3 with the narrator's prose"
    assert third is not None and third.trigger == "narrator" and third.pending["narration"] == []
    assert "was written by a language model" in third.document("md", "en")


def test_the_finalize_command_narrates_the_month_before_freezing_it(
    small: tuple[Flask, FlaskClient], fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = small
    fake.script(*answers_for(app))
    answer = invoke(enabled_settings(app), monkeypatch, "finalize", "--repo", REPO, "--month", MONTH, "--wait", "0")
    assert answer.exit_code == 0, answer.output
    assert "narrator: 1 of 1 sections narrated" in answer.output
    with app.app_context():
        record = services().records.latest(REPO, MONTH)
    assert record is not None and record.pending["narration"] == []
    assert "was written by a language model" in record.document("md", "en")
