"""The layers of ARCHITECTURE.md, checked with import-linter's contracts in pyproject.toml: arrows
point one way, the core imports no I/O library, and no package has an import circle. The checker
itself is shown to catch each kind of break on a copy of the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.fixtures.paths import ROOT

pytestmark = pytest.mark.system

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=project,
        env={"PYTHONPATH": str(project), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_package_keeps_its_contracts() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 kept, 0 broken" in done.stdout


@pytest.fixture
def copy_of_the_package(tmp_path: Path) -> Path:
    for name in ("tracker", "workers"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # The core reaching up to the web layer (a lazy import counts too).
        (
            "tracker/core/window.py",
            "def _up() -> None:\n    from tracker.web import context  # noqa\n",
            "Layers point one way",
        ),
        # Storage reaching up to the reports.
        ("tracker/store/ledger.py", "from tracker.reports import loading  # noqa\n", "Layers point one way"),
        # The reports and the GitHub client, on one layer, depending on each other.
        (
            "tracker/github/quota.py",
            "from tracker.reports import render  # noqa\n",
            "Reports and the GitHub client know nothing of each other",
        ),
        # A feature's store reaching up to its jobs, and its pure derivation to a database library.
        ("tracker/history/store.py", "from tracker.history import jobs  # noqa\n", "Layers point one way"),
        ("tracker/narration/schema.py", "import sqlalchemy  # noqa\n", "The core is pure"),
        # The pure core importing a database library.
        ("tracker/core/stats.py", "import sqlalchemy  # noqa\n", "The core is pure"),
        # A blueprint importing the app factory that imports it: a circle inside tracker.web.
        (
            "tracker/web/api.py",
            "def _factory() -> None:\n    from tracker.web import app  # noqa\n",
            "No import circles",
        ),
    ],
)
def test_the_check_catches_a_break(copy_of_the_package: Path, module: str, line: str, broken: str) -> None:
    path = copy_of_the_package / module
    path.write_text(path.read_text() + "\n\n" + line)
    done = lint_imports(copy_of_the_package)
    assert done.returncode != 0, done.stdout
    assert f"{broken} BROKEN" in done.stdout, done.stdout


# The name of every job RQ runs, as Redis stores it with each queued or scheduled job. A job queued by one
# release runs under the next, so a name never changes: this list is written by hand, not read from the code.
STABLE_JOB_NAMES = {
    "workers.drain.drain_deliveries",
    "workers.jobs.process_delivery",
    "workers.jobs.fetch_head_files",
    "workers.jobs.fetch_heads",
    "workers.jobs.finalize_month",
    "workers.jobs.finalize_group_month",
    "workers.jobs.due_work",
    "workers.jobs.publish_month",
    "workers.jobs.publish_group_month",
    "workers.jobs.narrate_month",
    "workers.jobs.read_history_job",
    "workers.jobs.warm_month",
}


def test_every_job_keeps_its_name_and_rq_finds_it() -> None:
    from rq.utils import import_attribute

    from tracker import queue

    names = {value for name, value in vars(queue).items() if name.endswith("_FUNCTION")}
    assert names == STABLE_JOB_NAMES
    for name in sorted(names):
        function = import_attribute(name)  # as a worker resolves a job it takes from Redis
        assert callable(function) and function.__module__ == name.rsplit(".", 1)[0], name
