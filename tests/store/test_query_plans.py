"""SQLite's plans for the look-ups that run on every fetch job, every report and every request for a
month's records: each must search an index, never read a table whole (then it costs more with each month
the ledger keeps). SQLite searches a key by a list of rows on its first column only, so the head look-ups
name the PR numbers on their own too (tracker.store.heads, tracker.store.month_state), and the
deliveries after a record name every status (tracker.records.store)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, select, tuple_
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql import ClauseElement

from tracker.records.store import deliveries_since_query
from tracker.store.heads import latest_heads_query, unknown_query
from tracker.store.month_state import head_details_queries
from tracker.store.schema import head_files

HEADS = [(7, "a" * 40), (9, "b" * 40), (12, "c" * 40)]
REPO = "nvidia/megatron-lm"


def plan(engine: Engine, query: Any) -> list[str]:
    """SQLite's plan of `query`, or of what `query(connection)` builds (a query whose lists are bound as
    one parameter builds itself for the connection's database)."""
    with engine.connect() as conn:
        built = query if isinstance(query, ClauseElement) else query(conn)
        sql = str(built.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
        return [str(row[3]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")]


def searched_by_number(steps: list[str], table: str) -> bool:
    reads = [step for step in steps if f" {table} " in f" {step} "]
    return bool(reads) and all(step.startswith("SEARCH") and "repo=? AND number=?" in step for step in reads)


@pytest.mark.parametrize(
    ("query", "table"),
    [
        (unknown_query([(REPO, number, sha) for number, sha in HEADS]), "heads"),
        (latest_heads_query([(REPO, number) for number, _sha in HEADS]), "pr_versions"),
        (lambda conn: head_details_queries(conn, REPO, HEADS)[0], "head_verdicts"),
        (lambda conn: head_details_queries(conn, REPO, HEADS)[1], "head_files"),
        (lambda conn: head_details_queries(conn, REPO, HEADS)[2], "heads"),
    ],
    ids=["stored heads", "latest heads", "verdicts", "paths", "unavailable heads"],
)
def test_head_look_ups_search_the_key_by_repository_and_number(sqlite_engine: Engine, query: Any, table: str) -> None:
    steps = plan(sqlite_engine, query)
    assert searched_by_number(steps, table), steps


def test_the_deliveries_after_a_record_are_searched_by_the_status_and_time_index(sqlite_engine: Engine) -> None:
    steps = plan(sqlite_engine, deliveries_since_query("NVIDIA/Megatron-LM", 1_790_000_000_000))
    reads = [step for step in steps if " deliveries " in f" {step} "]
    assert reads and all("ix_deliveries_status_received (status=? AND received_at>?)" in step for step in reads), steps


def test_the_check_sees_a_table_read_whole(sqlite_engine: Engine) -> None:
    """What these queries were: a list of (number, sha) rows alone searches by repository only."""
    by_pairs = select(head_files.c.path).where(
        head_files.c.repo == REPO, tuple_(head_files.c.number, head_files.c.head_sha).in_(HEADS)
    )
    assert not searched_by_number(plan(sqlite_engine, by_pairs), "head_files")
