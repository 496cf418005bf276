"""What job functions work with: the ledger, the derived state and the per-repository config.

A worker process installs one `Runtime` at start-up (`install`); job functions look it up with
`current()`. Tests install their own, against their own database.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracker.config import TrackerConfig, load_config
from tracker.database import connect
from tracker.ledger import Ledger
from tracker.settings import Settings, load_settings
from tracker.state import MonthState


@dataclass(frozen=True)
class Runtime:
    ledger: Ledger
    state: MonthState
    config: TrackerConfig

    @classmethod
    def from_settings(cls, settings: Settings) -> Runtime:
        engine = connect(settings.resolved_database_url)
        return cls(ledger=Ledger(engine), state=MonthState(engine), config=load_config(settings))


_installed: Runtime | None = None


def install(runtime: Runtime | None) -> None:
    global _installed
    _installed = runtime


def current() -> Runtime:
    global _installed
    if _installed is None:
        _installed = Runtime.from_settings(load_settings())
    return _installed
