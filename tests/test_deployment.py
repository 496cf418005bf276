"""A deployment on several machines (README, "Running on several machines"), run for real.

PostgreSQL and a shared Redis (the test services: TRACKER_TEST_DATABASE_URL's server, a database of
this test's own; TRACKER_TEST_REDIS_URL's database, flushed), `tracker migrate` once, then the
`Procfile` run by honcho: host A has the web processes, workers, the schedule and the sweep, host B
only workers, each with its own empty TRACKER_DATA_DIR, sharing nothing but the two URLs.

While a stream of signed deliveries arrives (sent to host A's web processes in turn, as a load
balancer would, and to the other one while one restarts), each process type is restarted one process
at a time (SIGTERM, and one worker SIGKILLed in the middle of a drain batch). Afterwards every
delivery a web process acknowledged is in the ledger once and processed, and the month derived under
that churn is the month `tracker rebuild` derives from the same ledger.

`honcho start` stops every process of its set when one of them exits (foreman's model), so a host
whose processes restart one at a time runs one honcho per process (what `honcho export systemd`
writes as units); the first test runs a host's whole set in one `honcho start -c web=2,worker=3`.

Select them with `-m deployment`; they skip unless PostgreSQL and Redis are named.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis
from rq import Worker
from sqlalchemy import create_engine, make_url, select, text
from sqlalchemy.engine import Engine

from bench.fixtures.factory import Delivery, PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import SECRET, show_head_to_github
from tests.support.processes import clean_env, free_port, free_ports, wait_until
from tracker.store.schema import deliveries, month_activity, pr_facts, pr_versions
from tracker.web.signature import sign

# One xdist worker runs them all, one after another: they use databases of fixed names.
pytestmark = [pytest.mark.deployment, needs_shared, pytest.mark.xdist_group("deployment")]

ROOT = Path(__file__).resolve().parent.parent
PROCFILE = ROOT / "Procfile"
BIN = Path(sys.executable).parent  # `tracker` for the Procfile's commands
DATABASE = "test_d_deploy"
REPO = "NVIDIA/Megatron-LM"
MONTH = "2026-09"
STOPPED = (0, 128 + signal.SIGTERM)  # honcho's exit code when SIGTERM stopped it and its processes


def _services() -> tuple[str, str]:
    database, redis = os.environ.get("TRACKER_TEST_DATABASE_URL"), os.environ.get("TRACKER_TEST_REDIS_URL")
    if not database or not database.startswith("postgresql") or not redis:
        pytest.skip("needs PostgreSQL (TRACKER_TEST_DATABASE_URL) and Redis (TRACKER_TEST_REDIS_URL)")
    return database, redis


# --- the shared services -----------------------------------------------------------------------------


@dataclass
class Deployment:
    database_url: str
    redis_url: str
    github_url: str
    root: Path
    units: list[Unit] = field(default_factory=list)

    def env(self, data_dir: Path) -> dict[str, str]:
        return clean_env(
            PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            TRACKER_WEBHOOK_SECRET=SECRET,
            TRACKER_DATA_DIR=str(data_dir),
            TRACKER_DATABASE_URL=self.database_url,
            REDIS_URL=self.redis_url,
            GITHUB_API_URL=self.github_url,
            TRACKER_DRAIN_BATCH="5",  # many batches, so that a SIGKILL lands in the middle of one
            # The fake GitHub knows the heads, not the PRs' states: no reconciliation with it (the
            # schedule's due work would otherwise read the PRs back from it as open).
            TRACKER_RECONCILE_EVERY="0",
            # September 2026 ended long ago: the schedule would freeze its final report as soon as nothing
            # was pending, in the middle of the stream, and the snapshot would then answer from that record.
            TRACKER_FINALIZE_GRACE="1000000000",
        )

    def tracker(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "tracker", *args],
            env=self.env(self.root / "operator"),
            capture_output=True,
            timeout=timeout,
        )
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode()

    def host(self, name: str) -> Path:
        data_dir = self.root / name
        data_dir.mkdir(exist_ok=True)
        return data_dir

    def start(self, host: str, *args: str, port: int | None = None) -> Unit:
        """`honcho start` on `host` (its own data directory and working directory) with `args`."""
        data_dir = self.host(host)
        log = (data_dir / f"honcho-{len(self.units)}.log").open("wb")
        command = [sys.executable, "-m", "honcho", "start", "-f", str(PROCFILE), "-d", str(data_dir), "--no-colour"]
        if port is not None:
            command += ["-p", str(port)]
        process = subprocess.Popen(
            [*command, *args], cwd=data_dir, env=self.env(data_dir), stdout=log, stderr=subprocess.STDOUT
        )
        unit = Unit(host, args, port, process, Path(log.name))
        log.close()
        self.units.append(unit)
        return unit

    def redis(self) -> Redis:
        return Redis.from_url(self.redis_url, socket_timeout=5)

    def stop_all(self) -> None:
        for unit in self.units:
            unit.stop(signal.SIGTERM)


@dataclass
class Unit:
    """One `honcho start`: a process manager's unit (a process, or a host's whole set)."""

    host: str
    args: tuple[str, ...]
    port: int | None
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self, how: signal.Signals, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(how)
        try:
            return self.process.wait(timeout)
        finally:
            for pid in _descendants(self.process.pid):  # nothing outlives its unit
                _kill(pid)

    def pids(self) -> list[int]:
        return _descendants(self.process.pid)


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent]
        found += children
        frontier += children
    return found


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def deployment(github: Any) -> Iterator[Deployment]:
    base, redis_url = _services()
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))
        conn.execute(text(f"CREATE DATABASE {DATABASE}"))
    Redis.from_url(redis_url).flushdb()
    url = make_url(base).set(database=DATABASE).render_as_string(hide_password=False)
    # Short: an embedded Redis would put its socket under a data directory (none must start here).
    with tempfile.TemporaryDirectory(prefix="trk-deploy-") as root:
        deployed = Deployment(url, redis_url, github.url, Path(root))
        try:
            yield deployed
        finally:
            deployed.stop_all()
            for unit in deployed.units:
                if unit.process.returncode not in (*STOPPED, None):
                    print(f"--- {unit.host} {unit.args} ---\n{unit.log.read_text(errors='replace')[-3000:]}")
            with admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"))
            admin.dispose()


# --- the deliveries ----------------------------------------------------------------------------------


def stories(count: int) -> list[PullRequestStory]:
    """`count` PRs of September 2026: each opened and pushed to; one in three merged, one in five
    closed, one in four labelled."""
    made = []
    for number in range(1, count + 1):
        opened = datetime(2026, 9, 1, 2, tzinfo=UTC) + timedelta(hours=7 * number)
        story = PullRequestStory(number, opened).opened().pushed(opened + timedelta(hours=2))
        if number % 4 == 0:
            story.labeled(opened + timedelta(hours=3), "moe")
        if number % 3 == 0:
            story.merged(opened + timedelta(hours=5))
        elif number % 5 == 0:
            story.closed(opened + timedelta(hours=5))
        made.append(story)
    return made


class Sender:
    """Posts deliveries to the web processes in turn, as GitHub would through a load balancer: one
    that does not answer (restarting) is skipped for the next; a delivery nobody took is tried again
    (GitHub's redelivery, same id). Keeps each answer's status per delivery id."""

    def __init__(self, ports: list[int], items: list[Delivery], pace: float) -> None:
        self.ports = ports
        self.items = items
        self.pace = pace
        self.answers: dict[str, list[int]] = {}
        self.refused = 0
        self.done = threading.Event()
        self._next = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the deliveries were not all sent"

    def _run(self) -> None:
        with httpx.Client(timeout=15) as client:
            for item in self.items:
                self._send(client, item)
                time.sleep(self.pace)
        self.done.set()

    def _send(self, client: httpx.Client, item: Delivery) -> None:
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": item.event,
            "X-GitHub-Delivery": item.delivery_id,
            "X-GitHub-Hook-ID": "4242",
            "X-Hub-Signature-256": sign(SECRET.encode(), item.body),
        }
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            port = self.ports[self._next % len(self.ports)]
            self._next += 1
            try:
                answer = client.post(f"http://127.0.0.1:{port}/webhook", content=item.body, headers=headers)
            except httpx.TransportError:
                self.refused += 1
                time.sleep(0.02)
                continue
            self.answers.setdefault(item.delivery_id, []).append(answer.status_code)
            if answer.status_code in (200, 202):
                return
            time.sleep(0.05)  # a 5xx: GitHub shows a failed delivery, its redelivery comes later
        raise AssertionError(f"no web process took {item.delivery_id}")


def deliveries_of(made: list[PullRequestStory]) -> list[Delivery]:
    """The stories' deliveries interleaved (PR 1's first, PR 2's first, …), each PR's in order."""
    queues = [list(story.deliveries) for story in made]
    out: list[Delivery] = []
    while any(queues):
        for queue in queues:
            if queue:
                out.append(queue.pop(0))
    for item in out:
        show_head_to_github(item.body)  # the fake GitHub knows every head, with its files
    return out


# --- waiting and looking -------------------------------------------------------------------------------


def healthy(port: int) -> bool:
    return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200


def ledger_rows(engine: Engine) -> list[tuple[str, str, int]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(select(deliveries.c.id, deliveries.c.status, deliveries.c.attempts))]


def derived_rows(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    with engine.connect() as conn:
        return {
            table.name: sorted(tuple(row) for row in conn.execute(select(table)))
            for table in (pr_facts, pr_versions, month_activity)
        }


def pending(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM deliveries WHERE status = 'pending'")).scalar_one())


def workers_of(redis: Redis, unit: Unit) -> list[Worker]:
    mine = set(unit.pids())
    return [worker for worker in Worker.all(connection=redis) if worker.pid in mine]


# --- the tests ---------------------------------------------------------------------------------------


def test_a_host_runs_the_procfile_with_two_web_processes_and_three_workers(deployment: Deployment) -> None:
    """`honcho start -c web=2,worker=3`: each web process on a port of its own, three workers, the
    schedule and the sweep; SIGTERM to honcho stops them all."""
    assert "created the schema" in deployment.tracker("migrate")
    port = free_ports(2)  # honcho gives the second web process the next port
    host = deployment.start("a", "-c", "web=2,worker=3", port=port)
    try:
        ports = [port, port + 1]  # honcho's PORT: the base, then one more per process of a type
        for each in ports:
            wait_until(lambda each=each: healthy(each), 60, f"the web process on {each} did not answer")
        redis = deployment.redis()
        wait_until(lambda: len(Worker.all(connection=redis)) == 3, 60, "three workers did not register")
        said = host.log.read_text().splitlines()  # honcho's own lines: `… system | web.1 started (pid=…)`
        names = {line.split("|", 1)[1].split()[0] for line in said if " started (pid=" in line}
        assert names == {"web.1", "web.2", "worker.1", "worker.2", "worker.3", "scheduler.1", "sweep.1"}
        items = deliveries_of(stories(6))
        sender = Sender(ports, items, pace=0.0)
        sender.start()
        sender.join(60)
        assert all(codes[-1] == 202 for codes in sender.answers.values())
        engine = create_engine(deployment.database_url)
        wait_until(lambda: pending(engine) == 0, 60, "the deliveries were not processed")
        assert {status for _, status, _ in ledger_rows(engine)} == {"processed"}
        engine.dispose()
    finally:
        code = host.stop(signal.SIGTERM)
    assert code in STOPPED, host.log.read_text()[-2000:]
    wait_until(lambda: not Worker.all(connection=deployment.redis()), 10, "a worker outlived honcho")


def test_a_rolling_restart_on_two_hosts_loses_and_doubles_nothing(deployment: Deployment) -> None:
    started = time.monotonic()
    assert "created the schema" in deployment.tracker("migrate")  # once, before any process starts
    assert "up to date" in deployment.tracker("migrate")

    # Host A: two web processes, three workers, the schedule, the sweep. Host B: three workers.
    web_ports = [free_port(), free_port()]
    web = [deployment.start("a", "web", port=p) for p in web_ports]
    a_workers = [deployment.start("a", "worker") for _ in range(3)]
    scheduler = deployment.start("a", "scheduler")
    sweep = deployment.start("a", "sweep")
    b_workers = [deployment.start("b", "worker") for _ in range(3)]
    for p in web_ports:
        wait_until(lambda p=p: healthy(p), 60, f"the web process on {p} did not answer")
    redis = deployment.redis()
    wait_until(lambda: len(Worker.all(connection=redis)) == 6, 60, "six workers did not register")
    assert all(workers_of(redis, unit) for unit in b_workers), "a worker of host B is not registered"

    made = stories(90)
    items = deliveries_of(made)
    items += items[5:15]  # GitHub redelivers some: the same ids again, answered as duplicates
    sender = Sender(web_ports, items, pace=0.08)
    sender.start()

    def restart(unit: Unit) -> Unit:
        code = unit.stop(signal.SIGTERM)
        assert code in STOPPED, f"{unit.args} stopped with {code}: {unit.log.read_text()[-2000:]}"
        again = deployment.start(unit.host, *unit.args, port=unit.port)
        if unit.port is not None:
            wait_until(lambda: healthy(unit.port or 0), 60, f"the web process on {unit.port} did not come back")
        return again

    # A worker SIGKILLed in the middle of a drain batch (its process group: nothing of it survives).
    def drain_running() -> Worker | None:
        for unit in b_workers + a_workers:
            for worker in workers_of(redis, unit):
                job = worker.get_current_job()
                if job is not None and job.func_name == "workers.drain.drain_deliveries":
                    return worker
        return None

    # The worker seen draining is the one killed (a drain may end before a second look finds it again).
    seen: list[Worker] = []
    wait_until(lambda: seen.append(drain_running()) or seen[-1] is not None, 30, "no worker was seen draining")
    busy = seen[-1]
    assert busy is not None
    victim = next(u for u in b_workers + a_workers if busy.pid in u.pids())
    os.killpg(os.getpgid(busy.pid), signal.SIGKILL)
    victim.process.wait(30)  # honcho stops when its process dies
    for group in (a_workers, b_workers):
        if victim in group:
            group[group.index(victim)] = deployment.start(victim.host, *victim.args)

    # One process at a time, under load: each web process, a worker of each host, the schedule, the sweep.
    web = [restart(unit) for unit in web]
    a_workers[0] = restart(a_workers[0])
    b_workers[0] = restart(b_workers[0])
    scheduler = restart(scheduler)
    sweep = restart(sweep)
    restarted_at = time.monotonic() - started

    sender.join(120)
    engine = create_engine(deployment.database_url)
    waited = wait_until(lambda: pending(engine) == 0, 90, "deliveries stayed pending")

    # Every delivery a web process acknowledged is in the ledger once, and processed.
    acknowledged = {i for i, codes in sender.answers.items() if 202 in codes}
    rows = ledger_rows(engine)
    ids = [row[0] for row in rows]
    assert len(ids) == len(set(ids)) == len({item.delivery_id for item in items})
    assert acknowledged == set(ids)  # a redelivery of a stored one is a duplicate (200), never a second row
    assert all(codes.count(202) == 1 for codes in sender.answers.values())
    assert sum(codes == [200] for codes in sender.answers.values()) == 0
    redelivered = {item.delivery_id for item in items[-10:]}
    assert all(sender.answers[i][-1] == 200 for i in redelivered)
    assert {status for _, status, _ in rows} == {"processed"}, [r for r in rows if r[1] != "processed"]

    # Nothing lived on either host's disk: PostgreSQL and Redis hold everything.
    for host in ("a", "b"):
        assert not list(deployment.root.joinpath(host).glob("*.sqlite3*"))
        assert not deployment.root.joinpath(host, "redis").exists()

    # The month derived under the churn is the month derived again from the ledger in one pass.
    deployment.stop_all()
    live_rows = derived_rows(engine)
    live = json.loads(deployment.tracker("snapshot", "--repo", REPO, "--month", MONTH))
    assert "rebuilt from" in deployment.tracker("rebuild")
    assert derived_rows(engine) == live_rows
    assert json.loads(deployment.tracker("snapshot", "--repo", REPO, "--month", MONTH)) == live
    merged = sum(1 for n in range(1, 91) if n % 3 == 0)
    closed = sum(1 for n in range(1, 91) if n % 3 and n % 5 == 0)
    opened_in_month = sum(1 for story in made if story.created_at.month == 9)
    # Every story's events arrived and were derived: 90 PRs opened, 30 merged, 12 closed unmerged.
    prs = live["pull_requests"]
    assert live["stats"]["opened"] == opened_in_month == len(prs) == 90
    assert sum(pr["activity"]["merged"] for pr in prs) == merged
    assert sum(pr["state_at_cutoff"] == "closed" for pr in prs) == closed
    assert live["pending_classification"] == 0  # every head's files were fetched, once the churn was over
    engine.dispose()
    total = time.monotonic() - started
    print(
        f"deployment: {len(items)} sent ({len(acknowledged)} acknowledged, {sender.refused} connections refused "
        f"while restarting), restarts done at {restarted_at:.1f} s, pending 0 after {waited:.1f} s more, "
        f"{total:.1f} s in all"
    )


# --- the container image and compose.yaml --------------------------------------------------------------
# Docker cannot build here (no daemon, and no registry for the base image), so the image's own
# commands are run as its Dockerfile runs them: a fresh environment, `pip install '.[postgres]'` from a
# copy of the build context (.dockerignore applied), then its ENTRYPOINT with its CMD and HEALTHCHECK.

DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "compose.yaml"
IMAGE = "monthly-activity-tracker"


def dockerfile_instruction(name: str) -> list[str]:
    """The exec-form (JSON) arguments of the Dockerfile's `name` instruction (joined across `\\` lines)."""
    joined = DOCKERFILE.read_text().replace("\\\n", " ")
    for line in joined.splitlines():
        if line.startswith(name + " "):
            rest = line[len(name) :].strip()
            if name == "HEALTHCHECK":
                rest = rest[rest.index("CMD ") + 4 :]
            parsed: list[str] = json.loads(rest)
            return parsed
    raise AssertionError(f"the Dockerfile has no {name}")


def tracker_command_is_real(args: list[str]) -> None:
    """`tracker <args>` names a real command with options it accepts (parsed by click, not run)."""
    from tracker.cli import main

    assert args and args[0] in main.commands, f"`tracker {' '.join(args)}` is no tracker command"
    command = main.commands[args[0]]
    command.make_context(args[0], list(args[1:]))


def known_settings() -> set[str]:
    from pydantic import AliasChoices

    from tracker.settings import Settings

    names = set()
    for field_info in Settings.model_fields.values():
        alias = field_info.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
    return names


def test_compose_runs_real_tracker_commands_with_known_settings() -> None:
    import yaml

    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    ours = {name: s for name, s in services.items() if s.get("image") == IMAGE}
    assert set(ours) == {"migrate", "web", "worker", "scheduler", "sweep"}
    assert {"postgres", "redis"} <= set(services)
    settings = known_settings()
    for name, service in ours.items():
        assert service["build"] == "."
        tracker_command_is_real(service["command"])
        unknown = set(service["environment"]) - settings
        assert not unknown, f"{name} sets {unknown}, which tracker/settings.py does not read"
        assert service["environment"]["TRACKER_DATABASE_URL"].startswith("postgresql+psycopg://")
        assert service["environment"]["REDIS_URL"].startswith("redis://redis:")
    # The migration runs once, first; everything else waits for it to have succeeded.
    assert ours["migrate"]["command"] == ["migrate"] and ours["migrate"]["restart"] == "no"
    for name in ("web", "worker", "scheduler", "sweep"):
        assert ours[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    # One schedule and one sweep; the web process answers the image's health check.
    assert "replicas" not in ours["scheduler"].get("deploy", {}) and "replicas" not in ours["sweep"].get("deploy", {})
    assert ours["web"]["healthcheck"]["test"][1:] == dockerfile_instruction("HEALTHCHECK")
    # The image's default command is one process type, the web part, and never `tracker run`.
    assert dockerfile_instruction("ENTRYPOINT") == ["tracker"]
    tracker_command_is_real(dockerfile_instruction("CMD"))
    assert dockerfile_instruction("CMD")[0] == "web"
    assert "--editable" not in DOCKERFILE.read_text() and " -e " not in DOCKERFILE.read_text()


def build_context(into: Path) -> Path:
    """A copy of what `docker build .` sends: the tree without what .dockerignore names."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    names = {p for p in patterns if "/" not in p and "*" not in p}
    context = into / "context"
    shutil.copytree(
        ROOT,
        context,
        ignore=lambda _, entries: [e for e in entries if e in names or e == "__pycache__" or e.endswith(".egg-info")],
    )
    assert not (context / "tests").exists() and not (context / ".venv").exists()
    return context


def test_the_images_commands_serve_from_a_fresh_install(tmp_path: Path) -> None:
    base, redis_url = _services()
    context = build_context(tmp_path)
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{context}[postgres]"],
        capture_output=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr.decode()[-3000:]

    url = make_url(base).set(database="test_d_image")
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("DROP DATABASE IF EXISTS test_d_image WITH (FORCE)"))
        conn.execute(text("CREATE DATABASE test_d_image"))
    Redis.from_url(redis_url).flushdb()
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": f"{environment / 'bin'}{os.pathsep}/usr/bin:/bin",
        "HOME": str(home),
        "TRACKER_DATA_DIR": str(home / "data"),  # the image's ENV
        "TRACKER_WEBHOOK_SECRET": SECRET,
        "TRACKER_DATABASE_URL": url.render_as_string(hide_password=False),
        "REDIS_URL": redis_url,
    }
    entrypoint = [str(environment / "bin" / dockerfile_instruction("ENTRYPOINT")[0])]
    port = str(free_port())  # the image listens on 8000 in its own network; here, a free port

    def image(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*entrypoint, *args], cwd=home, env=env, capture_output=True, timeout=timeout)

    web: subprocess.Popen[bytes] | None = None
    try:
        migrated = image("migrate")  # compose.yaml's one-shot service
        assert migrated.returncode == 0 and b"created the schema" in migrated.stdout, migrated.stderr.decode()
        command = [port if arg == "8000" else arg for arg in dockerfile_instruction("CMD")]
        web = subprocess.Popen([*entrypoint, *command], cwd=home, env=env, stderr=subprocess.PIPE)
        wait_until(lambda: healthy(int(port)), 60, "the image's web process did not answer")
        status = httpx.get(f"http://127.0.0.1:{port}/api/v1/status", timeout=10)
        assert status.status_code == 200 and "deliveries" in status.json()
        check = [port.join(part.split("8000")) for part in dockerfile_instruction("HEALTHCHECK")]
        check[0] = str(python)
        assert subprocess.run(check, env=env, timeout=30).returncode == 0  # the image's HEALTHCHECK
        assert image("worker", "--burst").returncode == 0
        swept = image("sweep")
        assert swept.returncode == 0 and b"found 0 pending" in swept.stdout, swept.stderr.decode()
        assert not list(home.glob("data/*.sqlite3"))  # PostgreSQL only
    finally:
        if web is not None:
            web.send_signal(signal.SIGTERM)
            assert web.wait(30) == 0
        with admin.connect() as conn:
            conn.execute(text("DROP DATABASE IF EXISTS test_d_image WITH (FORCE)"))
        admin.dispose()
