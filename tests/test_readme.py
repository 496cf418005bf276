"""Every command in the shell blocks of README.md and docs/**/*.md, run as written against one real
`tracker run` (the demo month loaded by the README's own block).

A shell block is a fenced ```sh, ```bash or ```shell block (every line a command, `\\` continuations
joined, comments dropped) or a ```console block (its `$ ` lines; the others are output). Each command is
run as written; the only changes are where it runs: the service's port for `localhost:8000`, this
interpreter for `.venv/bin/tracker`, `.venv/bin/python` and `tracker`, a GET of the URL for
`python -m webbrowser` (no browser here), and a scratch directory for the commands that write files
(`mkdir`). A command this file does not know fails the test: a new command in the docs must be runnable
here or be added to `ELSEWHERE`, with where it is run instead.
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
from typing import Any, NamedTuple

import httpx
import pytest

from bench.fixtures.paths import ROOT
from tests.support.processes import clean_env, free_port, wait_healthy

README = ROOT / "README.md"
DOCS = ROOT / "docs"
ADMIN = "readme-admin-token"
DEPLOYMENT = "tests/test_deployment.py"
MIGRATIONS = "tests/store/test_migrations.py"

# Commands run elsewhere, by what they start with (or, for a prefix starting with "/", hold), and where.
ELSEWHERE = {
    "python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e . && TRACKER_WEBHOOK_SECRET=change-me "
    ".venv/bin/tracker run": "the service this test starts (`tracker run` on the embedded defaults); "
    "the install is CI's and newcomer-check's",
    "python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e '.[dev]' && .venv/bin/python -m pytest": (
        "the test command itself (.ci/run runs exactly this)"
    ),
    "tracker run ": "the service this test starts: `tracker run` with a port and data directory of its own",
    ".venv/bin/pip install -q -c constraints.txt -e '.[docs]'": (
        "tests/test_docs.py builds the site with `mkdocs build --strict` (the dev extra holds the docs one)"
    ),
    ".venv/bin/ruff check .": "the developer's checks before a commit; lint-imports also in tests/test_architecture.py",
    "tracker backfill": "tests/test_cli_history.py runs `tracker backfill --repo … --month …` against the fake GitHub",
    "/backfill": "tests/history/test_views.py (a backfill reads GitHub; the demo's sample here refuses it)",
    "/api/v1/groups/": "tests/records/test_group_records.py (a group needs `groups:` in TRACKER_CONFIG; this "
    "service has none)",
    "tracker finalize --group": "tests/test_cli.py::test_finalize_a_group_on_the_cli (a group of its own)",
    "TRACKER_LINK_SECRET=": "below, with a real secret for the `…`",
    "export TRACKER_LLM_": "tests/narration/test_jobs.py (an OpenAI-compatible endpoint: a fake one there)",
    "export TRACKER_DATABASE_URL=": f"{DEPLOYMENT}: two hosts sharing PostgreSQL and Redis",
    "export REDIS_URL=": f"{DEPLOYMENT}: two hosts sharing PostgreSQL and Redis",
    "honcho start": f"{DEPLOYMENT} runs the Procfile with honcho, `-c web=2,worker=3` on host A, workers on host B",
    "TRACKER_DATA_DIR=/var/lib/tracker honcho start": f"{DEPLOYMENT}: host B, workers only, its own data directory",
    "systemctl restart": f"{DEPLOYMENT}: each process type restarted one at a time (honcho units for systemd's)",
    "docker ": f"{DEPLOYMENT} (no Docker daemon here): the build context installed as the image does, the image's "
    "commands and health check run, every compose.yaml service checked",
    "TRACKER_WEBHOOK_SECRET=… TRACKER_ADMIN_TOKEN=… docker compose": f"{DEPLOYMENT}, as `docker ` above",
    "pg_dump ": f"not run: it needs the operator's PostgreSQL; {MIGRATIONS} migrates pg_dump output",
    "pg_restore ": f"not run: it needs the operator's PostgreSQL; {MIGRATIONS} migrates pg_dump output",
}


class Command(NamedTuple):
    source: str  # the file, relative to the repository
    text: str


def sources() -> list[Path]:
    """README.md first (its demo block loads the month the other commands read), then the docs."""
    return [README, *sorted(DOCS.rglob("*.md"))]


_BLOCK = re.compile(r"^(?P<indent> *)```(?P<kind>sh|bash|shell|console)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


def commands() -> list[Command]:
    """Every command of every shell block, in the order of the files and of their text."""
    found: list[Command] = []
    for path in sources():
        for block in _BLOCK.finditer(path.read_text(encoding="utf-8")):
            lines = [line.removeprefix(block["indent"]) for line in block["body"].splitlines()]
            if block["kind"] == "console":
                lines = [line[2:] for line in lines if line.startswith("$ ")]
            text = re.sub(r"\s*\\\n\s*", " ", "\n".join(lines))
            for line in text.splitlines():
                line = re.sub(r"\s+#\s.*$", "", line).strip()
                if line and not line.startswith("#"):
                    found.append(Command(str(path.relative_to(ROOT)), line))
    return found


def elsewhere(command: str) -> bool:
    return any(command.startswith(prefix) or (prefix.startswith("/") and prefix in command) for prefix in ELSEWHERE)


def _runnable(command: str) -> bool:
    first = command.split()[0]
    return first in ("curl", "tracker", ".venv/bin/tracker", ".venv/bin/python", "python3", "mkdir") or (
        command.startswith("TRACKER_WEBHOOK_SECRET=change-me .venv/bin/tracker")
    )


def test_the_docs_have_commands_and_each_is_known() -> None:
    found = commands()
    assert len([c for c in found if c.source == "README.md"]) >= 8
    assert len(found) >= 40
    unknown = [c for c in found if not elsewhere(c.text) and not _runnable(c.text)]
    assert not unknown, f"commands this test does not run (run them, or add them to ELSEWHERE): {unknown}"


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
            [sys.executable, "-m", "tracker", "run", "--port", str(port)],
            env=env,  # two workers, as by default
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
    """One command through the shell, as a user types it; `python -m webbrowser URL` becomes a GET of
    the URL, which must answer 200 with an HTML page."""
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


def test_every_command_of_the_readme_and_the_docs_works_from_a_plain_clone(
    service: tuple[str, dict[str, str], Path], tmp_path: Path
) -> None:
    address, env, _ = service
    env = {**env, "TRACKER_ADMIN_TOKEN": ADMIN}
    ran: list[str] = []
    for source, command in commands():
        if command.startswith("TRACKER_LINK_SECRET="):
            command = command.replace("TRACKER_LINK_SECRET=…", "TRACKER_LINK_SECRET=readme-link-secret")
        elif elsewhere(command):
            continue
        if command in ran:
            continue  # the same command in two places (the README and a guide): run once
        local = localised(command, address)
        if " -m tracker replay " in local and "--url" not in local:
            local += f" --url http://{address}/webhook"  # its default is port 8000; the service here has its own
        # Commands that write files (a backup) write them in a scratch directory, not the clone.
        done = run(local, env, tmp_path if command.startswith("mkdir ") else ROOT)
        assert done.returncode == 0, f"{source}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, f"{source}: {command}"
        if command.startswith("curl"):
            _check_curl(command, done.stdout)
        ran.append(command)
    assert any("tracker demo" in c for c in ran) and any("finalize" in c for c in ran)
    assert list(tmp_path.glob("backup/ledger*.sqlite3")), "the backup command copied no ledger file"
    # The files the commands write land in the working directory: keep the clone clean.
    for written in ROOT.glob("0?.zh-CN.md"):
        assert written.read_text(encoding="utf-8").startswith("# ")
        written.unlink()
    _check_json_reference(address)


def _check_curl(command: str, body: str) -> None:
    """What each kind of curl must answer (not only exit 0)."""
    if "-X POST" in command:
        answer: Any = json.loads(body)
        assert "error" not in answer, (command, answer)
    elif ".md" in command:
        assert body.startswith("# "), (command, body[:200])
    elif "/api/" in command or ".json" in command:
        answer = json.loads(body)
        assert "error" not in answer, (command, answer)


def _check_json_reference(address: str) -> None:
    """docs/reference/json.md names every top-level field of the snapshot and of its summary."""
    page = (DOCS / "reference" / "json.md").read_text(encoding="utf-8")
    base = f"http://{address}/api/v1/repos/NVIDIA/Megatron-LM/months/2026-05"
    for url in (f"{base}?cutoff=2026-05-13", f"{base}?cutoff=2026-05-13&detail=summary"):
        document = httpx.get(url, timeout=60).json()
        missing = [key for key in document if f"`{key}`" not in page]
        assert not missing, f"docs/reference/json.md does not describe {missing} ({url})"


def test_the_docs_never_read_the_shared_folder() -> None:
    assert not [c for c in commands() if "../shared" in c.text]


def test_portable_commands_only() -> None:
    assert not [c for c in commands() if re.match(r"(open|xdg-open|start)\s", c.text)]
    assert all(shlex.split(c.text) for c in commands())
