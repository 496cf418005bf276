"""Checkpoints of a SQLite database's write-ahead log, made by a thread of each writing process, off
every writer's path.

A checkpoint copies the log's pages into the database and waits for the disk twice (fsync). Left to
SQLite (`PRAGMA wal_autocheckpoint`), it is made by the commit that finds the log past its limit,
inside that commit: behind the writers' lock (`tracker.store.database.WriterConnection`), so every
other writer waits for it too. With 40 MB of log that was 60-120 ms, paid every few seconds by a
webhook request and by the requests of the other web process queued behind its lock: the p99 of the
webhook's answers at 500 deliveries/s (`bench/service.py`) was that wait.

Here a commit only wakes its process's checkpointer for that database (`after_commit`), which waits
`CHECKPOINT_AFTER` seconds for more commits, then runs a PASSIVE checkpoint (it takes no writer's
lock, waits for no reader, and copies only what no reader still needs) on a connection of its own;
SQLite releases the interpreter's lock meanwhile. A checkpoint that could not copy the whole log
(another process's checkpoint at the same moment, or a reader still needing the older pages) is tried
again `CHECKPOINT_AFTER` later, up to `RETRIES` times, so the last commits of a process do not wait in the
log for someone's next commit. A checkpointer left idle for `IDLE_EXIT` seconds
ends its thread; the next commit starts another. SQLite's own limit stays as a backstop
(`tracker.store.database`), reached only if the log grows past it between two checkpoints.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from urllib.parse import quote

log = logging.getLogger(__name__)

CHECKPOINT_AFTER = 0.2  # seconds from a commit to the checkpoint that copies it (and the commits since)
IDLE_EXIT = 30.0  # seconds without a commit before a checkpointer's thread ends
RETRIES = 25  # checkpoints tried again, CHECKPOINT_AFTER apart, while one leaves part of the log uncopied
_BUSY_TIMEOUT = 5.0  # seconds a checkpoint waits for SQLite's own locks (another checkpoint)


class Checkpointer:
    """The checkpointer of one database file in one process."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.checkpoints = 0  # made by this process's thread (tests and benchmarks read it)
        self._wake = threading.Event()
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None

    def poke(self) -> None:
        """A commit happened: checkpoint within CHECKPOINT_AFTER seconds."""
        with self._guard:
            self._wake.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"wal-checkpoint {self.path}", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        unfinished = 0  # checkpoints in a row that left part of the log uncopied
        while self._wake.wait(IDLE_EXIT) or self._still_wanted():
            time.sleep(CHECKPOINT_AFTER)  # let more commits come: one checkpoint for them all
            self._wake.clear()
            if self.checkpoint():
                unfinished = 0
            else:
                unfinished += 1
                if unfinished <= RETRIES:
                    # Another process's checkpoint ran at the same moment, or a reader still needed part of
                    # the log: without a try of its own, what this process committed last would wait in
                    # the log for the next commit of any process.
                    self._wake.set()

    def _still_wanted(self) -> bool:
        """After IDLE_EXIT seconds without a commit: end the thread, unless a commit came meanwhile."""
        with self._guard:
            if self._wake.is_set():
                return True
            self._thread = None
            return False

    def checkpoint(self) -> bool:
        """One PASSIVE checkpoint; whether it copied the whole log (SQLite answers whether it was busy,
        the log's frames and the frames copied)."""
        try:
            # mode=rw: a database removed meanwhile is not made again, empty, by this connection
            uri = f"file:{quote(self.path)}?mode=rw"  # quoted: a '?' or '#' in a path is no URI syntax
            connection = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT)
            try:
                busy, logged, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            finally:
                connection.close()
            self.checkpoints += 1
            return not busy and copied >= logged
        except sqlite3.Error as exc:  # a vanished database: the next commit asks again
            log.debug("could not checkpoint %s: %s", self.path, exc)
            return False


_checkpointers: dict[tuple[int, str], Checkpointer] = {}
_registry_guard = threading.Lock()


def checkpointer(path: str) -> Checkpointer:
    """This process's checkpointer of `path` (a forked child gets its own: threads do not survive a fork)."""
    key = (os.getpid(), path)
    found = _checkpointers.get(key)
    if found is None:
        with _registry_guard:
            found = _checkpointers.setdefault(key, Checkpointer(path))
    return found


def after_commit(path: str) -> None:
    """What a write transaction's commit on `path` calls."""
    checkpointer(path).poke()
