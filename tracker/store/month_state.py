"""The derived per-month state: facts, attribute versions, the activity index, month versions.

Writes are idempotent (INSERT ... ON CONFLICT DO NOTHING on natural keys), so a delivery applied
twice, or deliveries applied in any order, leave the same rows.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, Select, and_, bindparam, func, or_, select, tuple_, update

from tracker.core.attributes import AttributeVersion, version_at
from tracker.core.classify import HeadVerdict
from tracker.core.derive import Derivation
from tracker.core.repository import repository_key
from tracker.core.timeline import Fact, FactKind
from tracker.store.changes import bump_months
from tracker.store.database import clear_derived_schema, insert_ignoring_duplicates, listed, mark_derived_schema
from tracker.store.heads import UNAVAILABLE, verdict_from_row
from tracker.store.ledger import PROCESSED, now_ms
from tracker.store.schema import (
    DERIVED_TABLES,
    deliveries,
    head_files,
    head_verdicts,
    ledger_meta,
    metadata,
    month_activity,
    months,
    pr_facts,
    pr_versions,
    repositories,
    wanted_heads,
    webhook_coverage,
)
from tracker.store.schema import heads as head_table

WEBHOOK = "webhook"

# The statements every batch of the drain runs, built once (building one anew, and its cache key, cost
# more CPU than running it on SQLite). An UPDATE's parameters must not be named as its columns.
_STILL_PENDING = select(deliveries.c.id).where(
    deliveries.c.id.in_(bindparam("ids", expanding=True)), deliveries.c.status != PROCESSED
)
_MARK_PROCESSED = (
    update(deliveries)
    .where(deliveries.c.id.in_(bindparam("ids", expanding=True)))
    .values(status=PROCESSED, processed_at=bindparam("now"), last_error=None)
)
_RENAME = (
    update(repositories)
    .where(
        repositories.c.repo == bindparam("key"),
        or_(
            repositories.c.named_at < bindparam("new_named_at"),
            and_(
                repositories.c.named_at == bindparam("new_named_at"),
                repositories.c.named_by < bindparam("new_named_by"),
            ),
        ),
    )
    .values(
        full_name=bindparam("new_full_name"), named_at=bindparam("new_named_at"), named_by=bindparam("new_named_by")
    )
)
_EXTEND_COVERAGE = (
    update(webhook_coverage)
    .where(webhook_coverage.c.repo == bindparam("key"), webhook_coverage.c.since > bindparam("new_since"))
    .values(since=bindparam("new_since"))
)


@dataclass(frozen=True)
class MonthInputs:
    """What a month's report reads, in one pass: the facts of the month's PRs, their versions at the
    window end, and the verdict and changed paths of the head each had then."""

    timelines: dict[int, list[Fact]]
    versions: dict[int, AttributeVersion]
    verdicts: dict[tuple[int, str], HeadVerdict]  # (number, head sha)
    unavailable: frozenset[tuple[int, str]] = frozenset()  # heads whose files GitHub no longer has
    paths: dict[int, list[str]] = field(default_factory=dict)  # changed paths of each PR's head at the end


class MonthState:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # --- writing ------------------------------------------------------------------------------

    def apply(self, delivery_id: str, derivation: Derivation | None) -> bool:
        """Add what a delivery proves and mark it processed, in one transaction.
        False when it was already processed (nothing changes)."""
        with self.engine.begin() as conn:
            status = conn.execute(
                select(deliveries.c.status).where(deliveries.c.id == delivery_id)
            ).scalar_one_or_none()
            if status is None or status == PROCESSED:
                return False
            if derivation is not None:
                write_derivations(conn, [(delivery_id, derivation)])
            mark_processed(conn, [delivery_id])
        return True

    def apply_batch(self, items: Sequence[tuple[str, Derivation | None]]) -> list[str]:
        """`apply` for many deliveries in one transaction, in the order given (arrival order: the
        same rows as applying them one by one); the ids that were not processed before."""
        with self.engine.begin() as conn:
            ids = [delivery_id for delivery_id, _ in items]
            waiting = set(conn.execute(_STILL_PENDING, {"ids": ids}).scalars())
            applied = [delivery_id for delivery_id in ids if delivery_id in waiting]
            write_derivations(
                conn, [(delivery_id, d) for delivery_id, d in items if delivery_id in waiting and d is not None]
            )
            if applied:
                mark_processed(conn, applied)
        return applied

    def drop_and_recreate(self) -> None:
        """Empty derived tables of this release's shape, marked as not yet derived: a rebuild marks
        them when it has finished (`mark_rebuilt`), so one that was killed half-way is done again at
        the next start instead of serving half a month."""
        with self.engine.begin() as conn:
            for table in reversed(DERIVED_TABLES):
                table.drop(conn, checkfirst=True)
            metadata.create_all(conn, tables=list(DERIVED_TABLES), checkfirst=True)
            clear_derived_schema(conn)

    def mark_rebuilt(self) -> None:
        with self.engine.begin() as conn:
            mark_derived_schema(conn)

    # --- reading ------------------------------------------------------------------------------

    def repository_name(self, full_name: str) -> str | None:
        """How the repository spells its name (it is matched without regard to case), or None."""
        with self.engine.connect().execution_options(read_only=True) as conn:
            return conn.execute(
                select(repositories.c.full_name).where(repositories.c.repo == repository_key(full_name))
            ).scalar_one_or_none()

    def repository_names(self) -> list[str]:
        with self.engine.connect().execution_options(read_only=True) as conn:
            return list(conn.execute(select(repositories.c.full_name).order_by(repositories.c.full_name)).scalars())

    def month_version(self, full_name: str, month: str) -> tuple[int, str]:
        """The month's change counter and the ledger's generation: together they change whenever
        anything the month's report reads may have changed."""
        with self.engine.connect().execution_options(read_only=True) as conn:
            version = conn.execute(
                select(months.c.version).where(months.c.repo == repository_key(full_name), months.c.month == month)
            ).scalar_one_or_none()
            generation = conn.execute(
                select(ledger_meta.c.value).where(ledger_meta.c.key == "generation")
            ).scalar_one_or_none()
        return version or 0, generation or ""

    def new_generation(self) -> None:
        with self.engine.begin() as conn:
            values = {"value": uuid.uuid4().hex}
            if not insert_ignoring_duplicates(conn, ledger_meta, [{"key": "generation", **values}]):
                conn.execute(update(ledger_meta).where(ledger_meta.c.key == "generation").values(**values))

    def bump(self, full_name: str, month: str) -> None:
        """The month's report reads something new that is not a delivery (the narrator's prose)."""
        with self.engine.begin() as conn:
            bump_months(conn, {(repository_key(full_name), month): ()})

    def month_versions(self, full_name: str) -> dict[str, int]:
        with self.engine.connect().execution_options(read_only=True) as conn:
            rows = conn.execute(
                select(months.c.month, months.c.version)
                .where(months.c.repo == repository_key(full_name))
                .order_by(months.c.month)
            ).all()
        return {row.month: row.version for row in rows}

    def month_inputs(
        self, full_name: str, month: str, end: int, *, bodies: bool = True, paths: bool = True
    ) -> MonthInputs:
        """Only what the report uses: the month's PRs (from the activity index), their facts before the end,
        their version at the window end, and the verdict and changed paths of the head each had then.
        `bodies=False`: each version's body left empty, `paths=False`: no changed paths (the numbers need
        neither, and a busy month's bodies and paths are most of what is read)."""
        repo = repository_key(full_name)
        with self.engine.connect().execution_options(read_only=True) as conn:
            numbers = list(
                conn.execute(
                    select(month_activity.c.number).where(
                        month_activity.c.repo == repo, month_activity.c.month == month
                    )
                ).scalars()
            )
            if not numbers:
                return MonthInputs({}, {}, {})
            fact_rows = conn.execute(
                select(pr_facts.c.number, pr_facts.c.kind, pr_facts.c.ident, pr_facts.c.at, pr_facts.c.rank).where(
                    pr_facts.c.repo == repo, pr_facts.c.number.in_(listed(conn, numbers))
                )
            ).all()
            versions = {}
            for number, rows in version_candidates(conn, repo, numbers, end, bodies=bodies).items():
                chosen = version_at(rows, end)
                if chosen is not None:
                    versions[number] = chosen
            heads = [(number, version.head_sha) for number, version in versions.items()]
            verdict_rows, path_rows, gone = head_details(conn, repo, heads, paths=paths)
        timelines: dict[int, list[Fact]] = defaultdict(list)
        kinds = {kind.value: kind for kind in FactKind}
        for fact in best_facts(fact_rows).values():
            if fact[1] < end:  # facts at or after the window end change nothing the snapshot shows
                timelines[fact[0]].append(Fact(kinds[fact[2]], fact[1]))
        verdicts = {(row.number, row.head_sha): verdict_from_row(row) for row in verdict_rows}
        changed: dict[int, list[str]] = defaultdict(list)
        for number, _sha, path in path_rows:  # one head per PR here
            changed[number].append(path)
        return MonthInputs(
            timelines=dict(timelines),
            versions=versions,
            verdicts=verdicts,
            unavailable=frozenset((number, sha) for number, sha in gone),
            paths=dict(changed),
        )


def best_facts(rows: Sequence[Any]) -> dict[tuple[int, str, str], tuple[int, int, str]]:
    """One fact per identity (number, kind, ident), at the best instant its sources gave: the lowest
    rank (a webhook's time before a timeline event's, before a commit's own date), then the earliest.
    Returns (number, instant, kind) by identity. Chosen before the window end is applied, so a worse
    instant inside the window never stands in for a better one after it."""
    chosen: dict[tuple[int, str, str], tuple[int, int]] = {}
    for number, kind, ident, at, rank in rows:
        key = (number, kind, ident)
        if key not in chosen or (rank, at) < chosen[key]:
            chosen[key] = (rank, at)
    return {key: (key[0], at, key[1]) for key, (_rank, at) in chosen.items()}


def version_candidates(
    conn: Connection, repo: str, numbers: Sequence[int], end: int, *, bodies: bool = True
) -> dict[int, list[AttributeVersion]]:
    """For each PR, the versions at the last instant before `end` and at the first one at or after
    it (the primary key's (repo, number, at) order answers both); `attributes.version_at` chooses.
    `bodies=False`: each body left empty."""
    found: dict[int, list[AttributeVersion]] = defaultdict(list)
    among = listed(conn, numbers)
    columns = [column for column in pr_versions.c if bodies or column.name != "body"]
    for side, edge in ((pr_versions.c.at < end, func.max), (pr_versions.c.at >= end, func.min)):
        chosen = (
            select(pr_versions.c.number, edge(pr_versions.c.at).label("at"))
            .where(pr_versions.c.repo == repo, pr_versions.c.number.in_(among), side)
            .group_by(pr_versions.c.number)
            .subquery()
        )
        query = select(*columns).join(
            chosen,
            and_(
                pr_versions.c.repo == repo,
                pr_versions.c.number == chosen.c.number,
                pr_versions.c.at == chosen.c.at,
            ),
        )
        for row in conn.execute(query):
            found[row.number].append(version_from_row(row))
    return found


def version_from_row(row: Any) -> AttributeVersion:
    """A `pr_versions` row as the version it records."""
    return AttributeVersion(
        at=row.at,
        delivery_id=row.delivery_id,
        title=row.title,
        body=row._mapping.get("body", ""),  # not read when the caller needs no body
        base_ref=row.base_ref,
        head_ref=row.head_ref,
        head_sha=row.head_sha,
        labels=tuple(orjson.loads(row.labels)),
        draft=bool(row.draft),
        author=row.author,
        observed=bool(row.observed),
    )


def head_details(
    conn: Connection, repo: str, heads: Sequence[tuple[int, str]], *, paths: bool = True
) -> tuple[Sequence[Any], Sequence[Any], Sequence[Any]]:
    """For these (number, head sha), each once: their `head_verdicts` rows, their changed paths as
    (number, sha, path) in each head's order (none when not `paths`), and the (number, sha) of those
    GitHub no longer has."""
    if not heads:
        return [], [], []
    verdicts, changed, gone = head_details_queries(conn, repo, heads)
    found = conn.execute(changed).all() if paths else []
    return conn.execute(verdicts).all(), found, conn.execute(gone).all()


def head_details_queries(
    conn: Connection, repo: str, heads: Sequence[tuple[int, str]]
) -> tuple[Select[Any], Select[Any], Select[Any]]:
    """`head_details`' three SELECTs, each naming the PRs' numbers on their own as well as the pairs, so
    that SQLite searches (repo, number) (why: tracker.store.heads, above `unknown_query`). The lists
    are bound as one parameter each (`database.listed`)."""
    numbers = listed(conn, sorted({number for number, _sha in heads}))
    pairs = listed(conn, [number for number, _sha in heads], [sha for _number, sha in heads])
    verdicts = select(head_verdicts).where(
        head_verdicts.c.repo == repo,
        head_verdicts.c.number.in_(numbers),
        tuple_(head_verdicts.c.number, head_verdicts.c.head_sha).in_(pairs),
    )
    paths = (
        select(head_files.c.number, head_files.c.head_sha, head_files.c.path)
        .where(
            head_files.c.repo == repo,
            head_files.c.number.in_(numbers),
            tuple_(head_files.c.number, head_files.c.head_sha).in_(pairs),
        )
        .order_by(head_files.c.number, head_files.c.head_sha, head_files.c.position)
    )
    gone = select(head_table.c.number, head_table.c.head_sha).where(
        head_table.c.repo == repo,
        head_table.c.source == UNAVAILABLE,
        head_table.c.number.in_(numbers),
        tuple_(head_table.c.number, head_table.c.head_sha).in_(pairs),
    )
    return verdicts, paths, gone


def write_derivations(conn: Connection, items: Sequence[tuple[str, Derivation]], source: str = WEBHOOK) -> None:
    """Insert the rows of many derivations at once (the worker passes one, a rebuild many); `source`
    says what they came from: webhook deliveries, or a backfill's or reconciliation's observations."""
    names: dict[str, tuple[int, str, str]] = {}
    fact_rows: dict[tuple[str, int, str, str, int], dict[str, object]] = {}
    since: dict[str, int] = {}
    version_rows = []
    activity_rows: dict[tuple[str, str, int], dict[str, object]] = {}
    wanted_rows: dict[tuple[str, int, str], dict[str, object]] = {}
    touched: dict[tuple[str, str], set[int]] = defaultdict(set)
    for delivery_id, d in items:
        names[d.repo] = max(
            names.get(d.repo, (d.version.at, delivery_id, d.full_name)), (d.version.at, delivery_id, d.full_name)
        )
        for fact in d.facts:
            key = (d.repo, d.number, fact.kind.value, fact.identity, fact.at)
            fact_rows[key] = {
                "repo": d.repo,
                "number": d.number,
                "kind": fact.kind.value,
                "ident": fact.identity,
                "at": fact.at,
                "rank": fact.rank,
                "source": source,
            }
        v = d.version
        if source == WEBHOOK:
            since[d.repo] = min(since.get(d.repo, v.at), v.at)
        version_rows.append(
            {
                "repo": d.repo,
                "number": d.number,
                "at": v.at,
                "delivery_id": v.delivery_id,
                "title": v.title,
                "body": v.body,
                "base_ref": v.base_ref,
                "head_ref": v.head_ref,
                "head_sha": v.head_sha,
                "labels": json.dumps(list(v.labels)),
                "draft": v.draft,
                "author": v.author,
                "observed": int(v.observed),
            }
        )
        for month in d.activity_months:
            activity_rows[(d.repo, month, d.number)] = {"repo": d.repo, "month": month, "number": d.number}
        for month in d.touched_months:
            touched[d.repo, month].add(d.number)
        if d.wanted_head is not None:
            head_sha, base_sha = d.wanted_head
            wanted_rows[(d.repo, d.number, head_sha)] = {
                "repo": d.repo,
                "number": d.number,
                "head_sha": head_sha,
                "full_name": d.full_name,
                "base_sha": base_sha,
            }
    _name_repositories(conn, names)
    insert_ignoring_duplicates(conn, pr_facts, list(fact_rows.values()))
    insert_ignoring_duplicates(conn, pr_versions, version_rows)
    insert_ignoring_duplicates(conn, month_activity, list(activity_rows.values()))
    insert_ignoring_duplicates(conn, wanted_heads, list(wanted_rows.values()))
    _extend_webhook_coverage(conn, since)
    bump_months(conn, touched)


def _extend_webhook_coverage(conn: Connection, since: dict[str, int]) -> None:
    for repo, at in since.items():
        if not insert_ignoring_duplicates(conn, webhook_coverage, [{"repo": repo, "since": at}]):
            conn.execute(_EXTEND_COVERAGE, {"key": repo, "new_since": at})


def _name_repositories(conn: Connection, names: dict[str, tuple[int, str, str]]) -> None:
    """Record each repository, spelled as its latest delivery (by time, then delivery id) spells it."""
    for repo, (at, delivery_id, full_name) in names.items():
        row = {"repo": repo, "full_name": full_name, "named_at": at, "named_by": delivery_id}
        if insert_ignoring_duplicates(conn, repositories, [row]):
            continue
        conn.execute(
            _RENAME, {"key": repo, "new_full_name": full_name, "new_named_at": at, "new_named_by": delivery_id}
        )


def mark_processed(conn: Connection, delivery_ids: Sequence[str]) -> None:
    conn.execute(_MARK_PROCESSED, {"ids": list(delivery_ids), "now": now_ms()})
