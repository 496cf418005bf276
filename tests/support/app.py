"""The app in this process: signed deliveries posted to its webhook, its queued jobs run by a burst
worker (as RQ's own tests do), a month of stories delivered."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from rq import SimpleWorker

from bench.fixtures.paths import WEBHOOKS, require_shared
from bench.fixtures.scenario import REPO, MonthScenario
from tracker.queue import github_queue
from tracker.settings import Settings
from tracker.web.app import create_app
from tracker.web.context import services
from tracker.web.signature import sign
from workers import runtime

SECRET = "test-webhook-secret"

# The fake GitHub of the running test (set by the `github` fixture): a pull request posted with `post`
# makes its head known to it, as GitHub knows the heads it sends.
ACTIVE_GITHUB: list[Any] = []


@contextmanager
def running_app(settings: Settings) -> Iterator[Flask]:
    """The app, with the worker runtime installed for jobs run in this process."""
    app = create_app(settings)
    app.config["TESTING"] = True
    with app.app_context():
        built = services()
    runtime.install(built)  # the same services object the web app uses
    try:
        yield app
    finally:
        runtime.install(None)
        built.close()


def signed_headers(body: bytes, event: str, delivery_id: str, secret: str = SECRET) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id,
        "X-GitHub-Hook-ID": "4242",
        "X-Hub-Signature-256": sign(secret.encode(), body),
        "User-Agent": "GitHub-Hookshot/test",
    }


def post(client: FlaskClient, payload: dict[str, Any] | bytes, event: str, delivery_id: str) -> Any:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    if ACTIVE_GITHUB and event == "pull_request":
        show_head_to_github(body)
    return client.post("/webhook", data=body, headers=signed_headers(body, event, delivery_id))


def show_head_to_github(body: bytes) -> None:
    from urllib.parse import parse_qs

    try:
        try:
            document = json.loads(body)
        except ValueError:
            document = json.loads(parse_qs(body.decode())["payload"][0])
        pr = document["pull_request"]
        repo = document["repository"]["full_name"]
        ACTIVE_GITHUB[0].saw_head(repo, pr["number"], pr["head"]["sha"], pr["updated_at"])
    except (ValueError, KeyError, TypeError):
        pass  # a malformed body: the webhook refuses it anyway


def stored_count(app: Flask) -> int:
    """Deliveries stored, in the ledger or (SQLite) the webhook's inbox, which the drain has yet to move."""
    with app.app_context():
        return len(services().ledger.accepted_ids())


class BurstWorker(SimpleWorker):
    """RQ's SimpleWorker without its pub/sub thread, as the tracker's own worker (workers.runtime): that
    thread serves `rq` command-line requests no test sends, and with redis-py 8.2 a burst worker's
    teardown sometimes waited for it for minutes (`PubSubWorkerThread.stop` joining a thread blocked in
    `get_message`)."""

    def subscribe(self) -> None:
        pass

    def unsubscribe(self) -> None:
        pass


def run_jobs(app: Flask) -> None:
    """Run every queued job in this process, deliveries first (RQ's own tests do the same)."""
    with app.app_context():
        s = services()
        queues = [s.delivery_queue, s.records_queue, github_queue(s.redis)]
        while any(q.count for q in queues):
            BurstWorker(queues, connection=s.redis).work(burst=True, with_scheduler=False)


def release_due_jobs(app: Flask, at: float | None = None) -> int:
    """Move re-scheduled jobs whose time has come (by `at`, epoch seconds, default now) back onto their
    queue (a worker's scheduler does this every second in production)."""
    from rq.registry import ScheduledJobRegistry

    released = 0
    with app.app_context():
        s = services()
        for queue in (s.delivery_queue, s.records_queue, github_queue(s.redis)):
            registry = ScheduledJobRegistry(queue=queue, connection=s.redis)  # type: ignore[no-untyped-call]
            for job_id in registry.get_jobs_to_schedule(int(time.time() if at is None else at)):
                job = queue.fetch_job(job_id)
                registry.remove(job_id)
                if job is not None:
                    queue.enqueue_job(job)
                    released += 1
    return released


def fixture_payload(name: str) -> dict[str, Any]:
    require_shared()  # GitHub's example payloads: skipped in a clone without ../shared
    payload: dict[str, Any] = json.loads((WEBHOOKS / name).read_text())
    return payload


def deliver_month(scenario: MonthScenario, app: Flask, client: FlaskClient, github: Any) -> None:
    """Post every delivery through the webhook, each head's files known to the fake GitHub as it is
    pushed, and run the jobs after each PR."""
    heads = {(number, sha): paths for number, sha, paths in scenario.head_files()}
    for story in scenario.stories:
        for d in story.deliveries:
            sha = json.loads(d.body)["pull_request"]["head"]["sha"]
            if (story.number, sha) in heads:
                github.set_files(REPO, story.number, sha, heads[(story.number, sha)])
            assert post(client, d.body, d.event, d.delivery_id).status_code == 202
        run_jobs(app)
