"""`?since=` on the reports (`tracker/web/api.py`, issue 34 item 2), on SQLite and PostgreSQL: the JSON's
`since` of cutoff B against A equals the difference of the two reports' JSON documents, computed here from
each PR's activity, state, category and theme at both cutoffs; Markdown and HTML say it in both languages;
a bad `since` is a 400 that says why; `since=last-publication` is the cutoff of the month's last publication.

The month is the drill-down's (tests/web/test_drilldown.py): 60 real Megatron-LM PRs of May 2026 with
made-up lives and six more, through the webhook and the worker's jobs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.factory import PullRequestStory  # noqa: E402
from bench.fixtures.fake_github import FakeGitHub  # noqa: E402
from bench.fixtures.scenario import REPO, MonthScenario, megatron_month  # noqa: E402
from tests.support.months import Months, month_app  # noqa: E402
from tests.web.test_drilldown import EXAMPLE_CONFIG, MONTH, with_extra  # noqa: E402
from tracker.records import store as records  # noqa: E402
from tracker.records.publish import PARTIAL, _documents  # noqa: E402
from tracker.settings import Settings  # noqa: E402
from tracker.web.context import services  # noqa: E402

REPORT = f"/reports/{REPO}/{MONTH}"
PAIRS = (
    ("2026-05-05", "2026-05-12"),
    ("2026-05-12", "2026-05-20"),
    ("2026-05-01", "2026-05-31"),
    ("2026-05-20", "2026-05-31"),
    ("2026-05-12", "2026-05-12"),
)
# Opened on May 6 changing code; a push on May 15 leaves only tests: re-classified between May 12 and 20.
RECLASSIFIED = 90101
# In one test process with tests/web/test_drilldown.py, whose month this one extends (tests/support/months.py).
pytestmark = pytest.mark.xdist_group("may")


def with_reclassification(scenario: MonthScenario) -> MonthScenario:
    opened = datetime(2026, 5, 6, 2, tzinfo=UTC)
    story = PullRequestStory(RECLASSIFIED, opened, base="main", title="Rework the MoE router's capacity")
    scenario.stories.append(story.opened().pushed(datetime(2026, 5, 15, 2, tzinfo=UTC)))
    scenario.files[(RECLASSIFIED, 0)] = ["megatron/core/transformer/moe/router.py"]
    scenario.files[(RECLASSIFIED, 1)] = ["tests/unit_tests/transformer/moe/test_router.py"]
    return scenario


@pytest.fixture(scope="module")
def megatron(
    months: Months, module_settings: Settings, github_server: FakeGitHub
) -> Iterator[tuple[Flask, FlaskClient]]:
    """May 2026 of Megatron-LM (the drill-down's month and the re-classified PR), delivered once in the
    session: a copy for the module's tests, which only read it."""
    settings = module_settings.model_copy(update={"config_path": EXAMPLE_CONFIG})
    month = with_reclassification(with_extra(megatron_month(MONTH)))
    drilldown = ("may-drilldown", with_extra(megatron_month(MONTH)))
    with month_app(months, "may-since", month, settings, github_server, drilldown) as app:
        yield app


def text(client: FlaskClient, url: str, **params: str) -> str:
    answer = client.get(url, query_string=params)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_data(as_text=True)


def document(client: FlaskClient, cutoff: str, **params: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(text(client, f"{REPORT}.json", cutoff=cutoff, **params))
    return found


# What each statistic of a PR's JSON row says of its status, its category aside (the difference compares
# statuses; a change of category is a re-classification).
STATUS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "newly_merged": lambda pr: pr["activity"]["merged"],
    "newly_opened": lambda pr: pr["activity"]["opened"],
    "closed_unmerged": lambda pr: pr["activity"]["closed"] and pr["state_at_cutoff"] == "closed",
    "reopened": lambda pr: pr["activity"]["reopened"] and pr["state_at_cutoff"] == "open",
}


def difference(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    before = {pr["number"]: pr for pr in earlier["pull_requests"]}
    after = {pr["number"]: pr for pr in later["pull_requests"]}
    found: dict[str, Any] = {"from": earlier["cutoff"]}
    for name, says in STATUS.items():
        found[name] = [
            n
            for n, pr in sorted(after.items())
            if pr["category"] == "substantive" and says(pr) and not (n in before and says(before[n]))
        ]
    found["reclassified"] = [
        {"number": n, "from": before[n]["category"], "to": pr["category"]}
        for n, pr in sorted(after.items())
        if n in before and before[n]["category"] != pr["category"]
    ]
    found["moved"] = [
        n
        for n, pr in sorted(after.items())
        if n in before
        and pr["theme"] is not None
        and before[n]["theme"] is not None
        and pr["section"] == before[n]["section"]
        and pr["theme"] != before[n]["theme"]
    ]
    return found


@pytest.mark.parametrize(("since", "cutoff"), PAIRS)
def test_the_since_of_b_against_a_is_the_difference_of_their_documents(
    megatron: tuple[Flask, FlaskClient], since: str, cutoff: str
) -> None:
    _, client = megatron
    earlier, later = document(client, since), document(client, cutoff)
    answer = document(client, cutoff, since=since)
    expected = difference(earlier, later)
    got = answer.pop("since")
    assert [item["number"] for item in got["moved"]] == expected.pop("moved")
    for item in got["moved"]:
        before = next(pr for pr in earlier["pull_requests"] if pr["number"] == item["number"])
        now = next(pr for pr in later["pull_requests"] if pr["number"] == item["number"])
        assert (item["from"]["id"], item["to"]["id"]) == (before["theme"], now["theme"])
    assert {k: v for k, v in got.items() if k != "moved"} == expected
    assert answer == later  # the rest of the document is the report's
    if since == cutoff:
        assert not any(got[key] for key in ("newly_merged", "newly_opened", "reclassified", "moved"))
    # The API's JSON is the report's.
    api = client.get(f"/api/v1/repos/{REPO}/months/{MONTH}", query_string={"cutoff": cutoff, "since": since})
    assert api.status_code == 200 and api.get_json()["since"] == got


def test_something_changes_between_the_pairs(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    got = document(client, "2026-05-20", since="2026-05-05")["since"]
    assert got["newly_merged"] and got["newly_opened"] and got["closed_unmerged"]
    assert document(client, "2026-05-31", since="2026-05-01")["since"]["moved"]


def test_a_push_that_leaves_only_tests_shows_both_categories(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    since = document(client, "2026-05-20", since="2026-05-12")["since"]
    assert {"number": RECLASSIFIED, "from": "substantive", "to": "test_only"} in since["reclassified"]
    for lang, said in (("en", "substantive → test-only"), ("zh-CN", "实质性 → 纯 UT")):
        for fmt in ("md", "html"):
            body = text(client, f"{REPORT}.{fmt}", cutoff="2026-05-20", since="2026-05-12", lang=lang)
            line = next(line for line in body.splitlines() if f"/pull/{RECLASSIFIED}" in line)
            assert said in line


def test_markdown_and_html_in_both_languages(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    since = document(client, "2026-05-20", since="2026-05-05")["since"]
    headings = {
        ("md", "en"): "\n## Since May 5, 2026\n",
        ("md", "zh-CN"): "\n## 自 2026年5月5日 以来的变化\n",
        ("html", "en"): '<h2 id="since">Since May 5, 2026</h2>',
        ("html", "zh-CN"): '<h2 id="since">自 2026年5月5日 以来的变化</h2>',
    }
    for (fmt, lang), heading in headings.items():
        body = text(client, f"{REPORT}.{fmt}", cutoff="2026-05-20", since="2026-05-05", lang=lang)
        assert heading in body
        plain = text(client, f"{REPORT}.{fmt}", cutoff="2026-05-20", lang=lang)
        assert heading not in plain
        for number in since["newly_merged"]:
            assert f"/pull/{number}" in body.split(heading, 1)[1]
    # Before the month: the month's first day.
    assert document(client, "2026-05-20", since="2026-04-02")["since"]["from"] == "2026-05-01"


@pytest.mark.parametrize(
    ("since", "said"),
    [
        ("yesterday", "is not a day"),
        ("2026-5-5", "is not a day"),
        ("2026-05-32", "is not a day"),
        ("2026-05-21", "after the cutoff 2026-05-20"),
    ],
)
def test_a_bad_since_is_a_400_that_says_why(megatron: tuple[Flask, FlaskClient], since: str, said: str) -> None:
    _, client = megatron
    for fmt in ("json", "md"):
        answer = client.get(f"{REPORT}.{fmt}", query_string={"cutoff": "2026-05-20", "since": since})
        assert answer.status_code == 400 and said in answer.get_json()["error"]
    page = client.get(f"{REPORT}.html", query_string={"cutoff": "2026-05-20", "since": since})
    assert page.status_code == 400 and said in page.get_data(as_text=True)
    assert page.content_type.startswith("text/html")


def test_since_the_last_publication(megatron: tuple[Flask, FlaskClient], monkeypatch: pytest.MonkeyPatch) -> None:
    app, client = megatron
    answer = client.get(f"{REPORT}.json", query_string={"cutoff": "2026-05-20", "since": "last-publication"})
    assert answer.status_code == 400 and "has no publication of 2026-05 yet" in answer.get_json()["error"]
    # A partial edition that ran at 2026-05-12 09:00 in Shanghai: through May 12.
    at = int(datetime(2026, 5, 12, 1, tzinfo=UTC).timestamp() * 1000)
    monkeypatch.setattr(records, "now_ms", lambda: at)
    with app.app_context():
        services().records.record_publication(
            REPO, MONTH, kind="files", edition="partial", target="/tmp/x", content_hash="0" * 64, result="written"
        )
    since = document(client, "2026-05-20", since="last-publication")["since"]
    assert since == document(client, "2026-05-20", since="2026-05-12")["since"]
    answer = client.get(f"{REPORT}.json", query_string={"cutoff": "2026-05-10", "since": "last-publication"})
    assert answer.status_code == 400 and "through 2026-05-12, after the cutoff 2026-05-10" in answer.get_json()["error"]


# After test_since_the_last_publication (the module's tests run in order, in one process): the month's
# publications are the module's database's.
def test_the_weekly_partial_edition_says_what_changed_since_the_last_one(
    megatron: tuple[Flask, FlaskClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, client = megatron
    with app.app_context():
        # The month's cutoff is its last day (it ended): the last partial edition ran on May 22 (Shanghai).
        at = int(datetime(2026, 5, 22, 1, tzinfo=UTC).timestamp() * 1000)
        monkeypatch.setattr(records, "now_ms", lambda: at)
        services().records.record_publication(
            REPO, MONTH, kind="issue", edition="partial", target="o/r#1", content_hash="1" * 64, result="updated"
        )
        documents = _documents(services(), REPO, MONTH, PARTIAL)
    assert documents is not None
    english, chinese = documents
    assert "\n## Since Last Week\n" in english and "\n## 上周以来的变化\n" in chinese
    assert "From the end of 2026-05-22 to the end of 2026-05-31 (Asia/Shanghai)" in english
    since = document(client, "2026-05-31", since="2026-05-22")["since"]
    weekly = english.split("\n## Since Last Week\n", 1)[1].split("\n## ", 1)[0]
    for number in since["newly_merged"] + since["newly_opened"]:
        assert f"/pull/{number})" in weekly
    asked = text(client, f"{REPORT}.md", cutoff="2026-05-31", since="2026-05-22", live="1")
    assert weekly == asked.split("\n## Since May 22, 2026\n", 1)[1].split("\n## ", 1)[0]
    # Run again after it ran at this cutoff (GitHub made it wait): the week before the cutoff, not nothing.
    monkeypatch.setattr(records, "now_ms", lambda: int(datetime(2026, 6, 2, tzinfo=UTC).timestamp() * 1000))
    with app.app_context():
        services().records.record_publication(
            REPO, MONTH, kind="files", edition="partial", target="/tmp/x", content_hash="2" * 64, result="written"
        )
        again = _documents(services(), REPO, MONTH, PARTIAL)
    assert again is not None and "From the end of 2026-05-24 to the end of 2026-05-31" in again[0]
