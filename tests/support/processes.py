"""The `tracker` command as a real process, and waiting for what it does: tests that use these start
processes and belong to the `system` tier (tests/conftest.py marks them)."""

from __future__ import annotations

import os
import random
import socket
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from redis import Redis

from tracker.queue import QUEUE_NAME

TRACKER = [sys.executable, "-m", "tracker"]
# The deliveries queue's scheduler lock (RQ's key), held by the one live scheduler of a deployment.
LOCK = f"rq:scheduler-lock:{QUEUE_NAME}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int) -> int:
    """The first of `count` consecutive ports free on every interface now, for a command that takes a base port
    and counts up (honcho's PORT). Below Linux's ephemeral range (32768 on), which `free_port` and every
    outgoing connection take theirs from, so that another test's process cannot take one meanwhile."""
    chooser = random.Random()
    for _ in range(200):
        base = chooser.randrange(20_000, 32_000)
        sockets = [socket.socket() for _ in range(count)]
        try:
            for offset, each in enumerate(sockets):
                each.bind(("0.0.0.0", base + offset))
            return base
        except OSError:
            continue
        finally:
            for each in sockets:
                each.close()
    raise AssertionError(f"no {count} consecutive free ports between 20000 and 32000")


def clean_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not (k.startswith("TRACKER_") or k in ("REDIS_URL",))}
    env.update(values)
    return env


def wait_healthy(base: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the service did not become healthy"
        time.sleep(0.2)


def wait_processed(base: str, count: int, timeout: float = 30) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        deliveries: dict[str, int] = httpx.get(f"{base}/api/v1/status").json()["deliveries"]
        if deliveries["processed"] + deliveries["failed"] >= count:
            return deliveries
        assert time.monotonic() < deadline, f"not processed in time: {deliveries}"
        time.sleep(0.2)


def classified_snapshot(url: str, timeout: float = 30) -> dict[str, Any]:
    """The snapshot once every PR in it is classified (files arrive after the delivery is processed)."""
    deadline = time.monotonic() + timeout
    while True:
        snapshot: dict[str, Any] = httpx.get(url).json()
        if snapshot["pending_classification"] == 0:
            return snapshot
        assert time.monotonic() < deadline, f"still pending: {snapshot}"
        time.sleep(0.2)


def wait_until(condition: Any, timeout: float, what: str) -> float:
    """Seconds until `condition()` held; fails after `timeout`."""
    started = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - started
        except Exception:
            pass
        assert time.monotonic() - started < timeout, what
        time.sleep(0.1)


def alive(pid: int) -> bool:
    """Running, not a zombie (an orphan nobody reaped: PID 1 of a container may never do it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def scheduler_holding(redis: Redis) -> tuple[str, int] | None:
    """The name and pid of the live scheduler holding the deliveries lock, if any."""
    name = redis.get(LOCK)
    if name is None:
        return None
    pid = redis.hget(f"rq:scheduler:{name.decode()}", "pid")
    if pid is None or not alive(int(pid)):
        return None
    return name.decode(), int(pid)
