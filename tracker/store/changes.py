"""Month versions and what each one changed.

Every write that can change a month's report moves the month's version on (`months`, which every cache
of the month is keyed by) and, in the same transaction, records which PRs it wrote (`month_changes`).
A request that finds the month's digest kept at version b while the month is at version v reads
`changes_since(b)`: the PRs of versions b+1..v, to read again instead of the whole month. Every version
is recorded, so a gap (a version pruned, or written before this table existed) says "unknown", and the
request reads the whole month as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import orjson
from sqlalchemy import Connection, bindparam, delete, select, update

from tracker.store.database import insert_ignoring_duplicates
from tracker.store.schema import month_changes, months

# Versions of a month whose changes are kept: a digest is kept again at least every minute while its
# month changes (tracker.reports.warm), by which time a busy month has moved on a few hundred versions at most.
CHANGES_KEPT = 5_000

_BUMP = (
    update(months)
    .where(months.c.repo == bindparam("key"), months.c.month == bindparam("the_month"))
    .values(version=months.c.version + 1)
)
_VERSION = select(months.c.version).where(months.c.repo == bindparam("key"), months.c.month == bindparam("the_month"))
_PRUNE = delete(month_changes).where(
    month_changes.c.repo == bindparam("key"),
    month_changes.c.month == bindparam("the_month"),
    month_changes.c.version <= bindparam("oldest_dropped"),
)


def bump_months(conn: Connection, touched: Mapping[tuple[str, str], Iterable[int]]) -> None:
    """Move each (repository key, month) of `touched` on by one version, recording the PR numbers its
    new version changed (none: something not about a PR, such as the narrator's prose)."""
    if not touched:
        return
    keys = sorted(touched)
    insert_ignoring_duplicates(conn, months, [{"repo": repo, "month": month, "version": 0} for repo, month in keys])
    rows = []
    for repo, month in keys:
        conn.execute(_BUMP, {"key": repo, "the_month": month})
        version = conn.execute(_VERSION, {"key": repo, "the_month": month}).scalar_one()
        numbers = sorted(set(touched[repo, month]))
        rows.append({"repo": repo, "month": month, "version": version, "numbers": orjson.dumps(numbers).decode()})
        if version > CHANGES_KEPT and version % 100 == 0:  # now and then, not in every transaction
            conn.execute(_PRUNE, {"key": repo, "the_month": month, "oldest_dropped": version - CHANGES_KEPT})
    conn.execute(month_changes.insert(), rows)


def changes_since(conn: Connection, repo: str, month: str, since: int) -> tuple[int, set[int] | None]:
    """The month's version now and the PRs its versions after `since` changed; None when a version
    after `since` is not recorded (or `since` is not older than now)."""
    version = month_version(conn, repo, month)
    if version <= since:
        return version, None
    rows = conn.execute(
        select(month_changes.c.numbers).where(
            month_changes.c.repo == repo,
            month_changes.c.month == month,
            month_changes.c.version > since,
            month_changes.c.version <= version,
        )
    ).scalars()
    numbers: set[int] = set()
    seen = 0
    for text in rows:
        numbers.update(orjson.loads(text))
        seen += 1
    return version, numbers if seen == version - since else None


def month_version(conn: Connection, repo: str, month: str) -> int:
    """The month's version (0 before anything touched it), `repo` a repository key."""
    version: int | None = conn.execute(_VERSION, {"key": repo, "the_month": month}).scalar_one_or_none()
    return version or 0
