"""Fail fast, explain in one line (issue 11): `tracker run` checks before starting anything, a part
that keeps dying stops everything with a message, and every command's expected errors are one line
(the traceback only with `tracker -v`). Real processes, as a user runs them."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.app import SECRET
from tests.support.processes import TRACKER, clean_env, free_port, wait_healthy
from tracker.supervisor import Child, ChildKeepsDying, RestartPolicy, _start, _stop_all, _watch

# A closed port on loopback: PostgreSQL that does not answer (never a real database).
UNREACHABLE_DATABASE = "postgresql+psycopg://u@127.0.0.1:9/x"
# A Python start-up and a failed check, on a busy machine.
FAST = 15.0  # seconds: a refusal comes at once (about a second); this only says it does not hang


def run_and_fail(data_dir: Path, *arguments: str, **values: str) -> tuple[int, list[str]]:
    """`tracker run` that must refuse to start, at once (within FAST): its exit code and stderr lines."""
    env = clean_env(TRACKER_DATA_DIR=str(data_dir), **values)
    done = subprocess.run([*TRACKER, "run", *arguments], env=env, capture_output=True, timeout=FAST)
    assert done.stdout == b""
    return done.returncode, done.stderr.decode().strip().splitlines()


def nothing_started(data_dir: Path) -> None:
    assert not (data_dir / "redis" / "redis.sock").exists(), "an embedded Redis socket was left behind"
    assert not (data_dir / "redis").exists(), "the embedded Redis was started"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("repositories: [\n", "is not valid YAML"),
        ("repositories:\n  a/b:\n    timezone: Mars/Olympus\n", "is invalid"),
        ("colour: blue\n", "is invalid"),
    ],
)
def test_an_invalid_config_is_one_line_and_exit_code_2(data_dir: Path, config: str, expected: str) -> None:
    path = data_dir / "tracker.yaml"
    path.write_text(config)
    code, lines = run_and_fail(
        data_dir, "--port", str(free_port()), TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_CONFIG=str(path)
    )
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: TRACKER_CONFIG {path} ") and expected in lines[0], lines
    nothing_started(data_dir)
    assert not (data_dir / "ledger.sqlite3").exists()  # the config is checked before the database


def test_a_missing_secret_is_one_line_and_exit_code_2(data_dir: Path) -> None:
    code, lines = run_and_fail(data_dir, "--port", str(free_port()))
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("Error: TRACKER_WEBHOOK_SECRET is not set: set it to"), lines
    nothing_started(data_dir)


def test_a_port_taken_is_one_line_naming_the_fix(data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, lines = run_and_fail(data_dir, "--port", str(port), TRACKER_WEBHOOK_SECRET=SECRET)
    assert code == 1
    assert lines == [f"Error: port {port} on 127.0.0.1 is taken: stop what uses it or pass --port"]
    nothing_started(data_dir)


def test_tracker_web_alone_refuses_a_taken_port_in_one_line(data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = clean_env(
            TRACKER_DATA_DIR=str(data_dir), TRACKER_WEBHOOK_SECRET=SECRET, REDIS_URL="redis://127.0.0.1:9/0"
        )
        done = subprocess.run([*TRACKER, "web", "--port", str(port)], env=env, capture_output=True, timeout=FAST)
    assert done.returncode == 1
    assert done.stderr.decode().strip().splitlines() == [
        f"Error: port {port} on 127.0.0.1 is taken: stop what uses it or pass --port"
    ]


def test_a_host_that_is_not_an_address_is_one_line(data_dir: Path) -> None:
    code, lines = run_and_fail(
        data_dir, "--host", "no-such-host.invalid", "--port", str(free_port()), TRACKER_WEBHOOK_SECRET=SECRET
    )
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("Error: --host no-such-host.invalid is not an address"), lines
    nothing_started(data_dir)


def test_an_unreachable_redis_is_one_line_naming_the_fix(data_dir: Path) -> None:
    redis_port = free_port()  # nothing listens there
    code, lines = run_and_fail(
        data_dir,
        "--port",
        str(free_port()),
        TRACKER_WEBHOOK_SECRET=SECRET,
        REDIS_URL=f"redis://127.0.0.1:{redis_port}/10",
    )
    assert code == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: Redis at 127.0.0.1:{redis_port}/10 does not answer ("), lines
    assert "fix REDIS_URL" in lines[0]
    nothing_started(data_dir)


def test_an_unreachable_database_is_one_line_naming_the_fix(data_dir: Path) -> None:
    code, lines = run_and_fail(
        data_dir, "--port", str(free_port()), TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATABASE_URL=UNREACHABLE_DATABASE
    )
    assert code == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: the database at {UNREACHABLE_DATABASE} cannot be used ("), lines
    assert "Connection refused" in lines[0] and "fix TRACKER_DATABASE_URL" in lines[0]
    nothing_started(data_dir)


def test_a_database_password_is_not_shown(data_dir: Path) -> None:
    code, lines = run_and_fail(
        data_dir,
        "--port",
        str(free_port()),
        TRACKER_WEBHOOK_SECRET=SECRET,
        TRACKER_DATABASE_URL="postgresql+psycopg://u:hunter2@127.0.0.1:9/x",
    )
    assert code == 1 and len(lines) == 1, lines
    assert "hunter2" not in lines[0] and "u:***@127.0.0.1:9/x" in lines[0]


# --- a part that keeps dying ---------------------------------------------------------------------


def children_of(pid: int) -> dict[int, str]:
    """The live child processes of `pid` and their command lines."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rpartition(")")[2].split()[:2]
            if int(ppid) == pid and state != "Z":
                found[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
    return found


def test_a_part_that_keeps_dying_stops_everything_with_its_last_lines(data_dir: Path) -> None:
    """Probe: the config file breaks while `tracker run` runs, and a worker dies: the restarted
    worker cannot start. Before: it was restarted for ever, about 800 log lines in 15 s."""
    config = data_dir / "tracker.yaml"
    config.write_text("defaults:\n  timezone: UTC\n")
    port = free_port()
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), TRACKER_CONFIG=str(config))
    log = data_dir / "run.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*TRACKER, "run", "--port", str(port), "--workers", "1", "--web-processes", "1"], env=env, stderr=stderr
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}")
        time.sleep(3)  # every part has read the config by now; only the one killed below starts again
        workers = [pid for pid, command in children_of(process.pid).items() if "tracker worker" in command]
        assert len(workers) == 1, children_of(process.pid)
        config.write_text("defaults: [\n")  # every part started from now on stops at once, exit code 2
        killed = time.monotonic()
        os.kill(workers[0], signal.SIGKILL)
        code = process.wait(90)
        took = time.monotonic() - killed
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = log.read_text()
    assert code == 1, text
    # Restarted after 1, 2, 4 (and 8) s: no burst of restarts, and not for ever.
    assert 7 <= took <= 60, (took, text)
    assert text.count("worker-1 exited with code") <= 5, text
    assert "web exited" not in text and "sweep exited" not in text and "schedule exited" not in text, text
    gave_up = [line for line in text.splitlines() if "ERROR tracker.supervisor:" in line]
    assert len(gave_up) == 1, text
    assert "worker-1 exited 5 times in a row within 10 s of starting (last exit code 2)" in gave_up[0]
    assert "its last lines on stderr: Error: TRACKER_CONFIG" in gave_up[0] and "is not valid YAML" in gave_up[0]
    assert gave_up[0].endswith("everything is stopped")
    assert "tracker stopped" not in text
    assert not (data_dir / "redis" / "redis.sock").exists(), "the embedded Redis was not stopped"
    assert children_of(process.pid) == {}


def test_the_restart_policy_backs_off_and_gives_up(caplog: pytest.LogCaptureFixture) -> None:
    """The supervisor's restart policy driven directly, with a child that fails at once."""
    command = [sys.executable, "-c", "import sys; print('cannot start: boom', file=sys.stderr); sys.exit(3)"]
    child = Child("broken", command, policy=RestartPolicy(quick=10.0, first_pause=0.1, give_up_after=4))
    env = dict(os.environ)
    caplog.set_level(logging.WARNING, logger="tracker.supervisor")
    _start(child, env)
    starts = [time.monotonic()]
    try:
        with pytest.raises(ChildKeepsDying) as gave_up:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                process = child.process
                _watch(child, env)
                if child.process is not process:
                    starts.append(time.monotonic())
                time.sleep(0.01)
    finally:
        _stop_all([child])
    message = str(gave_up.value)
    assert message == (
        "broken exited 4 times in a row within 10 s of starting (last exit code 3); "
        "its last lines on stderr: cannot start: boom"
    )
    assert len(starts) == 4  # started, then restarted three times
    pauses = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    for pause, wanted in zip(pauses, (0.1, 0.2, 0.4), strict=True):
        assert pause >= wanted, pauses
    warnings = [r.getMessage() for r in caplog.records if r.name == "tracker.supervisor"]
    assert len(warnings) == 3, warnings
    assert [w.rpartition(" in ")[2] for w in warnings] == ["0.10 s", "0.20 s", "0.40 s"], warnings
    assert all(w.startswith("broken exited with code 3 after ") for w in warnings), warnings


def test_a_part_that_ran_a_while_is_restarted_at_once_and_never_given_up() -> None:
    command = [sys.executable, "-c", "import sys, time; time.sleep(0.4); sys.exit(1)"]
    child = Child("slow", command, policy=RestartPolicy(quick=0.2, first_pause=5.0, give_up_after=2))
    env = dict(os.environ)
    _start(child, env)
    starts = 1
    try:
        deadline = time.monotonic() + 20
        while starts < 4:
            assert time.monotonic() < deadline
            process = child.process
            _watch(child, env)  # never raises: each death came after more than `quick` seconds
            if child.process is not process:
                starts += 1
                assert child.quick_deaths == 0
            time.sleep(0.01)
    finally:
        _stop_all([child])


# --- every command: one line, the traceback with -v ---------------------------------------------


@pytest.mark.parametrize(
    ("values", "code", "expected"),
    [
        ({"TRACKER_DATABASE_URL": UNREACHABLE_DATABASE}, 1, f"Error: the database at {UNREACHABLE_DATABASE}"),
        ({"TRACKER_CONFIG": "{config}"}, 2, "Error: TRACKER_CONFIG {config} is not valid YAML"),
    ],
)
def test_errors_are_one_line_and_the_traceback_only_with_verbose(
    data_dir: Path, values: dict[str, str], code: int, expected: str
) -> None:
    config = data_dir / "broken.yaml"
    config.write_text("repositories: [\n")
    env = clean_env(TRACKER_DATA_DIR=str(data_dir), **{k: v.format(config=config) for k, v in values.items()})
    render = ["render", "--repo", "a/b", "--month", "2026-09"]
    plain = subprocess.run([*TRACKER, *render], env=env, capture_output=True, timeout=60)
    assert plain.returncode == code
    lines = plain.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected.format(config=config)), lines
    verbose = subprocess.run([*TRACKER, "-v", *render], env=env, capture_output=True, timeout=60)
    assert verbose.returncode == code
    text = verbose.stderr.decode()
    assert "Traceback (most recent call last):" in text
    assert text.strip().splitlines()[-1] == lines[0]  # the same line, last
