"""The HTML report in a real browser: headless Chromium (Debian's package) driven by Playwright.

Chromium is installed with apt-get by this test's setup when it is missing (as CI runs as root);
Playwright's own browser download is never used. The screenshot is saved under test-output/.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from tests.conftest import running_app
from tests.fake_github import FakeGitHub
from tests.paths import ROOT  # noqa: E402
from tests.scenario import REPO, deliver, megatron_month
from tracker.settings import Settings

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
    if Path(CHROMIUM).exists():
        _ensure_chinese_fonts()
        return CHROMIUM
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.skip("Chromium is missing and apt-get is not available to install it")
    install = [apt, "install", "-y", "-q", "chromium"]
    if subprocess.run(install, capture_output=True, timeout=900).returncode != 0:
        subprocess.run([apt, "update", "-q"], check=True, capture_output=True, timeout=600)
        subprocess.run(install, check=True, capture_output=True, timeout=900)
    _ensure_chinese_fonts()
    return CHROMIUM


def _ensure_chinese_fonts() -> None:
    """Best effort: without a CJK font the Chinese screenshot shows boxes (the page is still right)."""
    listed = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True)
    apt = shutil.which("apt-get")
    if listed.returncode == 0 and listed.stdout.strip() or apt is None:
        return
    subprocess.run([apt, "install", "-y", "-q", "fonts-noto-cjk"], capture_output=True, timeout=900)


@pytest.fixture
def served_report(settings: Settings, github: FakeGitHub) -> Iterator[str]:
    config = ROOT / "examples" / "megatron-lm.yaml"
    with running_app(settings.model_copy(update={"config_path": config})) as app:
        client = app.test_client()
        deliver(megatron_month(count=30), app, client, github)
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
            themes = page.locator("article.theme")
            assert themes.count() >= 2
            assert page.locator("article.theme a.cite").count() >= 10
            heading = "已交付成果" if lang == "zh-CN" else "Delivered"
            assert page.locator("h2#delivered").inner_text() == heading
            page.screenshot(path=str(OUTPUT / f"report-2026-05-{lang}.png"), full_page=True)
            # a phone-sized screen shows the same page without sideways scrolling
            page.set_viewport_size({"width": 390, "height": 844})
            assert page.evaluate("document.documentElement.scrollWidth") <= 400
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
