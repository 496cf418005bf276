"""Drill-down pages (`tracker/web/drilldown.py`, issue 34): every number of the HTML report links to a page
listing the PRs it counts, whose count is that number, at several cutoffs, on SQLite and PostgreSQL.

A real month: 60 real Megatron-LM PRs of May 2026 with made-up lives (bench/fixtures/scenario.py), and six
more that put a PR in each exclusion, one closed without merge and one with a hostile title, through the
webhook and the worker's jobs, the files of every head from the fake GitHub, the shipped taxonomy.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from bench.fixtures.fake_github import FakeGitHub  # noqa: E402
from bench.fixtures.paths import ROOT  # noqa: E402
from bench.fixtures.scenario import REPO, MonthScenario, megatron_month  # noqa: E402
from tests.support.app import post, run_jobs, running_app  # noqa: E402
from tests.support.months import Months, month_app  # noqa: E402
from tracker.core.drilldown import EXCLUSIONS, STATISTICS  # noqa: E402
from tracker.reports.digests import forget_held  # noqa: E402
from tracker.reports.warm import warm_month  # noqa: E402
from tracker.settings import Settings  # noqa: E402
from tracker.web.access import sign_link  # noqa: E402
from tracker.web.context import services  # noqa: E402

EXAMPLE_CONFIG = ROOT / "examples" / "megatron-lm.yaml"
MONTH = "2026-05"
CUTOFFS = ("2026-05-05", "2026-05-12", "2026-05-20", "2026-05-31")
REPORT = f"/reports/{REPO}/{MONTH}.html"
API = f"/api/v1/repos/{REPO}/months/{MONTH}/prs"
HOSTILE = "<img src=x onerror=alert(1)> & <b>bold</b>"
WHITESPACE = "@@ -1 +1 @@\n-a = 1\n+a  =  1"
# number -> (title, the head's files, what becomes of it), opened on May 6-11
EXTRA: dict[int, tuple[str, list[Any], str]] = {
    90001: (
        "Add tests for the data loader",
        ["tests/unit_tests/test_loader.py", "tests/unit_tests/test_x.py"],
        "merged",
    ),
    90002: ("Pin the CI image", [".github/workflows/ci.yml"], "merged"),
    90003: ("Tests and CI for MoE", ["tests/unit_tests/test_moe.py", ".github/workflows/moe.yml"], "open"),
    90004: (
        "Apply formatting to the trainer",
        [{"filename": "megatron/training/trainer.py", "patch": WHITESPACE}],
        "merged",
    ),
    90005: ("Drop the old scheduler", ["megatron/core/scheduler.py"], "closed"),
    90006: (HOSTILE, ["megatron/core/hostile.py"], "open"),
}
# In one test process with tests/reports/test_report.py, whose month this one extends (tests/support/months.py).
pytestmark = pytest.mark.xdist_group("may")


def with_extra(scenario: MonthScenario) -> MonthScenario:
    for offset, (number, (title, files, end)) in enumerate(EXTRA.items()):
        opened = datetime(2026, 5, 6 + offset, 2, 0, tzinfo=UTC)
        story = PullRequestStory(number, opened, base="main", title=title).opened()
        if end == "merged":
            story.merged(opened + timedelta(days=2))
        elif end == "closed":
            story.closed(opened + timedelta(days=2))
        scenario.stories.append(story)
        scenario.files[(number, 0)] = files
    return scenario


@pytest.fixture(scope="module")
def megatron(
    months: Months, module_settings: Settings, github_server: FakeGitHub
) -> Iterator[tuple[Flask, FlaskClient]]:
    """May 2026 of Megatron-LM (tests/reports/test_report.py's month, and the PRs above), delivered once in
    the session: a copy for the module's tests, which only read it."""
    settings = module_settings.model_copy(update={"config_path": EXAMPLE_CONFIG})
    may = ("may", megatron_month(MONTH))
    with month_app(months, "may-drilldown", with_extra(megatron_month(MONTH)), settings, github_server, may) as app:
        yield app


def text(client: FlaskClient, url: str, **params: str) -> str:
    answer = client.get(url, query_string=params) if params else client.get(url)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_data(as_text=True)


def report_json(client: FlaskClient, cutoff: str) -> dict[str, Any]:
    return json.loads(text(client, f"/reports/{REPO}/{MONTH}.json", cutoff=cutoff))


def drill(client: FlaskClient, cutoff: str, **selection: str) -> dict[str, Any]:
    return json.loads(text(client, API, cutoff=cutoff, **selection))


# Every number of the report that links to a drill-down: a stat card, an exclusion count, a theme count.
_LINKED = re.compile(
    r'<a class="stat" id="stat-\w+" href="([^"]+)"><b>(\d+)</b>'
    r'|<a id="stat-\w+" href="([^"]+)">(\d+)</a>'
    r'|<a class="drill" href="([^"]+)">(\d+)</a>'
)


def linked_numbers(page: str) -> list[tuple[str, int]]:
    """(the drill-down URL, resolved against the report's, and the number) of every linking number."""
    found = []
    for match in _LINKED.finditer(page):
        href, number = next((match.group(i), match.group(i + 1)) for i in (1, 3, 5) if match.group(i))
        found.append((urljoin(REPORT, html.unescape(href)), int(number)))
    return found


def shown_count(page: str) -> tuple[int, int, int]:
    """A drill-down page's count, and how many changes and PRs it lists."""
    count = re.search(r'<p class="stat" id="count"><b>(\d+)</b>', page)
    assert count is not None
    return int(count.group(1)), page.count('<li class="change"'), page.count('<li class="pr"')


# --- every number equals the number that linked to it -----------------------------------------------


@pytest.mark.parametrize("cutoff", CUTOFFS)
def test_every_linking_number_opens_a_page_of_that_many(megatron: tuple[Flask, FlaskClient], cutoff: str) -> None:
    _, client = megatron
    for lang in ("en", "zh-CN"):
        report = text(client, REPORT, cutoff=cutoff, lang=lang)
        links = linked_numbers(report)
        themes = report.count('<details class="theme"')
        # four stat cards, four exclusions (and the pending count when any), each theme's count twice
        pending = 1 if "stat=pending" in report else 0
        assert len(links) == 8 + pending + 2 * themes
        for url, number in links:
            query = parse_qs(urlsplit(url).query)
            assert query["lang"] == [lang] and query["cutoff"] == [cutoff]  # kept
            page = text(client, url)
            count, changes, prs = shown_count(page)
            assert count == number, url
            if "theme" in query:
                assert changes == number and prs >= number, url
            else:
                assert prs == number and changes == 0, url
            assert f'<html lang="{lang}">' in page
    assert themes >= 2


@pytest.mark.parametrize("cutoff", CUTOFFS)
def test_the_api_lists_exactly_what_the_report_counts(megatron: tuple[Flask, FlaskClient], cutoff: str) -> None:
    _, client = megatron
    document = report_json(client, cutoff)
    by_number = {pr["number"]: pr for pr in document["pull_requests"]}
    for stat in STATISTICS:
        answer = drill(client, cutoff, stat=stat)
        assert (answer["repo"], answer["month"], answer["stat"], answer["cutoff"]) == (REPO, MONTH, stat, cutoff)
        assert answer["count"] == document["stats"][stat] == len(answer["prs"])
        numbers = [pr["number"] for pr in answer["prs"]]
        assert numbers == sorted(n for n, pr in by_number.items() if pr["counted"][stat])
        for pr in answer["prs"]:
            kept = by_number[pr["number"]]
            assert (pr["title"], pr["base_ref"]) == (kept["title"], kept["base_ref"])
            evidence = pr["evidence"]
            assert evidence["state_at_cutoff"] == kept["state_at_cutoff"]
            assert evidence["head_sha"] == kept["head_sha"]
            assert (evidence["opened_at"], evidence["merged_at"]) == (kept["created_at"], kept["merged_at"])
    for stat in EXCLUSIONS:
        answer = drill(client, cutoff, stat=stat)
        assert answer["count"] == document["excluded"][stat] == len(answer["prs"])
        assert [pr["number"] for pr in answer["prs"]] == sorted(
            n for n, pr in by_number.items() if pr["category"] == stat
        )
        for pr in answer["prs"]:
            kept = by_number[pr["number"]]
            assert pr["evidence"]["head_sha"] == kept["head_sha"]  # the head at the cutoff decided it
            assert {k: v for k, v in pr["evidence"].items() if k != "paths"} == kept["evidence"]
    pending = drill(client, cutoff, stat="pending")
    assert pending["count"] == document["pending_classification"]
    for section in document["report"]["sections"]:
        for theme in section["themes"]:
            answer = drill(client, cutoff, theme=theme["id"], section=section["id"])
            changes = [change for highlight in theme["highlights"] for change in highlight["changes"]]
            assert answer["theme"] == {
                "id": theme["id"],
                "section": section["id"],
                "en": theme["en"],
                "zh": theme["zh"],
            }
            assert answer["count"] == len(changes)
            cited = sorted(n for change in changes for n in change["group"])
            assert sorted(pr["number"] for pr in answer["prs"]) == cited == sorted(set(cited))
            assert answer["pull_requests"] == len(cited)
            for pr in answer["prs"]:
                assert by_number[pr["number"]]["theme"] == theme["id"]
                assert by_number[pr["number"]]["section"] == section["id"]


def test_the_evidence_says_what_put_each_pr_there(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    cutoff = "2026-05-20"
    window = report_json(client, cutoff)["window"]
    merged = drill(client, cutoff, stat="merged")["prs"]
    assert merged and all(window["start"] <= pr["evidence"]["merged_at"] < window["end"] for pr in merged)
    assert all("merged" in pr["evidence"]["in_window"] for pr in merged)
    opened = drill(client, cutoff, stat="opened")["prs"]
    assert all(window["start"] <= pr["evidence"]["opened_at"] < window["end"] for pr in opened)
    [closed] = drill(client, cutoff, stat="closed_unmerged")["prs"]
    assert closed["number"] == 90005 and closed["evidence"]["state_at_cutoff"] == "closed"
    assert closed["evidence"]["closed_at"] == "2026-05-12T02:00:00Z" and closed["evidence"]["merged_at"] is None
    active = drill(client, cutoff, stat="active_at_cutoff")["prs"]
    assert active and all(pr["evidence"]["state_at_cutoff"] == "open" for pr in active)
    assert all({"opened", "committed"} & set(pr["evidence"]["in_window"]) for pr in active)
    # Each exclusion: the head and the files that decided it, every changed path of the head.
    expected = {"test_only": 90001, "ci_only": 90002, "test_ci_only": 90003, "format_only": 90004}
    rules = {
        "test_only": "all_files_test",
        "ci_only": "all_files_ci",
        "test_ci_only": "all_files_test_or_ci",
        "format_only": "whitespace_only_with_format_signal",
    }
    for stat, number in expected.items():
        found = {pr["number"]: pr for pr in drill(client, cutoff, stat=stat)["prs"]}
        evidence = found[number]["evidence"]
        assert evidence["rule"] == rules[stat]
        files = [f if isinstance(f, str) else f["filename"] for f in EXTRA[number][1]]
        assert sorted(evidence["paths"]) == sorted(files) and evidence["files"] == len(files)
        assert len(evidence["head_sha"]) == 40
    assert found[90004]["evidence"]["signal"] == "title"


def test_the_same_rows_from_the_database_the_kept_digest_the_held_window_and_without_redis(
    megatron: tuple[Flask, FlaskClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, client = megatron
    cutoff = "2026-05-12"
    queries = [{"stat": stat} for stat in (*STATISTICS, *EXCLUSIONS)]

    def answers() -> list[bytes]:
        return [client.get(API, query_string={**query, "cutoff": cutoff}).get_data() for query in queries]

    with app.app_context():
        s = services()
        s.require_redis().flushdb()
        forget_held()
        read_whole = answers()  # no digest: the window read from the database, then held
        warm_month(s, REPO, MONTH)  # the worker's job keeps the month's digest in Redis
        forget_held()
        from_digest = answers()
        held = answers()
        monkeypatch.setattr(s, "redis", None)  # Redis away: the month's tables
        forget_held()
        without_redis = answers()
    assert read_whole == from_digest == held == without_redis


# --- what is asked -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "status", "said"),
    [
        ("", 400, "ask for one number of the report"),
        ("?stat=everything", 400, "'everything' is not a number of the report"),
        ("?stat=merged&theme=x&section=delivered", 400, "ask for one number"),
        ("?theme=x", 400, "theme= needs section=delivered or section=in_progress"),
        ("?theme=x&section=elsewhere", 400, "theme= needs section="),
        ("?theme=no-such-theme&section=delivered&cutoff=2026-05-20", 404, "no theme 'no-such-theme'"),
        ("?stat=merged&cutoff=2026-06-01", 400, "outside 2026-05"),
        ("?stat=merged&cutoff=13", 400, "not a day"),
    ],
)
def test_a_bad_question_is_a_clear_400_or_404(
    megatron: tuple[Flask, FlaskClient], query: str, status: int, said: str
) -> None:
    _, client = megatron
    answer = client.get(API + query)
    assert answer.status_code == status
    assert said in answer.json["error"]
    page = client.get(f"/reports/{REPO}/{MONTH}/prs.html{query}")
    assert page.status_code == status and page.mimetype == "text/html"
    assert said in html.unescape(page.get_data(as_text=True))


def test_unknown_months_repositories_and_forms(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    assert client.get(f"/api/v1/repos/{REPO}/months/2026-13/prs?stat=merged").status_code == 400
    unknown = client.get("/api/v1/repos/someone/else/months/2026-05/prs?stat=merged")
    assert unknown.status_code == 404 and "someone/else" in unknown.json["error"]
    assert client.get(f"/reports/{REPO}/{MONTH}/prs.txt?stat=merged").status_code == 404
    assert client.get(f"/reports/{REPO}/{MONTH}/prs.html?stat=merged&lang=fr").status_code == 400
    same = client.get(f"/reports/{REPO}/{MONTH}/prs.json?stat=merged&cutoff=2026-05-12").get_data()
    assert same == client.get(f"{API}?stat=merged&cutoff=2026-05-12").get_data()


def test_the_page_escapes_titles_and_keeps_its_choices(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    page = text(client, f"/reports/{REPO}/{MONTH}/prs.html", stat="active_at_cutoff", cutoff="2026-05-20")
    assert HOSTILE not in page and "<img" not in page and "<b>bold" not in page
    assert html.escape(HOSTILE, quote=False) in page
    assert 'href="https://github.com/NVIDIA/Megatron-LM/pull/90006"' in page
    # Its own links keep the number asked for, the language and the cutoff.
    assert 'href="../2026-05.html?lang=en&amp;cutoff=2026-05-20"' in page  # back to the report
    assert 'href="../2026-05/prs.html?stat=active_at_cutoff&amp;lang=zh-CN&amp;cutoff=2026-05-20"' in page
    assert 'href="../2026-05/prs.json?stat=active_at_cutoff&amp;cutoff=2026-05-20"' in page
    assert '<input type="hidden" name="stat" value="active_at_cutoff">' in page
    # The month to date (`current`) links the month it resolves to.
    current = text(client, f"/reports/{REPO}/current/prs.html", stat="merged")
    assert re.search(r'href="\.\./\d{4}-\d{2}\.html\?lang=en&amp;cutoff=', current)


def test_the_markdown_has_no_drill_down_links(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    for lang in ("en", "zh-CN"):
        assert "prs.html" not in text(client, f"/reports/{REPO}/{MONTH}.md", cutoff="2026-05-20", lang=lang)


# --- private repositories and finalised months -----------------------------------------------------

PRIVATE = "Secret-Org/Internal"
LINK_SECRET = "test-link-secret-0123456789"
ADMIN = {"Authorization": "Bearer test-admin-token"}  # the `settings` fixture's admin token


@pytest.fixture
def private(settings: Settings, tmp_path: Path) -> Iterator[tuple[Flask, FlaskClient]]:
    config = tmp_path / "tracker.yaml"
    config.write_text(f"repositories:\n  {PRIVATE}:\n    public: false\n", encoding="utf-8")
    update = {"config_path": config, "link_secret": SecretStr(LINK_SECRET)}
    with running_app(settings.model_copy(update=update)) as app:
        client = app.test_client()
        for number in (1, 2):
            story = PullRequestStory(number, datetime(2026, 5, 4, 2, tzinfo=UTC), repo=PRIVATE, title=f"Work {number}")
            story.opened().merged(datetime(2026, 5, 6, 2, tzinfo=UTC))
            for delivery in story.deliveries:
                assert post(client, delivery.body, delivery.event, delivery.delivery_id).status_code == 202
        run_jobs(app)
        yield app, client


def test_a_private_repositorys_pages_obey_its_reports_access_rules(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    page = f"/reports/{PRIVATE}/2026-05/prs.html?stat=merged&cutoff=2026-05-20"
    api = f"/api/v1/repos/{PRIVATE}/months/2026-05/prs?stat=merged&cutoff=2026-05-20"
    # Anonymous: the same 404 as the report's and as an unknown name's, the selection never checked first.
    report = client.get(f"/reports/{PRIVATE}/2026-05.json")
    for url in (api, api.replace("stat=merged", "stat=nonsense")):
        answer = client.get(url)
        assert answer.status_code == 404 and answer.json == report.json
        assert answer.headers["Cache-Control"] == report.headers["Cache-Control"]
    assert client.get(page).status_code == 404
    # The admin
    answer = client.get(api, headers=ADMIN)
    assert answer.status_code == 200 and answer.json["count"] == 2
    assert answer.headers["Cache-Control"] == "private, no-store"
    # A link to the month: its token opens the page, whose own links carry it.
    token = sign_link(LINK_SECRET, PRIVATE, "2026-05", None, timedelta(days=1))
    opened = client.get(f"{page}&token={token}")
    assert opened.status_code == 200 and opened.headers["Cache-Control"] == "private, no-store"
    body = opened.get_data(as_text=True)
    assert f'href="../2026-05.html?token={token}&amp;lang=en' in body
    assert f'href="../2026-05/prs.json?token={token}&amp;stat=merged' in body
    assert f'<input type="hidden" name="token" value="{token}">' in body
    assert client.get(f"{api}&token={token}").json["count"] == 2
    # A link to another month is refused as the report refuses it.
    other = sign_link(LINK_SECRET, PRIVATE, "2026-04", None, timedelta(days=1))
    refused = client.get(f"{api}&token={other}")
    assert refused.status_code == 403 and "the link is for" in refused.json["error"]


def test_a_link_holders_report_carries_the_token_to_its_drill_downs(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    token = sign_link(LINK_SECRET, PRIVATE, "2026-05", None, timedelta(days=1))
    report = client.get(f"/reports/{PRIVATE}/2026-05.html", query_string={"token": token, "cutoff": "2026-05-20"})
    drills = re.findall(r'href="(2026-05/prs\.html\?[^"]*)"', report.get_data(as_text=True))
    assert len(drills) >= 8
    for href in drills:
        assert client.get(f"/reports/{PRIVATE}/{html.unescape(href)}").status_code == 200, href


def test_a_finalised_month_at_its_last_day_is_drilled_from_its_record(private: tuple[Flask, FlaskClient]) -> None:
    app, client = private
    assert client.post(f"/api/v1/repos/{PRIVATE}/months/2026-05/finalize", headers=ADMIN).status_code == 202
    run_jobs(app)
    late = PullRequestStory(3, datetime(2026, 5, 20, 2, tzinfo=UTC), repo=PRIVATE, title="Late May work").opened()
    assert post(client, late.deliveries[0].body, "pull_request", late.deliveries[0].delivery_id).status_code == 202
    run_jobs(app)
    api = f"/api/v1/repos/{PRIVATE}/months/2026-05/prs"
    report = json.loads(client.get(f"/reports/{PRIVATE}/2026-05.json", headers=ADMIN).get_data())
    recorded = client.get(api, query_string={"stat": "opened"}, headers=ADMIN).json
    assert recorded["count"] == report["stats"]["opened"] == 2  # the record's, whatever came late
    assert recorded["prs"][0]["evidence"]["closed_at"] is None  # a record keeps no close instant
    live = client.get(api, query_string={"stat": "opened", "live": "1"}, headers=ADMIN).json
    assert live["count"] == 3
    themes = report["report"]["sections"][0]["themes"]
    answer = client.get(api, query_string={"theme": themes[0]["id"], "section": "delivered"}, headers=ADMIN).json
    assert answer["count"] == sum(len(h["changes"]) for h in themes[0]["highlights"])
