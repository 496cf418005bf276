"""A non-editable install (`pip install .` into a fresh virtual environment, as a container image
does) ships everything a render needs: the report templates and the index page are package data.

The ledger is written here with the project's code; the report is rendered by the installed
`tracker` command, run from a directory outside the clone, so nothing is read from the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import ROOT, needs_shared
from tracker.core.classify import ChangedFile, Rules
from tracker.core.derive import derive
from tracker.store.database import connect
from tracker.store.heads import HeadStore
from tracker.store.ledger import Ledger
from tracker.store.month_state import MonthState

REPO = "octo-org/octo-repo"


def write_ledger(url: str) -> None:
    """Two PRs of September 2026: #1 merged into main, #2 still open on dev; both change code."""
    stories = [
        PullRequestStory(1, datetime(2026, 9, 2, 3, tzinfo=UTC), repo=REPO, title="Add the flux capacitor")
        .opened()
        .merged(datetime(2026, 9, 5, 3, tzinfo=UTC)),
        PullRequestStory(2, datetime(2026, 9, 8, 3, tzinfo=UTC), repo=REPO, base="dev", title="Faster warp core")
        .opened()
        .pushed(datetime(2026, 9, 9, 3, tzinfo=UTC)),
    ]
    engine = connect(url)
    ledger, state, heads = Ledger(engine), MonthState(engine), HeadStore(engine)
    try:
        for story in stories:
            for made in story.deliveries:
                assert ledger.store(made.as_ledger_delivery())
                derivation = derive(made.delivery_id, "application/json", made.body, lambda _: "UTC")
                state.apply(made.delivery_id, derivation)
                if derivation.wanted_head is not None:
                    path = f"src/part_{story.number}.py"
                    heads.store(
                        derivation.repo,
                        story.number,
                        derivation.wanted_head[0],
                        [ChangedFile(path, additions=3)],
                        truncated=False,
                        source="pulls",
                        rules=Rules(),
                    )
    finally:
        engine.dispose()


# Its tests share one fresh install (half a minute or more): in one test process (xdist_group), and kept
# for the session there, so that it is made once even when other modules' tests run between them.
pytestmark = [pytest.mark.xdist_group("install"), pytest.mark.system]


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the project installed from a copy of its packaged files."""
    where = tmp_path_factory.mktemp("install")
    source = where / "source"
    source.mkdir()
    for name in ("tracker", "workers"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    environment = where / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(source)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.rmtree(source)  # the installed copy must stand alone
    return environment


@needs_shared
def test_a_plain_install_renders_reports(installed: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    write_ledger(url)
    env = {
        "PATH": f"{installed / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TRACKER_DATABASE_URL": url,
        "TRACKER_TIMEZONE": "UTC",
    }
    # The installed package, not the clone: its templates are package data in site-packages.
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import tracker.reports.render as r; print(r.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert str(installed) in where and not where.startswith(str(ROOT))

    def render(*args: str) -> str:
        command = [str(installed / "bin" / "tracker"), "render", "--repo", REPO, "--month", "2026-09", *args]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    english = render("--cutoff", "2026-09-10", "--format", "md")
    assert english.startswith("# ")
    assert "(through September 10, 2026)" in english.splitlines()[0]
    assert f"[main #1](https://github.com/{REPO}/pull/1)" in english
    assert f"[dev #2](https://github.com/{REPO}/pull/2)" in english
    chinese = render("--cutoff", "2026-09-10", "--lang", "zh-CN", "--format", "md")
    assert "（截至2026-09-10）" in chinese.splitlines()[0]
    page = render("--cutoff", "2026-09-10", "--format", "html")
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert "Add the flux capacitor" in page
    document = json.loads(render("--cutoff", "2026-09-10", "--format", "json"))
    assert document["stats"]["merged"] == 1


def test_the_index_page_template_is_installed(installed: Path, tmp_path: Path) -> None:
    script = (
        "from tracker.settings import load_settings\n"
        "from tracker.web.app import create_app\n"
        "import sys\n"
        "app = create_app(load_settings(webhook_secret='s', data_dir=sys.argv[1], redis_url=sys.argv[2]))\n"
        "print(app.jinja_env.get_template('index.html').filename)\n"
    )
    done = subprocess.run(
        [str(installed / "bin" / "python"), "-c", script, str(tmp_path / "var"), "redis://127.0.0.1:1/0"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(installed)), done.stdout
    assert os.path.basename(done.stdout.strip()) == "index.html"
