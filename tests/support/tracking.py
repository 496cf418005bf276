"""A ledger fed by hand in tests: deliveries stored and applied as the webhook and the worker do, and
head files stored as the fetch job does, without Redis or GitHub."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.fixtures import factory
from tracker.config import TrackerConfig
from tracker.core.classify import ChangedFile
from tracker.core.derive import derive
from tracker.store.heads import HeadStore
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState


@dataclass
class Tracker:
    ledger: Ledger
    state: MonthState
    heads: HeadStore
    config: TrackerConfig

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
