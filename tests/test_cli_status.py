"""`tracker status` (issue 15): what GET /api/v1/status says, as tables or as its JSON document, from
a real process against the real database and Redis; one line when either does not answer."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import SECRET, BurstWorker, fixture_payload, post, running_app
from tests.support.processes import TRACKER, clean_env
from tracker.cli import _status_renderables
from tracker.settings import load_settings
from tracker.web.context import services

ADMIN = "status-admin-token"
# A log line (tracker.logs.FORMAT): a first start may log its schema migrations before the error.
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING) [\w.]+: .*")


def status(env: dict[str, str], *options: str) -> subprocess.CompletedProcess[bytes]:
    # Wide enough that rich does not wrap the tables' cells.
    return subprocess.run(
        [*TRACKER, "status", *options], env={**env, "COLUMNS": "200"}, capture_output=True, timeout=60
    )


def error_lines(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [line for line in result.stderr.decode().splitlines() if line.strip() and not LOG_LINE.fullmatch(line)]


@needs_shared
def test_status_shows_what_the_endpoint_says(tmp_path: Path, database_url: str, redis_url: str) -> None:
    settings = load_settings(
        webhook_secret=SECRET,
        admin_token=ADMIN,
        data_dir=tmp_path / "var",
        database_url=database_url,
        redis_url=redis_url,
    )
    story = PullRequestStory(51, datetime(2026, 9, 2, 10, tzinfo=UTC), title="Status table check").opened()
    with running_app(settings) as app:
        client = app.test_client()
        for delivery in story.deliveries:
            assert post(client, delivery.body, delivery.event, delivery.delivery_id).status_code == 202
        assert post(client, fixture_payload("ping.json"), "ping", "ping-51").status_code == 200
        with app.app_context():  # the delivery processed; the fetch of its head stays queued
            built = services()
            BurstWorker([built.delivery_queue], connection=built.redis).work(burst=True)
        expected = client.get("/api/v1/status", headers={"Authorization": f"Bearer {ADMIN}"}).json
    env = clean_env(
        TRACKER_DATA_DIR=str(tmp_path / "var"),
        TRACKER_DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        TRACKER_ADMIN_TOKEN=ADMIN,
    )  # no webhook secret: the command does not need one

    raw = status(env, "--json")
    assert raw.returncode == 0, raw.stderr
    document: dict[str, Any] = json.loads(raw.stdout)
    # The same document, but for coverage intervals that end at the moment they are read.
    assert {**document, "history": None} == {**expected, "history": None}
    assert document["history"]["runs"] == expected["history"]["runs"]
    assert document["history"]["coverage"].keys() == expected["history"]["coverage"].keys()
    assert document["deliveries"]["received"] == 1 and document["repositories"] == ["NVIDIA/Megatron-LM"]
    assert "storage" in document  # the admin's view: TRACKER_ADMIN_TOKEN is set

    shown = status(env)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout.decode()
    for heading in ("Deliveries", "Hooks", "Repositories: NVIDIA/Megatron-LM", "Storage", "Queue", "GitHub", "History"):
        assert heading in text, text
    assert re.search(r"│ received\s+│ 1\s+│", text), text
    assert re.search(r"│ processed\s+│ 1\s+│", text), text
    assert re.search(r"│ waiting_jobs\s+│ 1\s+│", text), text
    hook = document["hooks"][0]
    cells = (hook["hook_id"], hook["type"], ", ".join(hook["events"]))
    assert re.search(r"\s+│ ".join(re.escape(str(cell)) for cell in cells), text), text
    assert str(tmp_path / "var") in text

    anonymous = status({**env, "TRACKER_ADMIN_TOKEN": ""}, "--json")
    assert anonymous.returncode == 0, anonymous.stderr
    assert "storage" not in json.loads(anonymous.stdout)  # without the token, what anyone may see


def test_an_unreachable_database_is_one_line(tmp_path: Path, redis_url: str) -> None:
    env = clean_env(
        TRACKER_DATA_DIR=str(tmp_path),
        TRACKER_DATABASE_URL="postgresql+psycopg://tracker:pw-5150@127.0.0.1:1/ledger",
        REDIS_URL=redis_url,
    )
    result = status(env)
    assert result.returncode == 1
    lines = error_lines(result)
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "Error: the database at postgresql+psycopg://tracker:***@127.0.0.1:1/ledger cannot be used"
    )
    assert "pw-5150" not in result.stderr.decode() and result.stdout == b""


def test_an_unreachable_redis_is_one_line(tmp_path: Path, database_url: str) -> None:
    env = clean_env(
        TRACKER_DATA_DIR=str(tmp_path), TRACKER_DATABASE_URL=database_url, REDIS_URL="redis://127.0.0.1:1/0"
    )
    for options in ((), ("--json",)):
        result = status(env, *options)
        assert result.returncode == 1
        lines = error_lines(result)
        assert len(lines) == 1, lines
        assert lines[0].startswith("Error: Redis at 127.0.0.1:1/0 does not answer"), lines
        assert result.stdout == b""


def test_no_redis_at_all_says_how_to_start_one(tmp_path: Path) -> None:
    result = status(clean_env(TRACKER_DATA_DIR=str(tmp_path)))
    assert result.returncode == 2  # the settings must change (tracker.cli)
    lines = error_lines(result)
    assert len(lines) == 1 and "REDIS_URL is not set" in lines[0] and "tracker run" in lines[0], lines


def test_text_from_outside_is_never_read_as_markup() -> None:
    console = Console(record=True, width=200)
    document = {
        "failed_deliveries": [
            {"delivery_id": "d-1", "repo": "o/r", "error": "[red]boom[/red] [link=http://x]y[/link]"}
        ],
        "history": {"runs": [], "coverage": {"o/r": False}},
        "hooks": [],
    }
    for key, value in document.items():
        for shown in _status_renderables(key, value):
            console.print(shown)
    text = console.export_text()
    assert "[red]boom[/red] [link=http://x]y[/link]" in text
    assert "hooks: none" in text and re.search(r"│ runs\s+│ none\s+│", text)
    assert "\nhistory: coverage\n┌" in text
    assert re.search(r"│ o/r\s+│ no\s+│", text), text
