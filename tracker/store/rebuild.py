"""`tracker rebuild`: drop every derived table and derive it again from the raw ledger; and `tracker
migrate`'s upgrade, which rebuilds them after carrying an older ledger's sources over."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine

from tracker.config import TrackerConfig
from tracker.core.classify import HeadVerdict, Rules, classify_head
from tracker.core.derive import Derivation, derive
from tracker.core.payloads import IncompleteBody, MalformedBody
from tracker.history.derive import derive_history
from tracker.history.store import HistoryStore
from tracker.store.database import Migration, migrate
from tracker.store.heads import HeadStore, write_verdicts
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState, mark_processed, write_derivations


def _write_verdicts(state: MonthState, batch: list[tuple[str, int, HeadVerdict]]) -> None:
    with state.engine.begin() as conn:
        write_verdicts(conn, batch)


def upgrade(engine: Engine, config: Callable[[], TrackerConfig]) -> Migration:
    """Bring the ledger's schema to this release's (`database.migrate`) and, when an older ledger's sources
    were carried over, rebuild its derived tables from them now, under `config()` (read only then: a plain
    upgrade needs no config). Stop the tracker's processes first."""
    done = migrate(engine)
    if done.carried is not None:
        rebuild(Ledger(engine), MonthState(engine), config())
    return done


def rebuild(
    ledger: Ledger,
    state: MonthState,
    config: TrackerConfig,
    progress: Callable[[int], None] | None = None,
) -> tuple[int, int, int]:
    """Re-derive everything from the raw deliveries, the observations of backfills and reconciliations,
    and the stored files, under the current config;
    returns (deliveries processed, deliveries failed, heads classified). No GitHub request is made.
    Stop the workers first: a job that runs while the tables are dropped would fail and be retried."""
    state.drop_and_recreate()
    state.new_generation()
    processed = failed = 0
    for batch in ledger.iter_pull_request_deliveries():
        items: list[tuple[str, Derivation]] = []
        for delivery in batch:
            try:
                items.append(
                    (delivery.id, derive(delivery.id, delivery.content_type, delivery.body, config.timezone_for))
                )
            except (MalformedBody, IncompleteBody) as exc:
                ledger.record_attempt_failed(delivery.id, f"{type(exc).__name__}: {exc}", final=True)
                failed += 1
        with state.engine.begin() as conn:
            write_derivations(conn, items)
            mark_processed(conn, [delivery_id for delivery_id, _ in items])
        processed += len(items)
        if progress is not None:
            progress(len(batch))
    for batch_ in HistoryStore(state.engine).iter_observations():
        for observation_id, source, document in batch_:
            try:
                history = derive_history(observation_id, document, config.timezone_for)
            except (MalformedBody, IncompleteBody):
                failed += 1
                continue
            with state.engine.begin() as conn:
                write_derivations(conn, [(observation_id, d) for d in history.derivations], source=source)
    classified = 0
    rules: dict[str, Rules] = {}
    verdicts: list[tuple[str, int, HeadVerdict]] = []
    for repo, number, head_sha, truncated, files in HeadStore(state.engine).stored():
        if repo not in rules:
            rules[repo] = config.rules_for(state.repository_name(repo) or repo)
        verdicts.append((repo, number, classify_head(head_sha, files, rules[repo], truncated)))
        if len(verdicts) >= 1000:
            _write_verdicts(state, verdicts)
            classified += len(verdicts)
            verdicts = []
    _write_verdicts(state, verdicts)
    classified += len(verdicts)
    state.mark_rebuilt()
    return processed, failed, classified
