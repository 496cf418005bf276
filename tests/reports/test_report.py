"""The monthly report: Markdown in both languages, HTML and JSON, at a partial and a final cutoff."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.paths import require_shared
from tests.support import bullets

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.fake_github import FakeGitHub  # noqa: E402
from bench.fixtures.paths import ROOT  # noqa: E402
from bench.fixtures.scenario import REPO, megatron_month  # noqa: E402
from tests.support.app import post, run_jobs  # noqa: E402
from tests.support.months import Months, month_app  # noqa: E402
from tracker.settings import Settings  # noqa: E402
from tracker.store.rebuild import rebuild  # noqa: E402
from tracker.web.context import services  # noqa: E402

EXAMPLE_CONFIG = ROOT / "examples" / "megatron-lm.yaml"
GOLDEN = Path(__file__).resolve().parent / "golden"
CUTOFFS = {"partial": "2026-05-15", "final": "2026-05-31"}
CITATION = re.compile(r"\[([^\]\[]+) #(\d+)\]\(https://github\.com/NVIDIA/Megatron-LM/pull/(\d+)\)")
# In one test process with the modules whose months extend this one (tests/web/test_drilldown.py, test_since.py):
# each is this month's copy with more delivered, and two processes asking for a month at once would leave one
# waiting for the other's delivery (tests/support/months.py).
pytestmark = pytest.mark.xdist_group("may")


@pytest.fixture(scope="module")
def megatron(
    months: Months, module_settings: Settings, github_server: FakeGitHub
) -> Iterator[tuple[Flask, FlaskClient]]:
    """May 2026 of Megatron-LM through the webhook, files from the fake GitHub, the shipped taxonomy:
    delivered once in the session (tests/support/months.py), a copy for the module's tests, which only read
    it (a rebuild gives the same month)."""
    settings = module_settings.model_copy(update={"config_path": EXAMPLE_CONFIG})
    with month_app(months, "may", megatron_month(), settings, github_server) as app:
        yield app


def get(client: FlaskClient, name: str, **params: str) -> str:
    answer = client.get(f"/reports/{REPO}/{name}", query_string=params)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_data(as_text=True)


def test_golden_markdown_in_both_languages(megatron: tuple[Flask, FlaskClient]) -> None:
    app, client = megatron
    for kind, cutoff in CUTOFFS.items():
        for lang in ("en", "zh-CN"):
            text = get(client, "2026-05.md", cutoff=cutoff, lang=lang)
            golden = GOLDEN / f"megatron-2026-05-{kind}.{lang}.md"
            if os.environ.get("TRACKER_UPDATE_GOLDEN"):
                golden.parent.mkdir(exist_ok=True)
                golden.write_text(text, encoding="utf-8")
            assert text == golden.read_text(encoding="utf-8"), f"{golden.name} changed: TRACKER_UPDATE_GOLDEN=1"


def test_rendering_is_deterministic_and_survives_a_rebuild(megatron: tuple[Flask, FlaskClient]) -> None:
    app, client = megatron
    names = [("2026-05.md", "en"), ("2026-05.md", "zh-CN"), ("2026-05.html", "en"), ("2026-05.json", "en")]
    before = [get(client, name, cutoff=CUTOFFS["partial"], lang=lang) for name, lang in names]
    assert before == [get(client, name, cutoff=CUTOFFS["partial"], lang=lang) for name, lang in names]
    with app.app_context():
        s = services()
        rebuild(s.ledger, s.state, s.config)
    assert before == [get(client, name, cutoff=CUTOFFS["partial"], lang=lang) for name, lang in names]


def sections_of(markdown: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", markdown, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.mark.parametrize("kind", CUTOFFS)
def test_every_narrated_pr_is_cited_once_in_both_languages(megatron: tuple[Flask, FlaskClient], kind: str) -> None:
    _, client = megatron
    cutoff = CUTOFFS[kind]
    document = json.loads(get(client, "2026-05.json", cutoff=cutoff))
    narrated = {pr["number"]: pr for pr in document["pull_requests"] if pr["section"]}
    assert narrated, "the scenario narrates something"
    orders = []
    for lang in ("en", "zh-CN"):
        markdown = get(client, "2026-05.md", cutoff=cutoff, lang=lang)
        cited = [(branch, int(number), int(url_number)) for branch, number, url_number in CITATION.findall(markdown)]
        numbers = [number for _, number, _ in cited]
        assert len(numbers) == len(set(numbers)), f"a PR is cited twice in {lang}"
        assert set(numbers) == set(narrated), f"{lang} cites {set(numbers) ^ set(narrated)} wrongly"
        for branch, number, url_number in cited:
            assert number == url_number
            # Branches are escaped in Markdown (`core\_r0.17.0`): unescaped, the branch at the cutoff.
            assert re.sub(r"\\(.)", r"\1", branch) == narrated[number]["base_ref"]
        orders.append(numbers)
    assert orders[0] == orders[1], "English and Chinese cite the same PRs in the same order"
    # not narrated: excluded, closed without merge, pending
    for pr in document["pull_requests"]:
        if pr["category"] != "substantive":
            assert pr["section"] is None


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_theme_and_highlight_limits(megatron: tuple[Flask, FlaskClient], lang: str) -> None:
    _, client = megatron
    markdown = get(client, "2026-05.md", cutoff=CUTOFFS["final"], lang=lang)
    sections = sections_of(markdown)
    delivered = sections["已交付成果" if lang == "zh-CN" else "Delivered"]
    themes = re.split(r"^### .+$", delivered, flags=re.MULTILINE)[1:]
    assert 1 <= len(themes) <= 10  # the upkeep theme, last, among them
    for theme in themes:
        # At most 4 highlight lines, each naming at most three changes within 40 words; every other change of
        # the theme one a line in its fold.
        highlights = [line for line in theme.splitlines() if line.startswith("- **")]
        assert len(highlights) <= 4
        for line in theme.splitlines():
            if line.startswith("- **"):
                assert CITATION.search(line) and 1 <= len(bullets.changes(line)) <= 3, line
                assert bullets.words(line) - len(bullets.CJK.findall(line)) / 2 <= 40, line
            elif line.startswith("- "):
                assert len(bullets.changes(line)) == 1, line
        assert highlights or "<details><summary>" in theme


def test_overview_lines_match_the_statistics(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    document = json.loads(get(client, "2026-05.json", cutoff=CUTOFFS["partial"]))
    s, e = document["stats"], document["excluded"]
    english = get(client, "2026-05.md", cutoff=CUTOFFS["partial"])
    assert (
        f"- Substantive PR activity after filtering: opened {s['opened']}; merged {s['merged']}; "
        f"closed without merge {s['closed_unmerged']}; active at cutoff {s['active_at_cutoff']}.\n"
    ) in english
    assert (
        f"- Excluded from the report and statistics: test-only {e['test_only']}, CI-only {e['ci_only']}, "
        f"test/CI-only {e['test_ci_only']}, format-only {e['format_only']}.\n"
    ) in english
    chinese = get(client, "2026-05.md", cutoff=CUTOFFS["partial"], lang="zh-CN")
    assert (
        f"- 过滤后的实质性 PR 活动：新开 {s['opened']}；合并 {s['merged']}；关闭未合并 {s['closed_unmerged']}；"
        f"截止时仍在进行 {s['active_at_cutoff']}。\n"
    ) in chinese
    assert (
        f"- 不计入报告正文和统计：纯 UT {e['test_only']}，纯 CI {e['ci_only']}，UT/CI-only {e['test_ci_only']}，"
        f"纯格式化 {e['format_only']}。\n"
    ) in chinese
    assert english.startswith("# Megatron-LM Monthly Activity Report — May 2026 (through May 15, 2026)\n")
    assert chinese.startswith("# Megatron\\-LM 月度活动报告 — 2026年5月（截至2026-05-15）\n") or chinese.startswith(
        "# Megatron-LM 月度活动报告 — 2026年5月（截至2026-05-15）\n"
    )
    final = get(client, "2026-05.md", cutoff=CUTOFFS["final"])
    assert "(Final, through May 31, 2026)" in final.splitlines()[0]
    assert "（最终版，截至2026-05-31）" in get(client, "2026-05.md", cutoff=CUTOFFS["final"], lang="zh-CN")


def test_twins_are_one_change(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    document = json.loads(get(client, "2026-05.json", cutoff=CUTOFFS["final"]))
    groups = [pr["group"] for pr in document["pull_requests"] if pr["group"] and len(pr["group"]) > 1]
    assert groups, "the scenario has dev/main twins"
    branches = {pr["number"]: pr["base_ref"] for pr in document["pull_requests"]}
    for group in groups:
        assert len({branches[n] for n in group}) > 1  # twins live on different branches


def test_formats_media_types_and_errors(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    answer = client.get(f"/reports/{REPO}/2026-05.md?cutoff=2026-05-15")
    assert answer.headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert client.get(f"/reports/{REPO}/2026-05.html").headers["Content-Type"] == "text/html; charset=utf-8"
    assert client.get(f"/reports/{REPO}/current.json").status_code == 200
    assert client.get(f"/reports/{REPO}/2026-05.pdf").status_code == 404
    assert client.get(f"/reports/{REPO}/2026-05.md?lang=fr").status_code == 400
    assert client.get(f"/reports/{REPO}/2026-13.md").status_code == 400
    assert client.get(f"/reports/{REPO}/2026-05.md?cutoff=2026-06-01").status_code == 400
    assert client.get("/reports/nobody/nothing/2026-05.md").status_code == 404


def test_html_page_has_chart_themes_and_switches(megatron: tuple[Flask, FlaskClient]) -> None:
    _, client = megatron
    page = get(client, "2026-05.html", cutoff=CUTOFFS["partial"])
    assert '<figure id="daily-activity">' in page and "<svg" in page and "<rect" in page
    assert 'id="language-switch"' in page and "lang=zh-CN" in page
    assert '<input type="date" id="cutoff" name="cutoff" value="2026-05-15"' in page
    assert re.search(r'<a class="cite" href="https://github.com/NVIDIA/Megatron-LM/pull/\d+">', page)
    assert "http://" not in page.replace("http://www.w3.org", "")  # no request to any other host
    assert not re.search(r'(src|href)="(https?:)?//(?!github\.com/)', page)


def test_cli_render_writes_the_same_bytes(megatron: tuple[Flask, FlaskClient]) -> None:
    from click.testing import CliRunner

    from tracker.cli import main

    app, client = megatron
    with app.app_context():
        settings = services().settings  # over the module's copy of the month
    env = {
        "TRACKER_DATABASE_URL": settings.resolved_database_url,
        "TRACKER_CONFIG": str(EXAMPLE_CONFIG),
        "TRACKER_DATA_DIR": str(settings.data_dir),
        "REDIS_URL": str(settings.redis_url),
    }
    result = CliRunner().invoke(
        main,
        ["render", "--repo", REPO, "--month", "2026-05", "--cutoff", "2026-05-15", "--lang", "zh-CN"],
        env=env,
    )
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes.decode() == get(client, "2026-05.md", cutoff="2026-05-15", lang="zh-CN")


def untrusted_titles() -> list[str]:
    return [
        "<script>alert('x')</script> fix",
        "Break [out](javascript:alert(1)) of links",
        "Pipes | and `backticks` and **bold**",
        "Line one\n## Injected heading\n- injected bullet",
        "A very long title " + "x" * 500,
        "![image](http://evil.example/x.png) & <b>bold</b>",
    ]


def test_untrusted_titles_cannot_break_or_inject(app: Flask, client: FlaskClient, github: FakeGitHub) -> None:
    from datetime import UTC, datetime

    from bench.fixtures.factory import PullRequestStory

    for number, title in enumerate(untrusted_titles(), start=1):
        story = PullRequestStory(number, datetime(2026, 5, 3, tzinfo=UTC), title=title).opened()
        for d in story.deliveries:
            post(client, d.body, d.event, d.delivery_id)
    run_jobs(app)
    for lang in ("en", "zh-CN"):
        markdown = get(client, "2026-05.md", cutoff="2026-05-20", lang=lang)
        # The folds' own tags aside, no raw HTML.
        ours = re.sub(r"^<details><summary>[^<>]*</summary>$|^</details>$", "", markdown, flags=re.MULTILINE)
        assert not re.search(r"(?<!\\)<", ours), "raw HTML from a title"
        assert not re.search(r"(?<!\\)\]\((javascript|http://evil)", markdown), "a link from a title"
        assert not re.search(r"(?<!\\)`backticks", markdown)
        assert "\n## Injected" not in markdown and "\n- injected" not in markdown
        assert len(CITATION.findall(markdown)) == len(untrusted_titles())
        assert max(len(line) for line in markdown.splitlines()) < 2000
    page = get(client, "2026-05.html", cutoff="2026-05-20")
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<b>bold</b>" not in page
    document: dict[str, Any] = json.loads(get(client, "2026-05.json", cutoff="2026-05-20"))
    assert {pr["title"] for pr in document["pull_requests"]} == set(untrusted_titles())
