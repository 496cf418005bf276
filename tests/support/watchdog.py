"""Liveness, not speed: `finishes(call)` fails the test when the call does not return within a
generous bound.

Tests of hostile input (issue 8: a title of 100,000 spaces held a month's report for 30 s; a regular
expression that backtracks, work that is quadratic in what a PR author writes) ask that the code
returns, not how fast: the bound, `HANG`, is hundreds of times what these calls take on a loaded
machine, and only a regression of the kind they guard against (seconds to minutes) reaches it. How
long they take is measured by bench/hostile_inputs.py.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

HANG = 10.0  # seconds


class Hung(AssertionError):
    pass


def finishes(call: Callable[[], T], *, within: float = HANG, what: str = "") -> T:
    """`call()`'s result; the test fails (SIGALRM interrupts the call) if it runs for `within` seconds."""
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        raise RuntimeError("finishes() needs the main thread: it uses SIGALRM")

    def alarm(signum: int, frame: Any) -> None:
        raise Hung(f"{what or getattr(call, '__name__', 'the call')} did not return within {within} s: it hangs")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, within)
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
