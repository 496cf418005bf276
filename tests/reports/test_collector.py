"""tracker.reports.collector: the cyclic collector is off inside, restored after, nested and threaded."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from tracker.reports.collector import collector_paused


@pytest.fixture(autouse=True)
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_on_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_it_is_restored_after_an_error() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a failed render")
    assert gc.isenabled()


def test_nested_pauses_end_with_the_outermost() -> None:
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_process_that_disabled_it_keeps_it_disabled() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_the_last_thread_out_enables_it() -> None:
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    inside.wait(10)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other thread is still inside
    release.set()
    other.join(10)
    assert gc.isenabled()


def test_cycles_made_during_a_pause_are_collected_afterwards() -> None:
    class Node:
        other: object = None

    with collector_paused():
        first, second = Node(), Node()
        first.other, second.other = second, first
        del first, second
    assert gc.collect() >= 2
