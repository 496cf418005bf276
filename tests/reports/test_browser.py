"""The HTML report in a real browser: headless Chromium (Debian's package) driven by Playwright.

Chromium is installed with apt-get by this test's setup when it is missing (as CI runs as root);
Playwright's own browser download is never used. The screenshot is saved under test-output/.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from werkzeug.serving import make_server

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.fake_github import FakeGitHub  # noqa: E402
from bench.fixtures.paths import ROOT  # noqa: E402
from bench.fixtures.scenario import REPO, megatron_month  # noqa: E402
from tests.support.app import running_app  # noqa: E402
from tests.support.months import Months  # noqa: E402
from tracker.settings import Settings  # noqa: E402

pytestmark = pytest.mark.system

OUTPUT = ROOT / "test-output"
CHROMIUM = "/usr/bin/chromium"
# The flags a headless Chromium needs on this closed network (no background fetches at start-up).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def ensure_chromium() -> str:
    # One installer at a time: the session's other test processes wait here (apt-get takes dpkg's lock and
    # fails at once when another holds it).
    with open(Path(tempfile.gettempdir()) / "tracker-tests-chromium.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not Path(CHROMIUM).exists():
            _install("chromium")
        _ensure_chinese_fonts()
    return CHROMIUM


def _install(package: str) -> None:
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.skip(f"{package} is missing and apt-get is not available to install it")
    install = [apt, "install", "-y", "-q", package]
    if subprocess.run(install, capture_output=True, timeout=900).returncode != 0:
        subprocess.run([apt, "update", "-q"], check=True, capture_output=True, timeout=600)
        subprocess.run(install, check=True, capture_output=True, timeout=900)


def _ensure_chinese_fonts() -> None:
    """Best effort: without a CJK font the Chinese screenshot shows boxes (the page is still right)."""
    listed = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True)
    apt = shutil.which("apt-get")
    if listed.returncode == 0 and listed.stdout.strip() or apt is None:
        return
    subprocess.run([apt, "install", "-y", "-q", "fonts-noto-cjk"], capture_output=True, timeout=900)


@pytest.fixture
def served_report(months: Months, settings: Settings, github: FakeGitHub) -> Iterator[str]:
    """30 PRs of May 2026 with the shipped taxonomy: a copy, for each test, of the month delivered once in the
    session (tests/support/months.py)."""
    shipped = settings.model_copy(update={"config_path": ROOT / "examples" / "megatron-lm.yaml"})
    with running_app(months.copy("may-30-browser", megatron_month(count=30), shipped, github)) as app:
        yield from _served(app)


@pytest.fixture
def served_empty(settings: Settings) -> Iterator[str]:
    """The service before any delivery."""
    with running_app(settings) as app:
        yield from _served(app)


def _served(app: Flask) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_html_report_in_headless_chromium(served_report: str, lang: str) -> None:
    from playwright.sync_api import sync_playwright

    executable = ensure_chromium()
    OUTPUT.mkdir(exist_ok=True)
    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("request", lambda request: requests.append(request.url))
            url = f"{served_report}/reports/{REPO}/2026-05.html?cutoff=2026-05-15&lang={lang}"
            answer = page.goto(url)
            assert answer is not None and answer.status == 200
            chart = page.locator("#daily-activity svg")
            assert chart.count() == 1
            assert page.locator("#daily-activity rect").count() > 0
            assert chart.bounding_box() is not None and chart.bounding_box()["width"] > 200  # type: ignore[index]
            themes = page.locator("details.theme")
            assert themes.count() >= 2
            assert page.locator("details.theme a.cite").count() >= 10
            heading = "已交付成果" if lang == "zh-CN" else "Delivered"
            assert page.locator("h2#delivered").inner_text() == heading
            # Themes start folded: a theme's name, size and one-line summary show, its lines do not.
            first = themes.first
            assert first.locator("summary h3").is_visible() and first.locator(".summary").is_visible()
            assert not first.locator("a.cite").first.is_visible()
            first.locator("summary").first.click()
            assert first.locator("a.cite").first.is_visible()  # opened: its highlights' lines
            folded = first.locator("details.folded")
            if folded.count():  # the rest of the theme, one change a line, folded again
                assert not folded.locator("a.cite").first.is_visible()
                folded.locator("summary").click()
                assert folded.locator("a.cite").first.is_visible()
            # The table of contents names every theme and leads to it.
            toc = page.locator("nav.toc ol ol li > a")  # each theme's name (its count links its drill-down)
            assert toc.count() == themes.count()
            last = toc.nth(1)  # one with enough page below it to be scrolled to the top
            target = last.get_attribute("href")
            assert target is not None and page.locator(target).count() == 1
            last.click()  # the page scrolls to the theme's name and summary (its lines open with a click)
            top = page.evaluate(f"document.querySelector('{target}').getBoundingClientRect().top")
            assert 0 <= top < 900 - 100, top  # on the screen, not below it
            page.screenshot(path=str(OUTPUT / f"report-2026-05-{lang}.png"), full_page=True)
            # A phone-sized screen: no sideways scrolling of the page; the chart keeps labels of 10 px (it scrolls
            # within its figure); with its themes folded, the page ends In Progress within 8 screens.
            page.goto(url)
            page.set_viewport_size({"width": 390, "height": 844})
            assert page.evaluate("document.documentElement.scrollWidth") <= 400
            label = page.locator("#daily-activity svg text").first.bounding_box()
            assert label is not None and label["height"] >= 10, label
            end = page.evaluate(
                "document.getElementById('in_progress').closest('section').getBoundingClientRect().bottom + scrollY"
            )
            assert end <= 8 * 844, end
            page.screenshot(path=str(OUTPUT / f"report-2026-05-{lang}-phone.png"))
            # the cutoff picker and the language switch lead to working pages
            page.fill("#cutoff", "2026-05-10")
            with page.expect_navigation():
                page.click("nav.controls button")
            assert "cutoff=2026-05-10" in page.url
            assert page.locator("#cutoff").input_value() == "2026-05-10"
            with page.expect_navigation():
                page.click("#language-switch")
            assert ("lang=en" if lang == "zh-CN" else "lang=zh-CN") in page.url
        finally:
            browser.close()
    assert problems == []
    assert all(r.startswith(served_report) for r in requests), [r for r in requests if not r.startswith(served_report)]


STAT_CARDS = ("opened", "merged", "closed_unmerged", "active_at_cutoff")
SCREENS = {"desktop": {"width": 1200, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_stat_cards_lead_to_their_drill_down_pages(served_report: str, screen: str, lang: str) -> None:
    """Issue 34: each stat card, an exclusion count and a theme's count open the page of the PRs they count,
    as many as the number said, with the language and the cutoff kept; its own link leads back."""
    size = SCREENS[screen]
    report = f"{served_report}/reports/{REPO}/2026-05.html?lang={lang}&cutoff=2026-05-15"  # as its links write it
    with chromium_page(served_report) as (page, problems):
        page.set_viewport_size(size)
        page.goto(report)
        for stat in STAT_CARDS:
            card = page.locator(f"a.stat#stat-{stat}")
            number = int(card.locator("b").inner_text())
            with page.expect_navigation():
                card.click()
            assert f"/reports/{REPO}/2026-05/prs.html?stat={stat}&lang={lang}&cutoff=2026-05-15" in page.url
            assert int(page.locator("#count b").inner_text()) == number
            assert page.locator("li.pr").count() == number
            assert page.locator("html").get_attribute("lang") == lang
            # No sideways scrolling of the page, on a phone too.
            assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
            if stat == "merged":
                page.screenshot(path=str(OUTPUT / f"drilldown-merged-{lang}-{screen}.png"), full_page=True)
            with page.expect_navigation():
                page.click("#report-link")
            assert page.url == report
        # An exclusion count and a theme's count (the table of contents') open theirs.
        for link, item in (("p.excluded a#stat-test_only", "li.pr"), ("nav.toc ol ol a.drill", "li.change")):
            number = int(page.locator(link).first.inner_text())
            with page.expect_navigation():
                page.locator(link).first.click()
            assert "/2026-05/prs.html?" in page.url and f"lang={lang}" in page.url and "cutoff=2026-05-15" in page.url
            assert int(page.locator("#count b").inner_text()) == number == page.locator(item).count()
            page.go_back()
    assert problems == []


UNKNOWN = "/reports/someone/else/current.html"


def expected_404(problems: list[str]) -> None:
    """Chromium logs a console error for every 404 answer, the one asked for on purpose included."""
    problems[:] = [p for p in problems if not ("status of 404" in p and p.endswith(f"{UNKNOWN})"))]


@contextmanager
def chromium_page(base: str) -> Iterator[tuple[Any, list[str]]]:
    """A page of a headless Chromium, and the problems it saw (console errors, page errors, and any
    request to another host than `base`)."""
    from playwright.sync_api import sync_playwright

    executable = ensure_chromium()
    OUTPUT.mkdir(exist_ok=True)
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on(
                "console",
                lambda m: (
                    problems.append(f"{m.type}: {m.text} ({m.location.get('url')})") if m.type == "error" else None
                ),
            )
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("request", lambda r: None if r.url.startswith(base) else problems.append(f"request: {r.url}"))
            yield page, problems
        finally:
            browser.close()


def test_the_index_without_data_says_how_to_begin(served_empty: str) -> None:
    with chromium_page(served_empty) as (page, problems):
        answer = page.goto(f"{served_empty}/")
        assert answer is not None and answer.status == 200
        text = page.locator("body").inner_text()
        assert "tracker demo" in text
        assert "cloudflared tunnel --url http://127.0.0.1:8000" in text and "ngrok http 8000" in text
        assert "127.0.0.1:8000/webhook" not in text
        page.screenshot(path=str(OUTPUT / "index-empty.png"), full_page=True)
        # An unknown repository's page, in the browser, is a page (404) that leads back here.
        answer = page.goto(f"{served_empty}{UNKNOWN}")
        assert answer is not None and answer.status == 404
        expected_404(problems)
        said = page.locator("#message").inner_text()
        assert "no reports of someone/else to show: no deliveries have been received for it" in said
        with page.expect_navigation():
            page.click("text=All repositories and months")
        assert page.url == f"{served_empty}/"
    assert problems == []


def test_the_index_leads_to_a_months_html_report(served_report: str) -> None:
    with chromium_page(served_report) as (page, problems):
        answer = page.goto(f"{served_report}/")
        assert answer is not None and answer.status == 200
        assert page.locator("h2", has_text=REPO).count() == 1
        months = page.locator("section.repository a.month:not(.current)")
        assert months.count() >= 1
        assert page.locator("section.repository a.month.current").count() == 1
        page.screenshot(path=str(OUTPUT / "index.png"), full_page=True)
        month = months.first.inner_text()
        assert month == "2026-05"
        with page.expect_navigation():
            months.first.click()
        assert page.url == f"{served_report}/reports/{REPO}/2026-05.html"
        assert page.locator("#daily-activity svg").count() == 1
        assert page.locator("details.theme a.cite").count() >= 10
        # The error page of an unknown repository links the known ones' month to date.
        answer = page.goto(f"{served_report}{UNKNOWN}")
        assert answer is not None and answer.status == 404
        expected_404(problems)
        with page.expect_navigation():
            page.click(f"#repositories a:has-text('{REPO}')")
        assert page.url == f"{served_report}/reports/{REPO}/current.html"
        assert page.locator("nav.controls").count() == 1  # the report page, with its cutoff picker
    assert problems == []


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_400_change_month_on_a_phone_ends_in_progress_within_eight_screens(lang: str) -> None:
    """Issue 32: the month-end page of a big month, its themes folded as it opens, on a 390 × 844 screen."""
    from tests.core.test_clusters import generated_month, megatron_taxonomy
    from tracker.reports.render import render

    report = generated_month(600, 5, megatron_taxonomy())  # about two thirds merged, a third open
    narrated = sum(len(section.changes) for section in report.sections)
    assert narrated >= 400
    with chromium_page("about:") as (page, problems):
        page.set_viewport_size({"width": 390, "height": 844})
        page.set_content(render(report, "html", lang))
        assert page.evaluate("document.documentElement.scrollWidth") <= 400
        end = page.evaluate(
            "document.getElementById('in_progress').closest('section').getBoundingClientRect().bottom + scrollY"
        )
        assert end <= 8 * 844, (narrated, end / 844)
        label = page.locator("#daily-activity svg text").first.bounding_box()
        assert label is not None and label["height"] >= 10, label
        page.screenshot(path=str(OUTPUT / f"report-400-{lang}-phone.png"), full_page=True)
    assert problems == []
