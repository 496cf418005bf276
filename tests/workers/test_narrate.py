"""workers/narrate.py: the narrator's job, through the app, with May 2026 received as webhooks and a fake
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

from tests.conftest import run_jobs, running_app
from tests.fake_openai import FakeOpenAI, Reply, Status
from tests.paths import require_shared
from tracker.core import narration
from tracker.llm.client import ChatClient
from tracker.settings import Settings
from tracker.web.context import services

require_shared()

from tests.scenario import REPO, deliver, megatron_month  # noqa: E402
from workers.narrate import narrate_month  # noqa: E402

MONTH = "2026-05"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def narrated(settings: Settings, github: Any, fake: FakeOpenAI, tmp_path: Path) -> Iterator[tuple[Flask, FlaskClient]]:
    config = tmp_path / "tracker.yaml"
    config.write_text(f"repositories:\n  {REPO}:\n    narrator: llm\n    glossary: [Megatron]\n", encoding="utf-8")
    enabled = settings.model_copy(
        update={
            "config_path": config,
            "llm_base_url": fake.url,
            "llm_model": "test-model",
            "llm_timeout": 5.0,
            "llm_input_price": 2.0,
            "llm_output_price": 8.0,
        }
    )
    with running_app(enabled) as app:
        client = app.test_client()
        deliver(megatron_month(), app, client, github)
        run_jobs(app)
        yield app, client


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
        report = report_for(s.state, s.config, resolve(s.state, s.config, REPO, MONTH, None), prose=False)
    replies = []
    for section in report.sections:
        if not section.changes:
            continue
        ids = narration.section_input(report, section.id).change_ids
        english = {
            "themes": [
                {
                    "title": f"Work of {section.id}",
                    "summary": "Several changes moved forward across the code base.",
                    "highlights": [{"change_ids": list(ids), "sentence": "These changes improve Megatron."}],
                }
            ]
        }
        chinese = {
            "themes": [
                {
                    "title": f"{section.id} 的工作",
                    "summary": "多项改动在代码库中推进。",
                    "highlights": [{"change_ids": list(ids), "sentence": "这些改动改进了 Megatron。"}],
                }
            ]
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
    themes = [theme for section in after["report"]["sections"] for theme in section["themes"]]
    assert themes and all(theme["en"].startswith("Work of") for theme in themes)
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
    from workers.narrate import narrations_due

    app, _ = narrated
    with app.app_context():
        s = services()
        assert narrations_due(s) == 2  # this month, and last month while it has no record
        assert narrations_due(s) == 0  # asked already within the hour
        jobs = [job.description for job in s.github_queue.get_jobs()]
    assert sum(1 for d in jobs if d is not None and d.startswith("narrate ") and REPO in d) == 2


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
        report = report_for(s.state, s.config, resolve(s.state, s.config, REPO, MONTH, None), prose=False)
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
    from tests.fake_github import Scripted

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


def test_the_months_bill_counts_every_request_and_survives_pruning(
    narrated: tuple[Flask, FlaskClient], fake: FakeOpenAI
) -> None:
    from tracker.store.narrations import NarrationStore

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
    from tests.fake_github import Scripted

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
