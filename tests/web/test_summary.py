"""The JSON's summary form (`?detail=summary`) and the JSON answers' encoder, through the real app: May 2026 of
Megatron-LM posted through the webhook (real titles, branches and paths; files from the fake GitHub), the
shipped taxonomy, a real Redis and a real ledger."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.paths import ROOT, require_shared

require_shared()  # bench.fixtures.fake_github reads GitHub's example answers from ../shared as it loads

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from bench.fixtures.fake_github import FakeGitHub  # noqa: E402
from bench.fixtures.scenario import REPO, megatron_month  # noqa: E402
from tests.support.app import post, run_jobs, running_app  # noqa: E402
from tests.support.months import Months  # noqa: E402
from tracker.core import clusters  # noqa: E402
from tracker.settings import Settings  # noqa: E402

ADMIN = {"Authorization": "Bearer test-admin-token"}
CUTOFF = "2026-05-15"
SNAPSHOT = f"/api/v1/repos/{REPO}/months/2026-05"
REPORT = f"/reports/{REPO}/2026-05.json"
# In one test process: two processes asking for a month at once would leave one waiting for the other's
# delivery (tests/support/months.py).
pytestmark = pytest.mark.xdist_group("summary")


@pytest.fixture
def megatron(months: Months, settings: Settings, github: FakeGitHub) -> Iterator[tuple[Flask, FlaskClient]]:
    """30 PRs of May 2026: a copy, for each test, of the month delivered once in the session
    (tests/support/months.py)."""
    shipped = settings.model_copy(update={"config_path": ROOT / "examples" / "megatron-lm.yaml"})
    with running_app(months.copy("may-30", megatron_month(count=30, still_open=6), shipped, github)) as app:
        yield app, app.test_client()


def get(client: FlaskClient, path: str, **params: str) -> Any:
    answer = client.get(path, query_string=params)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.content_type == "application/json"
    return json.loads(answer.get_data())


def test_the_summary_has_the_numbers_and_themes_without_the_pull_requests(
    megatron: tuple[Flask, FlaskClient],
) -> None:
    _, client = megatron
    full = get(client, SNAPSHOT, cutoff=CUTOFF)
    summary = get(client, SNAPSHOT, cutoff=CUTOFF, detail="summary")
    assert summary["detail"] == "summary"
    for key in ("repo", "month", "cutoff", "timezone", "final", "window", "stats", "excluded", "coverage"):
        assert summary[key] == full[key]
    assert summary["pending_classification"] == full["pending_classification"]
    assert summary["pull_requests"] == len(full["pull_requests"]) > 0
    assert summary["report"]["daily"] == full["report"]["daily"]
    assert summary["report"]["narrator"] == full["report"]["narrator"]
    # Every theme and highlight of the full outline, named alike, with its counts.
    assert [s["id"] for s in summary["report"]["sections"]] == ["delivered", "in_progress"]
    narrated = {pr["number"]: pr for pr in full["pull_requests"] if pr["section"]}
    for section, outline in zip(summary["report"]["sections"], full["report"]["sections"], strict=True):
        in_section = [pr for pr in narrated.values() if pr["section"] == section["id"]]
        assert section["pull_requests"] == len(in_section)
        assert section["changes"] == sum(len(h["changes"]) for t in outline["themes"] for h in t["highlights"])
        assert [t["id"] for t in section["themes"]] == [t["id"] for t in outline["themes"]]
        for theme, full_theme in zip(section["themes"], outline["themes"], strict=True):
            assert (theme["en"], theme["zh"], theme["terms"]) == (
                full_theme["en"],
                full_theme["zh"],
                full_theme["terms"],
            )
            assert theme["pull_requests"] == sum(1 for pr in in_section if pr["theme"] == theme["id"])
            assert theme["changes"] == sum(h["changes"] for h in theme["highlights"])
            for highlight, full_highlight in zip(theme["highlights"], full_theme["highlights"], strict=True):
                assert (highlight["id"], highlight["en"], highlight["zh"]) == (
                    full_highlight["id"],
                    full_highlight["en"],
                    full_highlight["zh"],
                )
                assert highlight["changes"] == len(full_highlight["changes"])
                assert highlight["pull_requests"] == sum(
                    1 for pr in in_section if pr["highlight"] == f"{theme['id']}/{highlight['id']}"
                )
    assert sum(s["pull_requests"] for s in summary["report"]["sections"]) == len(narrated)
    # Nothing per PR: no evidence, titles, links or the PR list.
    text = json.dumps(summary)
    for absent in ('"evidence"', '"title"', "/pull/", '"bullets"', '"head_sha"'):
        assert absent not in text
    assert len(text) < len(json.dumps(full)) / 5


def test_the_report_route_gives_the_same_summary(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    api = client.get(SNAPSHOT, query_string={"cutoff": CUTOFF, "detail": "summary"})
    report = client.get(REPORT, query_string={"cutoff": CUTOFF, "detail": "summary", "lang": "zh-CN"})
    assert api.get_data() == report.get_data()
    full = client.get(SNAPSHOT, query_string={"cutoff": CUTOFF, "detail": "full"})
    assert full.get_data() == client.get(SNAPSHOT, query_string={"cutoff": CUTOFF}).get_data()


@pytest.mark.parametrize(
    ("path", "detail"),
    [(SNAPSHOT, "brief"), (REPORT, "SUMMARY"), (f"/reports/{REPO}/2026-05.md", "summary")],
)
def test_an_unknown_detail_is_400(megatron: tuple[Flask, FlaskClient], path: str, detail: str) -> None:
    _, client = megatron
    answer = client.get(path, query_string={"cutoff": CUTOFF, "detail": detail})
    assert answer.status_code == 400
    assert "detail=summary" in answer.json["error"]


def test_an_unknown_detail_of_the_html_is_its_error_page(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    answer = client.get(f"/reports/{REPO}/2026-05.html", query_string={"detail": "summary"})
    assert answer.status_code == 400
    assert answer.content_type.startswith("text/html")


def test_a_new_delivery_changes_the_cached_summary(megatron: tuple[Flask, FlaskClient]) -> None:
    app, client = megatron
    before = get(client, SNAPSHOT, cutoff=CUTOFF, detail="summary")
    assert get(client, SNAPSHOT, cutoff=CUTOFF, detail="summary") == before  # from the cache now
    opened = datetime.fromisoformat(before["window"]["start"].replace("Z", "+00:00")) + timedelta(days=3)
    story = PullRequestStory(9901, opened, repo=REPO, title="Add a fused MoE router kernel").opened()
    for d in story.deliveries:
        assert post(client, d.body, d.event, d.delivery_id).status_code == 202
    run_jobs(app)
    after = get(client, SNAPSHOT, cutoff=CUTOFF, detail="summary")
    assert after["pull_requests"] == before["pull_requests"] + 1
    assert after["stats"]["opened"] == before["stats"]["opened"] + 1
    in_progress = {s["id"]: s for s in after["report"]["sections"]}["in_progress"]
    assert (
        in_progress["pull_requests"]
        == {s["id"]: s for s in before["report"]["sections"]}["in_progress"]["pull_requests"] + 1
    )
    # What the cache served is what a computation from nothing gives.
    with app.app_context():
        from tracker.web.context import services

        services().require_redis().flushdb()
    clusters.forget()
    assert get(client, SNAPSHOT, cutoff=CUTOFF, detail="summary") == after


def test_a_records_summary_is_the_summary_of_its_document(megatron: tuple[Flask, FlaskClient]) -> None:
    app, client = megatron
    assert client.post(f"/api/v1/repos/{REPO}/months/2026-05/finalize", headers=ADMIN).status_code == 202
    run_jobs(app)
    answer = client.get(SNAPSHOT, query_string={"detail": "summary"})
    assert answer.status_code == 200
    assert answer.headers["X-Tracker-Record"].startswith("revision=1;")
    summary = json.loads(answer.get_data())
    live = get(client, SNAPSHOT, detail="summary", live="1")
    assert summary == live
    assert summary["final"] is True


def test_json_answers_keep_their_key_order_and_escape_invisible_characters(
    megatron: tuple[Flask, FlaskClient],
) -> None:
    _, client = megatron
    status = client.get("/api/v1/status", headers=ADMIN)
    body = json.loads(status.get_data())
    assert list(body)[:4] == ["deliveries", "hooks", "repositories", "storage"]
    assert status.get_data().endswith(b"}\n") and b"\n" not in status.get_data()[:-1]  # compact, as Flask writes
    # A name from the URL in an error: non-ASCII as UTF-8, an invisible character as an escape.
    answer = client.get("/api/v1/repos/octo-org/r\u00e9po\u202e/months/2026-05")
    assert answer.status_code == 404
    raw = answer.get_data()
    assert "r\u00e9po".encode() in raw
    assert b"\\u202e" in raw and "\u202e".encode() not in raw
    assert "octo-org/r\u00e9po\u202e" in answer.json["error"]
