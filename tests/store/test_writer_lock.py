"""The SQLite writers' lock (tracker.store.database.WriterConnection): every write transaction, the
webhook's insert included, holds `<database>.writers` from BEGIN IMMEDIATE to its COMMIT or ROLLBACK, a
writer behind another waits for it and starts once it ends, and one that waits past the busy timeout
fails as SQLite would, having changed nothing."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from bench.fixtures.paths import needs_shared
from tests.store.test_ledger import ping_delivery
from tracker.store import database
from tracker.store.database import connect
from tracker.store.ledger import Ledger


def lock_path(engine: Engine) -> str:
    return f"{engine.url.database}.writers"


def lock_is_free(engine: Engine) -> bool:
    """Whether another writer could take the lock now (asked through a descriptor of its own)."""
    fd = os.open(lock_path(engine), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


@contextmanager
def held(engine: Engine) -> Iterator[None]:
    """The writers' lock, held as another process's writer holds it."""
    fd = os.open(lock_path(engine), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def test_a_write_transaction_holds_the_lock_until_its_commit_or_rollback(sqlite_engine: Engine) -> None:
    with sqlite_engine.begin() as conn:
        conn.execute(text("CREATE TABLE marks (n INTEGER)"))
        assert not lock_is_free(sqlite_engine)
    assert lock_is_free(sqlite_engine)
    with pytest.raises(RuntimeError), sqlite_engine.begin() as conn:
        conn.execute(text("INSERT INTO marks VALUES (1)"))
        assert not lock_is_free(sqlite_engine)
        raise RuntimeError("rolled back")
    assert lock_is_free(sqlite_engine)
    with sqlite_engine.connect().execution_options(read_only=True) as conn:
        assert conn.execute(text("SELECT count(*) FROM marks")).scalar_one() == 0
        assert lock_is_free(sqlite_engine)  # a reader takes no writer's lock


@needs_shared
def test_the_webhook_insert_waits_for_the_lock_and_stores_once_it_is_released(sqlite_engine: Engine) -> None:
    ledger = Ledger(sqlite_engine)
    stored: list[bool] = []
    with held(sqlite_engine):
        writer = threading.Thread(target=lambda: stored.append(ledger.store(ping_delivery("d-1", 1_790_000_000_000))))
        writer.start()
        writer.join(0.5)
        assert writer.is_alive()  # waiting for the lock: nothing stored yet
        assert ledger.get("d-1") is None
    writer.join(10)
    assert stored == [True]
    assert ledger.get("d-1") is not None
    assert lock_is_free(sqlite_engine)  # and let go of after its commit


@needs_shared
def test_a_writer_that_waits_past_the_busy_timeout_fails_and_changes_nothing(
    sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "_SQLITE_BUSY_TIMEOUT_MS", 200)
    ledger = Ledger(sqlite_engine)
    with held(sqlite_engine):
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            ledger.store(ping_delivery("d-2", 1_790_000_000_000))
        with pytest.raises(OperationalError, match="database is locked"), sqlite_engine.begin() as conn:
            conn.execute(text("CREATE TABLE never (n INTEGER)"))
        assert time.monotonic() - started >= 0.4
    assert ledger.get("d-2") is None
    with sqlite_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM sqlite_master WHERE name = 'never'")).scalar_one() == 0
    assert ledger.store(ping_delivery("d-2", 1_790_000_000_000)) is True  # the connection is usable after


def _increment(url: str, times: int, start: multiprocessing.synchronize.Event) -> None:
    engine = connect(url)
    start.wait(30)
    for _ in range(times):
        with engine.begin() as conn:  # read, then write: safe only while no other writer runs in between
            value = conn.execute(text("SELECT n FROM counter")).scalar_one()
            conn.execute(text("UPDATE counter SET n = :n"), {"n": value + 1})
    engine.dispose()


@pytest.mark.system
def test_writers_in_several_processes_never_overlap(sqlite_engine: Engine) -> None:
    with sqlite_engine.begin() as conn:
        conn.execute(text("CREATE TABLE counter (n INTEGER)"))
        conn.execute(text("INSERT INTO counter VALUES (0)"))
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    url = str(sqlite_engine.url)
    processes = [context.Process(target=_increment, args=(url, 100, start)) for _ in range(4)]
    for process in processes:
        process.start()
    start.set()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    with sqlite_engine.connect() as conn:
        assert conn.execute(text("SELECT n FROM counter")).scalar_one() == 400
    assert lock_is_free(sqlite_engine)
