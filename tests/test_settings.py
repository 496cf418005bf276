"""`tracker/settings.py`: the one place that reads the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from platformdirs import user_data_dir

from tracker.settings import Settings, SettingsError, load_settings

pytestmark = pytest.mark.usefixtures("no_tracker_environment")


def test_everything_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRACKER_WEBHOOK_SECRET", "s3cret")
    monkeypatch.setenv("TRACKER_ADMIN_TOKEN", "admin-token-0123456789")
    monkeypatch.setenv("TRACKER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TRACKER_DATABASE_URL", "postgresql+psycopg://u:p@db/tracker")
    monkeypatch.setenv("REDIS_URL", "redis://cache:6379/3")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_example")
    monkeypatch.setenv("GITHUB_API_URL", "https://ghe.example.com/api/v3")
    monkeypatch.setenv("TRACKER_TIMEZONE", "Europe/Berlin")
    monkeypatch.setenv("TRACKER_CONFIG", str(tmp_path / "tracker.yaml"))
    settings = load_settings()
    assert settings.webhook_secret is not None
    assert settings.webhook_secret.get_secret_value() == "s3cret"
    assert settings.require_webhook_secret() == b"s3cret"
    assert settings.admin_token is not None and settings.admin_token.get_secret_value() == "admin-token-0123456789"
    assert settings.data_dir == tmp_path / "data"
    assert settings.database_url == "postgresql+psycopg://u:p@db/tracker"
    assert settings.resolved_database_url == "postgresql+psycopg://u:p@db/tracker"
    assert settings.redis_url == "redis://cache:6379/3"
    assert settings.github_token is not None and settings.github_token.get_secret_value() == "ghp_example"
    assert settings.github_api_url == "https://ghe.example.com/api/v3"
    assert settings.timezone == "Europe/Berlin"
    assert settings.config_path == tmp_path / "tracker.yaml"


def test_defaults() -> None:
    settings = load_settings()
    assert settings.webhook_secret is None
    assert settings.admin_token is None
    assert settings.github_token is None
    assert settings.database_url is None
    assert settings.redis_url is None
    assert settings.config_path is None
    assert settings.timezone == "Asia/Shanghai"
    assert settings.github_api_url == "https://api.github.com"
    assert settings.inbox is True  # on SQLite the webhook writes to the ledger's inbox
    # A per-user data directory, the same whatever the working directory (platformdirs).
    assert settings.data_dir == Path(user_data_dir("monthly-activity-tracker"))
    assert settings.data_dir.is_absolute()


@pytest.mark.parametrize(("value", "expected"), [("0", False), ("false", False), ("1", True)])
def test_the_inbox_is_turned_off_by_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    monkeypatch.setenv("TRACKER_INBOX", value)
    assert load_settings().inbox is expected


def test_default_database_is_sqlite_in_the_data_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRACKER_DATA_DIR", str(tmp_path / "data"))
    assert load_settings().resolved_database_url == f"sqlite:///{tmp_path / 'data' / 'ledger.sqlite3'}"


def test_secrets_do_not_show_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKER_WEBHOOK_SECRET", "very-secret-value")
    monkeypatch.setenv("TRACKER_ADMIN_TOKEN", "very-secret-token")
    text = repr(load_settings()) + str(load_settings())
    assert "very-secret-value" not in text
    assert "very-secret-token" not in text


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"], ids=["empty", "spaces", "whitespace"])
def test_a_blank_secret_is_unset(monkeypatch: pytest.MonkeyPatch, blank: str) -> None:
    monkeypatch.setenv("TRACKER_WEBHOOK_SECRET", blank)
    monkeypatch.setenv("TRACKER_ADMIN_TOKEN", blank)
    monkeypatch.setenv("GITHUB_TOKEN", blank)
    settings = load_settings()
    assert settings.webhook_secret is None
    assert settings.admin_token is None
    assert settings.github_token is None


@pytest.mark.parametrize("token", ["Z", "tiny9", "eleven-char", "  padded-11ch  "])
def test_a_short_admin_token_is_refused_at_start_up_without_quoting_it(
    monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    # Issue 31, item 9: a one-character admin token was accepted; it opens every private report.
    monkeypatch.setenv("TRACKER_ADMIN_TOKEN", token)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith("TRACKER_ADMIN_TOKEN is shorter than 12 characters: set it to a long random value")
    assert "secrets.token_urlsafe" in message
    assert token.strip() not in message
    with pytest.raises(SettingsError, match="TRACKER_ADMIN_TOKEN is shorter"):
        load_settings(admin_token=token)  # an override is checked the same way


def test_an_admin_token_of_12_characters_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKER_ADMIN_TOKEN", "twelve-chars")
    token = load_settings().admin_token
    assert token is not None and token.get_secret_value() == "twelve-chars"


def test_require_webhook_secret_says_what_to_do() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings().require_webhook_secret()
    message = str(caught.value)
    assert message.startswith("TRACKER_WEBHOOK_SECRET is not set")
    assert "GitHub webhook settings" in message


def test_require_webhook_secret_when_blank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKER_WEBHOOK_SECRET", "  ")
    with pytest.raises(SettingsError, match="TRACKER_WEBHOOK_SECRET"):
        load_settings().require_webhook_secret()


def test_secret_is_used_verbatim(monkeypatch: pytest.MonkeyPatch) -> None:
    # GitHub signs with the secret exactly as entered, including surrounding spaces and non-ASCII.
    monkeypatch.setenv("TRACKER_WEBHOOK_SECRET", " It's a Secret to Everybody ✓")
    assert load_settings().require_webhook_secret() == " It's a Secret to Everybody ✓".encode()


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "Asia/Shangai", "GMT+25", ""])
def test_unknown_tracker_timezone_fails(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    monkeypatch.setenv("TRACKER_TIMEZONE", zone)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert "unknown time zone" in message
    assert "Asia/Shanghai or UTC" in message


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_known_tracker_timezone(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    monkeypatch.setenv("TRACKER_TIMEZONE", zone)
    assert load_settings().timezone == zone


def test_overrides_win_over_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRACKER_WEBHOOK_SECRET", "from-env")
    monkeypatch.setenv("TRACKER_TIMEZONE", "Europe/Berlin")
    settings = load_settings(webhook_secret="from-override", timezone="UTC", data_dir=tmp_path)
    assert settings.require_webhook_secret() == b"from-override"
    assert settings.timezone == "UTC"
    assert settings.data_dir == tmp_path


def test_an_invalid_override_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match="unknown time zone"):
        load_settings(timezone="Nowhere/Special")


def test_settings_is_the_pydantic_model() -> None:
    assert isinstance(load_settings(), Settings)


def test_the_narrator_endpoint_is_read_and_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().llm_enabled is False
    monkeypatch.setenv("TRACKER_LLM_BASE_URL", "http://localhost:11434/v1/")
    assert load_settings().llm_enabled is False  # a model is needed too
    monkeypatch.setenv("TRACKER_LLM_MODEL", "qwen2.5:14b")
    monkeypatch.setenv("TRACKER_LLM_API_KEY", "sk-narrator-key")
    monkeypatch.setenv("TRACKER_LLM_INPUT_PRICE", "0.15")
    settings = load_settings()
    assert settings.llm_enabled is True
    assert settings.llm_base_url == "http://localhost:11434/v1"
    assert settings.llm_model == "qwen2.5:14b"
    assert settings.llm_api_key is not None and settings.llm_api_key.get_secret_value() == "sk-narrator-key"
    assert (settings.llm_input_price, settings.llm_output_price, settings.llm_timeout) == (0.15, 0.0, 120.0)
    assert "sk-narrator-key" not in repr(settings)
    monkeypatch.setenv("TRACKER_LLM_API_KEY", "")
    assert load_settings().llm_api_key is None  # empty means unset: a local server needs no key


def test_a_narrator_url_that_is_not_http_is_refused_without_quoting_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKER_LLM_BASE_URL", "ftp://user:hunter2@llm.example")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert "TRACKER_LLM_BASE_URL must start with http:// or https://" in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_the_narrator_temperature_and_prompt_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings()
    assert (settings.llm_temperature, settings.llm_prompt_budget) == (0.0, 200_000)
    monkeypatch.setenv("TRACKER_LLM_TEMPERATURE", "0.7")
    monkeypatch.setenv("TRACKER_LLM_PROMPT_BUDGET", "60000")
    assert (load_settings().llm_temperature, load_settings().llm_prompt_budget) == (0.7, 60_000)
    for left_out in ("none", "None", ""):  # for models that accept only their default
        monkeypatch.setenv("TRACKER_LLM_TEMPERATURE", left_out)
        assert load_settings().llm_temperature is None
    for name, wrong in (
        ("TRACKER_LLM_TEMPERATURE", "3"),
        ("TRACKER_LLM_TEMPERATURE", "warm"),
        ("TRACKER_LLM_PROMPT_BUDGET", "500"),
    ):
        monkeypatch.setenv(name, wrong)
        with pytest.raises((SettingsError, ValueError)):
            load_settings()
        monkeypatch.delenv(name)
