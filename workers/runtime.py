"""What job functions work with: the ledger, the derived state, fetched heads, config, GitHub.

A worker process installs one `Runtime` at start-up (`install`); job functions look it up with
`current()`. Tests install their own, against their own database and fake GitHub.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis import Redis

from tracker.config import TrackerConfig, load_config
from tracker.database import connect
from tracker.github import GitHubClient
from tracker.heads import HeadStore, SqlResponseCache
from tracker.ledger import Ledger
from tracker.quota import Quota
from tracker.settings import Settings, load_settings
from tracker.state import MonthState


@dataclass
class Runtime:
    ledger: Ledger
    state: MonthState
    config: TrackerConfig
    github_api_url: str = "https://api.github.com"
    github_token: str | None = field(default=None, repr=False)
    redis: Redis | None = None  # for enqueueing fetches and sharing quota; absent in pure tests
    github_timeout: float = 10.0
    github_backoff: float = 30.0  # first wait after a GitHub outage; doubles with each attempt

    @classmethod
    def from_settings(cls, settings: Settings, redis: Redis | None = None) -> Runtime:
        engine = connect(settings.resolved_database_url)
        return cls(
            ledger=Ledger(engine),
            state=MonthState(engine),
            config=load_config(settings),
            github_api_url=settings.github_api_url,
            github_token=settings.github_token.get_secret_value() if settings.github_token else None,
            redis=redis,
        )

    @property
    def heads(self) -> HeadStore:
        return HeadStore(self.state.engine)

    def github(self) -> GitHubClient:
        quota = Quota(self.redis) if self.redis is not None else None
        return GitHubClient(
            self.github_api_url,
            self.github_token,
            cache=SqlResponseCache(self.state.engine),
            on_response=quota.record if quota is not None else None,
            timeout=self.github_timeout,
        )


_installed: Runtime | None = None


def install(runtime: Runtime | None) -> None:
    global _installed
    _installed = runtime


def current() -> Runtime:
    global _installed
    if _installed is None:
        _installed = Runtime.from_settings(load_settings())
    return _installed
