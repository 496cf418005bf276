"""`tracker run`: one machine, every part — web, workers, sweep, and the embedded Redis if needed.

Each part is a child process running the same `tracker` subcommand a multi-machine deployment
would run. A child that dies is restarted; Ctrl-C or SIGTERM stops them all, Redis last.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from types import FrameType

from tracker.embedded_redis import EmbeddedRedis
from tracker.settings import Settings
from tracker.store.database import connect

log = logging.getLogger(__name__)

_STOP_TIMEOUT = 15.0


@dataclass
class Child:
    name: str
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)


def run(settings: Settings, host: str, port: int, workers: int, web_processes: int, sweep_every: float) -> int:
    settings.require_webhook_secret()
    connect(settings.resolved_database_url).dispose()  # create the schema once, before the children race
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
            for child in children:
                assert child.process is not None
                code = child.process.poll()
                if code is not None and not stopping:
                    log.warning("%s exited with code %s; restarting it", child.name, code)
                    _pause_if_flapping(child)
                    _start(child, env)
            time.sleep(0.2)
    finally:
        _stop_all(children)
        if embedded is not None:
            embedded.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("tracker stopped")
    return 0


def _start(child: Child, env: dict[str, str]) -> None:
    # Each child gets its own process group, so Ctrl-C in the terminal reaches only the supervisor,
    # which then stops the children in order.
    child.process = subprocess.Popen(child.args, env=env, start_new_session=True)


def _pause_if_flapping(child: Child) -> None:
    now = time.monotonic()
    child.restarts = [t for t in child.restarts if now - t < 60] + [now]
    if len(child.restarts) > 5:
        time.sleep(5)


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
