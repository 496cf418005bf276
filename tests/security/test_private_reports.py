"""Issue 9, item 6: a repository configured `public: false` shows its reports only to the admin token
or a signed, expiring link (`tracker link`). Issue 31, item 3: to everyone else it is answered as a
name the tracker does not know (404, the same body and headers), in a sentence that says how to get
access; the holder of an expired link for it is told when it expired.

The real app over real deliveries: one private repository and one public one, May 2026.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner
from flask import Flask
from flask.testing import FlaskClient
from pydantic import SecretStr

from bench.fixtures.factory import pr_payload
from bench.fixtures.paths import needs_shared
from tests.support.app import post, run_jobs, running_app
from tracker.cli import main
from tracker.settings import Settings
from tracker.web.access import sign_link

PRIVATE = "Secret-Org/Internal"
PUBLIC = "octo/open"
LINK_SECRET = "test-link-secret-0123456789"
ADMIN = {"Authorization": "Bearer test-admin-token"}  # the `settings` fixture's admin token
CONFIG = f"""
repositories:
  {PRIVATE.lower()}:          # any case, as GitHub names repositories
    public: false
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "tracker.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def with_links(settings: Settings, config_file: Path, secret: str | None = LINK_SECRET) -> Settings:
    # model_copy does not validate: the secret goes in as the SecretStr the settings would hold.
    return settings.model_copy(
        update={"config_path": config_file, "link_secret": SecretStr(secret) if secret is not None else None}
    )


def deliver_may(app: Flask, client: FlaskClient) -> None:
    for number, repo in ((1, PRIVATE), (2, PUBLIC)):
        payload = pr_payload("opened", number, created_at="2026-05-04T02:00:00Z", repo=repo, title=f"Work {number}")
        assert post(client, payload, "pull_request", f"may-{number}").status_code == 202
    run_jobs(app)


@pytest.fixture
def private(settings: Settings, config_file: Path) -> Iterator[tuple[Flask, FlaskClient]]:
    with running_app(with_links(settings, config_file)) as app:
        client = app.test_client()
        deliver_may(app, client)
        yield app, client


def link(month: str = "2026-05", repo: str = PRIVATE, cutoff: str | None = None, **kwargs: Any) -> str:
    return sign_link(LINK_SECRET, repo, month, cutoff, kwargs.pop("lifetime", timedelta(days=7)), **kwargs)


def error(answer: Any) -> str:
    """The error's text: the JSON answer's `error`, or an HTML page's text (a browser's .html)."""
    if answer.mimetype == "text/html":
        import html
        import re

        return html.unescape(re.sub(r"<[^>]+>", "", answer.get_data(as_text=True)))
    message = answer.get_json()["error"]
    assert isinstance(message, str)
    return message


@needs_shared
def test_a_public_repository_is_unchanged(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    for path in (
        f"/reports/{PUBLIC}/2026-05.md",
        f"/reports/{PUBLIC}/2026-05.html",
        f"/api/v1/repos/{PUBLIC}/months/2026-05",
    ):
        answer = client.get(path)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        assert "no-store" not in answer.headers.get("Cache-Control", "")
        # A token, even a broken one, changes nothing for a public repository.
        assert client.get(path, query_string={"token": "garbage"}).get_data() == answer.get_data()


@needs_shared
@pytest.mark.parametrize(
    "path",
    [
        f"/reports/{PRIVATE}/2026-05.md",
        f"/reports/{PRIVATE}/2026-05.html?lang=zh-CN",
        f"/reports/{PRIVATE}/2026-05.json?cutoff=2026-05-10",
        f"/reports/{PRIVATE.upper()}/current.md",
        f"/api/v1/repos/{PRIVATE}/months/2026-05",
        # Neither a bad month nor a month without data says more than "private" to an outsider.
        f"/reports/{PRIVATE}/2026-13.md",
        f"/reports/{PRIVATE}/1999-01.md",
    ],
)
def test_anonymous_readers_get_404_saying_how_to_get_access(private: tuple[Flask, FlaskClient], path: str) -> None:
    _, client = private
    answer = client.get(path)
    assert answer.status_code == 404
    message = error(answer)
    assert "or it is private" in message
    assert "Authorization: Bearer <TRACKER_ADMIN_TOKEN>" in message
    assert "tracker link" in message
    assert "WWW-Authenticate" not in answer.headers
    assert "Work 1" not in answer.get_data(as_text=True)


@needs_shared
def test_the_admin_token_opens_every_report(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    for path in (
        f"/reports/{PRIVATE}/2026-05.md",
        f"/reports/{PRIVATE}/2026-05.html",
        f"/api/v1/repos/{PRIVATE}/months/2026-05",
    ):
        answer = client.get(path, headers=ADMIN)
        assert answer.status_code == 200
        assert "Work 1" in answer.get_data(as_text=True)
        assert answer.headers["Cache-Control"] == "private, no-store"
    # `bearer` in any case (RFC 7235: the scheme is case-insensitive).
    lower = {"Authorization": ADMIN["Authorization"].replace("Bearer", "bearer")}
    assert client.get(f"/reports/{PRIVATE}/2026-05.md", headers=lower).status_code == 200


@needs_shared
def test_a_wrong_bearer_token_is_404(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    answer = client.get(f"/reports/{PRIVATE}/2026-05.md", headers={"Authorization": "Bearer test-admin-tokeN"})
    assert answer.status_code == 404
    assert error(answer).startswith(f"no reports of {PRIVATE} to show")
    assert "test-admin-tok" not in answer.get_data(as_text=True)


@needs_shared
def test_a_valid_link_opens_every_format_and_language_of_its_month(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    token = link()
    for path, query in (
        (f"/reports/{PRIVATE}/2026-05.md", {}),
        (f"/reports/{PRIVATE}/2026-05.md", {"lang": "zh-CN"}),
        (f"/reports/{PRIVATE}/2026-05.html", {}),
        (f"/reports/{PRIVATE}/2026-05.json", {"cutoff": "2026-05-10"}),
        (f"/reports/{PRIVATE.lower()}/2026-05.md", {}),  # repository names match in any case
        (f"/api/v1/repos/{PRIVATE}/months/2026-05", {}),
    ):
        answer = client.get(path, query_string={**query, "token": token})
        assert answer.status_code == 200, (path, answer.get_data(as_text=True))
        assert "Work 1" in answer.get_data(as_text=True)
        assert answer.headers["Cache-Control"] == "private, no-store"


class _Controls(HTMLParser):
    """The report page's own links and its cutoff picker's fields."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.form_fields: dict[str, str] = {}
        self.form_action: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        # Links to other pages (the table of contents' `#…` stay on this one, and need no token).
        if tag == "a" and not found.get("href", "").startswith(("https://", "#")):
            self.links.append(found["href"])
        elif tag == "form":
            self.form_action = found["action"]
        elif tag == "input" and self.form_action is not None:
            self.form_fields[found["name"]] = found.get("value", "")


@needs_shared
def test_the_page_opened_with_a_link_keeps_the_token_in_its_own_links(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    token = link()
    page = client.get(f"/reports/{PRIVATE}/2026-05.html", query_string={"token": token, "cutoff": "2026-05-20"})
    assert page.status_code == 200
    controls = _Controls()
    controls.feed(page.get_data(as_text=True))
    # The language switch, the Markdown and the JSON links, and the page behind each number of the report
    # (its statistics, exclusions and theme counts): each works as it stands.
    own = [href for href in controls.links if "/prs.html?" not in href]
    assert len(own) == 3, controls.links
    assert len(controls.links) >= len(own) + 8  # four statistics and four exclusions at least
    for href in controls.links:
        assert parse_qs(urlsplit(href).query)["token"] == [token]
        followed = client.get(f"/reports/{PRIVATE}/{href}")
        assert followed.status_code == 200, (href, followed.get_data(as_text=True))
    # The cutoff picker, submitted as a browser would (a GET form with its fields).
    assert controls.form_fields["token"] == token
    picked = client.get(
        f"/reports/{PRIVATE}/{controls.form_action}", query_string={**controls.form_fields, "cutoff": "2026-05-05"}
    )
    assert picked.status_code == 200
    assert "through May 5, 2026" in picked.get_data(as_text=True)
    # Pages opened without a link (the admin, a public repository) carry no token, and the cached
    # copy every reader shares holds none either.
    for path, headers in ((f"/reports/{PRIVATE}/2026-05.html", ADMIN), (f"/reports/{PUBLIC}/2026-05.html", {})):
        text = client.get(path, query_string={"cutoff": "2026-05-20"}, headers=headers).get_data(as_text=True)
        assert "token" not in text
        assert token not in text


@needs_shared
def test_an_expired_link_is_403_saying_when_it_expired(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    signed = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    token = link(lifetime=timedelta(hours=2), now=signed)
    answer = client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": token})
    assert answer.status_code == 403
    expired_at = (signed + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert error(answer).startswith(f"the link expired at {expired_at}")
    # The same link signed an hour later is still good for an hour more.
    fresh = link(lifetime=timedelta(hours=2), now=signed + timedelta(hours=2))
    assert client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": fresh}).status_code == 200


def flipped(token: str, index: int) -> str:
    return token[:index] + ("B" if token[index] != "B" else "C") + token[index + 1 :]


@needs_shared
def test_a_tampered_link_is_404(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    token = link()
    payload, timestamp, signature = token.rsplit(".", 2)  # the payload starts with `.` when compressed
    # A character of the payload, of the timestamp, of the signature (the middle: the last one may
    # only hold padding bits), and a link made with another secret.
    for tampered in (
        flipped(token, 3),
        flipped(token, len(payload) + 2),
        flipped(token, len(payload) + len(timestamp) + 2 + len(signature) // 2),
        sign_link("another-secret", PRIVATE, "2026-05", None, timedelta(days=7)),
        token[:-5],
        "",
    ):
        answer = client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": tampered})
        assert answer.status_code == 404, tampered
        assert error(answer).startswith(f"no reports of {PRIVATE} to show")
        if tampered:
            assert tampered not in answer.get_data(as_text=True)


@needs_shared
def test_a_link_for_another_repository_is_404(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    answer = client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": link(repo="Secret-Org/Other")})
    assert answer.status_code == 404
    assert error(answer).startswith(f"no reports of {PRIVATE} to show")


@needs_shared
def test_a_link_opens_only_its_month_and_its_cutoff(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    april = client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": link(month="2026-04")})
    assert april.status_code == 403
    assert error(april).startswith(f"the link is for {PRIVATE} 2026-04, not 2026-05")
    # A link with a cutoff opens that cutoff (asked for or, on its last day, implied) and no other.
    token = link(cutoff="2026-05-31")
    assert client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": token}).status_code == 200
    assert (
        client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": token, "cutoff": "2026-05-31"}).status_code
        == 200
    )
    other = client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": token, "cutoff": "2026-05-10"})
    assert other.status_code == 403
    assert error(other) == f"the link is for {PRIVATE} 2026-05 at the cutoff 2026-05-31, not 2026-05-10"


@needs_shared
def test_links_are_404_while_the_link_secret_is_unset_and_the_log_says_why(
    settings: Settings, config_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with running_app(with_links(settings, config_file, secret=None)) as app:
        client = app.test_client()
        deliver_may(app, client)
        answer = client.get(f"/reports/{PRIVATE}/2026-05.md", query_string={"token": link()})
        assert answer.status_code == 404
        assert answer.get_data() == client.get(f"/reports/{PRIVATE}/2026-05.md").get_data()
        assert "TRACKER_LINK_SECRET is not set" in caplog.text
        assert client.get(f"/reports/{PRIVATE}/2026-05.md", headers=ADMIN).status_code == 200


@needs_shared
def test_lists_leave_private_repositories_out_for_anonymous_visitors(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    anonymous = client.get("/api/v1/repos").get_json()["repositories"]
    assert [entry["repo"] for entry in anonymous] == [PUBLIC]
    # A link opens a month, not the list.
    assert client.get("/api/v1/repos", query_string={"token": link()}).get_json()["repositories"] == anonymous
    admin = client.get("/api/v1/repos", headers=ADMIN)
    assert sorted(entry["repo"] for entry in admin.get_json()["repositories"]) == sorted([PRIVATE, PUBLIC])
    assert admin.headers["Cache-Control"] == "private, no-store"
    page = client.get("/").get_data(as_text=True)
    assert PUBLIC in page
    assert PRIVATE not in page
    assert PRIVATE in client.get("/", headers=ADMIN).get_data(as_text=True)


@needs_shared
def test_no_answer_shows_a_secret(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    expired = link(lifetime=timedelta(minutes=1), now=datetime.now(UTC) - timedelta(hours=1))
    answers = [
        client.get(f"/reports/{PRIVATE}/2026-05.html", query_string={"token": token})
        for token in (link(), expired, flipped(link(), 3), link(month="2026-04"), link(repo="a/b"))
    ]
    answers += [client.get(f"/reports/{PRIVATE}/2026-05.md"), client.get("/"), client.get("/api/v1/repos")]
    for answer in answers:
        text = answer.get_data(as_text=True) + str(answer.headers)
        assert LINK_SECRET not in text
        assert "test-admin-token" not in text


@needs_shared
def test_tracker_link_prints_a_working_url(
    private: tuple[Flask, FlaskClient], config_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, client = private
    monkeypatch.chdir(tmp_path)  # no stray .env
    env = {"TRACKER_LINK_SECRET": LINK_SECRET, "TRACKER_CONFIG": str(config_file), "TRACKER_TIMEZONE": "Asia/Shanghai"}
    runner = CliRunner()
    made = runner.invoke(
        main,
        ["link", "--repo", PRIVATE, "--month", "2026-05", "--expires", "12h", "--base-url", "https://tracker.example/"],
        env=env,
    )
    assert made.exit_code == 0, made.output
    url = made.stdout.strip()
    assert re.fullmatch(rf"https://tracker\.example/reports/{PRIVATE}/2026-05\.html\?token=[A-Za-z0-9_.-]+", url), url
    assert re.search(r"expires at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", made.stderr)
    assert LINK_SECRET not in made.output
    parts = urlsplit(url)
    answer = client.get(parts.path, query_string=parts.query)
    assert answer.status_code == 200
    assert "Work 1" in answer.get_data(as_text=True)

    # A cutoff and a format: the link opens that cutoff's JSON.
    made = runner.invoke(
        main, ["link", "--repo", PRIVATE, "--month", "2026-05", "--cutoff", "2026-05-10", "--format", "json"], env=env
    )
    assert made.exit_code == 0, made.output
    parts = urlsplit(made.stdout.strip())
    assert parts.netloc == "127.0.0.1:8000"
    assert parse_qs(parts.query)["cutoff"] == ["2026-05-10"]
    answer = client.get(parts.path, query_string=parts.query)
    assert answer.status_code == 200
    assert answer.get_json()["cutoff"] == "2026-05-10"


@pytest.mark.parametrize(
    ("arguments", "env", "message"),
    [
        (["--month", "2026-05"], {}, "TRACKER_LINK_SECRET is not set"),
        (["--month", "2026-5"], {"TRACKER_LINK_SECRET": LINK_SECRET}, "is not a month"),
        (["--month", "2999-01"], {"TRACKER_LINK_SECRET": LINK_SECRET}, "has not started"),
        (["--month", "2026-05", "--cutoff", "2026-06-01"], {"TRACKER_LINK_SECRET": LINK_SECRET}, "outside 2026-05"),
        (["--month", "2026-05", "--expires", "7"], {"TRACKER_LINK_SECRET": LINK_SECRET}, "is not a duration"),
        (["--month", "2026-05", "--expires", "0m"], {"TRACKER_LINK_SECRET": LINK_SECRET}, "a link lives from 1m"),
        (["--month", "2026-05", "--base-url", "tracker"], {"TRACKER_LINK_SECRET": LINK_SECRET}, "not an http"),
    ],
)
def test_tracker_link_refuses_what_the_server_would(
    arguments: list[str], env: dict[str, str], message: str, no_tracker_environment: None
) -> None:
    made = CliRunner().invoke(main, ["link", "--repo", PRIVATE, *arguments], env=env)
    assert made.exit_code != 0
    assert message in made.output
    assert made.stdout == ""


@needs_shared
def test_status_and_records_keep_a_private_repository_to_the_admin(private: tuple[Flask, FlaskClient]) -> None:
    _, client = private
    anonymous = client.get("/api/v1/status").json
    assert anonymous["repositories"] == [PUBLIC]
    assert PRIVATE not in json.dumps(anonymous) and PRIVATE.lower() not in json.dumps(anonymous)
    assert set(client.get("/api/v1/status", headers=ADMIN).json["repositories"]) == {PRIVATE, PUBLIC}
    # The records of a private repository, and whether it exists at all, are the admin's.
    assert client.get(f"/api/v1/repos/{PRIVATE}/months/2026-05/records").status_code == 404
    assert client.get(f"/api/v1/repos/{PRIVATE}/months/2026-05/records", headers=ADMIN).status_code == 200
    assert client.get(f"/api/v1/repos/{PUBLIC}/months/2026-05/records").status_code == 200
