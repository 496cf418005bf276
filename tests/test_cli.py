"""The `tracker` command as a user runs it: real processes, real HTTP on loopback."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import WEBHOOKS, needs_shared
from tests.support.app import SECRET, show_head_to_github
from tests.support.processes import TRACKER, classified_snapshot, clean_env, free_port, wait_healthy, wait_processed
from tracker.web.signature import sign


def show_to_github(github: Any, *paths: Path) -> None:
    for path in paths:
        if path.name.startswith("pull_request."):
            show_head_to_github(path.read_bytes())


@pytest.fixture
def service(data_dir: Path, github: Any) -> Iterator[tuple[str, dict[str, str]]]:
    """`tracker run` on the embedded defaults: SQLite ledger, embedded Redis, no REDIS_URL."""
    port = free_port()
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), GITHUB_API_URL=github.url)
    process = subprocess.Popen([*TRACKER, "run", "--port", str(port), "--workers", "1"], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield base, env
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        assert not (data_dir / "redis" / "redis.sock").exists(), "the embedded Redis was not stopped"


@needs_shared
def test_run_on_embedded_defaults_replay_and_query(service: tuple[str, dict[str, str]], data_dir: Path) -> None:
    base, env = service
    show_to_github(None, *WEBHOOKS.glob("*.json"))
    files = sorted(str(p) for p in WEBHOOKS.glob("*.json"))
    replay = subprocess.run([*TRACKER, "replay", *files, "--url", f"{base}/webhook"], env=env, capture_output=True)
    assert replay.returncode == 0, replay.stderr
    pull_requests = len(list(WEBHOOKS.glob("pull_request.*.json")))
    assert f"{pull_requests} × 202" in replay.stdout.decode()
    deliveries = wait_processed(base, pull_requests)
    assert deliveries == {"received": pull_requests, "processed": pull_requests, "failed": 0, "pending": 0}
    assert httpx.get(f"{base}/api/v1/status").json()["hooks"][0]["hook_id"] == "109948940"

    # replaying again is a redelivery: stored once
    again = subprocess.run([*TRACKER, "replay", *files, "--url", f"{base}/webhook"], env=env, capture_output=True)
    assert f"{pull_requests + 3} × 200" in again.stdout.decode()  # the pull requests, and 3 pings

    classified_snapshot(f"{base}/api/v1/repos/Codertocat/Hello-World/months/2019-05")
    api = httpx.get(f"{base}/api/v1/repos/Codertocat/Hello-World/months/2019-05").content
    cli = subprocess.run(
        [*TRACKER, "snapshot", "--repo", "Codertocat/Hello-World", "--month", "2019-05"],
        env=env,
        capture_output=True,
        check=True,
    ).stdout
    assert api == cli
    assert json.loads(api)["stats"]["opened"] == 1


@needs_shared
def test_oversized_chunked_body_is_refused_by_the_real_server(service: tuple[str, dict[str, str]]) -> None:
    base, _ = service

    def chunks() -> Iterator[bytes]:
        for _ in range(26):
            yield b"x" * (1024 * 1024)

    headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "huge", "X-Hub-Signature-256": "sha256=00"}
    answer = httpx.post(f"{base}/webhook", content=chunks(), headers=headers, timeout=30)
    assert answer.status_code == 413
    assert httpx.get(f"{base}/api/v1/status").json()["deliveries"]["received"] == 0


@needs_shared
def test_a_chunked_body_of_exactly_25_mb_is_accepted_by_the_real_server(service: tuple[str, dict[str, str]]) -> None:
    from tracker.web.context import MAX_BODY_BYTES

    base, _ = service
    document = (WEBHOOKS / "pull_request.opened.json").read_bytes()
    body = document + b" " * (MAX_BODY_BYTES - len(document))  # JSON allows trailing white space

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 1024 * 1024):
            yield body[start : start + 1024 * 1024]

    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": "exactly-25-mb",
        "X-Hub-Signature-256": sign(SECRET.encode(), body),
    }
    answer = httpx.post(f"{base}/webhook", content=chunks(), headers=headers, timeout=30)
    assert answer.status_code == 202, answer.text
    assert httpx.get(f"{base}/api/v1/status").json()["deliveries"]["received"] == 1


@needs_shared
def test_restart_keeps_everything(data_dir: Path, github: Any) -> None:
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), GITHUB_API_URL=github.url)
    story = PullRequestStory(5, __import__("datetime").datetime(2026, 9, 2, tzinfo=__import__("datetime").UTC))
    story.opened()
    body = story.deliveries[0].body
    show_head_to_github(body)
    for round_number in range(2):
        port = free_port()
        process = subprocess.Popen([*TRACKER, "run", "--port", str(port), "--workers", "1"], env=env)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(base)
            if round_number == 0:
                headers = {
                    "Content-Type": "application/json",
                    "X-GitHub-Event": "pull_request",
                    "X-GitHub-Delivery": "restart-1",
                    "X-Hub-Signature-256": sign(SECRET.encode(), body),
                }
                assert httpx.post(f"{base}/webhook", content=body, headers=headers).status_code == 202
            assert wait_processed(base, 1)["processed"] == 1
            snapshot = classified_snapshot(f"{base}/api/v1/repos/NVIDIA/Megatron-LM/months/2026-09")
            assert snapshot["stats"]["opened"] == 1
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0


@needs_shared
def test_replay_jsonl_and_rebuild_from_the_cli(data_dir: Path, redis_url: str, github: Any) -> None:
    env = clean_env(
        TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), REDIS_URL=redis_url, GITHUB_API_URL=github.url
    )
    records = data_dir / "september.jsonl"
    dt = __import__("datetime")
    story = (
        PullRequestStory(9, dt.datetime(2026, 9, 2, tzinfo=dt.UTC))
        .opened()
        .pushed(dt.datetime(2026, 9, 3, tzinfo=dt.UTC))
        .merged(dt.datetime(2026, 9, 4, tzinfo=dt.UTC))
    )
    records.write_text("".join(json.dumps(d.as_record()) + "\n" for d in story.deliveries))
    for d in story.deliveries:
        show_head_to_github(d.body)
    port = free_port()
    web = subprocess.Popen([*TRACKER, "web", "--port", str(port), "--processes", "1"], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        replay = subprocess.run(
            [*TRACKER, "replay", str(records), "--url", f"{base}/webhook"], env=env, capture_output=True, check=True
        )
        assert "3 × 202" in replay.stdout.decode()
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(30)
    subprocess.run([*TRACKER, "worker", "--burst"], env=env, check=True, capture_output=True)
    snapshot_command = [*TRACKER, "snapshot", "--repo", "NVIDIA/Megatron-LM", "--month", "2026-09"]
    before = subprocess.run(snapshot_command, env=env, capture_output=True, check=True).stdout
    assert json.loads(before)["stats"] == {"opened": 1, "merged": 1, "closed_unmerged": 0, "active_at_cutoff": 0}
    rebuilt = subprocess.run([*TRACKER, "rebuild"], env=env, capture_output=True, check=True)
    assert "rebuilt from 3 deliveries; 0 failed; 2 heads reclassified" in rebuilt.stdout.decode()
    assert subprocess.run(snapshot_command, env=env, capture_output=True, check=True).stdout == before


@needs_shared
def test_replay_signs_with_the_secret(data_dir: Path, redis_url: str) -> None:
    """A replay with the wrong secret is refused by the server and reported."""
    port = free_port()
    server_env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), REDIS_URL=redis_url)
    web = subprocess.Popen([*TRACKER, "web", "--port", str(port), "--processes", "1"], env=server_env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        wrong = {**server_env, "TRACKER_WEBHOOK_SECRET": "not-it"}
        replay = subprocess.run(
            [*TRACKER, "replay", str(WEBHOOKS / "pull_request.opened.json"), "--url", f"{base}/webhook"],
            env=wrong,
            capture_output=True,
        )
        assert replay.returncode == 1
        assert "401" in replay.stderr.decode()
        assert httpx.get(f"{base}/api/v1/status").json()["deliveries"]["received"] == 0
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(30)


@needs_shared
@pytest.mark.parametrize("command", [["web"], ["run"], ["replay", "--url", "http://127.0.0.1:1/webhook"]])
def test_a_missing_secret_is_a_clear_start_up_error(data_dir: Path, command: list[str]) -> None:
    args = [*TRACKER, *command]
    if command[0] == "replay":
        args.append(str(WEBHOOKS / "pull_request.opened.json"))
    result = subprocess.run(args, env=clean_env(TRACKER_DATA_DIR=str(data_dir)), capture_output=True, timeout=60)
    assert result.returncode != 0
    assert "TRACKER_WEBHOOK_SECRET is not set" in result.stderr.decode()


def test_worker_without_redis_says_what_to_do(data_dir: Path) -> None:
    result = subprocess.run(
        [*TRACKER, "worker"], env=clean_env(TRACKER_DATA_DIR=str(data_dir)), capture_output=True, timeout=60
    )
    assert result.returncode != 0
    message = result.stderr.decode()
    assert "REDIS_URL is not set" in message
    assert "tracker run" in message


def test_bad_month_on_the_cli(data_dir: Path) -> None:
    result = subprocess.run(
        [*TRACKER, "snapshot", "--repo", "a/b", "--month", "2026-13"],
        env=clean_env(TRACKER_DATA_DIR=str(data_dir)),
        capture_output=True,
    )
    assert result.returncode != 0
    assert "no deliveries have been received for a/b" in result.stderr.decode()


@pytest.mark.parametrize(
    ("command", "needs"),
    [
        (["render", "--repo", "a/b", "--month", "2026-09"], "config"),
        (["rebuild"], "config"),
        (["sweep"], "redis"),
        (["retry-failed"], "redis"),
        (["worker", "--burst"], "redis"),
    ],
)
def test_settings_errors_are_one_line_for_every_command(data_dir: Path, command: list[str], needs: str) -> None:
    """Every command gets its settings and services through one helper (tracker.cli.with_services):
    a problem is one line that says what to do, never a traceback."""
    env = clean_env(TRACKER_DATA_DIR=str(data_dir))
    if needs == "config":
        env["TRACKER_CONFIG"] = str(data_dir / "missing.yaml")
    result = subprocess.run([*TRACKER, *command], env=env, capture_output=True, timeout=60)
    assert result.returncode == 2  # the settings must change (tracker.cli: 2 for settings, 1 for failures)
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    expected = "missing.yaml, which does not exist" if needs == "config" else "REDIS_URL is not set"
    assert expected in lines[0]


def test_version() -> None:
    from tracker import __version__

    result = subprocess.run([*TRACKER, "--version"], capture_output=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout.decode().strip() == f"tracker, version {__version__}"


@needs_shared
def test_finalize_on_the_cli_records_the_month_and_render_serves_it(data_dir: Path) -> None:
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from tests.support.tracking import Tracker
    from tracker.config import TrackerConfig
    from tracker.store.database import connect
    from tracker.store.heads import HeadStore
    from tracker.store.ledger import Ledger
    from tracker.store.month_state import MonthState

    engine = connect(f"sqlite:///{data_dir / 'var' / 'ledger.sqlite3'}")
    tracker = Tracker(Ledger(engine), MonthState(engine), HeadStore(engine), TrackerConfig())
    story = PullRequestStory(1, datetime(2026, 7, 6, 2, tzinfo=UTC), repo="octo-org/octo-repo", title="Data loader")
    tracker.deliver(story.opened().merged(datetime(2026, 7, 9, 2, tzinfo=UTC)).deliveries)
    tracker.give_files({1: ["src/loader.py"]})
    engine.dispose()
    env = clean_env(TRACKER_DATA_DIR=str(data_dir / "var"))
    base = [*TRACKER, "finalize", "--repo", "octo-org/octo-repo"]
    done = subprocess.run([*base, "--month", "2026-07"], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert b"2026-07 of octo-org/octo-repo recorded: revision 1" in done.stdout
    again = subprocess.run([*base, "--month", "2026-07"], env=env, capture_output=True, timeout=60)
    assert b"recorded already (revision 1); --force adds one" in again.stdout
    # The month running now in the repository's time zone (the default, Asia/Shanghai), not in UTC.
    current = datetime.now(ZoneInfo("Asia/Shanghai")).strftime("%Y-%m")
    refused = subprocess.run([*base, "--month", current], env=env, capture_output=True, timeout=60)
    assert refused.returncode == 1
    assert b"has not ended yet" in refused.stderr or b"has not started" in refused.stderr
    rendered = subprocess.run(
        [*TRACKER, "render", "--repo", "octo-org/octo-repo", "--month", "2026-07", "--format", "json"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert rendered.returncode == 0
    assert json.loads(rendered.stdout)["final"] is True
    # A late delivery for July: the record, and so `tracker render`, stays byte for byte the same.
    engine = connect(f"sqlite:///{data_dir / 'var' / 'ledger.sqlite3'}")
    tracker = Tracker(Ledger(engine), MonthState(engine), HeadStore(engine), TrackerConfig())
    late = PullRequestStory(2, datetime(2026, 7, 20, 2, tzinfo=UTC), repo="octo-org/octo-repo", title="Late work")
    tracker.deliver(late.opened().deliveries)
    engine.dispose()
    again_rendered = subprocess.run(
        [*TRACKER, "render", "--repo", "octo-org/octo-repo", "--month", "2026-07", "--format", "json"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert again_rendered.stdout == rendered.stdout
    assert 2 not in {pr["number"] for pr in json.loads(again_rendered.stdout)["pull_requests"]}


@needs_shared
def test_finalize_a_group_on_the_cli(data_dir: Path) -> None:
    """`tracker finalize --group`: refused while a member is unrecorded, then recorded once and published to files;
    a bad group, month or pair of options is a clear error."""
    from datetime import UTC, datetime

    from tests.support.tracking import Tracker
    from tracker.config import TrackerConfig
    from tracker.store.database import connect
    from tracker.store.heads import HeadStore
    from tracker.store.ledger import Ledger
    from tracker.store.month_state import MonthState

    engine = connect(f"sqlite:///{data_dir / 'var' / 'ledger.sqlite3'}")
    tracker = Tracker(Ledger(engine), MonthState(engine), HeadStore(engine), TrackerConfig())
    for number, repo in enumerate(("octo-org/one", "octo-org/two"), start=1):
        story = PullRequestStory(number, datetime(2026, 7, 6, 2, tzinfo=UTC), repo=repo, title=f"Loader {number}")
        tracker.deliver(story.opened().merged(datetime(2026, 7, 9, 2, tzinfo=UTC)).deliveries)
    tracker.give_files({1: ["src/loader.py"], 2: ["src/loader.py"]})
    engine.dispose()
    config = data_dir / "tracker.yaml"
    published = data_dir / "published"
    config.write_text(
        f"groups:\n  octo:\n    members: ['octo-org/*']\n    publish:\n      directory: {published}\n", encoding="utf-8"
    )
    env = clean_env(TRACKER_DATA_DIR=str(data_dir / "var"), TRACKER_CONFIG=str(config))

    def tracker_cli(*arguments: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*TRACKER, "finalize", *arguments], env=env, capture_output=True, timeout=60)

    unknown = tracker_cli("--group", "nope", "--month", "2026-07")
    assert unknown.returncode == 1 and b"no group 'nope'; the groups: octo" in unknown.stderr
    bad = tracker_cli("--group", "octo", "--month", "2026-13")
    assert bad.returncode == 1 and b"'2026-13' is not a month" in bad.stderr
    both = tracker_cli("--group", "octo", "--repo", "octo-org/one", "--month", "2026-07")
    assert both.returncode == 2 and b"give --repo owner/name or --group NAME" in both.stderr
    neither = tracker_cli("--month", "2026-07")
    assert neither.returncode == 2 and b"give --repo owner/name or --group NAME" in neither.stderr
    assert tracker_cli("--repo", "octo-org/one", "--month", "2026-07").returncode == 0
    waiting = tracker_cli("--group", "octo", "--month", "2026-07")
    assert waiting.returncode == 1
    assert b"octo-org/two has none yet; finalise it first" in waiting.stderr
    assert not published.exists()
    assert tracker_cli("--repo", "octo-org/two", "--month", "2026-07").returncode == 0
    done = tracker_cli("--group", "OCTO", "--month", "2026-07")
    assert done.returncode == 0, done.stderr
    assert b"2026-07 of the group octo recorded: revision 1, /api/v1/groups/octo/months/2026-07/records" in done.stdout
    assert b"files written" in done.stdout
    english = (published / "reports" / "groups" / "octo" / "en-US" / "2026" / "07.md").read_text(encoding="utf-8")
    assert "octo-org/one" in english and "octo-org/two" in english
    again = tracker_cli("--group", "octo", "--month", "2026-07")
    assert again.returncode == 0 and b"recorded already: revision 1" in again.stdout
    forced = tracker_cli("--group", "octo", "--month", "2026-07", "--force")
    assert forced.returncode == 0 and b"recorded: revision 2" in forced.stdout and b"files unchanged" in forced.stdout
