"""Logs people can use (issue 11): one format in every process, an access log without secrets, RQ's
per-job chatter only with -v, and GitHub's refusals and waits as warnings and in /api/v1/status."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis
from rq import Queue

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import SECRET, post, run_jobs, running_app, show_head_to_github, signed_headers
from tests.support.processes import TRACKER, clean_env, free_port, wait_healthy, wait_processed
from tracker import logs
from tracker.core.window import iso_utc
from tracker.queue import QUEUE_NAME
from tracker.settings import SettingsError, load_settings
from tracker.web.server import access_log
from tracker.web.signature import sign

LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: .*")
TOKEN = "ghp_not-a-real-token-but-secret-4242"


# --- the web access log --------------------------------------------------------------------------


@needs_shared
def test_the_access_log_has_one_line_per_request_and_no_secrets(data_dir: Path, redis_url: str) -> None:
    """`tracker web` as run in production (gunicorn's master, Tornado in the worker)."""
    story = PullRequestStory(7, datetime(2026, 9, 2, 10, tzinfo=UTC), title="Body marker 7f3a9c").opened()
    delivery = story.deliveries[0]
    signature = sign(SECRET.encode(), delivery.body)
    port = free_port()
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), REDIS_URL=redis_url)
    log = data_dir / "web.log"
    with log.open("wb") as stderr:
        web = subprocess.Popen([*TRACKER, "web", "--port", str(port), "--processes", "1"], env=env, stderr=stderr)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": delivery.delivery_id,
            "X-Hub-Signature-256": signature,
        }
        assert httpx.post(f"{base}/webhook", content=delivery.body, headers=headers).status_code == 202
        report = f"{base}/reports/NVIDIA/Megatron-LM/2026-09.md?cutoff=2026-09-13&token=link-secret-5150&lang=en"
        assert httpx.get(report).status_code == 404  # no delivery processed yet: the path is what matters
        wrong = {**headers, "X-GitHub-Delivery": "wrong-signature-1", "X-Hub-Signature-256": "sha256=" + "0" * 64}
        assert httpx.post(f"{base}/webhook", content=delivery.body, headers=wrong).status_code == 401
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(30)
    text = log.read_text()
    lines = [line for line in text.splitlines() if "tracker.access" in line]
    posted = [line for line in lines if " POST /webhook " in line]
    assert len(posted) == 2, text
    assert re.fullmatch(
        LINE.pattern[: -len(".*")] + rf"POST /webhook 202 \d+ ms delivery={re.escape(delivery.delivery_id)}", posted[0]
    ), posted[0]
    assert posted[0].split(" ")[2:4] == ["INFO", "tracker.access:"]
    assert re.search(r"POST /webhook 401 \d+ ms delivery=wrong-signature-1$", posted[1]), posted[1]
    read = [line for line in lines if "/reports/" in line]
    assert len(read) == 1, text
    query = r"\?cutoff=2026-09-13&token=redacted&lang=en"
    assert re.search(r"GET /reports/NVIDIA/Megatron-LM/2026-09\.md" + query + r" 404 \d+ ms$", read[0]), read[0]
    for secret in (signature, signature.split("=", 1)[1], "link-secret-5150", "Body marker 7f3a9c", SECRET):
        assert secret not in text
    # One format for every line the process wrote (gunicorn's own lines included).
    for line in text.splitlines():
        assert LINE.fullmatch(line), line


def test_the_access_log_middleware_logs_failures_and_redacts_queries(caplog: pytest.LogCaptureFixture) -> None:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ["PATH_INFO"] == "/boom":
            raise RuntimeError("boom")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"secret body"]

    logged = access_log(app)
    caplog.set_level(logging.INFO, logger="tracker.access")

    def call(path: str, query: str = "", **headers: str) -> None:
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query, "SCRIPT_NAME": "", **headers}
        answer = logged(environ, lambda *a: None)
        b"".join(answer)
        answer.close()  # type: ignore[attr-defined]

    call("/reports/a/b/2026-09.html", "token=abc.def&cutoff=2026-09-13&access_token=x1&api_key=x2")
    call("/healthz", HTTP_X_GITHUB_DELIVERY="line\nbreak")
    call("/new\nline")
    with pytest.raises(RuntimeError):
        call("/boom")
    messages = [r.getMessage() for r in caplog.records if r.name == "tracker.access"]
    assert len(messages) == 4, messages
    assert re.fullmatch(
        r"GET /reports/a/b/2026-09\.html\?token=redacted&cutoff=2026-09-13&access_token=redacted&api_key=redacted "
        r"200 \d+ ms",
        messages[0],
    ), messages[0]
    assert messages[1].endswith("delivery=(malformed)")
    assert messages[2].startswith("GET /new%0Aline 200 ")
    assert re.fullmatch(r"GET /boom 500 \d+ ms", messages[3])
    assert all("\n" not in m and "secret body" not in m and "abc.def" not in m for m in messages)


# --- RQ's per-job chatter ------------------------------------------------------------------------


@pytest.mark.parametrize("verbose", [False, True])
def test_rq_job_lines_only_with_verbose(data_dir: Path, redis_url: str, verbose: bool) -> None:
    Queue(QUEUE_NAME, connection=Redis.from_url(redis_url)).enqueue("builtins.len", [1, 2, 3])
    env = clean_env(TRACKER_DATA_DIR=str(data_dir), REDIS_URL=redis_url)
    command = [*TRACKER, *(["-v"] if verbose else []), "worker", "--burst"]
    done = subprocess.run(command, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    text = done.stderr.decode()
    chatter = ("Job OK", "result is kept", "started with PID", "cleaning registries")
    if verbose:
        assert re.search(r"INFO rq\.worker: .*Job OK", text), text
        for line in text.splitlines():
            assert LINE.fullmatch(line), line
    else:
        assert not any(word in text for word in chatter), text
    assert done.stdout == b""  # RQ's own handlers (stdout) are not installed: its lines go through ours


@pytest.mark.parametrize("verbose", [False, True])
def test_verbose_reaches_every_part_of_tracker_run(data_dir: Path, verbose: bool) -> None:
    port = free_port()
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir))
    log = data_dir / "run.log"
    command = [*TRACKER, *(["-v"] if verbose else []), "run", "--port", str(port), "--workers", "1"]
    with log.open("wb") as stderr:
        process = subprocess.Popen(command, env=env, stderr=stderr)
    try:
        wait_healthy(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 20
        while verbose and "DEBUG rq.worker:" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    text = log.read_text()
    for part in ("gunicorn.error", "rq.worker"):  # the web process, a worker
        assert (f"DEBUG {part}:" in text) is verbose, text
    if not verbose:
        assert " DEBUG " not in text and "rq.worker" not in text, text


# --- GitHub's refusals and waits -----------------------------------------------------------------


@pytest.fixture
def with_token(tmp_path: Path, database_url: str, redis_url: str, github: Any) -> Iterator[Any]:
    settings = load_settings(
        github_api_url=github.url,
        github_token=TOKEN,
        webhook_secret=SECRET,
        data_dir=tmp_path / "var",
        database_url=database_url,
        redis_url=redis_url,
    )
    with running_app(settings) as app:
        yield app


def deliver_and_fetch(app: Any, number: int) -> None:
    story = PullRequestStory(number, datetime(2026, 9, 2, 10, tzinfo=UTC)).opened()
    client = app.test_client()
    for d in story.deliveries:
        show_head_to_github(d.body)
        assert post(client, d.body, d.event, d.delivery_id).status_code == 202
    run_jobs(app)


def github_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "workers.jobs" and r.levelno == logging.WARNING]


def no_token_anywhere(caplog: pytest.LogCaptureFixture, status: dict[str, Any]) -> None:
    assert TOKEN not in caplog.text
    assert TOKEN not in json.dumps(status)


@needs_shared
def test_bad_credentials_are_a_warning_and_the_last_error_in_status(
    with_token: Any, github: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    github.script(r"/pulls/\d+/files", Scripted(401, body={"message": "Bad credentials"}))
    before = int(time.time())
    deliver_and_fetch(with_token, 11)
    warnings = github_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("GitHub: the files of NVIDIA/Megatron-LM#11 at ")
    assert "GitHub answered 401 for " in warnings[0] and "Bad credentials" in warnings[0]
    assert warnings[0].endswith("bad credentials, check GITHUB_TOKEN (or the GitHub App's settings)")
    status = with_token.test_client().get("/api/v1/status").json
    last = status["github"]["last_error"]
    assert set(last) == {"message", "at", "next_try"}
    assert last["message"] == warnings[0].removeprefix("GitHub: ")
    assert iso_utc(before) <= last["at"] <= iso_utc(int(time.time()))
    assert last["next_try"] is None  # a refusal is not tried again by itself
    no_token_anywhere(caplog, status)


@needs_shared
def test_a_rate_limit_is_a_warning_with_until_when_and_the_next_try_in_status(
    with_token: Any, github: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    reset = int(time.time()) + 3600
    limited = Scripted(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}, {"message": "rate limit"})
    github.script(r"/pulls/\d+/files", limited)
    deliver_and_fetch(with_token, 12)
    deliver_and_fetch(with_token, 13)  # held back without asking GitHub: no second warning
    warnings = github_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("GitHub: the files of NVIDIA/Megatron-LM#12 at ")
    assert warnings[0].endswith(f": primary rate limit: waiting until {iso_utc(reset + 1)}")
    status = with_token.test_client().get("/api/v1/status").json
    last = status["github"]["last_error"]
    assert last["message"].endswith(f"primary rate limit: waiting until {iso_utc(reset + 1)}")
    assert last["next_try"] == iso_utc(reset + 1) == status["github"]["blocked_until"]
    no_token_anywhere(caplog, status)


@needs_shared
def test_github_unavailable_is_a_warning_with_the_next_try(
    with_token: Any, github: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    github.script(r"/pulls/\d+/files", Scripted(502), Scripted(502), Scripted(502))
    deliver_and_fetch(with_token, 14)
    warnings = github_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert re.search(r"GitHub unavailable \(GitHub answered 502 for .*\); next try in \d+ s$", warnings[0])
    status = with_token.test_client().get("/api/v1/status").json
    last = status["github"]["last_error"]
    assert last["next_try"] is not None and last["next_try"] > last["at"]
    no_token_anywhere(caplog, status)


def Scripted(*args: Any, **kwargs: Any) -> Any:  # noqa: N802  (bench.fixtures.fake_github reads ../shared as it loads)
    from bench.fixtures.fake_github import Scripted as scripted

    return scripted(*args, **kwargs)


# --- TRACKER_LOG_FORMAT=json (issue 15) ----------------------------------------------------------

ADMIN = "admin-token-not-for-logs-9911"
BODY_MARKER = "Body marker 5e1d77"
JSON_FIELDS = {"time", "level", "logger", "message"}
ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


@pytest.fixture
def logging_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`logs.configure` changes the process's logging: put everything back afterwards."""
    root = logging.getLogger()
    names = ("tracker", "workers", "rq", "rq.worker", "httpx", "httpcore", "hpack")
    levels = {name: logging.getLogger(name).level for name in names}
    handlers, root_level = list(root.handlers), root.level
    for name in ("_verbose", "_format", "_secrets"):
        monkeypatch.setattr(logs, name, getattr(logs, name))
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(root_level)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of `text` as the JSON object it must be."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    for line in lines:
        assert isinstance(line, dict) and line.keys() >= JSON_FIELDS, line
        assert ISO_UTC.fullmatch(line["time"]), line
    return lines


def json_settings(tmp_path: Path, database_url: str, redis_url: str, **extra: Any) -> Any:
    return load_settings(
        webhook_secret=SECRET,
        admin_token=ADMIN,
        github_token=TOKEN,
        data_dir=tmp_path / "var",
        database_url=database_url,
        redis_url=redis_url,
        log_format="json",
        **extra,
    )


def test_the_log_format_setting(no_tracker_environment: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACKER_LOG_FORMAT", raising=False)
    assert load_settings().log_format == "text"
    monkeypatch.setenv("TRACKER_LOG_FORMAT", " JSON ")
    assert load_settings().log_format == "json"
    monkeypatch.setenv("TRACKER_LOG_FORMAT", "xml")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert "TRACKER_LOG_FORMAT" in str(refused.value) and "'text' or 'json'" in str(refused.value)


def test_a_wrong_log_format_stops_the_start_up_in_one_line(data_dir: Path) -> None:
    env = clean_env(TRACKER_WEBHOOK_SECRET=SECRET, TRACKER_DATA_DIR=str(data_dir), TRACKER_LOG_FORMAT="xml")
    done = subprocess.run([*TRACKER, "run", "--port", str(free_port())], env=env, capture_output=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: invalid settings: "), lines
    assert "TRACKER_LOG_FORMAT" in lines[0] and "'text' or 'json'" in lines[0]


def test_plain_text_stays_the_default(
    logging_restored: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRACKER_LOG_FORMAT", raising=False)
    logs.configure(False, load_settings(webhook_secret=SECRET, link_secret="tiny"))  # too short to star
    assert logs.log_format() == "text"
    assert logs.child_environment() == {"TRACKER_LOG_FORMAT": "text"}
    with logs.context(delivery_id="d-1", repository="o/r"):
        logging.getLogger("tracker.test").info("a tiny line for %s", "people", extra={"status": 202})
        logging.getLogger("tracker.test").warning("the secret %s and redis://:pw-7@host:6379/0", SECRET)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert LINE.fullmatch(lines[0]) and lines[0].endswith(" INFO tracker.test: a tiny line for people"), lines[0]
    assert lines[1].endswith(" WARNING tracker.test: the secret *** and redis://:***@host:6379/0"), lines[1]


def test_json_lines_have_the_context_of_a_line_and_nothing_else(
    logging_restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(False, load_settings(log_format="json", webhook_secret=SECRET, admin_token=ADMIN))
    assert logs.child_environment() == {"TRACKER_LOG_FORMAT": "json"}
    log = logging.getLogger("workers.test")
    with logs.context(delivery_id="d-1", repository="o/r"):
        with logs.context(job_id="job-1", repository="p/q"):  # the inner block wins
            log.info("inner", extra={"headers": {"X-Hub-Signature-256": "sha256=feed"}, "body": BODY_MARKER})
        log.warning("outer %s / %s", SECRET, ADMIN, extra={"repository": "x/y"})  # extra= wins
        try:
            raise RuntimeError(f"postgresql+psycopg://bob:pw-{TOKEN}@db/ledger")
        except RuntimeError:
            log.exception("failed\nover two lines")
    log.info("outside")
    lines = json_lines(capsys.readouterr().err)
    assert [line["message"] for line in lines] == ["inner", "outer *** / ***", "failed\nover two lines", "outside"]
    inner, outer, failed, outside = lines
    assert inner == {**inner, "level": "INFO", "logger": "workers.test", "delivery_id": "d-1", "job_id": "job-1"}
    assert inner["repository"] == "p/q" and list(inner)[:4] == ["time", "level", "logger", "message"]
    assert set(inner) == JSON_FIELDS | {"delivery_id", "repository", "job_id"}  # no headers, no body
    assert outer["repository"] == "x/y" and outer["delivery_id"] == "d-1" and "job_id" not in outer
    assert failed["exc_info"].startswith("Traceback") and "postgresql+psycopg://bob:***@db/ledger" in failed["exc_info"]
    assert set(outside) == JSON_FIELDS
    with pytest.raises(ValueError, match="not a context field"), logs.context(token="x"):
        pass


def test_the_access_log_tags_what_a_request_logs_with_its_delivery_id(
    logging_restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(False, load_settings(log_format="json"))

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        logging.getLogger("tracker.web.webhook").warning("inside the request")
        start_response("202 Accepted", [("Content-Type", "application/json")])
        return [b"{}"]

    logged = access_log(app)
    for delivery in ("4e7c0f2a-1111-2222-3333-444455556666", "bad delivery id\n"):
        environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/webhook", "HTTP_X_GITHUB_DELIVERY": delivery}
        answer = logged(environ, lambda *a: None)
        b"".join(answer)
        answer.close()  # type: ignore[attr-defined]
    inside, access, inside_malformed, access_malformed = json_lines(capsys.readouterr().err)
    assert inside["delivery_id"] == access["delivery_id"] == "4e7c0f2a-1111-2222-3333-444455556666"
    assert access["logger"] == "tracker.access" and access["method"] == "POST" and access["path"] == "/webhook"
    assert access["status"] == 202 and isinstance(access["duration_ms"], float)
    assert "delivery_id" not in inside_malformed and "delivery_id" not in access_malformed
    assert access_malformed["message"].endswith("delivery=(malformed)")


@needs_shared
def test_a_signed_delivery_logs_json_without_secret_or_body(
    logging_restored: None, capsys: pytest.CaptureFixture[str], tmp_path: Path, database_url: str, redis_url: str
) -> None:
    """The web app as `tracker web` serves it (the access log around it), through Flask's test client."""
    settings = json_settings(tmp_path, database_url, redis_url)
    logs.configure(False, settings)
    story = PullRequestStory(31, datetime(2026, 9, 2, 10, tzinfo=UTC), title=BODY_MARKER).opened()
    delivery = story.deliveries[0]
    with running_app(settings) as app:
        app.wsgi_app = access_log(app.wsgi_app)  # type: ignore[method-assign]
        client = app.test_client()
        capsys.readouterr()
        headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "wrong-1", "X-Hub-Signature-256": "sha256=0"}
        answers = [
            post(client, delivery.body, delivery.event, delivery.delivery_id),
            client.post("/webhook", data=delivery.body, headers=headers),
            client.get(f"/api/v1/status?token={ADMIN}", headers={"Authorization": f"Bearer {ADMIN}"}),
        ]
        for answer in answers:
            answer.close()  # the server closes the answer once sent: the access log writes its line then
        assert [answer.status_code for answer in answers] == [202, 401, 200]
    text = capsys.readouterr().err
    lines = json_lines(text)
    access = [line for line in lines if line["logger"] == "tracker.access"]
    assert [(line["method"], line["path"], line["status"]) for line in access] == [
        ("POST", "/webhook", 202),
        ("POST", "/webhook", 401),
        ("GET", "/api/v1/status?token=redacted", 200),
    ]
    assert access[0]["delivery_id"] == delivery.delivery_id and access[1]["delivery_id"] == "wrong-1"
    # The repository once the body was read; a refused body names none.
    assert access[0]["repository"] == "NVIDIA/Megatron-LM" and "repository" not in access[1]
    signature = sign(SECRET.encode(), delivery.body)
    for secret in (SECRET, signature.removeprefix("sha256="), ADMIN, TOKEN, BODY_MARKER):
        assert secret not in text, secret


@needs_shared
def test_a_worker_job_logs_json_with_its_job_id(
    logging_restored: None, capsys: pytest.CaptureFixture[str], tmp_path: Path, database_url: str, redis_url: str
) -> None:
    import threading

    from tracker.services import Services
    from workers.runtime import Worker, install

    settings = json_settings(tmp_path, database_url, redis_url)
    logs.configure(True, settings)  # -v: RQ's own "Job OK" lines too
    services = Services.from_settings(settings)
    try:
        install(services)
        job = services.delivery_queue.enqueue("logging.warning", "said inside the job")
        capsys.readouterr()
        Worker(services, threading.Event()).work(burst=True, logging_level=logs.rq_level())
    finally:
        install(None)
        services.close()
    lines = json_lines(capsys.readouterr().err)
    inside = [line for line in lines if line["message"] == "said inside the job"]
    assert len(inside) == 1 and inside[0]["job_id"] == job.id and inside[0]["level"] == "WARNING", lines
    done = [line for line in lines if line["logger"] == "rq.worker" and "Job OK" in line["message"]]
    assert len(done) == 1 and done[0]["job_id"] == job.id, lines
    assert all("job_id" not in line for line in lines if "listening" in line["message"].lower())


@needs_shared
def test_every_part_of_tracker_run_logs_json(data_dir: Path) -> None:
    """`tracker -v run` with TRACKER_LOG_FORMAT=json: the supervisor, the web process (gunicorn's lines
    and the access log), the workers, the sweep and the schedule write nothing but JSON lines."""
    story = PullRequestStory(41, datetime(2026, 9, 2, 10, tzinfo=UTC), title=BODY_MARKER).opened()
    delivery = story.deliveries[0]
    port = free_port()
    env = clean_env(
        TRACKER_WEBHOOK_SECRET=SECRET,
        TRACKER_ADMIN_TOKEN=ADMIN,
        GITHUB_TOKEN=TOKEN,
        GITHUB_API_URL="http://127.0.0.1:9",  # nothing listens: a fetch fails, and says so without the token
        TRACKER_DATA_DIR=str(data_dir),
        TRACKER_LOG_FORMAT="json",
    )
    log = data_dir / "run.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*TRACKER, "-v", "run", "--port", str(port), "--workers", "1"], env=env, stderr=stderr
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        headers = signed_headers(delivery.body, "pull_request", delivery.delivery_id)
        assert httpx.post(f"{base}/webhook", content=delivery.body, headers=headers).status_code == 202
        wait_processed(base, 1)
        deadline = time.monotonic() + 20
        while '"job_id"' not in log.read_text() or "Job OK" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    text = log.read_text()
    lines = json_lines(text)
    loggers = {line["logger"] for line in lines}
    assert {"tracker.supervisor", "gunicorn.error", "tracker.access", "rq.worker"} <= loggers, loggers
    posted = [line for line in lines if line["logger"] == "tracker.access" and line.get("path") == "/webhook"]
    assert len(posted) == 1 and posted[0]["delivery_id"] == delivery.delivery_id and posted[0]["status"] == 202
    assert any(line.get("job_id") and "Job OK" in line["message"] for line in lines), text
    for secret in (SECRET, ADMIN, TOKEN, BODY_MARKER, headers["X-Hub-Signature-256"]):
        assert secret not in text, secret
