"""The benchmarks still start: each script of bench/ loads its modules and prints its usage.

A benchmark is run by hand, not in CI; without this, a change to a helper it imports breaks it unnoticed
until someone needs its figures (bench/slow_clients.py imported a function bench/ingest.py no longer had).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.fixtures.paths import ROOT

pytestmark = pytest.mark.system

SCRIPTS = sorted(path for path in (ROOT / "bench").glob("*.py") if not path.name.startswith("_"))


def test_there_are_benchmarks() -> None:
    assert len(SCRIPTS) >= 10, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.stem for path in SCRIPTS])
def test_a_benchmark_loads_and_prints_its_usage(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "usage:" in done.stdout, done.stdout[-2000:]
