"""Issue 11, items 4 and 6: the pages people open. The index lists each repository's months with
links to the HTML reports (and their Markdown and JSON), or, with no data, how to begin; the HTML
routes answer errors as small HTML pages (same status and headers as the JSON answers the other
routes keep); `GET /api/v1/status` says where the data is, to the admin."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from tests.support.app import post, run_jobs, running_app
from tracker.settings import Settings
from tracker.store.ledger import Ledger
from tracker.web.api import redis_shown
from tracker.web.app import create_app

PRIVATE = "Secret-Org/Internal"
PUBLIC = "octo/open"
ADMIN = {"Authorization": "Bearer test-admin-token"}  # the `settings` fixture's admin token
HTML = "text/html; charset=utf-8"


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [value or "" for name, value in attrs if name == "href"]


def links(page: str) -> list[str]:
    parser = Links()
    parser.feed(page)
    return parser.hrefs


def opened(number: int, repo: str, created_at: str) -> dict[str, Any]:
    from bench.fixtures.factory import pr_payload

    return pr_payload("opened", number, created_at=created_at, repo=repo, title=f"Work {number}")


@pytest.fixture
def filled(settings: Settings, tmp_path: Path) -> Iterator[tuple[Flask, FlaskClient]]:
    """A public repository active in April and May 2026, and a private one in May."""
    config = tmp_path / "tracker.yaml"
    config.write_text(f"repositories:\n  {PRIVATE}:\n    public: false\n", encoding="utf-8")
    with running_app(settings.model_copy(update={"config_path": config})) as app:
        client = app.test_client()
        deliveries = [
            (1, PUBLIC, "2026-04-20T02:00:00Z"),
            (2, PUBLIC, "2026-05-04T02:00:00Z"),
            (3, PRIVATE, "2026-05-05T02:00:00Z"),
        ]
        for number, repo, created_at in deliveries:
            answer = post(client, opened(number, repo, created_at), "pull_request", f"d-{number}")
            assert answer.status_code == 202
        run_jobs(app)
        yield app, client


# --- the index ----------------------------------------------------------------------------------


def test_the_index_links_each_month_in_every_form(filled: tuple[Flask, FlaskClient]) -> None:
    _, client = filled
    answer = client.get("/")
    assert answer.status_code == 200 and answer.content_type == HTML
    hrefs = links(answer.get_data(as_text=True))
    base = f"/reports/{PUBLIC}"
    for month in ("2026-05", "2026-04"):
        for form in (f"{month}.html", f"{month}.md", f"{month}.json", f"{month}.html?lang=zh-CN"):
            assert f"{base}/{form}" in hrefs
    for form in ("current.html", "current.md", "current.json"):
        assert f"{base}/{form}" in hrefs
    assert hrefs.index(f"{base}/2026-05.html") < hrefs.index(f"{base}/2026-04.html")  # newest first
    # every link works
    for href in hrefs:
        if href.startswith("/reports/"):
            assert client.get(href).status_code == 200, href


def test_the_index_shows_private_repositories_to_the_admin_only(filled: tuple[Flask, FlaskClient]) -> None:
    _, client = filled
    assert PRIVATE not in client.get("/").get_data(as_text=True)
    admin = client.get("/", headers=ADMIN)
    assert f"/reports/{PRIVATE}/2026-05.html" in links(admin.get_data(as_text=True))
    assert admin.headers["Cache-Control"] == "private, no-store"


def test_the_empty_index_says_how_to_begin(client: FlaskClient) -> None:
    answer = client.get("/", base_url="http://127.0.0.1:8000")
    assert answer.status_code == 200
    page = answer.get_data(as_text=True)
    assert "tracker demo" in page
    assert "cloudflared tunnel --url http://127.0.0.1:8000" in page
    assert "ngrok http 8000" in page
    assert "https://&lt;public host&gt;/webhook" in page
    # GitHub cannot reach this machine's loopback: no local address is offered as the Payload URL.
    assert not re.search(r"https?://(127\.0\.0\.1|localhost)[^\s<\"]*/webhook", page)
    assert "http://127.0.0.1:8000/webhook" not in page


def test_the_empty_index_offers_no_local_webhook_url_whatever_the_host(client: FlaskClient) -> None:
    page = client.get("/", base_url="http://localhost:8123").get_data(as_text=True)
    assert "localhost:8123" not in page


# --- error pages of the HTML routes ---------------------------------------------------------------


def test_an_unknown_repository_in_a_browser_is_a_page_naming_the_known_ones(filled: tuple[Flask, FlaskClient]) -> None:
    _, client = filled
    answer = client.get("/reports/someone/else/current.html")
    assert answer.status_code == 404
    assert answer.content_type == HTML
    page = answer.get_data(as_text=True)
    assert "no reports of someone/else to show" in page
    assert f"/reports/{PUBLIC}/current.html" in links(page)
    assert PRIVATE not in page  # only the admin learns the private ones
    assert "ledger" not in page and "sqlite" not in page  # where the data is: not for the web
    assert "default-src 'none'" in answer.headers["Content-Security-Policy"]
    admin = client.get("/reports/someone/else/current.html", headers=ADMIN)
    assert admin.status_code == 404
    assert "no deliveries have been received for someone/else" in admin.get_data(as_text=True)
    assert f"/reports/{PRIVATE}/current.html" in links(admin.get_data(as_text=True))


def test_the_same_error_in_json_and_markdown_stays_json(filled: tuple[Flask, FlaskClient]) -> None:
    _, client = filled
    for path in ("/reports/someone/else/current.json", "/reports/someone/else/current.md"):
        answer = client.get(path)
        assert answer.status_code == 404
        assert answer.content_type == "application/json"
        assert answer.json["error"].startswith("no reports of someone/else to show")
        assert answer.json["repositories"] == [PUBLIC]
    api = client.get("/api/v1/repos/someone/else/months/2026-05")
    assert api.status_code == 404 and api.content_type == "application/json"
    assert api.json["repositories"] == [PUBLIC]
    assert PRIVATE not in api.get_data(as_text=True)
    admin = client.get("/api/v1/repos/someone/else/months/2026-05", headers=ADMIN)
    assert f"known repositories: {PRIVATE}, {PUBLIC}" in admin.json["error"]


@pytest.mark.parametrize(
    ("name", "query", "message"),
    [
        ("2026-13.html", "", "not a month"),
        ("2026-05.html", "?cutoff=2026-06-01", "outside 2026-05"),
        ("2099-01.html", "", "has not started"),
        ("2026-05.html", "?lang=fr", "fr"),
    ],
)
def test_a_bad_month_or_cutoff_in_a_browser_is_a_400_page(
    filled: tuple[Flask, FlaskClient], name: str, query: str, message: str
) -> None:
    _, client = filled
    page = client.get(f"/reports/{PUBLIC}/{name}{query}")
    assert page.status_code == 400 and page.content_type == HTML
    assert message in page.get_data(as_text=True)
    data = client.get(f"/reports/{PUBLIC}/{name.replace('.html', '.json')}{query}")
    assert data.status_code == 400 and data.content_type == "application/json"
    assert message in data.json["error"]
    if "lang" not in query:
        assert f"/reports/{PUBLIC}/current.html" in links(page.get_data(as_text=True))


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer not-the-admin-token"}], ids=["no credentials", "wrong token"]
)
def test_a_private_report_in_a_browser_is_the_page_of_an_unknown_name(
    filled: tuple[Flask, FlaskClient], headers: dict[str, str]
) -> None:
    _, client = filled
    page = client.get(f"/reports/{PRIVATE}/2026-05.html", headers=headers)
    data = client.get(f"/reports/{PRIVATE}/2026-05.json", headers=headers)
    assert page.status_code == data.status_code == 404
    assert page.content_type == HTML and data.content_type == "application/json"
    assert data.json["error"] in page.get_data(as_text=True).replace("&lt;", "<").replace("&gt;", ">")
    assert page.headers.get("Cache-Control") == data.headers.get("Cache-Control") == "private, no-store"
    unknown = client.get("/reports/Secret-Org/Nothing/2026-05.html", headers=headers)
    assert unknown.get_data(as_text=True) == page.get_data(as_text=True).replace("Internal", "Nothing")


def test_a_repository_name_with_markup_is_escaped(filled: tuple[Flask, FlaskClient]) -> None:
    _, client = filled
    hostile = '<img src=x onerror="alert(1)">'
    answer = client.get(f"/reports/{hostile}/x/current.html")
    assert answer.status_code == 404 and answer.content_type == HTML
    page = answer.get_data(as_text=True)
    assert "<img" not in page
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;/x" in page
    bad_month = client.get(f"/reports/{PUBLIC}/<b>bold.html")
    assert bad_month.status_code == 400
    assert "<b>" not in bad_month.get_data(as_text=True)


def test_flasks_own_errors_on_html_routes_are_pages_too(filled: tuple[Flask, FlaskClient]) -> None:
    _, client = filled
    page = client.post(f"/reports/{PUBLIC}/current.html")
    assert page.status_code == 405 and page.content_type == HTML
    assert "GET" in page.headers["Allow"]
    data = client.post(f"/reports/{PUBLIC}/current.json")
    assert data.status_code == 405 and data.content_type == "application/json"
    assert data.headers["Allow"] == page.headers["Allow"]
    assert client.get("/nowhere").content_type == "application/json"


# --- where the data is ----------------------------------------------------------------------------


def test_status_tells_the_admin_where_the_data_is(filled: tuple[Flask, FlaskClient], settings: Settings) -> None:
    _, client = filled
    assert "storage" not in client.get("/api/v1/status").json  # paths show the machine's layout
    answer = client.get("/api/v1/status", headers=ADMIN)
    storage = answer.json["storage"]
    assert storage["data_dir"] == str(settings.data_dir.resolve())
    assert Path(storage["data_dir"]).is_absolute()
    assert settings.database_url is not None
    assert storage["ledger"] == make_url(settings.database_url).render_as_string(hide_password=True)
    assert storage["redis"] == settings.redis_url
    assert answer.headers["Cache-Control"] == "private, no-store"


def test_status_hides_the_passwords(settings: Settings) -> None:
    unreachable = settings.model_copy(update={"redis_url": "redis://:redis-pass-123@127.0.0.1:1/9"})
    app = create_app(unreachable)
    try:
        body = app.test_client().get("/api/v1/status", headers=ADMIN).json
    finally:
        app.extensions["tracker"].close()
    assert body["storage"]["redis"] == "redis://:***@127.0.0.1:1/9"
    assert "redis-pass-123" not in str(body)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw1@cache:6379/0", "redis://:***@cache:6379/0"),
        (
            "rediss://tracker:pw1@cache:6380/2?ssl_cert_reqs=none",
            "rediss://tracker:***@cache:6380/2?ssl_cert_reqs=none",
        ),
        ("redis://cache:6379/0?password=pw1&db=3", "redis://cache:6379/0?password=***&db=3"),
        ("unix:///run/redis.sock?db=9", "unix:///run/redis.sock?db=9"),
    ],
)
def test_redis_urls_are_shown_without_their_password(settings: Settings, url: str, shown: str) -> None:
    assert redis_shown(settings.model_copy(update={"redis_url": url})) == shown


def test_the_embedded_redis_is_shown_by_its_socket(settings: Settings) -> None:
    embedded = redis_shown(settings.model_copy(update={"redis_url": None}))
    assert embedded == f"unix://{(settings.data_dir / 'redis' / 'redis.sock').resolve()}"


def test_ledger_urls_are_shown_without_their_password() -> None:
    engine = create_engine("postgresql+psycopg://tracker:pw1@db.example:5432/tracker?password=pw2&sslmode=require")
    try:
        shown = Ledger(engine).shown_url()
    finally:
        engine.dispose()
    assert "pw1" not in shown and "pw2" not in shown
    assert shown == "postgresql+psycopg://tracker:***@db.example:5432/tracker?password=***&sslmode=require"
