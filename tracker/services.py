"""The one services object: what the web app, the workers and the CLI work with, built once from settings.

A process builds one `Services` at start-up (`Services.from_settings`) and looks it up where it needs
it: the web app keeps it in `app.extensions` (`tracker.web.context.services`), a worker process
installs it for its job functions (`workers.runtime`), and each CLI command gets one from
`tracker.cli`. Connections are opened here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from redis import Redis
from rq import Queue

from tracker.config import TrackerConfig, load_config
from tracker.embedded_redis import redis_url
from tracker.github.client import GitHubClient
from tracker.github.quota import Quota
from tracker.queue import WEB_REDIS, RedisTimeouts, connect_redis, delivery_queue, github_queue, records_queue
from tracker.settings import Settings, SettingsError
from tracker.store.database import connect
from tracker.store.heads import HeadStore
from tracker.store.http_cache import SqlResponseCache
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState
from tracker.store.records import RecordStore


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
        cls, settings: Settings, *, redis: bool = True, redis_timeouts: RedisTimeouts = WEB_REDIS
    ) -> Services:
        """Open the ledger (creating its schema if missing) and, when `redis`, connect to Redis
        (REDIS_URL, or the embedded server that `tracker run` or `tracker redis` started) with
        `redis_timeouts` (workers pass the long ones their blocking dequeue needs).
        Raises SettingsError with what to do."""
        config = load_config(settings)
        connection = connect_redis(redis_url(settings), redis_timeouts) if redis else None
        engine = connect(settings.resolved_database_url)
        return cls(settings, config, Ledger(engine), MonthState(engine), connection)

    @property
    def heads(self) -> HeadStore:
        return HeadStore(self.state.engine)

    @property
    def webhook_secret(self) -> bytes:
        return self.settings.require_webhook_secret()

    @cached_property
    def delivery_queue(self) -> Queue:
        return delivery_queue(self.require_redis())

    @cached_property
    def github_queue(self) -> Queue:
        return github_queue(self.require_redis())

    @cached_property
    def records_queue(self) -> Queue:
        return records_queue(self.require_redis())

    @property
    def records(self) -> RecordStore:
        return RecordStore(self.ledger.engine)

    def quota(self) -> Quota | None:
        return Quota(self.redis) if self.redis is not None else None

    def github(self) -> GitHubClient:
        """A client for one job (close it after use); its quota is shared through Redis."""
        quota = self.quota()
        token = self.settings.github_token
        return GitHubClient(
            self.settings.github_api_url,
            token.get_secret_value() if token is not None else None,
            cache=SqlResponseCache(self.state.engine),
            on_response=quota.record if quota is not None else None,
            timeout=self.github_timeout,
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.ledger.engine.dispose()
        if self.redis is not None:
            self.redis.close()

    def require_redis(self) -> Redis:
        if self.redis is None:
            raise SettingsError("this command was set up without Redis, and needs it")
        return self.redis
