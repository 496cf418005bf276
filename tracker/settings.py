"""The one place that reads the environment.

Every process (web, worker, CLI) builds one `Settings` at start-up, from the environment and a
`.env` file in the working directory, and passes it on; nothing else reads `os.environ`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from platformdirs import user_data_dir
from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

APP_NAME = "monthly-activity-tracker"
POSTGRES_EXTRA = f"install the postgres extra: pip install '{APP_NAME}[postgres]'"
# The Python module each PostgreSQL driver name of a SQLAlchemy URL needs (`postgresql://` alone
# means psycopg2, SQLAlchemy's default); other drivers are left to SQLAlchemy to report.
_POSTGRES_DRIVERS = {"psycopg": "psycopg", "psycopg2": "psycopg2", "": "psycopg2"}
# The shortest TRACKER_ADMIN_TOKEN accepted, and a command that prints a good one.
MIN_ADMIN_TOKEN = 12
RANDOM_VALUE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


class SettingsError(RuntimeError):
    """A setting a command needs is missing or wrong; the message says what to do."""


def default_data_dir() -> Path:
    """The user's own data directory (`~/.local/share/monthly-activity-tracker` on Linux,
    `~/Library/Application Support/monthly-activity-tracker` on macOS): absolute, so every command
    finds the same ledger from any working directory. The embedded Redis puts its unix socket under
    it (`redis/redis.sock`); a path too long for a socket is refused, saying so, when that server
    starts (`tracker.embedded_redis`), rather than the data moving somewhere else."""
    return Path(user_data_dir(APP_NAME))


def _env(name: str) -> AliasChoices:
    return AliasChoices(name)


class Settings(BaseSettings):
    # A `.env` file in the working directory is read too (the environment wins over it).
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_file=".env", env_file_encoding="utf-8")

    webhook_secret: SecretStr | None = Field(None, validation_alias=_env("TRACKER_WEBHOOK_SECRET"))
    admin_token: SecretStr | None = Field(None, validation_alias=_env("TRACKER_ADMIN_TOKEN"))
    # Signs the expiring links to private reports (tracker.web.access); kept apart from the admin
    # token so a leaked link secret lets one forge links to reports, never call the admin endpoints.
    link_secret: SecretStr | None = Field(None, validation_alias=_env("TRACKER_LINK_SECRET"))
    # When set, GET /metrics answers only `Authorization: Bearer <this token>` (tracker.web.metrics); kept
    # apart from the admin token so that a Prometheus server's credentials open nothing else.
    metrics_token: SecretStr | None = Field(None, validation_alias=_env("TRACKER_METRICS_TOKEN"))
    data_dir: Path = Field(default_factory=default_data_dir, validation_alias=_env("TRACKER_DATA_DIR"))
    # Not in the repr: either URL may hold a password.
    database_url: str | None = Field(None, validation_alias=_env("TRACKER_DATABASE_URL"), repr=False)
    # SQLite only: the webhook writes to the ledger's inbox, a file of its own (tracker.store.inbox), so
    # that a 202 never waits behind the workers' transactions (the README's Benchmarks, 2026-12-04).
    inbox: bool = Field(True, validation_alias=_env("TRACKER_INBOX"))
    redis_url: str | None = Field(None, validation_alias=_env("REDIS_URL"), repr=False)
    github_token: SecretStr | None = Field(None, validation_alias=_env("GITHUB_TOKEN"))
    github_api_url: str = Field("https://api.github.com", validation_alias=_env("GITHUB_API_URL"))
    # A GitHub App (tracker.github.app): its id and private key, the PEM text itself or a file holding
    # it (read once, here). For a repository the App is installed on it is used instead of
    # GITHUB_TOKEN; GITHUB_TOKEN stays in use for every other repository.
    github_app_id: int | None = Field(None, gt=0, validation_alias=_env("TRACKER_GITHUB_APP_ID"))
    github_app_private_key: SecretStr | None = Field(None, validation_alias=_env("TRACKER_GITHUB_APP_PRIVATE_KEY"))
    github_app_private_key_file: Path | None = Field(None, validation_alias=_env("TRACKER_GITHUB_APP_PRIVATE_KEY_FILE"))
    timezone: str = Field("Asia/Shanghai", validation_alias=_env("TRACKER_TIMEZONE"))
    config_path: Path | None = Field(None, validation_alias=_env("TRACKER_CONFIG"))
    # Month end: how long after a month ends (in its repository's time zone) the schedule finalises
    # it, and how long a finalisation waits for the month's pending deliveries and files.
    finalize_grace: float = Field(3600.0, ge=0, validation_alias=_env("TRACKER_FINALIZE_GRACE"))
    finalize_wait: float = Field(900.0, ge=0, validation_alias=_env("TRACKER_FINALIZE_WAIT"))
    # How often the schedule looks for due work (seconds).
    schedule_every: int = Field(300, ge=10, validation_alias=_env("TRACKER_SCHEDULE_EVERY"))
    # How often each repository's recent history is reconciled with GitHub's (seconds; 0: never), and
    # how far back the first reconciliation of a repository looks.
    reconcile_every: int = Field(3600, ge=0, validation_alias=_env("TRACKER_RECONCILE_EVERY"))
    reconcile_first_lookback: int = Field(86400, ge=0, validation_alias=_env("TRACKER_RECONCILE_LOOKBACK"))
    # Retention, applied by the schedule's due work (workers.retention), in days; 0 keeps for ever. GitHub's
    # answers kept for conditional requests go once unused that long (dropping one costs one plain request
    # later); finished backfill and reconciliation runs (progress and checkpoints, never what they read) go
    # that long after they finished. The ledger (deliveries, observations) is never pruned.
    http_cache_retention_days: int = Field(30, ge=0, validation_alias=_env("TRACKER_HTTP_CACHE_RETENTION_DAYS"))
    run_retention_days: int = Field(90, ge=0, validation_alias=_env("TRACKER_RUN_RETENTION_DAYS"))
    # The optional language-model narrator (tracker.narration): an OpenAI-compatible endpoint (the part before
    # /chat/completions: https://api.openai.com/v1, http://localhost:8000/v1 for vLLM,
    # http://localhost:11434/v1 for Ollama), its key (none for a local server) and the model. Off unless
    # the base URL and the model are set, and then only for repositories whose config says
    # `narrator: llm`. Prices (per million tokens, in any currency) make the cost estimate in status.
    llm_base_url: str | None = Field(None, validation_alias=_env("TRACKER_LLM_BASE_URL"))
    llm_api_key: SecretStr | None = Field(None, validation_alias=_env("TRACKER_LLM_API_KEY"))
    llm_model: str | None = Field(None, validation_alias=_env("TRACKER_LLM_MODEL"))
    llm_timeout: float = Field(120.0, gt=0, validation_alias=_env("TRACKER_LLM_TIMEOUT"))
    llm_input_price: float = Field(0.0, ge=0, validation_alias=_env("TRACKER_LLM_INPUT_PRICE"))
    llm_output_price: float = Field(0.0, ge=0, validation_alias=_env("TRACKER_LLM_OUTPUT_PRICE"))
    # Sampling temperature sent with each request; `none` leaves it out, for models that accept only
    # their default (OpenAI's reasoning models answer 400 `unsupported_value` to `temperature: 0`).
    llm_temperature: float | None = Field(0.0, ge=0, le=2, validation_alias=_env("TRACKER_LLM_TEMPERATURE"))
    # The most characters of PR text (the data block) one request may carry: a section whose text is
    # longer is sent with shorter bodies, fewer commit subjects and paths (tracker.narration.schema.fit).
    llm_prompt_budget: int = Field(200_000, ge=10_000, validation_alias=_env("TRACKER_LLM_PROMPT_BUDGET"))
    # How every process logs on stderr (tracker.logs): `text` lines, or `json`, one object per line for
    # a log collector. `tracker run` hands it on to its children.
    log_format: Literal["text", "json"] = Field("text", validation_alias=_env("TRACKER_LOG_FORMAT"))

    @property
    def llm_enabled(self) -> bool:
        return self.llm_base_url is not None and self.llm_model is not None

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}: use an IANA name such as Asia/Shanghai or UTC") from exc
        return value

    @field_validator("data_dir", mode="before")
    @classmethod
    def _blank_data_dir_is_unset(cls, value: object) -> object:
        # `TRACKER_DATA_DIR=` (an empty value) means the default, not the working directory.
        return default_data_dir() if isinstance(value, str) and not value.strip() else value

    @field_validator("data_dir")
    @classmethod
    def _home_expanded(cls, value: Path) -> Path:
        return value.expanduser()  # `~/tracker` in a .env file, where no shell expands it

    @field_validator(
        "webhook_secret",
        "admin_token",
        "link_secret",
        "github_token",
        "github_app_id",
        "github_app_private_key",
        "github_app_private_key_file",
        "config_path",
        "database_url",
        "redis_url",
        "llm_base_url",
        "llm_api_key",
        "llm_model",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("admin_token")
    @classmethod
    def _admin_token_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        # The token opens every private report and the admin endpoints: a short one is guessed.
        # SettingsError, not ValueError: pydantic would quote the input, the token itself.
        if value is not None and len(value.get_secret_value().strip()) < MIN_ADMIN_TOKEN:
            raise SettingsError(
                f"TRACKER_ADMIN_TOKEN is shorter than {MIN_ADMIN_TOKEN} characters: set it to a long random value "
                f"(for example the output of `{RANDOM_VALUE}`), or leave it unset to turn the admin endpoints off"
            )
        return value

    @field_validator("log_format", mode="before")
    @classmethod
    def _log_format_any_case(cls, value: object) -> object:
        return (value.strip().lower() or "text") if isinstance(value, str) else value

    @field_validator("llm_temperature", mode="before")
    @classmethod
    def _temperature_left_out(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "default"):
            return None
        return value

    @field_validator("github_app_private_key", mode="before")
    @classmethod
    def _escaped_newlines(cls, value: object) -> object:
        # A PEM put in one environment variable (.env files, container settings) often carries its
        # line breaks as the two characters `\n`.
        return value.replace("\\n", "\n").strip() + "\n" if isinstance(value, str) else value

    @field_validator("llm_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            # SettingsError, not ValueError: pydantic would quote the input, and a URL can carry a password.
            raise SettingsError("TRACKER_LLM_BASE_URL must start with http:// or https://")
        return value.rstrip("/") if value is not None else None

    @model_validator(mode="after")
    def _github_app(self) -> Self:
        # Raises SettingsError, not ValueError: pydantic would quote the input, which holds the key.
        if self.github_app_private_key is not None and self.github_app_private_key_file is not None:
            raise SettingsError(
                "both TRACKER_GITHUB_APP_PRIVATE_KEY and TRACKER_GITHUB_APP_PRIVATE_KEY_FILE are set: keep one of them"
            )
        name, source = "TRACKER_GITHUB_APP_PRIVATE_KEY", "TRACKER_GITHUB_APP_PRIVATE_KEY"
        if self.github_app_private_key_file is not None:
            self.github_app_private_key = SecretStr(_read_key_file(self.github_app_private_key_file))
            name = "TRACKER_GITHUB_APP_PRIVATE_KEY_FILE"
            source = f"{name} ({self.github_app_private_key_file})"
        if self.github_app_id is not None and self.github_app_private_key is None:
            raise SettingsError(
                "TRACKER_GITHUB_APP_ID is set but the App's private key is not: set "
                "TRACKER_GITHUB_APP_PRIVATE_KEY_FILE to the .pem file generated on the App's settings page "
                "(or TRACKER_GITHUB_APP_PRIVATE_KEY to its text)"
            )
        if self.github_app_private_key is not None:
            if self.github_app_id is None:
                raise SettingsError(
                    f"{name} is set but TRACKER_GITHUB_APP_ID is not: set it to the App ID shown on "
                    "the App's settings page"
                )
            _check_rsa_private_key(self.github_app_private_key.get_secret_value(), source)
        return self

    @model_validator(mode="after")
    def _database_url_usable(self) -> Self:
        if self.database_url:
            _check_database_url(self.database_url)
        return self

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'ledger.sqlite3').resolve()}"

    @property
    def github_app_credentials(self) -> tuple[int, str] | None:
        """The GitHub App's id and private key (PEM), when an App is configured."""
        if self.github_app_id is None or self.github_app_private_key is None:
            return None
        return self.github_app_id, self.github_app_private_key.get_secret_value()

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


def _check_database_url(url: str) -> None:
    """What SQLAlchemy would only find at the first connection, as one line at start-up: a database
    the ledger is not written for, a PostgreSQL driver the `postgres` extra was not installed for, or
    a SQLite file in a directory that does not exist (a typo would otherwise make a new, empty ledger
    there and the service would start as if nothing had been received)."""
    scheme = url.partition("://")[0].lower()
    dialect, _, driver = scheme.partition("+")
    if dialect not in ("sqlite", "postgresql"):
        # Only the scheme is quoted: the rest of a URL can carry a password.
        raise SettingsError(
            f"TRACKER_DATABASE_URL names {dialect[:40]!r}, which the tracker does not support: use "
            "postgresql+psycopg://user@host/database, or leave it unset for SQLite under TRACKER_DATA_DIR"
        )
    if dialect == "sqlite":
        _check_sqlite_directory(url)
        return
    if driver not in _POSTGRES_DRIVERS:
        return
    module = _POSTGRES_DRIVERS[driver]
    if _installed(module):
        return
    if module == "psycopg":
        raise SettingsError(f"TRACKER_DATABASE_URL names PostgreSQL but psycopg is not installed: {POSTGRES_EXTRA}")
    raise SettingsError(
        f"TRACKER_DATABASE_URL ({scheme}://…) needs the psycopg2 driver, which is not installed: write it as "
        f"postgresql+psycopg://… and {POSTGRES_EXTRA}"
    )


def _check_sqlite_directory(url: str) -> None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        database = make_url(url).database
    except ArgumentError as exc:
        raise SettingsError("TRACKER_DATABASE_URL is not a database URL: write it as sqlite:////absolute/path") from exc
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    directory = Path(database).expanduser().absolute().parent
    if not directory.is_dir():
        raise SettingsError(
            f"TRACKER_DATABASE_URL puts the ledger in {directory}, which does not exist: create that directory, "
            "or fix the path (or leave TRACKER_DATABASE_URL unset for the ledger under TRACKER_DATA_DIR)"
        )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _read_key_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a text file"
        raise SettingsError(
            f"TRACKER_GITHUB_APP_PRIVATE_KEY_FILE ({path}) cannot be read ({reason}): point it to the .pem file "
            "generated on the GitHub App's settings page, readable by the tracker"
        ) from None


def _check_rsa_private_key(pem: str, source: str) -> None:
    """A GitHub App's key is an RSA key in PEM form: GitHub accepts only RS256 for an App's JWT."""
    try:
        key = load_pem_private_key(pem.encode("utf-8"), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        key = None  # the library's message is not shown: it may quote the key
    if not isinstance(key, RSAPrivateKey):
        raise SettingsError(
            f"{source} is not an unencrypted RSA private key in PEM form: use the .pem file generated on the "
            "GitHub App's settings page, from -----BEGIN RSA PRIVATE KEY----- to its END line"
        )


def load_settings(**overrides: object) -> Settings:
    """Read the environment once; `overrides` (by field name) win, for tests and CLI options."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValueError as exc:
        raise SettingsError(f"invalid settings: {exc}") from exc
