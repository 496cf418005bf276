"""The one services object: what the web app, the workers and the CLI work with, built once from settings.

A process builds one `Services` at start-up (`Services.from_settings`) and looks it up where it needs
it: the web app keeps it in `app.extensions` (`tracker.web.context.services`), a worker process
installs it for its job functions (`workers.runtime`), and each CLI command gets one from
`tracker.cli`. Connections are opened here and nowhere else, and every store over the ledger is one of its
attributes, built once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, partial

from redis import Redis
from rq import Queue
from sqlalchemy import Engine

from tracker.config import TrackerConfig, load_config
from tracker.embedded_redis import redis_url
from tracker.github.app import GitHubApp
from tracker.github.client import GitHubClient, RateLimitState
from tracker.github.quota import Quota
from tracker.history.store import HistoryStore
from tracker.narration.store import NarrationStore
from tracker.queue import (
    WEB_REDIS,
    DrainAsker,
    RedisTimeouts,
    connect_redis,
    delivery_queue,
    github_queue,
    records_queue,
)
from tracker.records.store import RecordStore
from tracker.settings import Settings, SettingsError, load_settings
from tracker.store.database import connect, derived_schema_outdated
from tracker.store.heads import HeadStore
from tracker.store.http_cache import SqlResponseCache
from tracker.store.installations import InstallationStore
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState


@dataclass
class Services:
    settings: Settings
    config: TrackerConfig
    ledger: Ledger
    state: MonthState
    redis: Redis | None = None  # None for commands that never touch the queue (render, rebuild)
    github_timeout: float = 10.0
    github_backoff: float = 30.0  # first wait after a GitHub outage; doubles with each attempt
    _closed: bool = field(default=False, repr=False)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        redis: bool = True,
        redis_timeouts: RedisTimeouts = WEB_REDIS,
        outdated_ok: bool = False,
    ) -> Services:
        """Open the ledger (creating its schema if missing) and, when `redis`, connect to Redis
        (REDIS_URL, or the embedded server that `tracker run` or `tracker redis` started) with
        `redis_timeouts` (workers pass the long ones their blocking dequeue needs).
        Raises SettingsError with what to do."""
        config = load_config(settings)
        address = redis_url(settings) if redis else None  # no Redis anywhere: said before anything is opened
        engine = connect(settings.resolved_database_url)
        if not outdated_ok and derived_schema_outdated(engine):
            engine.dispose()
            raise SettingsError(
                "the ledger's derived tables come from an older release: stop the workers and run "
                "`tracker rebuild` (`tracker run` does it by itself)"
            )
        try:
            connection = connect_redis(address, redis_timeouts) if address is not None else None
        except BaseException:
            engine.dispose()
            raise
        return cls(settings, config, Ledger(engine, inbox=settings.inbox), MonthState(engine), connection)

    @classmethod
    def over(
        cls, engine: Engine, config: TrackerConfig, *, settings: Settings | None = None, redis: Redis | None = None
    ) -> Services:
        """Services over a ledger opened already (a benchmark's or a test's), with `config`; `settings`:
        the environment's when not given."""
        return cls(settings or load_settings(), config, Ledger(engine), MonthState(engine), redis)

    @cached_property
    def heads(self) -> HeadStore:
        return HeadStore(self.state.engine)

    @cached_property
    def history(self) -> HistoryStore:
        return HistoryStore(self.state.engine)

    @cached_property
    def records(self) -> RecordStore:
        return RecordStore(self.ledger.engine)

    @cached_property
    def installations(self) -> InstallationStore:
        """Which GitHub App installation covers which repository."""
        return InstallationStore(self.state.engine)

    @cached_property
    def narrations(self) -> NarrationStore:
        """The narrator's prose and what it spent."""
        return NarrationStore(self.state.engine)

    @cached_property
    def response_cache(self) -> SqlResponseCache:
        """GitHub's answers kept for conditional requests."""
        return SqlResponseCache(self.state.engine)

    @property
    def webhook_secret(self) -> bytes:
        return self.settings.require_webhook_secret()

    @cached_property
    def delivery_queue(self) -> Queue:
        return delivery_queue(self.require_redis())

    @cached_property
    def drain_asker(self) -> DrainAsker:
        """How the webhook asks for a drain: at once, or from a thread once a web process starts it."""
        return DrainAsker(self.delivery_queue)

    @cached_property
    def github_queue(self) -> Queue:
        return github_queue(self.require_redis())

    @cached_property
    def records_queue(self) -> Queue:
        return records_queue(self.require_redis())

    def quota(self) -> Quota | None:
        return Quota(self.redis) if self.redis is not None else None

    @cached_property
    def github_app(self) -> GitHubApp | None:
        """The GitHub App (TRACKER_GITHUB_APP_ID and its key), when one is configured; its tokens are
        shared through Redis."""
        credentials = self.settings.github_app_credentials
        if credentials is None:
            return None
        app_id, private_key = credentials
        return GitHubApp(
            app_id, private_key, self.settings.github_api_url, redis=self.redis, timeout=self.github_timeout
        )

    def github(
        self, full_name: str | None = None, *, on_response: Callable[[RateLimitState, bool], None] | None = None
    ) -> GitHubClient:
        """A client for one job (close it after use); its quota is shared through Redis.

        With a GitHub App configured and `full_name` given, it authenticates as the App's installation
        on that repository (the token is fetched by the first request and renewed before it expires);
        for a repository the App is not installed on, or without an App, with GITHUB_TOKEN.
        `on_response`: what sees each answer's rate-limit headers instead of the shared quota (a job's
        `QuotaTally`, written once at its end)."""
        quota = self.quota()
        secret = self.settings.github_token
        token = secret.get_secret_value() if secret is not None else None
        auth: Callable[[], str | None] | None = None
        app = self.github_app
        if app is not None and full_name is not None:
            known = self.installations.installation_for(full_name)
            auth = partial(app.token_for, full_name, known, fallback=token)
        return GitHubClient(
            self.settings.github_api_url,
            token if auth is None else None,
            auth=auth,
            cache=self.response_cache,
            on_response=on_response if on_response is not None else quota.record if quota is not None else None,
            timeout=self.github_timeout,
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        asker = self.__dict__.get("drain_asker")
        if asker is not None:
            asker.stop()  # its last ask, if a request wanted one since the one before
        app = self.__dict__.get("github_app")  # only when it was built
        if app is not None:
            app.close()
        self.ledger.engine.dispose()
        if self.redis is not None:
            self.redis.close()

    def require_redis(self) -> Redis:
        if self.redis is None:
            raise SettingsError("this command was set up without Redis, and needs it")
        return self.redis
