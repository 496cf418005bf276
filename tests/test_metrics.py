"""`tracker/metrics.py` and GET /metrics: a known workload gives known numbers, through the real app,
Redis, ledger and workers (in this process, where prometheus-client keeps its values in memory), and
`tracker run` adds up what its web processes and workers count (multiprocess mode)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from flask import Flask
from flask.testing import FlaskClient
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from redis import Redis
from rq.job import Job
from rq.registry import FailedJobRegistry, FinishedJobRegistry

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import SECRET, fixture_payload, post, running_app, show_head_to_github, signed_headers
from tests.support.processes import TRACKER, clean_env, free_port, wait_healthy
from tracker import metrics
from tracker.github.client import RateLimitState
from tracker.github.quota import Quota
from tracker.settings import Settings
from tracker.web.context import services
from tracker.web.signature import sign
from workers import runtime

pytestmark = needs_shared

REPO = "NVIDIA/Megatron-LM"
ADMIN = {"Authorization": "Bearer test-admin-token"}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(client: FlaskClient, headers: dict[str, str] | None = None) -> Samples:
    answer = client.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.content_type.startswith("text/plain")
    return parse(answer.get_data(as_text=True))


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def labelled(samples: Samples, name: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: v for (sample, labels), v in samples.items() if sample == name}


def stories(count: int) -> list[tuple[str, bytes]]:
    """`count` pull requests opened in September 2026, one delivery each."""
    out = []
    for number in range(1, count + 1):
        story = PullRequestStory(number, datetime(2026, 9, number + 1, 10, tzinfo=UTC), title=f"Change {number}")
        out.extend((d.delivery_id, d.body) for d in story.opened().deliveries)
    return out


def work(app: Flask) -> None:
    """Every queued job through the worker `tracker worker` runs (workers.runtime.Worker), in burst mode."""
    with app.app_context():
        built = services()
    runtime.work(built, burst=True)
    runtime.install(built)


def jobs_done(redis: Redis) -> tuple[Counter[str], Counter[str]]:
    """What RQ itself says ran, by job function: finished, and failed."""
    finished: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for name in ("deliveries", "github", "records"):
        finished_here = FinishedJobRegistry(name, connection=redis)
        failed_here = FailedJobRegistry(name, connection=redis)
        for registry, counts in ((finished_here, finished), (failed_here, failed)):
            for job_id in registry.get_job_ids():
                counts[Job.fetch(job_id, connection=redis).func_name] += 1
    return finished, failed


def test_a_known_workload_gives_known_numbers(app: Flask, client: FlaskClient, github: Any, redis: Redis) -> None:
    before = scrape(client)
    good = stories(3)
    for delivery_id, body in good:
        assert post(client, body, "pull_request", delivery_id).status_code == 202
    assert post(client, good[0][1], "pull_request", good[0][0]).json["status"] == "duplicate"
    for n in range(2):  # signed with another secret
        body = good[n][1]
        headers = signed_headers(body, "pull_request", f"forged-{n}", secret="not-the-secret")
        assert client.post("/webhook", data=body, headers=headers).status_code == 401
    assert post(client, b'{"action": "opened", ', "pull_request", "malformed-1").status_code == 400
    assert post(client, fixture_payload("push.json"), "push", "push-1").status_code == 204
    assert post(client, fixture_payload("ping.json"), "ping", "ping-1").status_code == 200
    headers = signed_headers(good[1][1], "pull_request", "no-event")
    del headers["X-GitHub-Event"]
    assert client.post("/webhook", data=good[1][1], headers=headers).status_code == 400

    queued = scrape(client)
    assert labelled(queued, "tracker_queue_jobs", "queue") == {
        "deliveries": redis.llen("rq:queue:deliveries"),
        "github": 0,
        "records": 0,
    }
    assert value(queued, "tracker_queue_jobs", queue="deliveries") == 1  # one drain for the three

    started = time.time()
    work(app)
    Quota(redis).record(
        RateLimitState(limit=5000, remaining=4321, reset=int(time.time()) + 600, resource="core"), False
    )
    assert client.get(f"/reports/{REPO}/2026-09.md?cutoff=2026-09-30").status_code == 200
    assert client.get(f"/reports/{REPO}/2026-09.json?cutoff=2026-09-30").status_code == 200
    assert client.get("/reports/nobody/nothing/2026-09.md").status_code == 404  # not an answered report
    answer = client.get("/metrics")
    text = answer.get_data(as_text=True)
    after = parse(text)

    # Deliveries: every request received, then accepted or rejected by its reason.
    assert delta(before, after, "tracker_webhook_deliveries_received_total") == 10
    assert delta(before, after, "tracker_webhook_deliveries_accepted_total") == 3
    rejected = {
        reason: delta(before, after, "tracker_webhook_deliveries_rejected_total", reason=reason)
        for reason in metrics.REJECTION_REASONS
    }
    assert rejected == {
        "bad_signature": 2,
        "missing_headers": 1,
        "malformed": 1,
        "oversized": 0,
        "unsupported_content_type": 0,
        "incomplete": 0,
        "unknown_event": 1,
        "duplicate": 1,
        "ping": 1,
        "other": 0,
    }
    # The lag of each delivery the drain applied, once.
    assert delta(before, after, "tracker_delivery_processing_lag_seconds_count") == 3
    lag = delta(before, after, "tracker_delivery_processing_lag_seconds_sum")
    assert 0 < lag < 3 * (time.time() - started + 60)

    # Jobs: what RQ says ran, by function, none failed.
    finished, failed = jobs_done(redis)
    assert not failed
    assert finished["workers.drain.drain_deliveries"] >= 1 and finished["workers.jobs.fetch_heads"] >= 1
    counted = {
        job: delta(before, after, "tracker_job_duration_seconds_count", job=job)
        for job in labelled(after, "tracker_job_duration_seconds_count", "job")
    }
    assert {job: n for job, n in counted.items() if n} == dict(finished)
    assert all(delta(before, after, "tracker_job_failures_total", job=job) == 0 for job in counted)

    # GitHub: every request the fake GitHub saw, by answer.
    answers = {a: delta(before, after, "tracker_github_requests_total", answer=a) for a in metrics.GITHUB_ANSWERS}
    assert sum(answers.values()) == len(github.requests) > 0
    assert answers["no_answer"] == 0 and answers["5xx"] == 0
    assert value(after, "tracker_github_quota_remaining_requests") == 4321
    assert value(after, "tracker_github_quota_limit_requests") == 5000

    # Reports answered, by format.
    for fmt, count in (("md", 1), ("json", 1), ("html", 0)):
        assert delta(before, after, "tracker_report_render_seconds_count", format=fmt) == count

    # Read at scrape time: the queues are empty now, and the repository's newest delivery is recent.
    assert labelled(after, "tracker_queue_jobs", "queue") == {"deliveries": 0, "github": 0, "records": 0}
    ages = labelled(after, "tracker_repository_last_delivery_age_seconds", "repository")
    assert list(ages) == [REPO]
    assert 0 <= ages[REPO] <= time.time() - started + 60
    assert labelled(after, "tracker_metrics_source_up", "source") == {"redis": 1, "ledger": 1}

    # Nothing secret, nothing from a body.
    for secret in (SECRET, "test-admin-token", "Change 1", "opened"):
        assert secret not in text


def test_a_redis_that_does_not_answer_leaves_its_metrics_out(app: Flask, client: FlaskClient, tmp_path: Path) -> None:
    with app.app_context():
        built = services()
    assert built.redis is not None
    kwargs = built.redis.connection_pool.connection_kwargs
    if "path" in kwargs:  # the embedded Redis, on a unix socket
        kwargs["path"] = str(tmp_path / "nothing.sock")
    else:
        kwargs.update(host="127.0.0.1", port=1)  # nothing listens there
    built.redis.connection_pool.disconnect()
    answer = client.get("/metrics")
    assert answer.status_code == 200
    samples = parse(answer.get_data(as_text=True))
    assert labelled(samples, "tracker_metrics_source_up", "source")["redis"] == 0
    assert not labelled(samples, "tracker_queue_jobs", "queue")


def test_finalisations_and_publications_are_counted(settings: Settings, tmp_path: Path, redis: Redis) -> None:
    config = tmp_path / "tracker.yaml"
    config.write_text(yaml.safe_dump({"repositories": {REPO: {"publish": {"directory": str(tmp_path / "out")}}}}))
    with running_app(settings.model_copy(update={"config_path": config})) as app:
        client = app.test_client()
        before = scrape(client)
        for delivery_id, body in stories(2):
            assert post(client, body, "pull_request", delivery_id).status_code == 202
        work(app)
        answer = client.post(f"/api/v1/repos/{REPO}/months/2026-09/finalize?force=1", headers=ADMIN)
        assert answer.status_code == 202, answer.json
        work(app)
        after = scrape(client)
    assert delta(before, after, "tracker_months_finalized_total") == 1
    assert delta(before, after, "tracker_publications_total", kind="files", edition="final") == 1
    assert delta(before, after, "tracker_publications_total", kind="issue", edition="final") == 0


def test_a_job_that_raises_is_timed_and_counted_as_failed(app: Flask, client: FlaskClient, redis: Redis) -> None:
    before = scrape(client)
    with app.app_context():
        services().records_queue.enqueue("workers.jobs.finalize_month", "nobody/nothing", "2026-09")
    work(app)
    after = scrape(client)
    _, failed = jobs_done(redis)
    assert failed == {"workers.jobs.finalize_month": 1}
    assert delta(before, after, "tracker_job_failures_total", job="workers.jobs.finalize_month") == 1
    assert delta(before, after, "tracker_job_duration_seconds_count", job="workers.jobs.finalize_month") == 1


def test_a_metrics_token_is_required_when_set(settings: Settings) -> None:
    token = "metrics-bearer-token-1234"
    with running_app(settings.model_copy(update={"metrics_token": SecretStr(token)})) as app:
        client = app.test_client()
        assert client.get("/metrics").status_code == 401
        wrong = client.get("/metrics", headers={"Authorization": "Bearer metrics-bearer-token-1235"})
        assert wrong.status_code == 401
        assert wrong.headers["WWW-Authenticate"] == 'Bearer realm="metrics"'
        assert client.get("/metrics", headers=ADMIN).status_code == 401  # the admin token is not this one
        answer = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200
        text = answer.get_data(as_text=True)
        assert "tracker_webhook_deliveries_received_total" in text
        assert token not in text and SECRET not in text


def test_without_a_token_the_endpoint_is_open(client: FlaskClient) -> None:
    assert client.get("/metrics").status_code == 200


def test_label_values_come_from_fixed_sets() -> None:
    assert metrics.job_label("workers.jobs.fetch_heads") == "workers.jobs.fetch_heads"
    assert metrics.job_label("os.system") == "other"
    assert metrics.job_label(None) == "other"
    assert metrics.job_label("workers.jobs.x; rm -rf /") == "other"


# --- `tracker run`: several processes, one sum ----------------------------------------------------


def per_process_received(directory: Path) -> dict[str, float]:
    """tracker_webhook_deliveries_received_total as each process's own file holds it."""
    counts = {}
    for path in directory.glob("counter_*.db"):
        for family in MultiProcessCollector.merge([str(path)]):
            for sample in family.samples:
                if sample.name == "tracker_webhook_deliveries_received_total" and sample.value:
                    counts[path.stem.removeprefix("counter_")] = sample.value
    return counts


def test_tracker_run_adds_up_what_its_processes_count(data_dir: Path, github: Any) -> None:
    port = free_port()
    token = "metrics-token-for-the-run"
    env = clean_env(
        TRACKER_WEBHOOK_SECRET=SECRET,
        TRACKER_DATA_DIR=str(data_dir),
        GITHUB_API_URL=github.url,
        TRACKER_METRICS_TOKEN=token,
    )
    log = data_dir / "run.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*TRACKER, "run", "--port", str(port), "--workers", "1", "--web-processes", "2", "--sweep-every", "600"],
            env=env,
            stderr=stderr,
        )
    base = f"http://127.0.0.1:{port}"
    directory = data_dir / "metrics" / f"run-{process.pid}"
    try:
        wait_healthy(base)
        assert directory.is_dir()
        deliveries = stories(24)
        for _, body in deliveries:
            show_head_to_github(body)

        def send(item: tuple[str, bytes]) -> int:
            delivery_id, body = item
            headers = {
                "Content-Type": "application/json",
                "X-GitHub-Event": "pull_request",
                "X-GitHub-Delivery": delivery_id,
                "X-Hub-Signature-256": sign(SECRET.encode(), body),
            }
            return httpx.post(f"{base}/webhook", content=body, headers=headers, timeout=30).status_code

        with ThreadPoolExecutor(8) as pool:  # at once, so that both web processes take some
            assert set(pool.map(send, deliveries)) == {202}
        forged = {"Content-Type": "application/json", "X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "x"}
        assert httpx.post(f"{base}/webhook", content=b"{}", headers=forged, timeout=30).status_code == 401

        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{base}/metrics", timeout=10).status_code == 401

        def scraped() -> Samples:
            answer = httpx.get(f"{base}/metrics", headers=auth, timeout=10)
            assert answer.status_code == 200
            assert token not in answer.text and SECRET not in answer.text
            return parse(answer.text)

        deadline = time.monotonic() + 60
        drains = {"job": "workers.drain.drain_deliveries"}
        while True:  # until the worker processed them all and a drain ended (its counts, read by a web process)
            samples = scraped()
            lags = value(samples, "tracker_delivery_processing_lag_seconds_count")
            if lags == len(deliveries) and value(samples, "tracker_job_duration_seconds_count", **drains) >= 1:
                break
            assert time.monotonic() < deadline, json.dumps({str(k): v for k, v in samples.items()})[:2000]
            time.sleep(0.3)
        processes = per_process_received(directory)
        assert len(processes) == 2, processes  # both web processes took deliveries
        assert sum(processes.values()) == len(deliveries) + 1
        for _ in range(6):  # whichever process answers, the sum of all
            samples = scraped()
            assert value(samples, "tracker_webhook_deliveries_received_total") == len(deliveries) + 1
            assert value(samples, "tracker_webhook_deliveries_accepted_total") == len(deliveries)
            assert value(samples, "tracker_webhook_deliveries_rejected_total", reason="bad_signature") == 1
            assert value(samples, "tracker_job_duration_seconds_count", job="workers.drain.drain_deliveries") >= 1
            assert labelled(samples, "tracker_repository_last_delivery_age_seconds", "repository").keys() == {REPO}
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()[-3000:]
    assert not directory.exists(), "tracker run left its metrics directory behind"
