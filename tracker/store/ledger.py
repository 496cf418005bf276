"""The ledger of raw deliveries and hook pings: the source of truth, written before the 202."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, select, update

from tracker.core.repository import repository_key
from tracker.core.window import iso_utc
from tracker.store.database import insert_ignoring_duplicates, raw_write
from tracker.store.inbox import COLUMNS as INBOX_COLUMN_NAMES
from tracker.store.inbox import Inbox, inbox_path
from tracker.store.schema import deliveries, hooks

PENDING, PROCESSED, FAILED = "pending", "processed", "failed"
STATUSES = (PENDING, PROCESSED, FAILED)  # every status a delivery can have


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Delivery:
    id: str
    event: str
    action: str | None
    repo: str | None
    hook_id: str | None
    content_type: str
    headers: dict[str, str]
    body: bytes
    received_at: int


@dataclass(frozen=True)
class DeliveryCounts:
    received: int
    processed: int
    failed: int
    pending: int

    def as_dict(self) -> dict[str, int]:
        return {
            "received": self.received,
            "processed": self.processed,
            "failed": self.failed,
            "pending": self.pending,
        }


_STORED_COLUMNS = (
    "id",
    "event",
    "action",
    "repo",
    "hook_id",
    "content_type",
    "headers",
    "body",
    "received_at",
    "status",
    "attempts",
)


class Ledger:
    def __init__(self, engine: Engine, inbox: bool = False) -> None:
        """`inbox`: `receive` writes to the inbox on SQLite (TRACKER_INBOX). Whatever it says, the drain
        moves what an inbox file holds, and the reads count it."""
        self.engine = engine
        marker = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        self._insert_sql = (
            f"INSERT INTO deliveries ({', '.join(_STORED_COLUMNS)}) "
            f"VALUES ({', '.join([marker] * len(_STORED_COLUMNS))}) ON CONFLICT (id) DO NOTHING"
        )
        self._digest_sql = (
            f"INSERT INTO delivery_digests (repo, digest, delivery_id) VALUES ({marker}, {marker}, {marker}) "
            "ON CONFLICT (repo, digest) DO NOTHING"
        )
        self._known_id_sql = f"SELECT 1 FROM deliveries WHERE id = {marker}"
        self._known_digest_sql = f"SELECT 1 FROM delivery_digests WHERE repo = {marker} AND digest = {marker}"
        path = inbox_path(engine)
        self.inbox = Inbox(path) if path is not None else None
        self._receive_into_inbox = inbox and self.inbox is not None

    # --- writing, on the request path ---------------------------------------------------------

    def receive(self, delivery: Delivery, digest: str | None = None) -> bool:
        """What the webhook stores: `store`, into the inbox on SQLite (tracker.store.inbox), where a web
        process never waits for the workers' transactions; the drain moves it into the ledger."""
        if self.inbox is None or not self._receive_into_inbox:
            return self.store(delivery, digest)
        key = repository_key(delivery.repo or "") if digest is not None else None
        return self.inbox.add(
            (*_stored_values(delivery)[:-2], key, digest), lambda: self._in_ledger(delivery.id, key, digest)
        )

    def store(self, delivery: Delivery, digest: str | None = None) -> bool:
        """Append a delivery; False when its id is already stored (a redelivery) or, given the
        `digest` of its JSON document, when the same repository already has a delivery with that
        body under another id (a replay).

        Prepared INSERTs on a pooled DBAPI connection in one short transaction: on SQLite the write
        lock is held for the shortest possible time."""
        values = _stored_values(delivery)

        def insert(cursor: Any) -> bool:
            if digest is not None:
                cursor.execute(self._digest_sql, (repository_key(delivery.repo or ""), digest, delivery.id))
                if cursor.rowcount != 1:
                    return False
            cursor.execute(self._insert_sql, values)
            return bool(cursor.rowcount == 1)

        return raw_write(self.engine, insert)

    def _in_ledger(self, delivery_id: str, key: str | None, digest: str | None) -> bool:
        """Whether the ledger itself holds this delivery id, or this body's digest (the inbox's check)."""
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            found = cursor.execute(self._known_id_sql, (delivery_id,)).fetchone() is not None
            if not found and digest is not None:
                found = cursor.execute(self._known_digest_sql, (key, digest)).fetchone() is not None
            cursor.close()
        finally:
            raw.close()
        return found

    def take_inbox(self, limit: int) -> int:
        """Move up to `limit` of the inbox's oldest deliveries into the ledger (pending, never tried):
        committed in the ledger first, then forgotten by the inbox. How many it moved."""
        if self.inbox is None:
            return 0
        rows = self.inbox.oldest(limit)
        if not rows:
            return 0

        def insert(cursor: Any) -> bool:
            cursor.executemany(self._insert_sql, [(*row[1:-2], PENDING, 0) for row in rows])
            digests = [(row[-2], row[-1], row[1]) for row in rows if row[-1] is not None]
            if digests:
                cursor.executemany(self._digest_sql, digests)
            return True

        raw_write(self.engine, insert)
        self.inbox.forget(rows[-1][0])
        return len(rows)

    def record_ping(self, hook_id: str, hook_type: str | None, events: Sequence[str], target: str | None) -> None:
        at = now_ms()
        with self.engine.begin() as conn:
            inserted = insert_ignoring_duplicates(
                conn,
                hooks,
                [
                    {
                        "hook_id": hook_id,
                        "hook_type": hook_type,
                        "events": json.dumps(list(events)),
                        "target": target,
                        "first_ping_at": at,
                        "last_ping_at": at,
                        "pings": 1,
                    }
                ],
            )
            if not inserted:
                conn.execute(
                    update(hooks)
                    .where(hooks.c.hook_id == hook_id)
                    .values(
                        hook_type=hook_type,
                        events=json.dumps(list(events)),
                        target=target,
                        last_ping_at=at,
                        pings=hooks.c.pings + 1,
                    )
                )

    # --- reading ------------------------------------------------------------------------------

    def get(self, delivery_id: str) -> Delivery | None:
        with self.engine.connect().execution_options(read_only=True) as conn:
            row = conn.execute(select(deliveries).where(deliveries.c.id == delivery_id)).first()
        if row is not None:
            return _delivery(row._mapping)
        waiting = self.inbox.find(delivery_id) if self.inbox is not None else None
        return _delivery(dict(zip(INBOX_COLUMN_NAMES, waiting, strict=True))) if waiting is not None else None

    def accepted_ids(self) -> set[str]:
        """The id of every delivery stored, in the ledger or its inbox (for checks that nothing is lost)."""
        with self.engine.connect().execution_options(read_only=True) as conn:
            found = set(conn.execute(select(deliveries.c.id)).scalars())
        return found | {delivery_id for _at, delivery_id in self.inbox.ids()} if self.inbox is not None else found

    def status_of(self, delivery_id: str) -> str | None:
        with self.engine.connect().execution_options(read_only=True) as conn:
            status = conn.execute(
                select(deliveries.c.status).where(deliveries.c.id == delivery_id)
            ).scalar_one_or_none()
        if status is None and self.inbox is not None and self.inbox.find(delivery_id) is not None:
            return PENDING
        return status

    def statuses(self, ids: Sequence[str]) -> dict[str, str]:
        """The status of each of `ids` the ledger holds; one still in the inbox (accepted by a web process,
        not yet moved into the ledger) is pending. The inbox is read first: a delivery leaves it only once
        the ledger holds it, so none is missed in between."""
        waiting = {delivery_id for _, delivery_id in self.inbox.ids()} if self.inbox is not None else set()
        with self.engine.connect().execution_options(read_only=True) as conn:
            rows = conn.execute(select(deliveries.c.id, deliveries.c.status).where(deliveries.c.id.in_(ids)))
            found = {row.id: row.status for row in rows}
        return {i: PENDING for i in ids if i in waiting} | found

    def shown_url(self) -> str:
        """The ledger's URL as people may see it: any password (in the user part or a `password` query
        parameter) hidden."""
        url = self.engine.url
        if "password" in url.query:
            url = url.update_query_dict({"password": "***"})
        return url.render_as_string(hide_password=True).replace("password=%2A%2A%2A", "password=***")

    def others_of(self, repo: str, ids: Sequence[str]) -> int:
        """How many deliveries of `repo` (its repository key) the ledger holds besides `ids`."""
        with self.engine.connect().execution_options(read_only=True) as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(deliveries)
                    .where(func.lower(deliveries.c.repo) == repo, deliveries.c.id.not_in(ids))
                ).scalar_one()
            )

    def ping(self) -> None:
        """A read of the ledger's database: raises when it does not answer."""
        with self.engine.connect().execution_options(read_only=True) as conn:
            conn.execute(select(1))

    def counts(self) -> DeliveryCounts:
        with self.engine.connect().execution_options(read_only=True) as conn:
            by_status: dict[str, int] = dict(
                conn.execute(select(deliveries.c.status, func.count()).group_by(deliveries.c.status)).all()
            )
        processed, failed, pending = (by_status.get(s, 0) for s in (PROCESSED, FAILED, PENDING))
        if self.inbox is not None:
            pending += self.inbox.count()
        return DeliveryCounts(processed + failed + pending, processed, failed, pending)

    def pending_for(self, full_name: str) -> int:
        """How many of the repository's deliveries are still waiting to be processed."""
        query = (
            select(func.count())
            .select_from(deliveries)
            .where(deliveries.c.status == PENDING, func.lower(deliveries.c.repo) == repository_key(full_name))
        )
        with self.engine.connect().execution_options(read_only=True) as conn:
            pending = int(conn.execute(query).scalar_one())
        return pending + (self.inbox.count(repository_key(full_name)) if self.inbox is not None else 0)

    def ids_with_status(self, status: str, received_before: int | None = None, tried: bool | None = None) -> list[str]:
        """Ids of deliveries in `status`, in arrival order; `tried` keeps only those tried before
        (True) or never tried (False)."""
        query = select(deliveries.c.id).where(deliveries.c.status == status)
        if received_before is not None:
            query = query.where(deliveries.c.received_at < received_before)
        if tried is not None:
            query = query.where(deliveries.c.attempts > 0 if tried else deliveries.c.attempts == 0)
        query = query.order_by(deliveries.c.received_at, deliveries.c.id)
        if self.inbox is not None and status == PENDING and tried is not True:
            query = query.add_columns(deliveries.c.received_at)
            with self.engine.connect().execution_options(read_only=True) as conn:
                found = [(at, delivery_id) for delivery_id, at in conn.execute(query)]
            return [delivery_id for _at, delivery_id in sorted(found + self.inbox.ids(received_before))]
        with self.engine.connect().execution_options(read_only=True) as conn:
            return list(conn.execute(query).scalars())

    def fresh_pending(self, limit: int, received_before: int | None = None) -> list[Delivery]:
        """Up to `limit` pending deliveries never tried before, in arrival order: what a drain job
        takes (workers.drain). One that failed once is retried on its own (workers.jobs)."""
        query = select(deliveries).where(deliveries.c.status == PENDING, deliveries.c.attempts == 0)
        if received_before is not None:
            query = query.where(deliveries.c.received_at < received_before)
        query = query.order_by(deliveries.c.received_at, deliveries.c.id).limit(limit)
        with self.engine.connect().execution_options(read_only=True) as conn:
            return [_delivery(row._mapping) for row in conn.execute(query)]

    def failures(self, limit: int = 50) -> list[dict[str, Any]]:
        query = (
            select(deliveries.c.id, deliveries.c.repo, deliveries.c.attempts, deliveries.c.last_error)
            .where(deliveries.c.status == FAILED)
            .order_by(deliveries.c.received_at.desc())
            .limit(limit)
        )
        with self.engine.connect().execution_options(read_only=True) as conn:
            return [
                {"delivery_id": r.id, "repo": r.repo, "attempts": r.attempts, "error": r.last_error}
                for r in conn.execute(query)
            ]

    def hooks(self) -> list[dict[str, Any]]:
        with self.engine.connect().execution_options(read_only=True) as conn:
            rows = conn.execute(select(hooks).order_by(hooks.c.hook_id)).all()
        return [
            {
                "hook_id": r.hook_id,
                "type": r.hook_type,
                "events": json.loads(r.events),
                "target": r.target,
                "first_ping_at": iso_utc(r.first_ping_at // 1000),
                "last_ping_at": iso_utc(r.last_ping_at // 1000),
                "pings": r.pings,
            }
            for r in rows
        ]

    def iter_pull_request_deliveries(self, batch: int = 500) -> Iterator[list[Delivery]]:
        """Every stored pull_request delivery, in batches, in a stable order (for rebuilds)."""
        last = ""
        while True:
            query = (
                select(deliveries)
                .where(deliveries.c.event == "pull_request", deliveries.c.id > last)
                .order_by(deliveries.c.id)
                .limit(batch)
            )
            with self.engine.connect().execution_options(read_only=True) as conn:
                rows = [_delivery(r._mapping) for r in conn.execute(query)]
            if not rows:
                return
            yield rows
            last = rows[-1].id

    # --- outcomes of processing ---------------------------------------------------------------

    def record_attempt_failed(self, delivery_id: str, error: str, final: bool) -> None:
        """Remember why processing failed; after the last retry the delivery is `failed`."""
        values: dict[str, Any] = {"attempts": deliveries.c.attempts + 1, "last_error": error[:2000]}
        if final:
            values["status"] = FAILED
        with self.engine.begin() as conn:
            conn.execute(
                update(deliveries)
                .where(deliveries.c.id == delivery_id, deliveries.c.status != PROCESSED)
                .values(**values)
            )

    def reset_failed(self, ids: Sequence[str] | None = None) -> list[str]:
        """Turn failed deliveries back to pending: every one, or those of `ids` still failed (a job
        may have processed one since); their ids. `retry-failed` enqueues the jobs first and then
        passes their ids, so a Redis that fails half-way leaves the ledger as it was."""
        if ids is None:
            with self.engine.begin() as conn:
                ids = list(conn.execute(select(deliveries.c.id).where(deliveries.c.status == FAILED)).scalars())
                if ids:
                    conn.execute(update(deliveries).where(deliveries.c.status == FAILED).values(status=PENDING))
            return ids
        reset: list[str] = []
        with self.engine.begin() as conn:
            for start in range(0, len(ids), 500):
                reset.extend(
                    conn.execute(
                        update(deliveries)
                        .where(deliveries.c.status == FAILED, deliveries.c.id.in_(list(ids[start : start + 500])))
                        .values(status=PENDING)
                        .returning(deliveries.c.id)
                    ).scalars()
                )
        return reset


def _stored_values(delivery: Delivery) -> tuple[Any, ...]:
    """A new delivery's values in _STORED_COLUMNS order: pending, never tried."""
    return (
        delivery.id,
        delivery.event,
        delivery.action,
        delivery.repo,
        delivery.hook_id,
        delivery.content_type,
        json.dumps(delivery.headers, sort_keys=True),
        delivery.body,
        delivery.received_at,
        PENDING,
        0,
    )


def _delivery(row: Any) -> Delivery:
    return Delivery(
        id=row["id"],
        event=row["event"],
        action=row["action"],
        repo=row["repo"],
        hook_id=row["hook_id"],
        content_type=row["content_type"],
        headers=json.loads(row["headers"]),
        body=bytes(row["body"]),
        received_at=row["received_at"],
    )
