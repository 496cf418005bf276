"""What a report is asked for (`MonthRequest`: a month of a repository at a cutoff) and what it reads
(`ReportServices`: the stores and the configuration, which tracker.services.Services has): the two
arguments of every function of tracker.reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tracker.config import TrackerConfig
from tracker.core.window import Window
from tracker.history.store import HistoryStore
from tracker.narration.store import NarrationStore
from tracker.records.store import RecordStore
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState


class ReportServices(Protocol):
    """What a report reads: the stores and the configuration (tracker.services.Services has them all)."""

    @property
    def config(self) -> TrackerConfig: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def state(self) -> MonthState: ...

    @property
    def history(self) -> HistoryStore: ...

    @property
    def records(self) -> RecordStore: ...

    @property
    def narrations(self) -> NarrationStore: ...


@dataclass(frozen=True)
class MonthRequest:
    """A month of a repository at a cutoff: what every report of it is asked for."""

    repo: str  # as the repository spells itself
    window: Window
