"""Make tests/fixtures/ledgers/: ledgers written by earlier commits of the tracker, by their own code.

For each commit: a git worktree of it and a virtualenv there (`pip install -e`), then that commit's own
code stores tracker/demo's sample month: its heads' files (`HeadStore.store`, as its fetch job does), its
deliveries (`Ledger.store`, as its webhook does) and, where it has backfills, a few PRs as a backfill reads
them (`HistoryStore.record`); then it derives everything from them (its `tracker rebuild`) and, where it has
`tracker finalize`, freezes the month's record; once on SQLite and once on PostgreSQL. Saved:
`<commit>.sqlite3.gz` (the SQLite file) and `<commit>.postgresql.sql.gz` (`pg_dump --no-owner
--no-privileges --inserts` of the PostgreSQL database). The worktrees are removed at the end.

    .venv/bin/python tools/make_old_ledgers.py --postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres

tests/store/test_migrations.py upgrades each of them and compares the month's report with a fresh ledger's.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from tracker.demo import read_bundle

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "ledgers"
# Commits where tracker/store/schema.py (tracker/schema.py before 60f9217) changed, before b7ee83b brought
# migrations: 06e71d4 (main as of 2026-11-30, before the month records), ae6da5f (records, publications),
# 4a5b015 (observations, backfill runs, coverage, installations), e146a80 (the narrator's prose).
REPOSITORY, MONTH = "NVIDIA/Megatron-LM", "2026-05"  # the sample's
OBSERVED = 8  # PRs a backfill read, on the commits that have backfills
COMMITS = ("06e71d4", "ae6da5f", "4a5b015", "e146a80")

# Run by the old commit's interpreter, in its worktree: store the sample as its own code did.
DRIVER = """
import importlib, json, sys, base64
from dataclasses import fields

def first(*names):
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            pass
    raise SystemExit(f"none of {names}")

database = first("tracker.store.database", "tracker.database")
ledger_module = first("tracker.store.ledger", "tracker.ledger")
heads_module = first("tracker.store.heads", "tracker.heads")
classify = first("tracker.core.classify", "tracker.classify")
from tracker.config import load_config
from tracker.settings import load_settings

engine = database.connect(sys.argv[1])
sample = json.load(open(sys.argv[2]))
rules = load_config(load_settings()).rules_for(sample["repository"])
store = heads_module.HeadStore(engine)
for head in sample["heads"]:
    files = [
        classify.ChangedFile(
            path=item["filename"],
            status=item.get("status", "modified"),
            previous_path=item.get("previous_filename"),
            additions=int(item.get("additions") or 0),
            deletions=int(item.get("deletions") or 0),
            patch=item.get("patch"),
        )
        for item in head["files"]
    ]
    key = sample["repository"].lower()
    store.store(key, head["number"], head["sha"], files, truncated=False, source="pulls", rules=rules)
ledger = ledger_module.Ledger(engine)
known = {field.name for field in fields(ledger_module.Delivery)}
observed = {}  # a few PRs as a backfill read them (the last state their deliveries show), where it could
for item in sample["deliveries"]:
    body = base64.b64decode(item["body"])
    document = json.loads(body)
    values = {
        "id": item["id"],
        "event": item["event"],
        "action": document.get("action"),
        "repo": document["repository"]["full_name"],
        "hook_id": "1",
        "content_type": "application/json",
        "headers": {"X-GitHub-Event": item["event"], "X-GitHub-Delivery": item["id"], "X-GitHub-Hook-ID": "1"},
        "body": body,
        "received_at": item["received_at"],
    }
    ledger.store(ledger_module.Delivery(**{k: v for k, v in values.items() if k in known}))
    if document["number"] in sample["observed"]:
        observed[document["number"]] = document["pull_request"]
try:
    history = importlib.import_module("tracker.history.derive")
    history_store = importlib.import_module("tracker.history.store")
except ModuleNotFoundError:
    history = None
if history is not None:
    config = load_config(load_settings())
    for number, pull_request in sorted(observed.items()):
        document = history.observation_document(sample["repository"], sample["range"], pull_request, [])
        oid = history.observation_id("backfill", sample["repository"], number, document)
        derived = history.derive_history(oid, document, config.timezone_for)
        history_store.HistoryStore(engine).record(oid, "backfill", sample["repository"], number, document, derived)
engine.dispose()
"""


def run(command: list[str], **kwargs: object) -> None:
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]


def deliveries_file(folder: Path) -> Path:
    path = folder / "sample.json"
    bundle = read_bundle()
    deliveries = [
        {"id": d.delivery_id, "event": d.event, "received_at": d.received_at, "body": base64.b64encode(d.body).decode()}
        for d in bundle.deliveries
    ]
    heads = [
        {"number": story.number, "sha": sha, "files": list(files)}
        for story in bundle.stories
        for sha, files in story.heads.items()
    ]
    start = datetime.strptime(bundle.month, "%Y-%m").replace(tzinfo=UTC)
    end = (start + timedelta(days=32)).replace(day=1)
    sample = {
        "repository": bundle.repository,
        "deliveries": deliveries,
        "heads": heads,
        "observed": sorted(story.number for story in bundle.stories)[:OBSERVED],
        "range": [int(start.timestamp()), int(end.timestamp())],
    }
    path.write_text(json.dumps(sample))
    return path


def recreate(server: str, name: str) -> str:
    url = make_url(server)
    with psycopg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, dbname=url.database, autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.set(database=name).render_as_string(hide_password=False)


def make(commit: str, folder: Path, deliveries: Path, server: str, database: str) -> None:
    tree = folder / commit
    run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit], stdout=subprocess.DEVNULL)
    try:
        run([sys.executable, "-m", "venv", str(tree / ".venv")])
        # PostgreSQL's driver became an extra of the package at some commits: installed either way.
        run([str(tree / ".venv/bin/pip"), "install", "-q", "-e", str(tree), "psycopg[binary]"])
        sqlite_file = folder / f"{commit}.sqlite3"
        postgres_url = recreate(server, database)
        for url in (f"sqlite:///{sqlite_file}", postgres_url):
            env = {
                "PATH": os.environ["PATH"],
                "HOME": str(folder),
                "TRACKER_DATA_DIR": str(folder / f"var-{commit}"),
                "TRACKER_DATABASE_URL": url,
            }
            python = str(tree / ".venv/bin/python")
            run([python, "-c", DRIVER, url, str(deliveries)], cwd=tree, env=env)
            run([python, "-m", "tracker", "rebuild"], cwd=tree, env=env, stderr=subprocess.DEVNULL)
            if "def finalize(" in (tree / "tracker" / "cli.py").read_text():  # a frozen record of the month
                run([python, "-m", "tracker", "finalize", "--repo", REPOSITORY, "--month", MONTH], cwd=tree, env=env)
        with sqlite3.connect(sqlite_file) as conn:  # one file, without the write-ahead log beside it
            conn.execute("PRAGMA journal_mode=DELETE")
        (OUT / f"{commit}.sqlite3.gz").write_bytes(gzip.compress(sqlite_file.read_bytes(), mtime=0))
        # Rows as INSERTs, not COPY: the tests run the dump through the driver, with no psql needed.
        libpq_url = make_url(postgres_url).set(drivername="postgresql").render_as_string(hide_password=False)
        dump = subprocess.run(
            ["pg_dump", "--no-owner", "--no-privileges", "--inserts", libpq_url], check=True, capture_output=True
        ).stdout
        (OUT / f"{commit}.postgresql.sql.gz").write_bytes(gzip.compress(dump, mtime=0))
    finally:
        run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="a PostgreSQL server's URL (any database on it)")
    parser.add_argument("--database", default="tracker_old_ledger", help="the scratch database made on it")
    parser.add_argument("commits", nargs="*", default=list(COMMITS))
    arguments = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="old-ledgers-"))
    try:
        deliveries = deliveries_file(folder)
        for commit in arguments.commits:
            make(commit, folder, deliveries, arguments.postgres, arguments.database)
            print(f"{commit}: {OUT / commit}.sqlite3.gz, {OUT / commit}.postgresql.sql.gz")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
