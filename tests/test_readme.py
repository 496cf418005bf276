"""Every command in the README's `sh` blocks, run as written (against a real `tracker run`).

Each command is taken from README.md as it stands; the only changes are where it runs: the service's
port for `localhost:8000`, this interpreter for `.venv/bin/tracker`, `.venv/bin/python` and `tracker`,
and a GET of the URL for `python -m webbrowser` (no browser here). A command this file does not
know fails the test: a new README command must be added to `RUN` or to `ELSEWHERE` (with where it
is run instead).
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.paths import ROOT
from tests.test_cli import clean_env, free_port, wait_healthy

README = ROOT / "README.md"
ADMIN = "readme-admin-token"

# Commands run elsewhere, by what they start with, and where.
ELSEWHERE = {
    "python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e . && TRACKER_WEBHOOK_SECRET=change-me "
    ".venv/bin/tracker run": "the service this test starts (`tracker run` on the embedded defaults); "
    "the install is CI's and newcomer-check's",
    "python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e '.[dev]' && .venv/bin/python -m pytest": (
        "the test command itself (.ci/run runs exactly this)"
    ),
    "tracker backfill": "tests/test_cli_history.py runs `tracker backfill --repo … --month …` against the fake GitHub",
    "/backfill": "tests/web/test_history_api.py (a backfill reads GitHub; the demo's sample here refuses it)",
    "TRACKER_LINK_SECRET=": "below, with a real secret for the `…`",
    "export TRACKER_LLM_": "tests/workers/test_narrate.py (an OpenAI-compatible endpoint: a fake one there)",
}


def commands() -> list[str]:
    """Every command of the README's ```sh blocks: continuation lines joined, comments dropped."""
    found: list[str] = []
    for block in re.findall(r"^```sh\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL):
        text = re.sub(r"\s*\\\n\s*", " ", block)
        for line in text.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line:
                found.append(line)
    return found


def elsewhere(command: str) -> bool:
    return any(command.startswith(prefix) or (prefix.startswith("/") and prefix in command) for prefix in ELSEWHERE)


def test_the_readme_has_commands_and_each_is_known() -> None:
    found = commands()
    assert len(found) >= 15
    unknown = [c for c in found if not elsewhere(c) and not _runnable(c)]
    assert not unknown, f"README commands this test does not run: {unknown}"


def _runnable(command: str) -> bool:
    first = command.split()[0]
    return first in ("curl", "tracker", ".venv/bin/tracker", ".venv/bin/python") or command.startswith(
        "TRACKER_WEBHOOK_SECRET=change-me .venv/bin/tracker"
    )


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[str, dict[str, str], Path]]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="trk-") as directory:
        data = Path(directory)
        port = free_port()
        env = clean_env(
            TRACKER_WEBHOOK_SECRET="change-me",
            TRACKER_DATA_DIR=str(data),
            TRACKER_ADMIN_TOKEN=ADMIN,
            GITHUB_API_URL="http://127.0.0.1:9",  # nothing may leave the machine
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "tracker", "run", "--port", str(port), "--workers", "1"], env=env
        )
        try:
            wait_healthy(f"http://127.0.0.1:{port}", timeout=60)
            yield f"127.0.0.1:{port}", env, data
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)


def localised(command: str, address: str) -> str:
    command = command.replace("localhost:8000", address).replace("127.0.0.1:8000", address)
    python = shlex.quote(sys.executable)
    command = re.sub(
        r"(?<![\w/.])\.venv/bin/(tracker|python) ",
        lambda m: f"{python} -m tracker " if m.group(1) == "tracker" else f"{python} ",
        command,
    )
    command = re.sub(r"(?:^|(?<=\s))(?<!-m )tracker(?= )", f"{python} -m tracker", command)
    return command


def run(command: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """One README command through the shell, as a user types it; `python -m webbrowser URL` becomes a
    GET of the URL, which must answer 200 with an HTML page."""
    parts = [part.strip() for part in command.split(" && ")]
    done = subprocess.CompletedProcess(command, 0, "", "")
    for part in parts:
        opened = re.search(r"-m webbrowser '?([^' ]+)'?$", part)
        if opened:
            page = httpx.get(opened.group(1), timeout=30)
            assert page.status_code == 200, (command, page.status_code)
            assert page.headers["content-type"].startswith("text/html"), command
            continue
        done = subprocess.run(part, shell=True, env=env, cwd=cwd, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            return done
    return done


def test_every_readme_command_works_from_a_plain_clone(
    service: tuple[str, dict[str, str], Path], tmp_path: Path
) -> None:
    address, env, _ = service
    env = {**env, "TRACKER_ADMIN_TOKEN": ADMIN}
    # The README's order: the demo first (its own block), so that the examples have a month to show.
    ran: list[str] = []
    for command in commands():
        if command.startswith("TRACKER_LINK_SECRET="):
            command = command.replace("TRACKER_LINK_SECRET=…", "TRACKER_LINK_SECRET=readme-link-secret")
        elif elsewhere(command):
            continue
        local = localised(command, address)
        if " -m tracker replay " in local and "--url" not in local:
            local += f" --url http://{address}/webhook"  # its default is port 8000; the service here has its own
        done = run(local, env, ROOT)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, command
        if command.startswith("curl"):
            _check_curl(command, done.stdout)
        ran.append(command)
    assert any("tracker demo" in c for c in ran) and any("finalize" in c for c in ran)
    # The files the README writes land in the working directory: keep the clone clean.
    for written in ROOT.glob("0?.zh-CN.md"):
        assert written.read_text(encoding="utf-8").startswith("# ")
        written.unlink()


def _check_curl(command: str, body: str) -> None:
    """What each kind of curl in the README must answer (not only exit 0)."""
    if "-X POST" in command:
        answer: Any = json.loads(body)
        assert "error" not in answer, (command, answer)
    elif ".md" in command:
        assert body.startswith("# "), (command, body[:200])
    elif "/api/" in command:
        answer = json.loads(body)
        assert "error" not in answer, (command, answer)


def test_the_readme_never_reads_the_shared_folder() -> None:
    assert not [c for c in commands() if "../shared" in c]


def test_portable_commands_only() -> None:
    assert not [c for c in commands() if re.match(r"(open|xdg-open|start)\s", c)]
    assert all(shlex.split(c) for c in commands())
