"""The test tiers cannot drift: a test without the `system` marker that starts a process fails, and the
marker is declared where `pytest -m "not system"` (the quick tier) finds it."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

from bench.fixtures.paths import ROOT
from tests.support.tiers import ProcessOutsideSystemTier, mark_system


def test_a_subprocess_outside_the_system_tier_is_refused(no_processes_outside_system: list[str]) -> None:
    with pytest.raises(ProcessOutsideSystemTier, match="without the `system` marker"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(ProcessOutsideSystemTier):
        subprocess.Popen(["true"])
    assert no_processes_outside_system == ["subprocess", "subprocess"]
    no_processes_outside_system.clear()  # else this test fails at its teardown, as it should


def test_a_process_outside_the_system_tier_is_refused(no_processes_outside_system: list[str]) -> None:
    for method in ("spawn", "fork", "forkserver"):
        with pytest.raises(ProcessOutsideSystemTier):
            multiprocessing.get_context(method).Process(target=print).start()
    with pytest.raises(ProcessOutsideSystemTier):
        os.fork()
    assert no_processes_outside_system == ["multiprocessing"] * 3 + ["os.fork"]
    no_processes_outside_system.clear()


def test_an_exception_handler_does_not_hide_a_refused_process(no_processes_outside_system: list[str]) -> None:
    try:
        subprocess.run(["true"])
    except Exception:  # what code under test may do around a command it runs
        pytest.fail("the refusal must not be an Exception")
    except ProcessOutsideSystemTier:
        pass
    assert no_processes_outside_system == ["subprocess"]
    no_processes_outside_system.clear()


@pytest.mark.system
def test_a_system_test_may_start_processes() -> None:
    assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout == "42\n"


class Item:
    """What mark_system reads of a collected test: its module, and where its markers go."""

    def __init__(self, **names: object) -> None:
        self.module = types.ModuleType("tests.example")
        vars(self.module).update(names)
        self.markers: list[str] = []

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker.name)


def test_a_module_using_the_process_helpers_is_in_the_system_tier() -> None:
    from tests import test_cli
    from tests.support import processes

    using = [Item(TRACKER=processes.TRACKER), Item(wait_healthy=processes.wait_healthy), Item(f=test_cli.free_port)]
    not_using = [Item(Path=Path, subprocess=subprocess), Item(TRACKER=["tracker"]), Item()]
    mark_system([*using, *not_using])  # type: ignore[list-item]
    assert [item.markers for item in using] == [["system"]] * 3
    assert [item.markers for item in not_using] == [[]] * 3


def test_the_markers_are_declared() -> None:
    options = tomllib.loads(Path(ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    declared = {marker.split(":")[0] for marker in options["markers"]}
    assert {"system", "deployment"} <= declared


@pytest.mark.xdist_group("tiers-probe")
def test_a_grouped_test_keeps_its_group_under_loadgroup(request: pytest.FixtureRequest) -> None:
    """Under `--dist loadgroup` (the suite's addopts) pytest-xdist sends the tests of a group to one worker by
    the group's name, which it appends to their node ids. pytest 9.2 drops that name, which split every group:
    the modules that share a delivered month set it up again on each worker, and CI took minutes more."""
    if not request.config.getvalue("loadgroup"):
        pytest.skip("not run by a pytest-xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@tiers-probe"), request.node.nodeid
