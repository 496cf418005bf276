"""Changed files per PR head (fetched from GitHub once) and their verdicts under the repository's rules."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, Select, and_, bindparam, func, select, tuple_

from tracker.core.classify import Category, ChangedFile, HeadVerdict, Rules, classify_head
from tracker.store.changes import bump_months
from tracker.store.database import insert_ignoring_duplicates, inserted_keys
from tracker.store.ledger import now_ms
from tracker.store.schema import head_files, head_verdicts, heads, month_activity, pr_versions, wanted_heads

PULLS, COMPARE, UNAVAILABLE = "pulls", "compare", "unavailable"

# The statements every head fetch runs, built once: building one anew (column comparisons, its
# cache key) cost more CPU than running it on SQLite.
_KNOWN = select(heads.c.head_sha).where(
    heads.c.repo == bindparam("repo"), heads.c.number == bindparam("number"), heads.c.head_sha == bindparam("head_sha")
)
# The months a PR is active in (they read the verdict of its heads).
_PR_MONTHS = select(month_activity.c.month).where(
    month_activity.c.repo == bindparam("pr_repo"), month_activity.c.number == bindparam("pr_number")
)


@dataclass(frozen=True)
class HeadFiles:
    """A head's files as fetched, with what its verdict is made under."""

    repo: str
    number: int
    head_sha: str
    files: tuple[ChangedFile, ...]
    truncated: bool
    source: str  # PULLS, COMPARE or UNAVAILABLE
    rules: Rules


@dataclass(frozen=True)
class WantedHead:
    full_name: str
    number: int
    head_sha: str
    base_sha: str


# The fetch path's look-ups name each PR's repository and number on their own as well as the tuples:
# SQLite searches a primary key by a list of rows only on its first column, so with the tuples alone
# each fetch job read every head (and every version) of every repository, more with each month kept.


def unknown_query(chunk: Sequence[tuple[str, int, str]]) -> Select[Any]:
    """The stored heads among `chunk` (repo, number, head sha)."""
    return select(heads.c.repo, heads.c.number, heads.c.head_sha).where(
        heads.c.repo.in_(sorted({repo for repo, _number, _sha in chunk})),
        heads.c.number.in_(sorted({number for _repo, number, _sha in chunk})),
        tuple_(heads.c.repo, heads.c.number, heads.c.head_sha).in_(list(chunk)),
    )


def latest_heads_query(prs: Sequence[tuple[str, int]]) -> Select[Any]:
    """The head sha of each of `prs` (repo, number) in its latest versions (several at one instant)."""
    last = (
        select(pr_versions.c.repo, pr_versions.c.number, func.max(pr_versions.c.at).label("at"))
        .where(
            pr_versions.c.repo.in_(sorted({repo for repo, _number in prs})),
            pr_versions.c.number.in_(sorted({number for _repo, number in prs})),
            tuple_(pr_versions.c.repo, pr_versions.c.number).in_(list(prs)),
        )
        .group_by(pr_versions.c.repo, pr_versions.c.number)
        .subquery()
    )
    return select(pr_versions.c.repo, pr_versions.c.number, pr_versions.c.head_sha).join(
        last,
        and_(pr_versions.c.repo == last.c.repo, pr_versions.c.number == last.c.number, pr_versions.c.at == last.c.at),
    )


class HeadStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def known(self, repo: str, number: int, head_sha: str) -> bool:
        with self.engine.connect().execution_options(read_only=True) as conn:
            return conn.execute(_KNOWN, {"repo": repo, "number": number, "head_sha": head_sha}).first() is not None

    def unknown(self, wanted: Sequence[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
        """Those of `wanted` (repo, number, head sha) with no stored files, in the order given."""
        found: set[tuple[str, int, str]] = set()
        with self.engine.connect().execution_options(read_only=True) as conn:
            for start in range(0, len(wanted), 500):
                rows = conn.execute(unknown_query(wanted[start : start + 500]))
                found.update((row.repo, row.number, row.head_sha) for row in rows)
        return [head for head in wanted if head not in found]

    def moved_on(self, wanted: Sequence[tuple[str, int, str]]) -> set[tuple[str, int, str]]:
        """Those of `wanted` (repo, number, head sha) whose PR the ledger already shows at another head
        later: GitHub's files listing of such a PR answers for that later head (or a later one still),
        never for this one, so asking it would be a request spent for nothing."""
        prs = sorted({(repo, number) for repo, number, _sha in wanted})
        latest: dict[tuple[str, int], str] = {}
        with self.engine.connect().execution_options(read_only=True) as conn:
            for start in range(0, len(prs), 500):
                for row in conn.execute(latest_heads_query(prs[start : start + 500])):
                    # Two versions at one instant (a delivery and a timeline's) may disagree: either
                    # head then counts as the PR's, and the wanted head is not passed by.
                    key = (row.repo, row.number)
                    latest[key] = row.head_sha if key not in latest or latest[key] == row.head_sha else ""
        return {
            (repo, number, sha) for repo, number, sha in wanted if latest.get((repo, number)) not in (None, "", sha)
        }

    def store(
        self,
        repo: str,
        number: int,
        head_sha: str,
        files: Sequence[ChangedFile],
        *,
        truncated: bool,
        source: str,
        rules: Rules,
    ) -> bool:
        """Keep a head's files and its verdict; False if the head was already stored."""
        return self.store_many([HeadFiles(repo, number, head_sha, tuple(files), truncated, source, rules)]).new == 1

    def store_many(self, items: Sequence[HeadFiles]) -> StoredHeads:
        """`store` for several heads in one transaction: how many were not stored before, and the months
        of each PR that gained a head, which read something new (each is bumped once, tracker.store.changes)
        and whose reports the caller may compute again (tracker.reports.warm).

        Everything but the writes is done before the transaction: the rows, and each head's verdict
        (classifying 300 files is milliseconds). On SQLite the transaction holds the one write lock
        the webhook's inserts wait for, and a fetch worker runs at a lower CPU priority than the web."""
        rows = _HeadRows(items)
        if not rows.heads:
            return StoredHeads(0, ())
        touched: dict[tuple[str, str], set[int]] = defaultdict(set)
        with self.engine.begin() as conn:
            new = inserted_keys(conn, heads, rows.heads)
            files = [row for key, file_rows in rows.files.items() if key in new for row in file_rows]
            if files:
                conn.execute(head_files.insert(), files)
            verdicts = [row for key, row in rows.verdicts.items() if key in new]
            if verdicts:
                insert_ignoring_duplicates(conn, head_verdicts, verdicts)
            prs = sorted({(repo, number) for repo, number, _sha in new})
            if prs:
                for repo, number in prs:
                    for month in conn.execute(_PR_MONTHS, {"pr_repo": repo, "pr_number": number}).scalars():
                        touched[repo, month].add(number)
                bump_months(conn, touched)
        return StoredHeads(len(new), tuple(sorted(touched)))

    def missing(self, limit: int = 1000) -> list[WantedHead]:
        """Heads that deliveries showed and whose files are not stored (for the sweep)."""
        query = (
            select(wanted_heads)
            .outerjoin(
                heads,
                and_(
                    heads.c.repo == wanted_heads.c.repo,
                    heads.c.number == wanted_heads.c.number,
                    heads.c.head_sha == wanted_heads.c.head_sha,
                ),
            )
            .where(heads.c.head_sha.is_(None))
            .order_by(wanted_heads.c.repo, wanted_heads.c.number, wanted_heads.c.head_sha)
            .limit(limit)
        )
        with self.engine.connect().execution_options(read_only=True) as conn:
            return [WantedHead(r.full_name, r.number, r.head_sha, r.base_sha) for r in conn.execute(query)]

    def stored(self) -> Iterator[tuple[str, int, str, bool, list[ChangedFile]]]:
        """Every stored head with its files (for rebuilds), streamed in one ordered query."""
        query = (
            select(heads.c.repo, heads.c.number, heads.c.head_sha, heads.c.truncated, head_files)
            .outerjoin(
                head_files,
                and_(
                    head_files.c.repo == heads.c.repo,
                    head_files.c.number == heads.c.number,
                    head_files.c.head_sha == heads.c.head_sha,
                ),
            )
            .where(heads.c.source != UNAVAILABLE)
            .order_by(heads.c.repo, heads.c.number, heads.c.head_sha, head_files.c.position)
        )
        current: tuple[str, int, str, bool] | None = None
        files: list[ChangedFile] = []
        with self.engine.connect().execution_options(read_only=True, stream_results=True, yield_per=2000) as conn:
            for row in conn.execute(query):
                key = (row[0], row[1], row[2], bool(row[3]))
                if key != current:
                    if current is not None:
                        yield (*current, files)
                    current, files = key, []
                if row.path is not None:
                    files.append(
                        ChangedFile(row.path, row.status, row.previous_path, row.additions, row.deletions, row.patch)
                    )
        if current is not None:
            yield (*current, files)


class _HeadRows:
    """The rows of the heads to store, built outside any transaction: each head's row, its files' and its
    verdict's (none for a head GitHub could not give), by (repo, number, head sha); a head given twice is
    stored once."""

    def __init__(self, items: Sequence[HeadFiles]) -> None:
        self.heads: list[dict[str, object]] = []
        self.files: dict[tuple[str, int, str], list[dict[str, object]]] = {}
        self.verdicts: dict[tuple[str, int, str], dict[str, object]] = {}
        fetched_at = now_ms()
        for item in items:
            key = (item.repo, item.number, item.head_sha)
            if key in self.files:
                continue
            head = {"repo": item.repo, "number": item.number, "head_sha": item.head_sha}
            self.heads.append(
                {
                    **head,
                    "file_count": len(item.files),
                    "truncated": item.truncated,
                    "source": item.source,
                    "fetched_at": fetched_at,
                }
            )
            self.files[key] = [
                {
                    **head,
                    "position": position,
                    "path": f.path,
                    "status": f.status,
                    "previous_path": f.previous_path,
                    "additions": f.additions,
                    "deletions": f.deletions,
                    "patch": f.patch,
                }
                for position, f in enumerate(item.files)
            ]
            if item.source != UNAVAILABLE:
                verdict = classify_head(item.head_sha, item.files, item.rules, item.truncated)
                self.verdicts[key] = _verdict_row(item.repo, item.number, verdict)


class StoredHeads(NamedTuple):
    """What `HeadStore.store_many` wrote: how many heads were new, and the (repository key, month) of
    every month a PR of theirs is in."""

    new: int
    months: tuple[tuple[str, str], ...]


class DeferredHeads:
    """A `HeadStore` for the heads of one fetch job: what it is asked to store is kept until `flush`,
    which writes it all in one transaction (a transaction per head was a fifth of a fetch's CPU). It
    knows what it keeps: a head kept is known."""

    def __init__(self, target: HeadStore) -> None:
        self.target = target
        self.pending: dict[tuple[str, int, str], HeadFiles] = {}

    def known(self, repo: str, number: int, head_sha: str) -> bool:
        return (repo, number, head_sha) in self.pending or self.target.known(repo, number, head_sha)

    def store(
        self,
        repo: str,
        number: int,
        head_sha: str,
        files: Sequence[ChangedFile],
        *,
        truncated: bool,
        source: str,
        rules: Rules,
    ) -> bool:
        """Keep a head's files for `flush`; False if this job kept that head already."""
        key = (repo, number, head_sha)
        if key in self.pending:
            return False
        self.pending[key] = HeadFiles(repo, number, head_sha, tuple(files), truncated, source, rules)
        return True

    def flush(self) -> StoredHeads:
        """Write what was kept (one transaction): `HeadStore.store_many`."""
        items, self.pending = list(self.pending.values()), {}
        return self.target.store_many(items) if items else StoredHeads(0, ())


def write_verdicts(conn: Connection, verdicts: Sequence[tuple[str, int, HeadVerdict]]) -> None:
    """Keep (repo, PR number, verdict) rows; a verdict already kept for a head stays."""
    insert_ignoring_duplicates(conn, head_verdicts, [_verdict_row(repo, number, v) for repo, number, v in verdicts])


def _verdict_row(repo: str, number: int, verdict: HeadVerdict) -> dict[str, object]:
    return {
        "repo": repo,
        "number": number,
        "head_sha": verdict.head_sha,
        "category": verdict.category.value,
        "whitespace_only": verdict.whitespace_only,
        "evidence": json.dumps(verdict.evidence, sort_keys=True),
    }


def verdict_from_row(row: Any) -> HeadVerdict:
    return HeadVerdict(
        head_sha=row.head_sha,
        category=Category(row.category),
        whitespace_only=bool(row.whitespace_only),
        evidence=json.loads(row.evidence),
    )
