"""`database.listed`: Python values as the rows of a SELECT, bound as one parameter per column, on both
databases. The month's reads name their 1,400 PRs and heads through it (tracker.store.month_state)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select, tuple_

from tracker.store.database import listed
from tracker.store.schema import head_files

SHAS = ["a" * 40, "b" * 40, 'it\'s "quoted" \\ and 中文']


def rows(engine: Engine, *columns: list) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(listed(conn, *columns))]


def test_one_column_of_numbers_or_strings(engine: Engine) -> None:
    assert sorted(rows(engine, [12, 7, 1_000_000])) == [(7,), (12,), (1_000_000,)]
    assert sorted(rows(engine, SHAS)) == sorted((sha,) for sha in SHAS)


def test_columns_in_step(engine: Engine) -> None:
    assert sorted(rows(engine, [3, 1, 2], ["c", "a", "b"])) == [(1, "a"), (2, "b"), (3, "c")]


def test_an_empty_list_is_no_rows(engine: Engine) -> None:
    assert rows(engine, []) == []
    assert rows(engine, [], []) == []


def test_a_long_list_is_one_parameter_and_the_same_sql(engine: Engine) -> None:
    numbers = list(range(1, 5001))
    with engine.connect() as conn:
        short, long = listed(conn, [1, 2]), listed(conn, numbers)
        assert str(short.compile(conn)) == str(long.compile(conn))
        assert len(long.compile(conn).params) == 1
        assert sorted(value for (value,) in conn.execute(long)) == numbers


def test_in_a_pairs_look_up(engine: Engine) -> None:
    """A (number, sha) look-up finds the rows of exactly the listed pairs, not those of a listed number
    at another sha, nor of a listed sha under another number."""
    stored = [(7, SHAS[0]), (7, SHAS[1]), (9, SHAS[1]), (9, SHAS[2])]
    with engine.begin() as conn:
        conn.execute(
            head_files.insert(),
            [
                {
                    "repo": "o/r",
                    "number": number,
                    "head_sha": sha,
                    "position": 0,
                    "path": f"{number}/{index}",
                    "status": "modified",
                    "additions": 1,
                    "deletions": 0,
                }
                for index, (number, sha) in enumerate(stored)
            ],
        )
    wanted = [(7, SHAS[1]), (9, SHAS[2]), (8, SHAS[0])]
    with engine.connect() as conn:
        found = conn.execute(
            select(head_files.c.number, head_files.c.head_sha).where(
                head_files.c.repo == "o/r",
                tuple_(head_files.c.number, head_files.c.head_sha).in_(
                    listed(conn, [number for number, _ in wanted], [sha for _, sha in wanted])
                ),
            )
        ).all()
    assert sorted(tuple(row) for row in found) == [(7, SHAS[1]), (9, SHAS[2])]


def test_postgresql_plans_each_execution_for_its_lists(engine: Engine) -> None:
    """psycopg prepares a statement from its fifth execution; a generic plan, made without the arrays'
    lengths, took a big month's verdicts from 11 ms to 790 ms (tracker.store.database)."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite has no plan cache to settle on")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "force_custom_plan"
        statement = listed(conn, [1, 2, 3], ["a", "b", "c"])
        for _ in range(12):  # past psycopg's prepare threshold: a prepared statement still answers right
            assert sorted(tuple(row) for row in conn.execute(statement)) == [(1, "a"), (2, "b"), (3, "c")]
