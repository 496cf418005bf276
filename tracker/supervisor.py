"""`tracker run`: one machine, every part — web, workers, sweep, schedule, and the embedded Redis if needed.

Each part is a child process running the same `tracker` subcommand a multi-machine deployment
would run. A child that dies is restarted, and so is the embedded Redis (its append-only file keeps
the data; workers and the sweep wait for it meanwhile); Ctrl-C or SIGTERM stops them all, Redis last.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from tracker.embedded_redis import EmbeddedRedis
from tracker.settings import Settings
from tracker.store.database import connect, derived_schema_outdated

log = logging.getLogger(__name__)

_STOP_TIMEOUT = 15.0
# What is left of a dead child's process group (RQ's scheduler process, forked by a worker) gets
# this long to stop after SIGTERM before SIGKILL.
_GROUP_STOP_TIMEOUT = 3.0
# A child restarted more than this many times in a minute waits a few seconds before the next start.
_FLAPPING_RESTARTS, _FLAPPING_PAUSE = 5, 5.0


@dataclass
class Child:
    name: str
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)
    start_at: float | None = None  # when a child that exited is due to start again


def run(settings: Settings, host: str, port: int, workers: int, web_processes: int, sweep_every: float) -> int:
    settings.require_webhook_secret()
    engine = connect(settings.resolved_database_url)  # create the schema once, before the children race
    try:
        if derived_schema_outdated(engine):
            # A ledger from an older release: its derived tables are rebuilt from the sources first.
            from tracker.config import load_config
            from tracker.store.ledger import Ledger
            from tracker.store.month_state import MonthState
            from tracker.store.rebuild import rebuild

            log.info("the ledger's derived tables are from an older release: rebuilding them (once)")
            processed, failed, heads = rebuild(Ledger(engine), MonthState(engine), load_config(settings))
            log.info("rebuilt from %d deliveries (%d failed); %d heads reclassified", processed, failed, heads)
    finally:
        engine.dispose()
    env = dict(os.environ)
    embedded: EmbeddedRedis | None = None
    if not settings.redis_url:
        embedded = EmbeddedRedis(settings.data_dir)
        embedded.start()
        env["REDIS_URL"] = embedded.url
        log.info("embedded Redis on %s (append-only file in %s)", embedded.url, embedded.directory)

    tracker = [sys.executable, "-m", "tracker"]
    children = [
        Child("web", [*tracker, "web", "--host", host, "--port", str(port), "--processes", str(web_processes)]),
        *(Child(f"worker-{n}", [*tracker, "worker"]) for n in range(1, workers + 1)),
        Child("sweep", [*tracker, "sweep", "--every", str(sweep_every)]),
        Child("schedule", [*tracker, "schedule"]),
    ]
    stopping = False

    def _stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for child in children:
            _start(child, env)
        log.info("tracker running on http://%s:%d (Ctrl-C stops it)", host, port)
        while not stopping:
            if embedded is not None:
                embedded.keep_alive()
            for child in children:
                if stopping:
                    break
                _watch(child, env)
            time.sleep(0.2)
    finally:
        _stop_all(children)
        if embedded is not None:
            embedded.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("tracker stopped")
    return 0


def _watch(child: Child, env: dict[str, str]) -> None:
    """Restart a child that exited, without holding up the loop (which also watches Redis)."""
    if child.start_at is not None:
        if time.monotonic() >= child.start_at:
            _start(child, env)
        return
    assert child.process is not None
    code = child.process.poll()
    if code is None:
        return
    _end_group(child)
    now = time.monotonic()
    child.restarts = [t for t in child.restarts if now - t < 60] + [now]
    flapping = len(child.restarts) > _FLAPPING_RESTARTS
    log.warning("%s exited with code %s; restarting it%s", child.name, code, " in 5 s" if flapping else "")
    child.start_at = now + (_FLAPPING_PAUSE if flapping else 0.0)


def _start(child: Child, env: dict[str, str]) -> None:
    # Each child gets its own process group, so Ctrl-C in the terminal reaches only the supervisor,
    # which then stops the children in order.
    child.start_at = None
    child.process = subprocess.Popen(child.args, env=env, start_new_session=True)


def _end_group(child: Child) -> None:
    """Stop what is left of an exited child's process group. A worker killed with SIGKILL leaves its
    RQ scheduler process running, holding the scheduler lock; SIGTERM makes it give the lock back,
    so the restarted worker takes it over at once."""
    assert child.process is not None
    group = child.process.pid  # the child led its own session, so its pid names the group
    if not _signal_group(group, signal.SIGTERM):
        return
    deadline = time.monotonic() + _GROUP_STOP_TIMEOUT
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if not _group_alive(group):
            return
    log.warning("what was left of %s did not stop in time; killing it", child.name)
    _signal_group(group, signal.SIGKILL)


def _signal_group(group: int, sig: int) -> bool:
    """Send `sig` to a process group; False when no process is left in it."""
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        return False
    return True


def _group_alive(group: int) -> bool:
    """Whether a process of the group still runs. Zombies do not count: an orphan that exited waits
    for PID 1 to reap it, and in a container PID 1 is often a program that never does."""
    if not _signal_group(group, 0):
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after it
            state, _ppid, pgrp = stat.read_text().rpartition(")")[2].split()[:3]
        except (OSError, ValueError):
            continue  # gone meanwhile
        if int(pgrp) == group and state != "Z":
            return True
    return False


def _stop_all(children: list[Child]) -> None:
    for child in children:
        if child.process is not None and child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT
    for child in children:
        if child.process is None:
            continue
        try:
            child.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in time; killing it", child.name)
            child.process.kill()
            child.process.wait()
        _end_group(child)
