"""The one place that reads the environment.

Every process (web, worker, CLI) builds one `Settings` at start-up and passes it on; nothing else
reads `os.environ`.
"""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class SettingsError(RuntimeError):
    """A setting a command needs is missing or wrong; the message says what to do."""


def _env(name: str) -> AliasChoices:
    return AliasChoices(name)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    webhook_secret: SecretStr | None = Field(None, validation_alias=_env("TRACKER_WEBHOOK_SECRET"))
    admin_token: SecretStr | None = Field(None, validation_alias=_env("TRACKER_ADMIN_TOKEN"))
    # Signs the expiring links to private reports (tracker.web.access); kept apart from the admin
    # token so a leaked link secret lets one forge links to reports, never call the admin endpoints.
    link_secret: SecretStr | None = Field(None, validation_alias=_env("TRACKER_LINK_SECRET"))
    data_dir: Path = Field(Path("./var"), validation_alias=_env("TRACKER_DATA_DIR"))
    database_url: str | None = Field(None, validation_alias=_env("TRACKER_DATABASE_URL"))
    redis_url: str | None = Field(None, validation_alias=_env("REDIS_URL"))
    github_token: SecretStr | None = Field(None, validation_alias=_env("GITHUB_TOKEN"))
    github_api_url: str = Field("https://api.github.com", validation_alias=_env("GITHUB_API_URL"))
    timezone: str = Field("Asia/Shanghai", validation_alias=_env("TRACKER_TIMEZONE"))
    config_path: Path | None = Field(None, validation_alias=_env("TRACKER_CONFIG"))
    # Month end: how long after a month ends (in its repository's time zone) the schedule finalises
    # it, and how long a finalisation waits for the month's pending deliveries and files.
    finalize_grace: float = Field(3600.0, ge=0, validation_alias=_env("TRACKER_FINALIZE_GRACE"))
    finalize_wait: float = Field(900.0, ge=0, validation_alias=_env("TRACKER_FINALIZE_WAIT"))
    # How often the schedule looks for due work (seconds).
    schedule_every: int = Field(300, ge=10, validation_alias=_env("TRACKER_SCHEDULE_EVERY"))

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}: use an IANA name such as Asia/Shanghai or UTC") from exc
        return value

    @field_validator("webhook_secret", "admin_token", "link_secret", "github_token", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'ledger.sqlite3').resolve()}"

    def require_webhook_secret(self) -> bytes:
        if self.webhook_secret is None:
            raise SettingsError(
                "TRACKER_WEBHOOK_SECRET is not set: set it to the secret you entered in the GitHub webhook settings"
            )
        return self.webhook_secret.get_secret_value().encode()

    def require_link_secret(self) -> str:
        if self.link_secret is None:
            raise SettingsError(
                "TRACKER_LINK_SECRET is not set: set it to a long random value (for example the output of "
                "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`), the same for the web "
                "server and for `tracker link`"
            )
        return self.link_secret.get_secret_value()


def load_settings(**overrides: object) -> Settings:
    """Read the environment once; `overrides` (by field name) win, for tests and CLI options."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValueError as exc:
        raise SettingsError(f"invalid settings: {exc}") from exc
