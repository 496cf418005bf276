"""`tracker backfill` and an older release's ledger, as a user runs them: real processes."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from sqlalchemy import delete

from bench.fixtures.paths import require_shared

require_shared()  # the fake GitHub (imported below) reads GitHub's example answers from ../shared as it loads

from bench.fixtures.fake_github import Scripted  # noqa: E402
from bench.fixtures.scenario import REPO, megatron_month  # noqa: E402
from bench.fixtures.world import publish_world  # noqa: E402
from tests.support.app import SECRET  # noqa: E402
from tests.support.processes import TRACKER, clean_env, free_port, wait_healthy  # noqa: E402
from tests.support.tracking import Tracker  # noqa: E402
from tracker.config import TrackerConfig  # noqa: E402
from tracker.store.database import connect, derived_schema_outdated  # noqa: E402
from tracker.store.heads import HeadStore  # noqa: E402
from tracker.store.ledger import Ledger  # noqa: E402
from tracker.store.month_state import MonthState  # noqa: E402
from tracker.store.schema import ledger_meta  # noqa: E402


def test_backfill_on_the_cli_shows_progress_resumes_and_repeats_cheaply(data_dir: Path, github: Any) -> None:  # noqa: F811
    scenario = megatron_month(count=12, still_open=2)
    publish_world(github, scenario.stories, {(n, sha): p for n, sha, p in scenario.head_files()})
    env = clean_env(TRACKER_DATA_DIR=str(data_dir), GITHUB_API_URL=github.url)
    command = [*TRACKER, "backfill", "--repo", REPO, "--month", "2026-05"]
    first = subprocess.run(command, env=env, capture_output=True, timeout=120)
    assert first.returncode == 0, first.stderr
    out = first.stdout.decode()
    assert "backfilling NVIDIA/Megatron-LM" in out  # the progress bar's label
    assert f"backfilled {REPO} from 2026-04-30T16:00:00Z to 2026-05-31T16:00:00Z" in out
    snapshot = subprocess.run(
        [*TRACKER, "snapshot", "--repo", REPO, "--month", "2026-05", "--cutoff", "2026-05-31"],
        env=env,
        capture_output=True,
        check=True,
    )
    document = json.loads(snapshot.stdout)
    merged = {s.number for s in scenario.stories if s._merged_at}
    assert {pr["number"] for pr in document["pull_requests"] if pr["state_at_cutoff"] == "merged"} == merged
    assert document["coverage"] == {"complete": True, "missing": []}
    again = subprocess.run(command, env=env, capture_output=True, timeout=120, check=True).stdout.decode()
    requests = int(again.split(" PRs, ")[1].split(" GitHub requests")[0])
    assert f"({requests} answered 304 Not Modified)" in again  # nothing changed on GitHub: every answer a 304


def test_backfill_errors_are_one_line(data_dir: Path, github: Any) -> None:  # noqa: F811
    env = clean_env(TRACKER_DATA_DIR=str(data_dir), GITHUB_API_URL=github.url)
    for arguments, message in (
        (["--repo", REPO, "--month", "2026-13"], "is not a month"),
        (["--repo", REPO], "give either a month"),
        (["--repo", REPO, "--month", "2026-05", "--since", "2026-05-01"], "not both"),
        (["--repo", "not a repo", "--month", "2026-05"], "--repo is not a GitHub owner/name"),
        (["--repo", REPO, "--month", "2099-01"], "has not begun"),
    ):
        done = subprocess.run([*TRACKER, "backfill", *arguments], env=env, capture_output=True, timeout=60)
        assert done.returncode == 1, (arguments, done.stdout)
        error = done.stderr.decode()
        assert message in error and "Traceback" not in error and len(error.strip().splitlines()) == 1, error


def test_a_broken_github_is_a_one_line_error(data_dir: Path, github: Any) -> None:  # noqa: F811
    """Malformed JSON, wrong types, another origin: `Error: …` and exit code 1, never a traceback."""
    listed: dict[str, Any] = {"number": 4503, "state": "open"}
    listed |= {"created_at": "2026-05-03T08:00:00Z", "updated_at": "2026-05-04T08:00:00Z"}
    github.set_timeline(REPO, 4503, [])
    env = clean_env(TRACKER_DATA_DIR=str(data_dir), GITHUB_API_URL=github.url, GITHUB_TOKEN="ghp_secret-for-tests")
    listing = (r"/pulls$", Scripted(200, body=[listed]))
    elsewhere = {"Link": '<http://127.0.0.1:9/repos/x/y/pulls?page=2>; rel="next"'}
    for scripts, message in (
        ([(r"/pulls$", Scripted(200, raw=b'[{"number": 1,'))], f"GitHub's answer for /repos/{REPO}/pulls is not JSON"),
        ([(r"/pulls$", Scripted(200, body={"total_count": 1}))], "answered an object where its API documents a list"),
        ([(r"/pulls$", Scripted(200, body=[listed | {"updated_at": 1}]))], "'updated_at' as a number, not a string"),
        ([(r"/pulls$", Scripted(200, body=[listed | {"user": "octocat"}]))], "pull_request.user"),
        ([listing, (r"/timeline$", Scripted(200, body=[{"event": "closed", "created_at": []}]))], "timeline.0"),
        (
            [(r"/pulls$", Scripted(200, elsewhere, []))],
            "GitHub's answer pointed to http://127.0.0.1:9, another origin than the configured API",
        ),
    ):
        for path, answer in scripts:
            github.script(path, answer)
        done = subprocess.run(
            [*TRACKER, "backfill", "--repo", REPO, "--month", "2026-05"], env=env, capture_output=True, timeout=60
        )
        error = done.stderr.decode()
        assert done.returncode == 1, (message, error)
        assert message in error and "Traceback" not in error and len(error.strip().splitlines()) == 1, error
        assert error.startswith("Error: ") and "ghp_secret-for-tests" not in error


def test_a_ledger_from_an_older_release_is_refused_then_rebuilt_by_tracker_run(
    data_dir: Path,  # noqa: F811
    github: Any,
) -> None:
    engine = connect(f"sqlite:///{data_dir / 'ledger.sqlite3'}")
    tracker = Tracker(Ledger(engine), MonthState(engine), HeadStore(engine), TrackerConfig())
    story = megatron_month(count=3, still_open=0).stories[0]
    tracker.deliver(story.deliveries)
    with engine.begin() as conn:  # what a ledger made before the derived tables changed looks like
        conn.execute(delete(ledger_meta).where(ledger_meta.c.key == "derived_schema"))
    assert derived_schema_outdated(engine)
    engine.dispose()
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), GITHUB_API_URL=github.url)
    refused = subprocess.run(
        [*TRACKER, "render", "--repo", REPO, "--month", "2026-05"], env=env, capture_output=True, timeout=60
    )
    assert refused.returncode == 2 and b"run `tracker rebuild`" in refused.stderr  # a step first: a settings error
    port = free_port()
    process = subprocess.Popen([*TRACKER, "run", "--port", str(port), "--workers", "1"], env=env)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", timeout=60)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    engine = connect(f"sqlite:///{data_dir / 'ledger.sqlite3'}")
    try:
        assert not derived_schema_outdated(engine)
    finally:
        engine.dispose()
    rendered = subprocess.run(
        [*TRACKER, "render", "--repo", REPO, "--month", "2026-05", "--format", "json"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert story.number in {pr["number"] for pr in json.loads(rendered.stdout)["pull_requests"]}
