"""`tracker run`: one machine, every part — web, workers, sweep, schedule, and the embedded Redis if needed.

Each part is a child process running the same `tracker` subcommand a multi-machine deployment
would run. A child that dies is restarted, and so is the embedded Redis (its append-only file keeps
the data; workers and the sweep wait for it meanwhile); Ctrl-C or SIGTERM stops them all, Redis last.

Before anything starts, `preflight` checks what would otherwise make the children die one after the
other: the settings, TRACKER_CONFIG, the port, Redis (REDIS_URL) and the database. A problem is a
`CannotStart` whose message says what to fix, and nothing has been started.

A child that dies within `RestartPolicy.quick` seconds of its start is restarted after 1 s, then
2 s, 4 s, ...; after `give_up_after` such deaths in a row the supervisor stops everything and exits
with 1, naming the part, its exit code and the last lines it wrote to stderr (each child's stderr
passes through the supervisor, which keeps its last lines). A child that ran longer before dying is
restarted at once.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

from sqlalchemy import Engine

from tracker import logs, metrics
from tracker.config import load_config
from tracker.embedded_redis import EmbeddedRedis
from tracker.queue import connect_redis, redis_address, redis_failure
from tracker.settings import Settings
from tracker.store.database import connect, derived_schema_outdated

log = logging.getLogger(__name__)

_STOP_TIMEOUT = 15.0
# What is left of a dead child's process group (RQ's scheduler process, forked by a worker) gets
# this long to stop after SIGTERM before SIGKILL.
_GROUP_STOP_TIMEOUT = 3.0
# How long the preflight waits for Redis to answer a PING.
_REDIS_PREFLIGHT_TIMEOUT = 2.0
# How many of a child's last stderr lines are kept (for the message when it keeps dying), and shown.
_TAIL_LINES, _SHOWN_LINES = 20, 5
# The data directory's run lock (`hold_data_directory`); it holds the running supervisor's pid.
_RUN_LOCK = "tracker-run.lock"


class CannotStart(RuntimeError):
    """`tracker run` cannot start: the message says what to fix. `exit_code` is 2 for the settings,
    the config file and the options, 1 for a service that does not answer or a port that is taken."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class RestartPolicy:
    quick: float = 10.0  # a child that dies sooner than this after its start died "quickly"
    first_pause: float = 1.0  # the pause before restarting after the first quick death; doubles
    longest_pause: float = 30.0
    give_up_after: int = 5  # quick deaths in a row, then everything stops

    def pause(self, quick_deaths: int) -> float:
        return 0.0 if quick_deaths == 0 else min(self.first_pause * 2 ** (quick_deaths - 1), self.longest_pause)


@dataclass
class Child:
    name: str
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    started_at: float = 0.0
    quick_deaths: int = 0  # in a row
    start_at: float | None = None  # when a child that exited is due to start again
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=_TAIL_LINES))
    reader: threading.Thread | None = None


class ChildKeepsDying(RuntimeError):
    """A child died `give_up_after` times in a row within seconds of its start."""


def preflight(settings: Settings, host: str, port: int) -> None:
    """Check, starting nothing, what every child needs: the webhook secret, TRACKER_CONFIG, the
    port, Redis (when REDIS_URL is set; the embedded one is started later) and the database (its
    schema is created here, once, before the children race to). Raises SettingsError or
    CannotStart with what to fix."""
    settings.require_webhook_secret()
    load_config(settings)
    check_port(host, port)
    if settings.redis_url:
        _check_redis(settings.redis_url)
    _check_database(settings)


def check_port(host: str, port: int) -> None:
    """Bind host:port as gunicorn will (IPv6 only for an IPv6 address, SO_REUSEADDR), then let it go."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        addresses = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise CannotStart(
            f"--host {host} is not an address to listen on ({exc}): pass --host 127.0.0.1, or 0.0.0.0 for every "
            "interface",
            2,
        ) from exc
    family, kind, proto, _, address = addresses[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CannotStart(f"port {port} on {host} is taken: stop what uses it or pass --port", 1) from exc
            if exc.errno == errno.EACCES:
                raise CannotStart(
                    f"port {port} on {host} needs privileges this user lacks: pass --port 1024 or above (and put "
                    "the TLS proxy on the low port)",
                    2,
                ) from exc
            if exc.errno == errno.EADDRNOTAVAIL:
                raise CannotStart(
                    f"--host {host} is not an address of this machine: pass --host 127.0.0.1, or 0.0.0.0 for every "
                    "interface",
                    2,
                ) from exc
            reason = exc.strerror or str(exc)
            raise CannotStart(f"cannot listen on {host}:{port} ({reason}): pass --host or --port", 1) from exc


def _check_redis(url: str) -> None:
    try:
        connection = connect_redis(url)
    except ValueError as exc:  # redis-py's message for a bad scheme does not repeat the URL
        raise CannotStart(f"REDIS_URL is not a Redis URL ({exc}): use redis://host:port/db or unix:///path", 2) from exc
    try:
        failure = redis_failure(connection, timeout=_REDIS_PREFLIGHT_TIMEOUT)
    finally:
        connection.close()
    if failure is not None:
        raise CannotStart(
            f"Redis at {redis_address(connection)} does not answer ({type(failure).__name__}: {failure}): "
            "start it, or fix REDIS_URL (or unset it: `tracker run` then starts its own)",
            1,
        )


def _check_database(settings: Settings) -> None:
    """Connect and create the schema (once, before the children race to); rebuild the derived tables
    of a ledger from an older release."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

    url = settings.resolved_database_url
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except ArgumentError as exc:
        raise CannotStart(f"TRACKER_DATABASE_URL is not a database URL ({exc}): fix it", 2) from exc
    try:
        engine = connect(url)
    except NoSuchModuleError as exc:
        raise CannotStart(f"TRACKER_DATABASE_URL names a database this install has no driver for ({exc})", 2) from exc
    except (DBAPIError, OSError) as exc:
        orig = getattr(exc, "orig", None) or exc
        reason = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
        where = "TRACKER_DATA_DIR (it must be writable)" if url.startswith("sqlite") else "TRACKER_DATABASE_URL"
        raise CannotStart(
            f"the database at {shown} cannot be used ({reason}): start it, or fix {where}",
            1,
        ) from exc
    log.info("ledger: %s", shown)
    try:
        _rebuild_if_outdated(engine, settings)
    finally:
        engine.dispose()


def _rebuild_if_outdated(engine: Engine, settings: Settings) -> None:
    if derived_schema_outdated(engine):
        # A ledger from an older release: its derived tables are rebuilt from the sources first.
        from tracker.store.ledger import Ledger
        from tracker.store.month_state import MonthState
        from tracker.store.rebuild import rebuild

        log.info("the ledger's derived tables are from an older release: rebuilding them (once)")
        processed, failed, heads = rebuild(Ledger(engine), MonthState(engine), load_config(settings))
        log.info("rebuilt from %d deliveries (%d failed); %d heads reclassified", processed, failed, heads)


def run(
    settings: Settings,
    host: str,
    port: int,
    workers: int,
    web_processes: int,
    sweep_every: float,
    worker_nice: int = 0,
) -> int:
    """Run every part until SIGINT or SIGTERM (0), or until a part keeps dying (1). Raises
    SettingsError or CannotStart, having started nothing, when the preflight finds a problem."""
    with hold_data_directory(settings.data_dir):
        return _run(settings, host, port, workers, web_processes, sweep_every, worker_nice)


def _run(
    settings: Settings, host: str, port: int, workers: int, web_processes: int, sweep_every: float, worker_nice: int
) -> int:
    preflight(settings, host, port)
    env = {**os.environ, **logs.child_environment()}  # -v reaches every child
    # Every child counts into the files of this run's own directory (a run killed before removing its
    # own leaves one, which the next run removes); a scrape of any web process adds them up.
    try:
        metrics_directory = metrics.run_directory(settings.data_dir)
    except OSError as exc:
        raise CannotStart(
            f"cannot make the metrics directory under {settings.data_dir} ({exc}): fix TRACKER_DATA_DIR", 1
        ) from exc
    env[metrics.MULTIPROCESS_VARIABLE] = str(metrics_directory)
    embedded: EmbeddedRedis | None = None
    if not settings.redis_url:
        embedded = EmbeddedRedis(settings.data_dir)
        try:
            embedded.start()
        except (RuntimeError, OSError) as exc:
            metrics.remove_run_directory(metrics_directory)
            raise CannotStart(f"the embedded Redis did not start ({exc})", 1) from exc
        env["REDIS_URL"] = embedded.url
        log.info("embedded Redis on %s (append-only file in %s)", embedded.url, embedded.directory)

    children = parts(host, port, workers, web_processes, sweep_every, worker_nice)
    stopping = False
    gave_up: ChildKeepsDying | None = None

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
    except ChildKeepsDying as exc:
        gave_up = exc
    finally:
        _stop_all(children)
        if embedded is not None:
            embedded.stop()
        metrics.remove_run_directory(metrics_directory)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if gave_up is not None:
        log.error("%s; everything is stopped", gave_up)
        return 1
    log.info("tracker stopped")
    return 0


def hold_data_directory(data_dir: Path) -> IO[str]:
    """The data directory's run lock, held until the returned file is closed.

    Two `tracker run`s on one data directory would share its embedded Redis and ledger and each start
    a schedule and workers, so the second is refused, naming the first's pid. The lock is an `flock`,
    which the kernel gives back when the process dies, however it dies: nothing stale to clean up.
    Children do not inherit it (Python opens files non-inheritable), so a child left running after its
    supervisor died does not keep it either."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        handle = open(data_dir / _RUN_LOCK, "a+", encoding="utf-8")  # noqa: SIM115 (held for the whole run)
    except OSError as exc:
        reason = exc.strerror or exc
        raise CannotStart(f"cannot use the data directory {data_dir} ({reason}): fix TRACKER_DATA_DIR", 1) from exc
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        other = handle.read().strip()[:20] or "unknown"
        handle.close()
        raise CannotStart(
            f"another `tracker run` (pid {other}) is using the data directory {data_dir}: stop it first, or give "
            "this one its own TRACKER_DATA_DIR",
            1,
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def parts(host: str, port: int, workers: int, web_processes: int, sweep_every: float, worker_nice: int) -> list[Child]:
    """The processes `tracker run` starts (the embedded Redis apart)."""
    tracker = [sys.executable, "-m", "tracker"]
    return [
        Child("web", [*tracker, "web", "--host", host, "--port", str(port), "--processes", str(web_processes)]),
        *(Child(f"worker-{n}", [*tracker, "worker", "--nice", str(worker_nice)]) for n in range(1, workers + 1)),
        Child("sweep", [*tracker, "sweep", "--every", str(sweep_every)]),
        Child("schedule", [*tracker, "schedule"]),
    ]


def _watch(child: Child, env: dict[str, str]) -> None:
    """Restart a child that exited, without holding up the loop (which also watches Redis): at once
    after a long run, else after a pause that doubles with each quick death in a row. Raises
    ChildKeepsDying after `give_up_after` quick deaths in a row."""
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
    lived = now - child.started_at
    policy = child.policy
    child.quick_deaths = child.quick_deaths + 1 if lived < policy.quick else 0
    if child.quick_deaths >= policy.give_up_after:
        if child.reader is not None:
            child.reader.join(timeout=1.0)  # its last lines
        lines = [line for line in child.tail if line.strip()][-_SHOWN_LINES:]
        said = f"; its last lines on stderr: {' | '.join(lines)}" if lines else ""
        raise ChildKeepsDying(
            f"{child.name} exited {child.quick_deaths} times in a row within {policy.quick:.0f} s of starting "
            f"(last exit code {code}){said}"
        )
    pause = policy.pause(child.quick_deaths)
    later = f" in {pause:.0f} s" if pause >= 1 else (f" in {pause:.2f} s" if pause else "")
    log.warning("%s exited with code %s after %.1f s; restarting it%s", child.name, code, lived, later)
    child.start_at = now + pause


def _start(child: Child, env: dict[str, str]) -> None:
    # Each child gets its own process group, so Ctrl-C in the terminal reaches only the supervisor,
    # which then stops the children in order. Its stderr passes through here (`_relay`), which keeps
    # its last lines.
    child.start_at = None
    child.started_at = time.monotonic()
    child.tail = deque(maxlen=_TAIL_LINES)  # this run's lines (the last run's reader may still be draining)
    child.process = subprocess.Popen(child.args, env=env, start_new_session=True, stderr=subprocess.PIPE)
    assert child.process.stderr is not None
    child.reader = threading.Thread(
        target=_relay, args=(child.process.stderr, child.tail), name=f"stderr of {child.name}", daemon=True
    )
    child.reader.start()


def _relay(stream: IO[bytes], tail: deque[str]) -> None:
    """Copy a child's stderr to ours, line by line, keeping the last lines."""
    out = getattr(sys.stderr, "buffer", None)
    try:
        for line in iter(stream.readline, b""):
            tail.append(line.decode("utf-8", "replace").rstrip())
            try:
                if out is not None:
                    out.write(line)
                    out.flush()
                else:
                    sys.stderr.write(line.decode("utf-8", "replace"))
                    sys.stderr.flush()
            except (OSError, ValueError):
                pass  # our stderr is gone: keep draining the child's, or it would block
    finally:
        stream.close()


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
    for child in children:
        if child.reader is not None:
            child.reader.join(timeout=1.0)  # the children's last lines before ours
