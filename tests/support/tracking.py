"""A ledger fed by hand in tests: deliveries stored and applied as the webhook and the worker do, and
head files stored as the fetch job does, without Redis or GitHub."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from bench.fixtures import factory
from tracker.config import TrackerConfig
from tracker.core.classify import ChangedFile
from tracker.core.derive import derive
from tracker.history.store import HistoryStore
from tracker.narration.store import NarrationStore
from tracker.records.store import RecordStore
from tracker.store.heads import HeadStore
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState


@dataclass
class Tracker:
    """The stores over one ledger and a configuration: what a report reads (tracker.reports.loading.
    ReportServices), as tracker.services.Services has it, without Redis."""

    ledger: Ledger
    state: MonthState
    heads: HeadStore
    config: TrackerConfig

    @cached_property
    def history(self) -> HistoryStore:
        return HistoryStore(self.state.engine)

    @cached_property
    def records(self) -> RecordStore:
        return RecordStore(self.state.engine)

    @cached_property
    def narrations(self) -> NarrationStore:
        return NarrationStore(self.state.engine)

    def deliver(self, deliveries: Sequence[factory.Delivery]) -> None:
        """Store each delivery, then apply what it proves, as the webhook and the worker do."""
        for item in deliveries:
            stored = item.as_ledger_delivery()
            assert self.ledger.store(stored) is True
            derivation = derive(stored.id, stored.content_type, stored.body, self.config.timezone_for)
            assert self.state.apply(stored.id, derivation) is True

    def give_files(self, files: Mapping[int, Sequence[str]]) -> None:
        """The files of every head shown so far whose PR is in `files`, as the fetch job stores them."""
        for head in self.heads.missing():
            if head.number in files:
                self.heads.store(
                    head.full_name.lower(),
                    head.number,
                    head.head_sha,
                    [ChangedFile(path, patch="@@ -1 +1 @@\n-a = 1\n+a = 2") for path in files[head.number]],
                    truncated=False,
                    source="pulls",
                    rules=self.config.rules_for(head.full_name),
                )
