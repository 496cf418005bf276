"""Months' records (the frozen final reports) of repositories and of groups, and publications, kept in the
ledger database.

A record is written once and never changed. Which revision a finalisation gets is decided by the
table's primary key, not by timing: a first finalisation inserts revision 1 or finds it taken (two
schedulers, a restart mid-run), and a forced one takes the next free revision.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, Select, Table, func, select
from sqlalchemy.exc import IntegrityError

from tracker.core.repository import repository_key
from tracker.core.window import iso_utc
from tracker.store.database import insert_ignoring_duplicates
from tracker.store.ledger import STATUSES, now_ms
from tracker.store.schema import deliveries, group_records, month_records, publications

# The documents of a record, by (format, language); the JSON is the same in every language.
DOCUMENTS = {
    ("md", "en"): "markdown_en",
    ("md", "zh-CN"): "markdown_zh",
    ("html", "en"): "html_en",
    ("html", "zh-CN"): "html_zh",
    ("json", ""): "json",
}


def document_key(fmt: str, lang: str) -> tuple[str, str]:
    return (fmt, "" if fmt == "json" else lang)


@dataclass(frozen=True)
class Position:
    """What a record was built from: the month's change counter, the ledger's generation, and how
    many deliveries the ledger had received and processed."""

    month_version: int
    generation: str
    deliveries_received: int
    deliveries_processed: int


@dataclass(frozen=True)
class MonthRecord:
    full_name: str
    month: str
    revision: int
    cutoff: str
    created_at: int
    trigger: str
    forced: bool
    position: Position
    config_hash: str
    content_hash: str
    pending: dict[str, Any]
    documents: dict[tuple[str, str], str] = field(repr=False)

    def document(self, fmt: str, lang: str) -> str:
        return self.documents[document_key(fmt, lang)]

    def summary(self) -> dict[str, Any]:
        """Everything but the documents themselves."""
        return {
            "repo": self.full_name,
            "month": self.month,
            "revision": self.revision,
            "cutoff": self.cutoff,
            "created_at": iso_utc(self.created_at // 1000),
            "trigger": self.trigger,
            "forced": self.forced,
            "built_from": {
                "month_version": self.position.month_version,
                "generation": self.position.generation,
                "deliveries_received": self.position.deliveries_received,
                "deliveries_processed": self.position.deliveries_processed,
            },
            "config_hash": self.config_hash,
            "content_hash": self.content_hash,
            "pending": self.pending,
        }


@dataclass(frozen=True)
class GroupRecord:
    """A group's month frozen over every member (the admin's view). `members`: each member in the group's
    order, with the revision and content hash of the record it was read from, or None when it had none
    (a forced finalisation)."""

    name: str
    month: str
    revision: int
    cutoff: str
    created_at: int
    trigger: str
    forced: bool
    members: tuple[dict[str, Any], ...]
    config_hash: str
    content_hash: str
    pending: dict[str, Any]
    documents: dict[tuple[str, str], str] = field(repr=False)

    def document(self, fmt: str, lang: str) -> str:
        return self.documents[document_key(fmt, lang)]

    def summary(self) -> dict[str, Any]:
        """Everything but the documents themselves."""
        return {
            "group": self.name,
            "month": self.month,
            "revision": self.revision,
            "cutoff": self.cutoff,
            "created_at": iso_utc(self.created_at // 1000),
            "trigger": self.trigger,
            "forced": self.forced,
            "members": [dict(member) for member in self.members],
            "config_hash": self.config_hash,
            "content_hash": self.content_hash,
            "pending": self.pending,
        }


def group_key(name: str) -> str:
    """A group's key in the tables: its name in lower case (names are matched in any case)."""
    return name.lower()


def group_subject(name: str) -> str:
    """A group's key in `publications.repo`: no repository's name holds a colon."""
    return f"group:{group_key(name)}"


class RecordTaken(RuntimeError):
    """Another finalisation stored this revision first."""


class RecordStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add(self, record: MonthRecord, *, first_only: bool) -> MonthRecord | None:
        """Store `record` as revision 1 (`first_only`: None when the month has a record already), or as
        the next revision (raises RecordTaken when a concurrent one took it)."""
        repo = repository_key(record.full_name)
        where = {"repo": repo, "month": record.month}
        revision = self._insert(month_records, where, lambda n: _row(record, repo, n), first_only=first_only)
        return _with_revision(record, revision) if revision is not None else None

    def _insert(self, table: Table, where: dict[str, str], row: Any, *, first_only: bool) -> int | None:
        """Insert `row(revision)` into a records table (keyed by `where` and `revision`): revision 1, or None
        when it is taken (`first_only`); else the next revision, RecordTaken when a concurrent one took it."""
        with self.engine.begin() as conn:
            revision = 1 if first_only else _latest_revision(conn, table, where) + 1
            if first_only:
                if not insert_ignoring_duplicates(conn, table, [row(revision)]):
                    return None
            else:
                try:
                    conn.execute(table.insert(), [row(revision)])
                except IntegrityError as exc:
                    raise RecordTaken(f"revision {revision} of {where['month']} was stored meanwhile") from exc
        return revision

    def latest(self, full_name: str, month: str) -> MonthRecord | None:
        rows = self._revisions(month_records, month_records.c.repo == repository_key(full_name), month, latest=True)
        return _record(rows[0]) if rows else None

    def all(self, full_name: str, month: str) -> list[MonthRecord]:
        return [
            _record(row)
            for row in self._revisions(month_records, month_records.c.repo == repository_key(full_name), month)
        ]

    def _revisions(self, table: Table, owner: ColumnElement[bool], month: str, *, latest: bool = False) -> list[Any]:
        """The rows of `table` for the month of `owner` (a repository, a group), by revision; the last alone."""
        query = select(table).where(owner, table.c.month == month)
        query = query.order_by(table.c.revision.desc()).limit(1) if latest else query.order_by(table.c.revision)
        with self.engine.connect().execution_options(read_only=True) as conn:
            return list(conn.execute(query))

    def recorded_months(self) -> set[tuple[str, str]]:
        """(repository key, month) of every month that has a record."""
        with self.engine.connect().execution_options(read_only=True) as conn:
            return {(row.repo, row.month) for row in conn.execute(select(month_records.c.repo, month_records.c.month))}

    # --- groups' records --------------------------------------------------------------------------

    def add_group(self, record: GroupRecord, *, first_only: bool) -> GroupRecord | None:
        """As `add`, for a group's month."""
        key = group_key(record.name)
        where = {"group_key": key, "month": record.month}
        revision = self._insert(group_records, where, lambda n: _group_row(record, key, n), first_only=first_only)
        return _group_with_revision(record, revision) if revision is not None else None

    def latest_group(self, name: str, month: str) -> GroupRecord | None:
        rows = self._revisions(group_records, group_records.c.group_key == group_key(name), month, latest=True)
        return _group_record(rows[0]) if rows else None

    def all_group(self, name: str, month: str) -> list[GroupRecord]:
        owner = group_records.c.group_key == group_key(name)
        return [_group_record(row) for row in self._revisions(group_records, owner, month)]

    def recorded_group_months(self) -> set[tuple[str, str]]:
        """(group key, month) of every group's month that has a record."""
        query = select(group_records.c.group_key, group_records.c.month)
        with self.engine.connect().execution_options(read_only=True) as conn:
            return {(row.group_key, row.month) for row in conn.execute(query)}

    def deliveries_since(self, full_name: str, since: int) -> Iterator[tuple[str, str, bytes]]:
        """(delivery id, content type, body) of the repository's pull_request deliveries received
        after `since` (epoch ms), oldest first: what may have arrived after a record."""
        with self.engine.connect().execution_options(read_only=True, stream_results=True, yield_per=500) as conn:
            for row in conn.execute(deliveries_since_query(full_name, since)):
                yield row.id, row.content_type, bytes(row.body)

    # --- publications -------------------------------------------------------------------------

    def record_publication(
        self,
        full_name: str,
        month: str,
        *,
        kind: str,
        edition: str,
        target: str,
        content_hash: str,
        result: str,
        detail: str | None = None,
    ) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                publications.insert(),
                [
                    {
                        "repo": repository_key(full_name),
                        "month": month,
                        "kind": kind,
                        "edition": edition,
                        "target": target,
                        "content_hash": content_hash,
                        "at": now_ms(),
                        "result": result,
                        "detail": detail,
                    }
                ],
            )

    def last_publication(self, full_name: str, month: str, kind: str) -> dict[str, Any] | None:
        """The last successful publication of that kind for the month."""
        query = (
            select(publications)
            .where(
                publications.c.repo == repository_key(full_name),
                publications.c.month == month,
                publications.c.kind == kind,
                publications.c.result != "failed",
            )
            .order_by(publications.c.at.desc(), publications.c.id.desc())
            .limit(1)
        )
        with self.engine.connect().execution_options(read_only=True) as conn:
            row = conn.execute(query).first()
        return _publication(row) if row is not None else None

    def last_publication_at(self, full_name: str, month: str, edition: str) -> int | None:
        """When (epoch ms) an edition of the month was last published anywhere, successfully."""
        query = select(func.max(publications.c.at)).where(
            publications.c.repo == repository_key(full_name),
            publications.c.month == month,
            publications.c.edition == edition,
            publications.c.result != "failed",
        )
        with self.engine.connect().execution_options(read_only=True) as conn:
            at = conn.execute(query).scalar_one_or_none()
        return int(at) if at is not None else None

    def last_issue_number(self, full_name: str, month: str) -> int | None:
        """The number of the month's issue, from its last successful publication."""
        last = self.last_publication(full_name, month, "issue")
        if last is None or "#" not in last["target"]:
            return None
        number = last["target"].rsplit("#", 1)[1]
        return int(number) if number.isdigit() else None

    def publications(self, limit: int = 20) -> list[dict[str, Any]]:
        query = select(publications).order_by(publications.c.at.desc(), publications.c.id.desc()).limit(limit)
        with self.engine.connect().execution_options(read_only=True) as conn:
            return [_publication(row) for row in conn.execute(query)]


def _latest_revision(conn: Connection, table: Table, where: dict[str, str]) -> int:
    query = select(func.max(table.c.revision)).where(*(table.c[column] == value for column, value in where.items()))
    return conn.execute(query).scalar_one_or_none() or 0


def _group_row(record: GroupRecord, key: str, revision: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "group_key": key,
        "month": record.month,
        "revision": revision,
        "name": record.name,
        "cutoff": record.cutoff,
        "created_at": record.created_at,
        "trigger": record.trigger,
        "forced": record.forced,
        "members": json.dumps(list(record.members), sort_keys=True),
        "config_hash": record.config_hash,
        "content_hash": record.content_hash,
        "pending": json.dumps(record.pending, sort_keys=True),
    }
    for key_, column in DOCUMENTS.items():
        row[column] = record.documents[key_]
    return row


def _group_with_revision(record: GroupRecord, revision: int) -> GroupRecord:
    return GroupRecord(
        record.name,
        record.month,
        revision,
        record.cutoff,
        record.created_at,
        record.trigger,
        record.forced,
        record.members,
        record.config_hash,
        record.content_hash,
        record.pending,
        record.documents,
    )


def _group_record(row: Any) -> GroupRecord:
    return GroupRecord(
        name=row.name,
        month=row.month,
        revision=row.revision,
        cutoff=row.cutoff,
        created_at=row.created_at,
        trigger=row.trigger,
        forced=bool(row.forced),
        members=tuple(json.loads(row.members)),
        config_hash=row.config_hash,
        content_hash=row.content_hash,
        pending=json.loads(row.pending),
        documents={key: getattr(row, column) for key, column in DOCUMENTS.items()},
    )


def _row(record: MonthRecord, repo: str, revision: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "repo": repo,
        "month": record.month,
        "revision": revision,
        "full_name": record.full_name,
        "cutoff": record.cutoff,
        "created_at": record.created_at,
        "trigger": record.trigger,
        "forced": record.forced,
        "month_version": record.position.month_version,
        "generation": record.position.generation,
        "deliveries_received": record.position.deliveries_received,
        "deliveries_processed": record.position.deliveries_processed,
        "config_hash": record.config_hash,
        "content_hash": record.content_hash,
        "pending": json.dumps(record.pending, sort_keys=True),
    }
    for key, column in DOCUMENTS.items():
        row[column] = record.documents[key]
    return row


def _with_revision(record: MonthRecord, revision: int) -> MonthRecord:
    return MonthRecord(
        record.full_name,
        record.month,
        revision,
        record.cutoff,
        record.created_at,
        record.trigger,
        record.forced,
        record.position,
        record.config_hash,
        record.content_hash,
        record.pending,
        record.documents,
    )


def _record(row: Any) -> MonthRecord:
    return MonthRecord(
        full_name=row.full_name,
        month=row.month,
        revision=row.revision,
        cutoff=row.cutoff,
        created_at=row.created_at,
        trigger=row.trigger,
        forced=bool(row.forced),
        position=Position(row.month_version, row.generation, row.deliveries_received, row.deliveries_processed),
        config_hash=row.config_hash,
        content_hash=row.content_hash,
        pending=json.loads(row.pending),
        documents={key: getattr(row, column) for key, column in DOCUMENTS.items()},
    )


def _publication(row: Any) -> dict[str, Any]:
    return {
        "repo": row.repo,
        "month": row.month,
        "kind": row.kind,
        "edition": row.edition,
        "target": row.target,
        "content_hash": row.content_hash,
        "at": iso_utc(row.at // 1000),
        "result": row.result,
        "detail": row.detail,
    }


def content_hash(documents: Sequence[str]) -> str:
    """SHA-256 over the documents, each prefixed with its length (no two lists hash alike)."""
    digest = hashlib.sha256()
    for text in documents:
        encoded = text.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return digest.hexdigest()


def deliveries_since_query(full_name: str, since: int) -> Select[Any]:
    """`RecordStore.deliveries_since`'s SELECT. Every status is named: SQLite then searches the (status,
    received_at) index for each, where without it every request for a month's records read the whole
    ledger, bodies and all."""
    return (
        select(deliveries.c.id, deliveries.c.content_type, deliveries.c.body)
        .where(
            deliveries.c.status.in_(STATUSES),
            deliveries.c.received_at > since,
            deliveries.c.event == "pull_request",
            func.lower(deliveries.c.repo) == repository_key(full_name),
        )
        .order_by(deliveries.c.received_at, deliveries.c.id)
    )
