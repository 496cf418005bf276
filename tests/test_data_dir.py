"""Issue 11, items 4 and 8: where the data is. The default data directory is the user's own (so every
command, from any working directory, finds the same ledger), a `.env` file in the working directory
is read, PostgreSQL without its driver is one line saying what to install, and `tracker render` of
an unknown repository names the ledger it looked in and the repositories that ledger knows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from flask import Flask
from flask.testing import FlaskClient
from platformdirs import user_data_dir
from sqlalchemy.engine import make_url

from bench.fixtures.factory import pr_payload
from tests.support.app import post, run_jobs
from tracker.cli import main
from tracker.embedded_redis import EmbeddedRedis
from tracker.settings import POSTGRES_EXTRA, Settings, SettingsError, default_data_dir, load_settings

pytestmark = pytest.mark.usefixtures("no_tracker_environment")

# sun_path holds 108 bytes on Linux and 104 on macOS, the terminating NUL included.
SOCKET_LIMIT = 103


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A home directory of the length most have (`/home/<name>`-like, under the test's directory)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return home


# --- the default data directory -------------------------------------------------------------------


def test_the_default_data_dir_is_the_users_own_and_absolute(home: Path) -> None:
    data_dir = load_settings().data_dir
    assert data_dir == Path(user_data_dir("monthly-activity-tracker"))
    assert data_dir.is_absolute()
    assert data_dir.is_relative_to(home)
    assert data_dir.name == "monthly-activity-tracker"
    if sys.platform.startswith("linux"):
        assert data_dir == home / ".local" / "share" / "monthly-activity-tracker"


def test_the_default_does_not_depend_on_the_working_directory(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = []
    for where in (tmp_path / "one", tmp_path / "two" / "deeper", home):
        where.mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(where)
        settings = load_settings()
        seen.append((settings.data_dir, settings.resolved_database_url))
    assert len(set(seen)) == 1
    data_dir, ledger = seen[0]
    assert ledger == f"sqlite:///{data_dir / 'ledger.sqlite3'}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's home directories")
def test_the_default_leaves_room_for_the_embedded_redis_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    # The longest user name Linux allows (32), in the usual place: the socket still fits, with room.
    monkeypatch.setenv("HOME", "/home/" + "u" * 32)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    socket = EmbeddedRedis(load_settings().data_dir).socket
    assert str(socket).startswith("/home/" + "u" * 32 + "/.local/share/monthly-activity-tracker/")
    assert len(str(socket).encode()) <= SOCKET_LIMIT, socket


@pytest.mark.system
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG_DATA_HOME is read on Linux")
def test_a_default_too_long_for_the_socket_stays_put_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setenv("XDG_DATA_HOME", str(deep))
    settings = load_settings()
    assert settings.data_dir == deep / "monthly-activity-tracker"  # not moved elsewhere behind one's back
    with pytest.raises(SettingsError) as caught:
        EmbeddedRedis(settings.data_dir).start()
    assert "use a shorter TRACKER_DATA_DIR or set REDIS_URL" in str(caught.value)


def test_an_explicit_data_dir_wins_and_a_tilde_is_the_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKER_DATA_DIR", "~/tracker-data")
    assert load_settings().data_dir == home / "tracker-data"


# --- .env -----------------------------------------------------------------------------------------


def test_a_dotenv_file_in_the_working_directory_is_read(home: Path, tmp_path: Path) -> None:
    # no_tracker_environment made tmp_path the working directory
    (tmp_path / ".env").write_text(
        "# the tracker's settings\n"
        "TRACKER_WEBHOOK_SECRET=from-the-dotenv-file\n"
        "TRACKER_DATA_DIR=~/tracker-data\n"
        "TRACKER_DATABASE_URL=postgresql+psycopg://tracker:db-password-123@db.example/tracker\n"
        "REDIS_URL=redis://:redis-password-456@cache.example:6379/9\n"
        "TRACKER_TIMEZONE=UTC\n"
        "SOMETHING_ELSE=ignored\n",
        encoding="utf-8",
    )
    settings = load_settings()
    assert settings.require_webhook_secret() == b"from-the-dotenv-file"
    assert settings.data_dir == home / "tracker-data"
    assert settings.resolved_database_url == "postgresql+psycopg://tracker:db-password-123@db.example/tracker"
    assert settings.redis_url == "redis://:redis-password-456@cache.example:6379/9"
    assert settings.timezone == "UTC"
    shown = repr(settings) + str(settings)
    for secret in ("from-the-dotenv-file", "db-password-123", "redis-password-456"):
        assert secret not in shown


def test_the_environment_wins_over_the_dotenv_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("TRACKER_TIMEZONE=UTC\nTRACKER_WEBHOOK_SECRET=from-file\n", encoding="utf-8")
    monkeypatch.setenv("TRACKER_TIMEZONE", "Europe/Berlin")
    settings = load_settings()
    assert settings.timezone == "Europe/Berlin"
    assert settings.require_webhook_secret() == b"from-file"


def test_a_dotenv_file_elsewhere_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("TRACKER_TIMEZONE=UTC\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_settings().timezone == "Asia/Shanghai"


# --- PostgreSQL without its driver ----------------------------------------------------------------


def without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """As if `modules` were not installed: find_spec finds nothing for them."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name.partition(".")[0] in modules else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_postgresql_without_psycopg_is_one_line_saying_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "psycopg")
    with pytest.raises(SettingsError) as caught:
        load_settings(database_url="postgresql+psycopg://tracker:pw@db.example/tracker")
    message = str(caught.value)
    assert "\n" not in message
    assert message.endswith("install the postgres extra: pip install 'monthly-activity-tracker[postgres]'")
    assert POSTGRES_EXTRA in message
    assert "tracker:pw@" not in message  # the URL, which may hold a password, is not quoted


def test_a_missing_module_in_sys_modules_counts_as_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` would raise ImportError
    monkeypatch.setenv("TRACKER_DATABASE_URL", "postgresql+psycopg://tracker@db.example/tracker")
    with pytest.raises(SettingsError, match=r"install the postgres extra"):
        load_settings()


def test_the_cli_says_it_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "psycopg")
    made = CliRunner().invoke(
        main,
        ["render", "--repo", "a/b", "--month", "2026-09"],
        env={"TRACKER_DATABASE_URL": "postgresql+psycopg://tracker@db.example/tracker"},
    )
    assert made.exit_code != 0
    assert made.output.strip().splitlines() == [
        "Error: TRACKER_DATABASE_URL names PostgreSQL but psycopg is not installed: "
        "install the postgres extra: pip install 'monthly-activity-tracker[postgres]'"
    ]


def test_a_bare_postgresql_url_needs_psycopg2_and_says_how_to_use_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "psycopg2")
    with pytest.raises(SettingsError) as caught:
        load_settings(database_url="postgresql://tracker@db.example/tracker")
    assert "postgresql+psycopg://" in str(caught.value)
    assert POSTGRES_EXTRA in str(caught.value)


def test_sqlite_and_an_installed_driver_need_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert load_settings(database_url=f"sqlite:///{tmp_path / 'l.sqlite3'}").database_url
    if importlib.util.find_spec("psycopg") is not None:
        assert load_settings(database_url="postgresql+psycopg://tracker@db.example/tracker").database_url
    without(monkeypatch, "psycopg", "psycopg2")
    assert load_settings(database_url=f"sqlite:///{tmp_path / 'l.sqlite3'}").database_url


# --- `tracker render` of an unknown repository --------------------------------------------------


def test_render_of_an_unknown_repository_names_the_ledger_and_what_it_knows(
    app: Flask, client: FlaskClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = pr_payload("opened", 1, created_at="2026-05-04T02:00:00Z", repo="octo/known", title="Work")
    assert post(client, payload, "pull_request", "known-1").status_code == 202
    run_jobs(app)
    assert settings.database_url is not None
    monkeypatch.setenv("TRACKER_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("TRACKER_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("REDIS_URL", settings.redis_url or "")
    made = CliRunner().invoke(main, ["render", "--repo", "octo/unknown", "--month", "2026-05"])
    assert made.exit_code != 0
    message = made.output.strip()
    assert message.startswith("Error: no deliveries have been received for octo/unknown in the ledger ")
    assert "known repositories: octo/known" in message
    assert make_url(settings.database_url).render_as_string(hide_password=True) in message


def test_render_from_an_empty_ledger_asks_whether_it_is_the_right_one(home: Path) -> None:
    made = CliRunner().invoke(main, ["render", "--repo", "octo/anything", "--month", "2026-05"])
    assert made.exit_code != 0
    ledger = Path(user_data_dir("monthly-activity-tracker")) / "ledger.sqlite3"
    assert f"in the ledger sqlite:///{ledger}" in made.output
    assert "TRACKER_DATA_DIR" in made.output


def test_an_empty_data_dir_means_the_default(monkeypatch: pytest.MonkeyPatch, no_tracker_environment: None) -> None:
    # `TRACKER_DATA_DIR=` must not put the ledger in whatever directory the command runs from.
    monkeypatch.setenv("TRACKER_DATA_DIR", "")
    assert load_settings().data_dir == default_data_dir()
    monkeypatch.setenv("TRACKER_DATA_DIR", "   ")
    assert load_settings().data_dir == default_data_dir()


def test_empty_paths_and_urls_mean_unset(monkeypatch: pytest.MonkeyPatch, no_tracker_environment: None) -> None:
    for name in ("TRACKER_CONFIG", "TRACKER_DATABASE_URL", "REDIS_URL"):
        monkeypatch.setenv(name, "")
    settings = load_settings()
    assert (settings.config_path, settings.database_url, settings.redis_url) == (None, None, None)


# --- TRACKER_DATABASE_URL checked at start-up -------------------------------------------------------


def test_a_database_the_ledger_is_not_written_for_is_one_line(tmp_path: Path) -> None:
    """Probe: `TRACKER_DATABASE_URL=mysql://…`. Before: `tracker run` printed SQLAlchemy's traceback
    (no MySQLdb module) and exited 0."""
    with pytest.raises(SettingsError) as caught:
        load_settings(database_url="mysql://root:hunter2@db.example/test")
    message = str(caught.value)
    assert message.startswith("TRACKER_DATABASE_URL names 'mysql', which the tracker does not support")
    assert "postgresql+psycopg://" in message and "hunter2" not in message
    made = CliRunner().invoke(
        main, ["run"], env={"TRACKER_DATABASE_URL": "mysql://root@db.example/test", "TRACKER_DATA_DIR": str(tmp_path)}
    )
    assert made.exit_code == 2
    assert made.output.strip().splitlines() == [f"Error: {message}"]


def test_a_sqlite_ledger_in_a_directory_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    """Probe: a typo in a SQLite path. Before: the directory was created with an empty ledger in it,
    and the service started as if nothing had ever been received."""
    typo = tmp_path / "trakcer" / "ledger.sqlite3"
    with pytest.raises(SettingsError) as caught:
        load_settings(database_url=f"sqlite:///{typo}")
    assert str(caught.value).startswith(f"TRACKER_DATABASE_URL puts the ledger in {typo.parent}, which does not exist")
    assert not typo.parent.exists()
    # The data directory's own ledger is made, directory and all, as before.
    assert load_settings(data_dir=tmp_path / "fresh").resolved_database_url.endswith("/fresh/ledger.sqlite3")
    assert load_settings(database_url="sqlite://").database_url == "sqlite://"
