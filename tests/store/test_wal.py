"""SQLite's write-ahead log: checkpoints are made by a thread of each writing process after its commits
(tracker.store.wal), never inside a commit behind the writers' lock; deletes do not zero overflow pages."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from tracker.store import wal
from tracker.store.database import checkpoint, open_engine, raw_write

BLOB = os.urandom(20_000)  # about five pages of log a row


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[Engine, Path]]:
    path = tmp_path / "wal.sqlite3"
    made = sqlite3.connect(path, isolation_level=None)  # not through the engine: no commit of its yet
    made.execute("PRAGMA journal_mode=WAL")
    made.execute("CREATE TABLE blobs (n INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    made.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    made.close()
    engine = open_engine(f"sqlite:///{path}")
    yield engine, path
    engine.dispose()


def write_rows(engine: Engine, first: int, count: int) -> None:
    for n in range(first, first + count):

        def insert(cursor: Any, n: int = n) -> bool:
            cursor.execute("INSERT INTO blobs (n, body) VALUES (?, ?)", (n, BLOB))
            return True

        raw_write(engine, insert)


def wait_until(condition: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())


def test_commits_leave_the_checkpoint_to_their_process_thread(
    database: tuple[Engine, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, path = database
    monkeypatch.setattr(wal, "CHECKPOINT_AFTER", 1.0)  # from the first commit: longer than the writes
    before = os.path.getsize(path)
    write_rows(engine, 1, 80)  # 1.6 MB of log, under SQLite's own limit (its backstop)
    assert os.path.getsize(path) == before  # no commit copied the log into the database
    keeper = wal.checkpointer(str(path))
    assert wait_until(lambda: os.path.getsize(path) > before + 80 * len(BLOB))  # the thread did
    assert wait_until(lambda: keeper.checkpoints >= 1)  # (counted once its connection is closed)


def test_sqlites_own_checkpoint_is_only_the_backstop(database: tuple[Engine, Path]) -> None:
    engine, _path = database
    raw = engine.raw_connection()
    try:
        assert raw.cursor().execute("PRAGMA wal_autocheckpoint").fetchone() == (10_000,)
    finally:
        raw.close()
    checkpoint(engine)  # an explicit one still works on SQLite (and does nothing on PostgreSQL)


def test_an_idle_checkpointer_ends_its_thread_and_the_next_commit_starts_another(
    database: tuple[Engine, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, path = database
    monkeypatch.setattr(wal, "CHECKPOINT_AFTER", 0.01)
    monkeypatch.setattr(wal, "IDLE_EXIT", 0.2)
    keeper = wal.checkpointer(str(path))
    write_rows(engine, 1, 5)
    assert wait_until(lambda: keeper._thread is None)  # checkpointed, then idle long enough to end
    done = keeper.checkpoints
    before = os.path.getsize(path)
    write_rows(engine, 100, 20)
    assert wait_until(lambda: keeper.checkpoints > done and os.path.getsize(path) > before + 20 * len(BLOB))


def test_a_checkpoint_a_reader_held_back_is_tried_again_without_another_commit(
    database: tuple[Engine, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader whose snapshot is older than the last commits keeps their pages in the log; once it
    ends, the writing process's checkpointer copies them without waiting for another commit."""
    engine, path = database
    monkeypatch.setattr(wal, "CHECKPOINT_AFTER", 0.05)
    monkeypatch.setattr(wal, "IDLE_EXIT", 30.0)
    keeper = wal.checkpointer(str(path))
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM blobs").fetchone()  # its snapshot: before the rows below
        before = os.path.getsize(path)
        done = keeper.checkpoints
        write_rows(engine, 1, 20)
        assert wait_until(lambda: keeper.checkpoints >= done + 3)  # tried, and tried again
        assert os.path.getsize(path) == before  # the reader still needs the database's old pages
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    assert wait_until(lambda: os.path.getsize(path) > before + 20 * len(BLOB), seconds=5.0)


def test_a_checkpointer_never_makes_a_database_that_was_removed(tmp_path: Path) -> None:
    gone = tmp_path / "gone.sqlite3"
    wal.Checkpointer(str(gone)).checkpoint()
    assert not gone.exists()


def _child_writes(url: str, first: int) -> None:
    engine = open_engine(url)
    write_rows(engine, first, 40)
    # This process's own checkpointer (a forked child has no thread of its parent's) copies them.
    keeper = wal.checkpointer(engine.url.database or "")
    # Checkpointed, and idle since (IDLE_EXIT): the last checkpoint came after the last commit.
    if not wait_until(lambda: keeper.checkpoints > 0 and keeper._thread is None):
        raise SystemExit(3)
    engine.dispose()


@pytest.mark.system
def test_each_writing_process_checkpoints_what_it_committed(
    database: tuple[Engine, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, path = database
    monkeypatch.setattr(wal, "CHECKPOINT_AFTER", 0.01)
    monkeypatch.setattr(wal, "IDLE_EXIT", 0.2)
    write_rows(engine, 1, 5)  # the parent's checkpointer exists (and has a thread) before the fork
    assert wait_until(lambda: wal.checkpointer(str(path)).checkpoints >= 1)
    before = os.path.getsize(path)
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_child_writes, args=(f"sqlite:///{path}", 1000 * k)) for k in (1, 2)]
    for child in children:
        child.start()
    for child in children:
        child.join(30)
        assert child.exitcode == 0
    assert os.path.getsize(path) > before + 80 * len(BLOB)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM blobs").scalar() == 85


def test_deletes_zero_what_they_free_only_where_it_costs_no_writes(database: tuple[Engine, Path]) -> None:
    engine, _path = database
    raw = engine.raw_connection()
    try:
        assert raw.cursor().execute("PRAGMA secure_delete").fetchone() == (2,)  # FAST
    finally:
        raw.close()
