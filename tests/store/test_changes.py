"""tracker.store.changes: every version of a month records the PRs it changed; a request asking what
changed since a version gets every PR of the versions after it, or "unknown" when one is not recorded.
On each test database."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, delete, func, select

from tracker.store import changes
from tracker.store.changes import bump_months, changes_since, month_version
from tracker.store.schema import month_changes


def bump(engine: Engine, touched: dict[tuple[str, str], tuple[int, ...]]) -> None:
    with engine.begin() as conn:
        bump_months(conn, touched)


def since(engine: Engine, month: str, version: int) -> tuple[int, set[int] | None]:
    with engine.connect() as conn:
        return changes_since(conn, "o/r", month, version)


def test_each_version_records_its_prs_and_changes_since_gathers_those_after_it(engine: Engine) -> None:
    bump(engine, {("o/r", "2026-05"): (3, 1, 3), ("o/r", "2026-06"): (3,)})
    bump(engine, {("o/r", "2026-05"): ()})  # the narrator's prose: a version, no PR
    bump(engine, {("o/r", "2026-05"): (7,)})
    with engine.connect() as conn:
        assert month_version(conn, "o/r", "2026-05") == 3
        assert month_version(conn, "o/r", "2026-07") == 0
        rows = conn.execute(select(month_changes).where(month_changes.c.month == "2026-05")).all()
    assert [(row.version, row.numbers) for row in rows] == [(1, "[1,3]"), (2, "[]"), (3, "[7]")]
    assert since(engine, "2026-05", 0) == (3, {1, 3, 7})
    assert since(engine, "2026-05", 1) == (3, {7})
    assert since(engine, "2026-05", 2) == (3, {7})
    assert since(engine, "2026-06", 0) == (1, {3})
    assert since(engine, "2026-05", 3) == (3, None)  # nothing newer: not a patch
    assert since(engine, "2026-07", 0) == (0, None)
    with engine.begin() as conn:
        conn.execute(delete(month_changes).where(month_changes.c.month == "2026-05", month_changes.c.version == 2))
    assert since(engine, "2026-05", 0) == (3, None)  # a version not recorded: unknown
    assert since(engine, "2026-05", 2) == (3, {7})  # after the gap, still known


def test_old_versions_are_pruned_and_a_digest_older_than_them_is_unknown(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(changes, "CHANGES_KEPT", 150)
    for number in range(1, 251):
        bump(engine, {("o/r", "2026-05"): (number,)})
    with engine.connect() as conn:
        kept = conn.execute(select(func.min(month_changes.c.version), func.count()).select_from(month_changes)).one()
    assert tuple(kept) == (51, 200)  # pruned at version 200: the 150 before it and those since are kept
    assert since(engine, "2026-05", 50) == (250, set(range(51, 251)))
    assert since(engine, "2026-05", 49) == (250, None)
