"""A throw-away tracker stack for one benchmark run: data directory, ledger, Redis, child processes.

- Data directory: a fresh temporary one, deleted at the end (short path: the embedded Redis socket
  lives under it and Linux caps unix socket paths at 108 bytes).
- Ledger: SQLite in the data directory, or the database at --database-url / TRACKER_DATABASE_URL;
  an external one must hold no deliveries yet, and its tracker tables are dropped at the end.
- Redis: the one at --redis-url / REDIS_URL, which must be an empty database (it is flushed at the
  end; use a spare database number such as redis://127.0.0.1:6379/15); otherwise the project's
  embedded Redis, started under the data directory.
- Child processes get their own process group and are stopped (TERM, then KILL) by their ids.
- SIGTERM: while a Stack is open the benchmark's own process turns it into SystemExit (so that the
  `with` block still stops children and deletes files); every process forked meanwhile (the load
  generator's pool, the delivery builders, service.py's helpers) gets SIGTERM's default action back
  at once, in the fork itself (see `_default_sigterm_in_child`).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from _stories import ROOT
from redis import Redis
from sqlalchemy import Engine, select
from sqlalchemy import func as sql_func

from tracker.embedded_redis import EmbeddedRedis
from tracker.settings import Settings, load_settings
from tracker.store.database import connect
from tracker.store.schema import deliveries, metadata

SECRET = "bench-webhook-secret"


def tracker_command() -> list[str]:
    """`tracker` from the running venv (the console script, else `python -m tracker`)."""
    script = Path(sys.executable).parent / "tracker"
    return [str(script)] if script.exists() else [sys.executable, "-m", "tracker"]


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # SIGTERM as SystemExit, so that `with Stack()` still stops children and deletes files.
    sys.exit(143)


def _default_sigterm_in_child() -> None:
    """Forked children must not keep `_exit_on_sigterm`: they die at SIGTERM, as by default.

    A Python signal handler does not run when the signal arrives: the C handler only notes it, and
    the interpreter calls the Python function at its next check between bytecodes, or when a blocking
    call the signal interrupted returns EINTR. A SIGTERM that lands just before a process blocks
    interrupts nothing and is never acted on. That is what hung the benchmarks: `Pool.terminate` (at
    the end of every `with Pool(...)`: `_load.run`, `_stories.stories`) holds the task queue's read
    lock and sends SIGTERM to the workers; a worker that got it just before blocking on that lock
    slept for ever with the signal noted (CPython's `Handlers[SIGTERM].tripped` set, seen in gdb),
    and the pool's `join` of that worker waited for ever. With SIG_DFL the kernel ends the worker
    whatever it is doing.

    Registered with `os.register_at_fork`, so it runs in every forked child before any of its Python
    code (pool workers, `multiprocessing` processes, a bare `os.fork`); it does nothing unless the
    Stack's handler is the one installed."""
    if signal.getsignal(signal.SIGTERM) is _exit_on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


os.register_at_fork(after_in_child=_default_sigterm_in_child)


class Stack:
    def __init__(
        self,
        database_url: str | None = None,
        redis_url: str | None = None,
        with_redis: bool = True,
        keep: bool = False,
    ) -> None:
        self.external_database = database_url or os.environ.get("TRACKER_DATABASE_URL") or None
        self.external_redis = redis_url or os.environ.get("REDIS_URL") or None
        self.with_redis = with_redis
        self.keep = keep
        self.children: list[subprocess.Popen[bytes]] = []
        self.embedded: EmbeddedRedis | None = None
        self._engine: Engine | None = None
        # Set only once an external database or Redis was seen empty: only then is it ours to wipe.
        self._owns_database = False
        self._owns_redis = False
        self.directory = Path(tempfile.mkdtemp(prefix="trk-"))

    # --- set-up -------------------------------------------------------------------------------

    def __enter__(self) -> Stack:
        self._sigterm_before = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        self._cpu_at_start = (_machine_cpu(), _own_cpu())
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        self.data_dir = self.directory / "var"
        self.data_dir.mkdir()
        if self.external_database:
            self._check_empty_database(self.external_database)
            self._owns_database = True
        self.redis_url = ""
        if self.with_redis:
            if self.external_redis:
                connection = Redis.from_url(self.external_redis)
                size = connection.dbsize()
                connection.close()
                if size:
                    raise SystemExit(
                        f"REDIS_URL {self.external_redis} holds {size} keys: the benchmark flushes its Redis "
                        "database at the end, so give it an empty one (e.g. redis://127.0.0.1:6379/15) "
                        "or unset REDIS_URL to use an embedded Redis"
                    )
                self.redis_url = self.external_redis
                self._owns_redis = True
            else:
                self.embedded = EmbeddedRedis(self.directory)
                self.embedded.start()
                self.redis_url = self.embedded.url
        # Jobs that fetch PR files talk to GitHub: point them at a closed loopback port, so that no
        # benchmark ever sends a request off this machine (they fail fast and are re-scheduled).
        self.github_api_url = f"http://127.0.0.1:{_closed_port()}"
        self.settings: Settings = load_settings(
            webhook_secret=SECRET,
            data_dir=self.data_dir,
            database_url=self.external_database,
            redis_url=self.redis_url or None,
            timezone="Asia/Shanghai",
            config_path=None,
            github_api_url=self.github_api_url,
            github_token=None,
        )
        dropped = ("TRACKER_CONFIG", "TRACKER_DATABASE_URL", "REDIS_URL", "GITHUB_TOKEN", "GITHUB_API_URL")
        env = {k: v for k, v in os.environ.items() if k not in dropped}
        env.update(
            TRACKER_DATA_DIR=str(self.data_dir),
            TRACKER_WEBHOOK_SECRET=SECRET,
            TRACKER_TIMEZONE="Asia/Shanghai",
            GITHUB_API_URL=self.github_api_url,
            PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "bench"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        )
        if self.external_database:
            env["TRACKER_DATABASE_URL"] = self.external_database
        if self.redis_url:
            env["REDIS_URL"] = self.redis_url
        self.env = env

    @staticmethod
    def _check_empty_database(url: str) -> None:
        engine = connect(url)
        try:
            with engine.connect() as conn:
                count = conn.execute(select(sql_func.count()).select_from(deliveries)).scalar_one()
        finally:
            engine.dispose()
        if count:
            raise SystemExit(
                f"the database at TRACKER_DATABASE_URL already holds {count} deliveries: the benchmark drops "
                "the tracker's tables at the end, so give it a scratch database"
            )

    @property
    def database_url(self) -> str:
        return self.settings.resolved_database_url

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = connect(self.database_url)
        return self._engine

    def redis(self) -> Redis:
        return Redis.from_url(self.redis_url)

    # --- children -----------------------------------------------------------------------------

    def spawn(self, args: Sequence[str], log: Path | None = None, cwd: Path = ROOT) -> subprocess.Popen[bytes]:
        output = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            child = subprocess.Popen(
                list(args),
                cwd=cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopping it stops its workers too
            )
        finally:
            if log is not None:
                output.close()  # type: ignore[union-attr]
        self.children.append(child)
        return child

    def stop(self, child: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        else:
            # The leader is gone; make sure nothing it started lingers in its group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
        if child in self.children:
            self.children.remove(child)

    # --- tear-down ----------------------------------------------------------------------------

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for child in list(self.children):
            self.stop(child)
        if self._owns_database:
            engine = self._engine or connect(str(self.external_database))
            metadata.drop_all(engine)
            engine.dispose()
        elif self._engine is not None:
            self._engine.dispose()
        self._engine = None
        if self._owns_redis:
            connection = Redis.from_url(str(self.external_redis))
            connection.flushdb()
            connection.close()
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None
        if hasattr(self, "_cpu_at_start"):
            print(interference_note(*self._cpu_at_start))
        if self.keep:
            print(f"kept {self.directory}")
        else:
            shutil.rmtree(self.directory, ignore_errors=True)
        before = getattr(self, "_sigterm_before", None)
        if before is not None:  # None: a handler not installed from Python, nothing to put back
            signal.signal(signal.SIGTERM, before)
            self._sigterm_before = None


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _machine_cpu() -> tuple[float, float, float]:
    """(busy, stolen, elapsed) CPU seconds of the whole machine so far, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = values
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick, sum(values) / tick


def _own_cpu() -> float:
    """CPU seconds of this process and of every child it has waited for (their children included)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def interference_note(machine_at_start: tuple[float, float, float], own_at_start: float) -> str:
    """How much CPU the rest of the machine took while the benchmark ran (call once every child is
    reaped). A database server reached through TRACKER_DATABASE_URL counts as the rest too."""
    busy, steal, elapsed = (now - then for now, then in zip(_machine_cpu(), machine_at_start, strict=True))
    others = max(0.0, busy - (_own_cpu() - own_at_start))
    return (
        f"machine: other processes used {others:.1f} CPU-s of {elapsed:.0f} CPU-s available during the run "
        f"({others / elapsed:.0%}); stolen by the host {steal:.1f} CPU-s"
    )


def load_note() -> str:
    """The machine's load averages: other work on a 2-core machine moves every absolute figure."""
    one, five, _ = Path("/proc/loadavg").read_text().split()[:3]
    return f"load average {one} (1 min), {five} (5 min) on {os.cpu_count()} CPUs"


def disk_usage(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def wait_for(condition: Callable[[], bool], timeout: float, every: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return bool(condition())
