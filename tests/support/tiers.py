"""The test tiers: a test that starts a process (a subprocess, a multiprocessing child, `tracker run`,
gunicorn, a worker process, a browser) carries the `system` marker; `pytest -m "not system"` is the
quick tier. tests/conftest.py applies both rules below to every test.

- `mark_system`: a test module that uses the process helpers of tests/support/processes.py is in the
  system tier as a whole; other tests mark themselves (`@pytest.mark.system`, or `pytestmark` for a module).
- `refuse_processes`: in a test without the marker, starting a process raises
  `ProcessOutsideSystemTier`, and the test fails even if the process was started from a thread, or
  the exception caught, so the tiers cannot drift apart as tests are added.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Callable
from typing import Any

import pytest


class ProcessOutsideSystemTier(BaseException):
    """Not an Exception: code under test that catches Exception must not hide it."""


def mark_system(items: list[pytest.Item]) -> None:
    from tests.support import processes

    helpers = {
        id(value)
        for name, value in vars(processes).items()
        if name == "TRACKER" or (callable(value) and getattr(value, "__module__", None) == processes.__name__)
    }
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and any(id(value) in helpers for value in vars(module).values()):
            item.add_marker(pytest.mark.system)


def refuse_processes(monkeypatch: pytest.MonkeyPatch, test: str) -> list[str]:
    """Make every way of starting a process raise for `test`; the list it returns names the attempts."""
    started: list[str] = []

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            started.append(what)
            raise ProcessOutsideSystemTier(
                f"{test} starts a process ({what}) without the `system` marker: mark the test "
                "`@pytest.mark.system` (or its module, `pytestmark = pytest.mark.system`)"
            )

        return refused

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse("subprocess"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("multiprocessing"))
    monkeypatch.setattr(os, "fork", refuse("os.fork"))
    monkeypatch.setattr(os, "posix_spawn", refuse("os.posix_spawn"))
    monkeypatch.setattr(os, "posix_spawnp", refuse("os.posix_spawnp"))
    return started
