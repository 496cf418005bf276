"""History read from GitHub's REST API: observations (a source of truth, like deliveries), the runs
that read them (backfills, reconciliations) with their checkpoints, and the coverage they give."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, func, select, update

from tracker.core.repository import repository_key
from tracker.core.window import iso_utc
from tracker.history.derive import History
from tracker.store.changes import bump_months
from tracker.store.database import insert_ignoring_duplicates
from tracker.store.ledger import now_ms
from tracker.store.month_state import write_derivations
from tracker.store.schema import coverage, history_done, history_runs, ledger_meta, observations, webhook_coverage
from tracker.store.schema import months as month_table

QUEUED, RUNNING, WAITING, DONE, FAILED = "queued", "running", "waiting", "done", "failed"
SAMPLE_REFUSAL = (
    "this ledger holds `tracker demo`'s sample of {0}, whose lives are made up: read {0}'s real history "
    "into a data directory of its own (TRACKER_DATA_DIR)"
)
WEBHOOK = "webhook"


@dataclass(frozen=True)
class Run:
    id: str
    full_name: str
    kind: str
    range_start: int
    range_end: int
    state: str
    total: int
    done: int
    requests: int
    not_modified: int
    started_at: int
    updated_at: int
    finished_at: int | None
    detail: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "repo": self.full_name,
            "kind": self.kind,
            "range": {"start": iso_utc(self.range_start), "end": iso_utc(self.range_end)},
            "state": self.state,
            "progress": {"done": self.done, "total": self.total},
            "requests": self.requests,
            "not_modified": self.not_modified,
            "started_at": iso_utc(self.started_at // 1000),
            "updated_at": iso_utc(self.updated_at // 1000),
            "finished_at": iso_utc(self.finished_at // 1000) if self.finished_at else None,
            "detail": self.detail,
        }


def run_id(kind: str, full_name: str, start: int) -> str:
    """A run is named by where it starts: a range that ends now (`--since`, the running month) ends a
    little later each time it is asked for, and is still the same run (resumed, or queued once)."""
    return f"{kind}:{repository_key(full_name)}:{start}"


class HistoryStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # --- observations -------------------------------------------------------------------------

    def record(
        self, observation_id: str, source: str, full_name: str, number: int, document: bytes, history: History
    ) -> bool:
        """Keep an observation and what it proves, in one transaction; False when the same document
        was already kept (nothing changes)."""
        with self.engine.begin() as conn:
            row = {
                "id": observation_id,
                "repo": repository_key(full_name),
                "number": number,
                "source": source,
                "fetched_at": now_ms(),
                "document": document,
            }
            if not insert_ignoring_duplicates(conn, observations, [row]):
                return False
            write_derivations(conn, [(observation_id, d) for d in history.derivations], source=source)
        return True

    def iter_observations(self, batch: int = 200) -> Iterator[list[tuple[str, str, bytes]]]:
        """Every observation as (id, source, document), in batches in a stable order (for rebuilds)."""
        last = ""
        while True:
            query = (
                select(observations.c.id, observations.c.source, observations.c.document)
                .where(observations.c.id > last)
                .order_by(observations.c.id)
                .limit(batch)
            )
            with self.engine.connect().execution_options(read_only=True) as conn:
                rows = [(r.id, r.source, bytes(r.document)) for r in conn.execute(query)]
            if not rows:
                return
            yield rows
            last = rows[-1][0]

    def observation_count(self, repo: str | None = None) -> int:
        """How many observations of GitHub's history are kept: of `repo` (its repository key), or of all."""
        query = select(func.count()).select_from(observations)
        if repo is not None:
            query = query.where(observations.c.repo == repo)
        with self.engine.connect().execution_options(read_only=True) as conn:
            return int(conn.execute(query).scalar_one())

    # --- runs and their checkpoints -----------------------------------------------------------

    def open_run(self, kind: str, full_name: str, start: int, end: int, *, state: str = RUNNING) -> Run:
        """The run for this range: a new one, or the interrupted one to resume (its finished PRs are
        kept); a finished run starts again from nothing (a repeat costs little: answers are 304s)."""
        rid = run_id(kind, full_name, start)
        at = now_ms()
        fresh = {
            "range_end": end,
            "state": state,
            "started_at": at,
            "updated_at": at,
            "finished_at": None,
            "total": 0,
            "done": 0,
            "requests": 0,
            "not_modified": 0,
            "detail": None,
        }
        with self.engine.begin() as conn:
            existing = conn.execute(
                select(history_runs.c.state, history_runs.c.range_end).where(history_runs.c.id == rid)
            ).first()
            if existing is None:
                conn.execute(
                    history_runs.insert().values(
                        id=rid,
                        repo=repository_key(full_name),
                        full_name=full_name,
                        kind=kind,
                        range_start=start,
                        **fresh,
                    )
                )
            elif existing.state == DONE:
                conn.execute(delete(history_done).where(history_done.c.run_id == rid))
                conn.execute(update(history_runs).where(history_runs.c.id == rid).values(**fresh))
            else:
                conn.execute(
                    update(history_runs)
                    .where(history_runs.c.id == rid)
                    .values(state=state, updated_at=at, range_end=max(existing.range_end, end))
                )
        found = self.run(rid)
        assert found is not None
        return found

    def run(self, rid: str) -> Run | None:
        with self.engine.connect().execution_options(read_only=True) as conn:
            row = conn.execute(select(history_runs).where(history_runs.c.id == rid)).first()
        return _run(row) if row is not None else None

    def runs(self, full_name: str | None = None, limit: int = 20) -> list[Run]:
        query = select(history_runs).order_by(history_runs.c.updated_at.desc()).limit(limit)
        if full_name is not None:
            query = query.where(history_runs.c.repo == repository_key(full_name))
        with self.engine.connect().execution_options(read_only=True) as conn:
            return [_run(row) for row in conn.execute(query)]

    def finished_numbers(self, rid: str) -> set[int]:
        with self.engine.connect().execution_options(read_only=True) as conn:
            return set(conn.execute(select(history_done.c.number).where(history_done.c.run_id == rid)).scalars())

    def finish_pull_request(self, rid: str, number: int, outcome: str) -> None:
        with self.engine.begin() as conn:
            if insert_ignoring_duplicates(conn, history_done, [{"run_id": rid, "number": number, "outcome": outcome}]):
                conn.execute(
                    update(history_runs)
                    .where(history_runs.c.id == rid)
                    .values(done=history_runs.c.done + 1, updated_at=now_ms())
                )

    def outcomes(self, rid: str) -> dict[int, str]:
        with self.engine.connect().execution_options(read_only=True) as conn:
            rows = conn.execute(
                select(history_done.c.number, history_done.c.outcome).where(history_done.c.run_id == rid)
            ).all()
        return {number: outcome for number, outcome in rows}

    def update_run(self, rid: str, **values: Any) -> None:
        """Set a run's state, total, detail, or add to its request counts (`requests`, `not_modified`
        are increments)."""
        changes: dict[str, Any] = {"updated_at": now_ms()}
        for name in ("requests", "not_modified"):
            if name in values:
                changes[name] = getattr(history_runs.c, name) + int(values.pop(name))
        changes.update(values)
        if changes.get("state") in (DONE, FAILED):
            changes["finished_at"] = now_ms()
        with self.engine.begin() as conn:
            conn.execute(update(history_runs).where(history_runs.c.id == rid).values(**changes))

    def prune_runs(self, finished_before_ms: int) -> int:
        """Drop the runs that finished (done or failed) before `finished_before_ms`, with their
        checkpoints; how many runs were dropped. What they read stays: the observations, the facts
        and the coverage they added are kept. A failed run asked for again then starts afresh."""
        finished = select(history_runs.c.id).where(
            history_runs.c.state.in_((DONE, FAILED)), history_runs.c.finished_at < finished_before_ms
        )
        with self.engine.begin() as conn:
            conn.execute(delete(history_done).where(history_done.c.run_id.in_(finished)))
            return int(conn.execute(delete(history_runs).where(history_runs.c.id.in_(finished))).rowcount)

    # --- sample repositories (`tracker demo`) ---------------------------------------------------

    def mark_sample(self, full_name: str) -> None:
        """The repository holds `tracker demo`'s made-up lives: nothing may read its real history
        from GitHub into this ledger (reconciliation leaves it alone)."""
        with self.engine.begin() as conn:
            insert_ignoring_duplicates(conn, ledger_meta, [{"key": _sample_key(full_name), "value": "tracker demo"}])

    def is_sample(self, full_name: str) -> bool:
        with self.engine.connect().execution_options(read_only=True) as conn:
            found = conn.execute(select(ledger_meta.c.key).where(ledger_meta.c.key == _sample_key(full_name))).first()
        return found is not None

    # --- coverage -----------------------------------------------------------------------------

    def add_coverage(
        self, full_name: str, source: str, start: int, end: int, months: tuple[str, str] | None = None
    ) -> None:
        """[start, end) is complete for the repository, read by `source`. `months` (first, last, as
        YYYY-MM in the repository's time zone) are the months it overlaps: their versions change, so
        no cached report keeps saying their history is incomplete."""
        if end <= start:
            return
        repo = repository_key(full_name)
        row = {"repo": repo, "source": source, "start_at": start, "end_at": end}
        with self.engine.begin() as conn:
            if months is not None:
                overlapped = conn.execute(
                    select(month_table.c.month).where(
                        month_table.c.repo == row["repo"],
                        month_table.c.month >= months[0],
                        month_table.c.month <= months[1],
                    )
                ).scalars()
                bump_months(conn, {(repo, month): () for month in overlapped})  # no PR's rows changed
            if not insert_ignoring_duplicates(conn, coverage, [row]):
                conn.execute(
                    update(coverage)
                    .where(
                        coverage.c.repo == row["repo"],
                        coverage.c.source == source,
                        coverage.c.start_at == start,
                        coverage.c.end_at < end,
                    )
                    .values(end_at=end)
                )

    def covered_until(self, full_name: str, source: str) -> int | None:
        """Where the latest interval `source` read ends (where the next reconciliation starts)."""
        with self.engine.connect().execution_options(read_only=True) as conn:
            return conn.execute(
                select(func.max(coverage.c.end_at)).where(
                    coverage.c.repo == repository_key(full_name), coverage.c.source == source
                )
            ).scalar_one_or_none()

    def intervals(self, full_name: str, now: int) -> list[tuple[str, int, int]]:
        """(source, start, end) of every interval known complete, oldest first: each backfilled or
        reconciled range, and webhook deliveries from the first instant one stamped until `now`."""
        repo = repository_key(full_name)
        with self.engine.connect().execution_options(read_only=True) as conn:
            rows = [
                (r.source, r.start_at, r.end_at)
                for r in conn.execute(select(coverage).where(coverage.c.repo == repo).order_by(coverage.c.start_at))
            ]
            since = conn.execute(
                select(webhook_coverage.c.since).where(webhook_coverage.c.repo == repo)
            ).scalar_one_or_none()
        if since is not None and since < now:
            rows.append((WEBHOOK, since, now))
        return sorted(rows, key=lambda r: (r[1], r[2], r[0]))


def _sample_key(full_name: str) -> str:
    return f"sample:{repository_key(full_name)}"[:64]


def _run(row: Any) -> Run:
    return Run(
        id=row.id,
        full_name=row.full_name,
        kind=row.kind,
        range_start=row.range_start,
        range_end=row.range_end,
        state=row.state,
        total=row.total,
        done=row.done,
        requests=row.requests,
        not_modified=row.not_modified,
        started_at=row.started_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
        detail=row.detail,
    )
