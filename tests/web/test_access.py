"""`tracker/web/access.py`: signed links to private reports, and who may read a report.

The HTTP answers over a real app are in tests/security/test_private_reports.py; here the pieces:
signing and reading links (valid, expired, tampered, wrong repository), durations, the access
decision, the token carried in the HTML page's own links, and the settings and config it reads.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from tracker.config import TrackerConfig, load_config
from tracker.core.window import Month, month_window
from tracker.settings import Settings, SettingsError, load_settings
from tracker.web.access import (
    TAMPERED,
    AccessDenied,
    DurationError,
    LinkRefused,
    NotShown,
    authorize,
    carry_token,
    link_url,
    parse_duration,
    read_link,
    sign_link,
)

SECRET = "link-secret"
NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
PRIVATE = TrackerConfig.model_validate({"repositories": {"Org/Private": {"public": False}}})


ADMIN = "admin-token-0123456789"


def make_settings(link_secret: str | None = SECRET, admin_token: str | None = ADMIN) -> Settings:
    return load_settings(link_secret=link_secret, admin_token=admin_token)


# --- links ----------------------------------------------------------------------------------------


def test_a_valid_link_reads_back_what_it_binds() -> None:
    token = sign_link(SECRET, "Org/Private", "2026-05", "2026-05-13", timedelta(days=7), now=NOW)
    found = read_link(SECRET, token, now=NOW + timedelta(days=6, hours=23))
    assert found.repo == "org/private"  # bound case-insensitively
    assert (found.month, found.cutoff) == ("2026-05", "2026-05-13")
    assert found.expires_at == NOW + timedelta(days=7)
    # URL-safe as it stands: nothing to escape in a query string or an HTML attribute.
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def test_a_link_without_a_cutoff_binds_none() -> None:
    token = sign_link(SECRET, "Org/Private", "2026-05", None, timedelta(hours=1), now=NOW)
    assert read_link(SECRET, token, now=NOW).cutoff is None


def test_an_expired_link_says_when_it_expired() -> None:
    token = sign_link(SECRET, "Org/Private", "2026-05", None, timedelta(hours=12), now=NOW)
    read_link(SECRET, token, now=NOW + timedelta(hours=12) - timedelta(seconds=1))
    for later in (timedelta(hours=12), timedelta(days=30)):
        with pytest.raises(LinkRefused) as caught:
            read_link(SECRET, token, now=NOW + later)
        assert str(caught.value) == "the link expired at 2026-06-02T00:00:00Z: ask for a new one"


def test_an_expired_link_by_the_real_clock() -> None:
    # Signed two hours ago by itsdangerous' own timestamp, for one hour: expired now.
    token = sign_link(
        SECRET, "Org/Private", "2026-05", None, timedelta(hours=1), now=datetime.now(UTC) - timedelta(hours=2)
    )
    with pytest.raises(LinkRefused, match="the link expired at"):
        read_link(SECRET, token)


@pytest.mark.parametrize("cutoff", [None, "2026-05-13"], ids=["plain", "compressed"])
@pytest.mark.parametrize("part", [0, 1, 2], ids=["payload", "timestamp", "signature"])
def test_a_tampered_link_is_refused(part: int, cutoff: str | None) -> None:
    token = sign_link(SECRET, "Org/Private", "2026-05", cutoff, timedelta(days=7), now=NOW)
    # itsdangerous compresses a payload when that makes it shorter, and marks it with a leading `.`.
    assert token.startswith(".") == (cutoff is not None)
    pieces = token.rsplit(".", 2)
    middle = len(pieces[part]) // 2
    pieces[part] = pieces[part][:middle] + ("x" if pieces[part][middle] != "x" else "y") + pieces[part][middle + 1 :]
    with pytest.raises(LinkRefused) as caught:
        read_link(SECRET, ".".join(pieces), now=NOW)
    assert str(caught.value) == TAMPERED
    assert token not in str(caught.value)


def test_a_payload_changed_to_another_repository_is_tampered() -> None:
    import base64
    import json

    token = sign_link(SECRET, "Org/Private", "2026-05", None, timedelta(days=7), now=NOW)
    payload, rest = token.split(".", 1)
    forged = {"r": "org/other", "m": "2026-05", "c": None, "x": 604800}
    encoded = base64.urlsafe_b64encode(json.dumps(forged, separators=(",", ":")).encode()).rstrip(b"=").decode()
    assert encoded != payload
    with pytest.raises(LinkRefused, match="tampered"):
        read_link(SECRET, f"{encoded}.{rest}", now=NOW)


@pytest.mark.parametrize("token", ["", "garbage", "a.b.c", "..", "€uro"])
def test_garbage_is_tampered(token: str) -> None:
    with pytest.raises(LinkRefused, match="tampered"):
        read_link(SECRET, token, now=NOW)


def test_a_link_signed_with_another_secret_is_refused() -> None:
    token = sign_link("another-secret", "Org/Private", "2026-05", None, timedelta(days=7), now=NOW)
    with pytest.raises(LinkRefused) as caught:
        read_link(SECRET, token, now=NOW)
    assert str(caught.value) == TAMPERED


@pytest.mark.parametrize(
    ("text", "lifetime"),
    [
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        (" 2w ", timedelta(weeks=2)),
    ],
)
def test_durations(text: str, lifetime: timedelta) -> None:
    assert parse_duration(text) == lifetime


@pytest.mark.parametrize("text", ["", "7", "d", "7 d", "1.5h", "-1d", "0m", "367d", "7y", "7D"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


def test_link_url() -> None:
    assert link_url("https://t.example/base/", "Org/Private", "2026-05", "md", "T.k-n", "2026-05-13") == (
        "https://t.example/base/reports/Org/Private/2026-05.md?token=T.k-n&cutoff=2026-05-13"
    )
    assert link_url("http://127.0.0.1:8000", "Org/Private", "2026-05", "html", "tok") == (
        "http://127.0.0.1:8000/reports/Org/Private/2026-05.html?token=tok"
    )


# --- the access decision --------------------------------------------------------------------------


def denied(call: Callable[[], object]) -> AccessDenied:
    with pytest.raises(AccessDenied) as caught:
        call()
    return caught.value


def test_public_repositories_need_nothing() -> None:
    grant = authorize(make_settings(), PRIVATE, "Org/Public", None, "not-a-token")
    assert not grant.private and grant.token is None and grant.headers == {}


def not_shown(call: Callable[[], object]) -> None:
    with pytest.raises(NotShown):
        call()


def test_private_repositories_without_credentials_are_not_shown() -> None:
    # Issue 31, item 3: not 401 (which told an outsider the name exists): the caller answers as for
    # a name the tracker does not know.
    not_shown(lambda: authorize(make_settings(), PRIVATE, "org/PRIVATE", None, None))
    # Another scheme (a proxy's Basic credentials) is no credential of ours either.
    not_shown(lambda: authorize(make_settings(), PRIVATE, "Org/Private", "Basic dXNlcjpwdw==", None))


def test_the_admin_token_is_compared_exactly() -> None:
    grant = authorize(make_settings(), PRIVATE, "Org/Private", f"Bearer {ADMIN}", None)
    assert grant.private and grant.link is None and grant.headers == {"Cache-Control": "private, no-store"}
    assert authorize(make_settings(), PRIVATE, "Org/Private", f"bearer  {ADMIN} ", None).private
    for wrong in (f"Bearer {ADMIN.upper()}", f"Bearer {ADMIN}2", f"Bearer {ADMIN[:-1]}", "Bearer ", "Bearer"):
        not_shown(lambda wrong=wrong: authorize(make_settings(), PRIVATE, "Org/Private", wrong, None))
    not_shown(lambda: authorize(make_settings(admin_token=None), PRIVATE, "Org/Private", f"Bearer {ADMIN}", None))


def test_a_wrong_bearer_token_does_not_spoil_a_valid_link() -> None:
    token = sign_link(SECRET, "Org/Private", "2026-05", None, timedelta(days=1))
    grant = authorize(make_settings(), PRIVATE, "Org/Private", "Bearer someone-elses", token)
    assert grant.token == token


def test_a_link_for_another_repository_is_not_shown() -> None:
    token = sign_link(SECRET, "Org/Other", "2026-05", None, timedelta(days=1))
    not_shown(lambda: authorize(make_settings(), PRIVATE, "Org/Private", None, token))
    # Expired too: whether a link for another name has expired says nothing of this one.
    old = sign_link(SECRET, "Org/Other", "2026-05", None, timedelta(hours=1), now=NOW)
    not_shown(lambda: authorize(make_settings(), PRIVATE, "Org/Private", None, old))


def test_an_expired_link_for_this_repository_says_when_it_expired() -> None:
    token = sign_link(SECRET, "Org/Private", "2026-05", None, timedelta(hours=1), now=NOW)
    refusal = denied(lambda: authorize(make_settings(), PRIVATE, "org/private", None, token))
    assert (refusal.status, refusal.message) == (403, "the link expired at 2026-06-01T13:00:00Z: ask for a new one")
    assert refusal.headers == {"Cache-Control": "private, no-store"}


def test_a_link_matches_the_repository_in_any_case() -> None:
    token = sign_link(SECRET, "ORG/private", "2026-05", None, timedelta(days=1))
    assert authorize(make_settings(), PRIVATE, "org/Private", None, token).link is not None


def test_a_link_opens_its_month_and_cutoff_only() -> None:
    token = sign_link(SECRET, "Org/Private", "2026-05", "2026-05-13", timedelta(days=1))
    grant = authorize(make_settings(), PRIVATE, "Org/Private", None, token)
    grant.require("Org/Private", month_window(Month(2026, 5), date(2026, 5, 13), "UTC"))
    other_day = denied(lambda: grant.require("Org/Private", month_window(Month(2026, 5), date(2026, 5, 14), "UTC")))
    assert (other_day.status, other_day.message) == (
        403,
        "the link is for Org/Private 2026-05 at the cutoff 2026-05-13, not 2026-05-14",
    )
    other_month = denied(lambda: grant.require("Org/Private", month_window(Month(2026, 4), date(2026, 4, 13), "UTC")))
    assert other_month.status == 403
    assert other_month.message.startswith("the link is for Org/Private 2026-05, not 2026-04")
    # Without a cutoff, every cutoff of the month.
    monthly = authorize(
        make_settings(),
        PRIVATE,
        "Org/Private",
        None,
        sign_link(SECRET, "Org/Private", "2026-05", None, timedelta(days=1)),
    )
    for day in (1, 13, 31):
        monthly.require("Org/Private", month_window(Month(2026, 5), date(2026, 5, day), "UTC"))


def test_without_a_link_secret_links_are_not_shown_and_the_log_says_why(caplog: pytest.LogCaptureFixture) -> None:
    token = sign_link(SECRET, "Org/Private", "2026-05", None, timedelta(days=1))
    not_shown(lambda: authorize(make_settings(link_secret=None), PRIVATE, "Org/Private", None, token))
    assert "TRACKER_LINK_SECRET is not set" in caplog.text
    assert token not in caplog.text


@pytest.mark.parametrize("token", ["x", "garbage.with.dots"])
def test_a_tampered_link_is_not_shown(token: str) -> None:
    not_shown(lambda: authorize(make_settings(), PRIVATE, "Org/Private", None, token))
    forged = sign_link("another-secret", "Org/Private", "2026-05", None, timedelta(days=1))
    not_shown(lambda: authorize(make_settings(), PRIVATE, "Org/Private", None, forged))


def test_refusals_are_never_cached() -> None:
    token = sign_link(SECRET, "Org/Private", "2026-05", None, timedelta(hours=1), now=NOW)
    refusal = denied(lambda: authorize(make_settings(), PRIVATE, "Org/Private", None, token))
    assert refusal.answer()[1:] == (403, {"Cache-Control": "private, no-store"})


# --- the page's own links -------------------------------------------------------------------------

PAGE = """<nav class="controls">
    <a id="language-switch" href="2026-05.html?lang=zh-CN&amp;cutoff=2026-05-13">中文版本</a>
    <form method="get" action="2026-05.html">
      <input type="date" id="cutoff" name="cutoff" value="2026-05-13">
      <input type="hidden" name="lang" value="en">
    </form>
    <a href="2026-05.md?lang=en&amp;cutoff=2026-05-13">Markdown</a>
    <a href="2026-05.json?cutoff=2026-05-13">JSON</a>
</nav>
<a class="cite" href="https://github.com/Org/Private/pull/1">main #1</a>
<p>a title that mentions href=&#34;2026-05.md?x&#34; and &lt;form method=&#34;get&#34;&gt;</p>
"""


def test_carry_token_adds_the_token_to_the_own_links_and_the_form_only() -> None:
    carried = carry_token(PAGE, "T.ok-en_1")
    assert 'href="2026-05.html?token=T.ok-en_1&amp;lang=zh-CN&amp;cutoff=2026-05-13"' in carried
    assert 'href="2026-05.md?token=T.ok-en_1&amp;lang=en&amp;cutoff=2026-05-13"' in carried
    assert 'href="2026-05.json?token=T.ok-en_1&amp;cutoff=2026-05-13"' in carried
    assert '<form method="get" action="2026-05.html"><input type="hidden" name="token" value="T.ok-en_1">' in carried
    assert carried.count("T.ok-en_1") == 4
    # GitHub links and escaped text from pull requests are left alone.
    assert 'href="https://github.com/Org/Private/pull/1"' in carried
    assert "href=&#34;2026-05.md?x&#34; and &lt;form method=&#34;get&#34;&gt;" in carried


def test_carry_token_escapes_whatever_it_is_given() -> None:
    carried = carry_token(PAGE, 'a"b<c&d')
    assert 'a"b' not in carried and "<c" not in carried
    assert "token=a%22b%3Cc%26d&amp;" in carried
    assert 'value="a&#34;b&lt;c&amp;d"' in carried


# --- settings and config --------------------------------------------------------------------------


@pytest.mark.usefixtures("no_tracker_environment")
def test_the_link_secret_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError, match="TRACKER_LINK_SECRET is not set"):
        load_settings().require_link_secret()
    monkeypatch.setenv("TRACKER_LINK_SECRET", "  ")  # blank is unset, like the other secrets
    assert load_settings().link_secret is None
    monkeypatch.setenv("TRACKER_LINK_SECRET", "very-secret-link-key")
    loaded = load_settings()
    assert loaded.link_secret == SecretStr("very-secret-link-key")
    assert loaded.require_link_secret() == "very-secret-link-key"
    assert "very-secret-link-key" not in repr(loaded) + str(loaded)


@pytest.mark.usefixtures("no_tracker_environment")
def test_public_layers_like_the_time_zone(tmp_path: Path) -> None:
    path = tmp_path / "tracker.yaml"
    path.write_text(
        """
defaults:
  public: false
repositories:
  Org/Open:
    public: true
  Org/Listed: {}
""",
        encoding="utf-8",
    )
    config = load_config(load_settings(config_path=path))
    assert config.is_public("org/OPEN")
    assert not config.is_public("Org/Listed")  # listed without `public`: the default
    assert not config.is_public("someone/else")
    assert TrackerConfig().is_public("any/thing")  # nothing configured: public
    assert not PRIVATE.is_public("ORG/PRIVATE")
    path.write_text("repositories:\n  Org/Private:\n    public: sometimes\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="public"):
        load_config(load_settings(config_path=path))


@pytest.mark.parametrize("lifetime", [timedelta(0), timedelta(seconds=-5), timedelta(days=367)])
def test_sign_link_refuses_lifetimes_out_of_bounds(lifetime: timedelta) -> None:
    with pytest.raises(DurationError):
        sign_link(SECRET, "Org/Private", "2026-05", None, lifetime)
