"""What producing reports leaves in Redis may be evicted, and nothing else: the embedded server evicts by
`volatile-lru` (tracker.embedded_redis), which only drops keys with a time to live, so every key the
reports write (the month's digest and its base, groupings, rendered documents and their index, the warm
job's marks) must have one, and RQ's queued jobs and queues must not. Real app, Redis and ledger;
deliveries through the webhook and the worker's jobs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient

from bench.fixtures.paths import require_shared

require_shared()  # bench.fixtures.fake_github reads GitHub's example answers from ../shared as it loads

from tests.reports.test_warm import REPO, deliver, this_month  # noqa: E402
from tracker.reports.cache import rendered_bytes  # noqa: E402
from tracker.reports.digests import digest_key, forget_held  # noqa: E402
from tracker.reports.loading import resolve  # noqa: E402
from tracker.reports.warm import DOCUMENTS, warm_month  # noqa: E402
from tracker.services import Services  # noqa: E402
from tracker.web.context import services  # noqa: E402


@pytest.fixture
def built(app: Flask) -> Iterator[Services]:
    with app.app_context():
        yield services()


def test_every_key_producing_reports_writes_expires_while_a_queued_job_does_not(
    app: Flask, client: FlaskClient, built: Services
) -> None:
    deliver(client, app, 1, "Add a paged KV cache for inference")
    deliver(client, app, 2, "Speed up the data loader")
    redis = built.require_redis()
    redis.flushdb()  # what the deliveries' jobs left: only what the reports write from here on
    job = built.delivery_queue.enqueue("workers.jobs.process_delivery", "a delivery not processed yet")
    month = str(this_month())
    # The warm job's work (digest, groupings, month-to-date documents, earlier cutoffs' groupings), then
    # requests of a process that never read the month, through the web and the reports' own functions.
    warm_month(built, REPO, month)
    assert redis.exists(digest_key(built, resolve(built, REPO, month, None)))
    forget_held()
    owner, name = REPO.split("/")
    for fmt in ("md", "html", "json"):
        assert client.get(f"/reports/{owner}/{name}/current.{fmt}").status_code == 200
    request = resolve(built, REPO, month, None)
    first = request.window.month.first_day
    for cutoff in {first, request.window.cutoff - timedelta(days=1)}:
        if cutoff >= first:
            earlier = resolve(built, REPO, month, cutoff.isoformat())
            for document in DOCUMENTS:
                rendered_bytes(built, earlier, document, cache=redis)
    written = sorted(key.decode() for key in redis.scan_iter(count=1000))
    assert any(key.startswith("tracker:render:") for key in written)
    assert any(key.startswith("tracker:grouping:") for key in written)
    lasting = [key for key in written if not key.startswith("rq:") and redis.ttl(key) < 0]
    assert not lasting, f"keys the reports write without a time to live (never evicted): {lasting}"
    # The queued job and its queue have none: `volatile-lru` never picks them.
    assert redis.ttl(job.key) == -1
    assert redis.ttl(built.delivery_queue.key) == -1
    assert job.id in built.delivery_queue.get_job_ids()
