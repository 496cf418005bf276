"""`tracker migrate` and the schema at start-up, as a user runs them: real processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.store.test_migrations import contents, load_old_ledger, make_previous_release_ledger, revision_rows, wipe
from tests.support.app import SECRET
from tests.support.processes import TRACKER, clean_env, free_port, wait_healthy
from tracker.store import migrations
from tracker.store.database import derived_schema_outdated, open_engine
from tracker.store.ledger import Ledger


@pytest.fixture
def url_and_env(database_url: str, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """An empty database, and the environment that names it (TRACKER_DATA_DIR's ledger for SQLite)."""
    wipe(database_url)
    if database_url.startswith("sqlite"):
        return database_url, clean_env(TRACKER_DATA_DIR=str(Path(database_url.removeprefix("sqlite:///")).parent))
    return database_url, clean_env(TRACKER_DATA_DIR=str(tmp_path / "var"), TRACKER_DATABASE_URL=database_url)


def tracker(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TRACKER, *arguments], env=env, capture_output=True, text=True, timeout=120)


def test_migrate_creates_an_empty_database_then_has_nothing_to_do(url_and_env: tuple[str, dict[str, str]]) -> None:
    url, env = url_and_env
    head = migrations.head()
    first = tracker(env, "migrate")
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"created the schema at {url}: revision {head}\n"
    again = tracker(env, "migrate")
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"the schema at {url} is up to date: revision {head}\n"


def test_migrate_adopts_a_previous_release_ledger_keeping_every_row(url_and_env: tuple[str, dict[str, str]]) -> None:
    url, env = url_and_env
    before = make_previous_release_ledger(url)
    done = tracker(env, "migrate")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"upgraded the schema at {url} from revision none to {migrations.head()} ")
    assert "the release before migrations made it: checked, then stamped" in done.stdout
    engine = open_engine(url)
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert contents(engine) == before
    finally:
        engine.dispose()
    assert "is up to date" in tracker(env, "migrate").stdout


def test_postgresql_commands_refuse_an_older_schema_until_tracker_migrate(
    url_and_env: tuple[str, dict[str, str]],
) -> None:
    url, env = url_and_env
    if url.startswith("sqlite"):
        pytest.skip("SQLite is upgraded at start-up (tests/store/test_migrations.py)")
    make_previous_release_ledger(url)
    engine = create_engine(url)
    with engine.begin() as conn:  # what a rebuild reads must be real documents: these are not
        conn.execute(text("DELETE FROM observations"))
    engine.dispose()
    refused = tracker(env, "rebuild")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("Error: the database at ")
    assert "run `tracker migrate` (once, from one machine)" in refused.stderr
    assert tracker(env, "migrate").returncode == 0
    rebuilt = tracker(env, "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stdout.startswith("rebuilt from ")


def test_migrate_refuses_a_database_it_does_not_recognise_in_one_line(url_and_env: tuple[str, dict[str, str]]) -> None:
    url, env = url_and_env
    make_previous_release_ledger(url)
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE deliveries"))
    engine.dispose()
    refused = tracker(env, "migrate")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "has tables of the tracker but no deliveries table (table deliveries is missing)" in refused.stderr


def test_migrate_upgrades_an_older_ledger_in_one_line_then_has_nothing_to_do(
    url_and_env: tuple[str, dict[str, str]],
) -> None:
    """The ledger main wrote on 2026-11-30 (06e71d4): refused by PostgreSQL's `tracker run` with advice
    that works; `tracker migrate` keeps its deliveries, rebuilds the rest and says so in one line."""
    url, env = url_and_env
    load_old_ledger("06e71d4", url)
    if url.startswith("postgresql"):
        refused = tracker({**env, "TRACKER_WEBHOOK_SECRET": SECRET}, "run", "--port", str(free_port()))
        assert refused.returncode == 2
        assert refused.stderr.count("\n") == 1 and "run `tracker migrate` (once, from one machine)" in refused.stderr
    done = tracker(env, "migrate")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1
    assert done.stdout.startswith(
        f"upgraded the ledger at {url} from an unversioned schema (its last delivery 2026-05-31) to revision "
        f"{migrations.head()}: kept 372 deliveries and 0 observations, rebuilt the derived tables"
    )
    backup = Path(f"{url.removeprefix('sqlite:///')}.before-upgrade-")
    if url.startswith("sqlite"):
        kept_at = done.stdout.split("; the old file is kept at ")[1].strip()
        assert kept_at.startswith(str(backup)) and Path(kept_at).is_file()
    again = tracker(env, "migrate")
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"the schema at {url} is up to date: revision {migrations.head()}\n"
    report = tracker(env, "render", "--repo", "NVIDIA/Megatron-LM", "--month", "2026-05", "--format", "json")
    assert report.returncode == 0, report.stderr
    document = json.loads(report.stdout)  # rebuilt: every PR of the month, every head classified
    assert (document["repo"], document["stats"]["merged"], document["pending_classification"]) == (
        "NVIDIA/Megatron-LM",
        72,
        0,
    )


def test_tracker_run_carries_an_older_sqlite_ledger_over_at_start_in_one_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    url = f"sqlite:///{data_dir / 'ledger.sqlite3'}"
    load_old_ledger("06e71d4", url)
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), TRACKER_RECONCILE_EVERY="0")
    port = free_port()
    with (tmp_path / "run.log").open("w") as log:
        process = subprocess.Popen([*TRACKER, "run", "--port", str(port), "--workers", "1"], env=env, stderr=log)
        try:
            wait_healthy(f"http://127.0.0.1:{port}", timeout=60)
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0
    lines = (tmp_path / "run.log").read_text().splitlines()
    said = [line for line in lines if "upgraded the ledger at" in line]
    assert len(said) == 1, lines
    assert (
        f"upgraded the ledger at {url} from an unversioned schema (its last delivery 2026-05-31) to revision "
        f"{migrations.head()}: kept 372 deliveries and 0 observations, the derived tables are rebuilt from them next; "
        f"the old file is kept at {data_dir / 'ledger.sqlite3'}.before-upgrade-"
    ) in said[0]
    engine = open_engine(url)
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert derived_schema_outdated(engine) is False  # rebuilt at start
        assert Ledger(engine).counts().received == 372
    finally:
        engine.dispose()


def test_tracker_run_upgrades_a_previous_release_sqlite_ledger_at_start(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    url = f"sqlite:///{data_dir / 'ledger.sqlite3'}"
    data_dir.mkdir()
    make_previous_release_ledger(url)
    engine = create_engine(url)
    with engine.begin() as conn:  # nothing for the workers to do: the ledger stays as it was
        conn.execute(text("UPDATE deliveries SET status = 'processed'"))
    kept = ("deliveries", "hooks", "observations", "pr_facts", "pr_versions", "month_records", "narration_spend")
    before = {name: rows for name, rows in contents(engine).items() if name in kept}
    engine.dispose()
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), TRACKER_RECONCILE_EVERY="0")
    port = free_port()
    process = subprocess.Popen([*TRACKER, "run", "--port", str(port), "--workers", "1"], env=env)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", timeout=60)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    engine = open_engine(url)
    try:
        assert revision_rows(engine) == [migrations.head()]
        assert {name: rows for name, rows in contents(engine).items() if name in kept} == before
    finally:
        engine.dispose()
