"""Python's cyclic garbage collector held back while a report is computed.

Building the report of a big month makes hundreds of thousands of short-lived containers (the month's
digest parsed from JSON, facts, versions, the snapshot, the report model). Each burst of allocations
triggers the cyclic collector, and its full collections walk every object the process holds, the
parsed digest included: measured on the 1,419-PR month at its last day, they were about 40 % of a
cold request (JSON 210 ms with the collector, 120 ms without; bench/snapshot.py prints both).

None of that work needs the cyclic collector: reference counting frees every object the moment the
request drops it, and anything that does form a cycle is collected by the next collection after the
pause. `collector_paused()` therefore disables it for the duration and restores it afterwards. It nests
and is shared by threads: the collector is disabled while any holder is inside, and enabled again by the
last one out, and only if it was enabled when the first one came in (a process that disabled it for
its own reasons keeps it disabled).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()
