"""Unit tests of `tracker.queue`: the delivery and GitHub queues on Redis (RQ), against a real Redis."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import pytest
from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.retry import Retry as RedisRetry
from rq import Queue, Retry, get_current_job
from rq.job import Job, JobStatus, validate_job_id
from rq.registry import ScheduledJobRegistry

from bench.fixtures.factory import PullRequestStory
from bench.fixtures.paths import needs_shared
from tests.support.app import BurstWorker
from tests.support.watchdog import finishes
from tracker.queue import (
    DRAIN_WAITING_KEY,
    FETCH_BATCH,
    FETCH_BATCH_FUNCTION,
    FETCH_FUNCTION,
    GITHUB_QUEUE_NAME,
    JOB_FUNCTION,
    QUEUE_NAME,
    WEB_REDIS,
    WORKER_DEQUEUE_TIMEOUT,
    WORKER_REDIS,
    WORKER_TTL,
    Backoff,
    DrainAsker,
    connect_redis,
    delivery_queue,
    enqueue_deliveries,
    enqueue_head_fetch,
    enqueue_head_fetches,
    fetch_done,
    fetch_job_id,
    github_queue,
    job_id,
    queue_counts,
    redis_run,
    run_job_id,
    waiting_jobs,
    waiting_on_github,
)

FULL_NAME = "NVIDIA/Megatron-LM"
REPO = "nvidia/megatron-lm"
HEAD = "0" * 40
BASE = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
# sha256("nvidia/megatron-lm#7@" + "0" * 40)[:40], worked out apart from the module.
FETCH_ID = "files-5486ad815ba5bc6e384506e208fda51927ace62d"
MARKER = f"tracker:fetch:{FETCH_ID}"


@pytest.fixture
def deliveries(redis: Redis) -> Queue:
    return delivery_queue(redis)


@pytest.fixture
def github(redis: Redis) -> Queue:
    return github_queue(redis)


def run_burst(*queues: Queue) -> None:
    """Run every queued job in this process, without the scheduler (scheduled jobs stay scheduled)."""
    BurstWorker(list(queues), connection=queues[0].connection).work(burst=True, with_scheduler=False)


def counts_from_inside_a_job() -> dict[str, int]:
    """A job function: the counts of its own queue while it runs."""
    job = get_current_job()
    assert job is not None
    return queue_counts(Queue(job.origin, connection=job.connection))


def delivery_ids(count: int) -> list[str]:
    story = PullRequestStory(1, datetime(2026, 9, 2, 10, tzinfo=UTC)).opened()
    for day in range(3, 3 + count - 1):
        story.pushed(datetime(2026, 9, day, 10, tzinfo=UTC))
    return [d.delivery_id for d in story.deliveries]


# --- job ids -----------------------------------------------------------------------------------


def test_job_id_keeps_an_id_rq_accepts() -> None:
    assert job_id("delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958") == "delivery-72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert job_id("delivery", "abc_DEF-09") == "delivery-abc_DEF-09"
    assert job_id("delivery", "a" * 100) == "delivery-" + "a" * 100


def test_job_id_hashes_an_id_rq_would_refuse() -> None:
    assert job_id("files", "nvidia/megatron-lm#1@abc") == "files-70638837c7564b97a49feee09fe2d1b4996a9f97"
    assert job_id("delivery", "x.y") == "delivery-b24ca9b75eb7b75775b5fdd41e0ef5cfbb6d233f"
    assert job_id("delivery", "") == "delivery-e3b0c44298fc1c149afbf4c8996fb92427ae41e4"
    assert job_id("delivery", "a" * 101) == "delivery-9d0793397991b57a99a07c6e6b4a92bab68dbf60"  # too long


@pytest.mark.parametrize(
    "key", ["72d3162e-cc78-11e3-81ab-4c9367dc0958", "x.y", "", "a" * 101, "with space", "ünïcode", "a:b"]
)
def test_every_job_id_is_one_rq_accepts(key: str) -> None:
    validate_job_id(job_id("delivery", key))  # raises ValueError otherwise


def test_fetch_job_id_names_the_repository_pr_and_head() -> None:
    assert fetch_job_id(REPO, 7, HEAD) == FETCH_ID
    assert fetch_job_id(REPO, 8, HEAD) != FETCH_ID
    assert fetch_job_id("apache/arrow", 7, HEAD) != FETCH_ID
    assert fetch_job_id(REPO, 7, "1" * 40) != FETCH_ID


# --- enqueueing deliveries ---------------------------------------------------------------------


def test_queues_have_their_names(deliveries: Queue, github: Queue) -> None:
    assert (deliveries.name, github.name) == (QUEUE_NAME, GITHUB_QUEUE_NAME) == ("deliveries", "github")


def test_enqueue_no_deliveries(deliveries: Queue) -> None:
    assert enqueue_deliveries(deliveries, []) == 0
    assert enqueue_deliveries(deliveries, iter([])) == 0
    assert deliveries.count == 0


@needs_shared
def test_enqueue_deliveries_puts_one_job_each_with_deterministic_ids(deliveries: Queue) -> None:
    ids = delivery_ids(3)
    assert enqueue_deliveries(deliveries, iter(ids)) == 3  # any iterable
    assert deliveries.count == 3
    assert deliveries.job_ids == [f"delivery-{i}" for i in ids]
    for delivery_id in ids:
        job = deliveries.fetch_job(f"delivery-{delivery_id}")
        assert job is not None
        assert job.func_name == JOB_FUNCTION == "workers.jobs.process_delivery"
        assert list(job.args) == [delivery_id]
        assert job.kwargs == {}
        assert job.get_status() == JobStatus.QUEUED
        assert job.timeout == 300
        assert job.result_ttl == 600
        assert job.description == f"process delivery {delivery_id}"


@needs_shared
def test_enqueued_deliveries_carry_the_retry_policy(deliveries: Queue) -> None:
    (delivery_id,) = delivery_ids(1)
    enqueue_deliveries(deliveries, [delivery_id])
    job = Job.fetch(f"delivery-{delivery_id}", connection=deliveries.connection)
    assert job.retries_left == 4
    assert job.retry_intervals == [5, 30, 120, 600]


def test_a_delivery_id_rq_would_refuse_is_enqueued_under_its_hash(deliveries: Queue) -> None:
    assert enqueue_deliveries(deliveries, ["x.y"]) == 1
    assert deliveries.job_ids == ["delivery-b24ca9b75eb7b75775b5fdd41e0ef5cfbb6d233f"]
    job = deliveries.fetch_job("delivery-b24ca9b75eb7b75775b5fdd41e0ef5cfbb6d233f")
    assert job is not None
    assert list(job.args) == ["x.y"]  # the job still carries the real delivery id


@needs_shared
def test_enqueue_deliveries_twice_queues_the_id_twice(deliveries: Queue) -> None:
    # Nothing in enqueue_deliveries stops it: the sweep asks waiting_jobs first, and processing is idempotent.
    ids = delivery_ids(2)
    enqueue_deliveries(deliveries, ids)
    enqueue_deliveries(deliveries, ids[:1])
    assert deliveries.job_ids == [f"delivery-{ids[0]}", f"delivery-{ids[1]}", f"delivery-{ids[0]}"]


# --- head fetches ------------------------------------------------------------------------------


def test_enqueue_head_fetch_queues_a_job_and_sets_a_marker(github: Queue, redis: Redis) -> None:
    before = time.time()
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is True
    assert github.job_ids == [FETCH_ID]
    job = github.fetch_job(FETCH_ID)
    assert job is not None
    assert job.func_name == FETCH_FUNCTION == "workers.jobs.fetch_head_files"
    assert list(job.args) == [FULL_NAME, 7, HEAD, BASE, 0, 0]  # attempt, outages
    assert job.timeout == 300
    assert job.result_ttl == 600
    assert redis.get(MARKER) == redis_run(redis).encode()  # the Redis run that set it
    # The marker lasts until 15 minutes after the job is due.
    assert int(before) + 900 - time.time() - 1 <= redis.ttl(MARKER) <= 900


def test_many_heads_go_to_jobs_of_a_batch_each_skipping_those_on_their_way(github: Queue, redis: Redis) -> None:
    assert FETCH_BATCH == 16
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is True  # PR 7's head is on its way
    wanted = [(FULL_NAME, REPO, number, HEAD, BASE) for number in range(1, 38)]
    before = time.time()
    assert enqueue_head_fetches(github, wanted) == 36
    jobs = [job for job in github.get_jobs() if job.func_name == FETCH_BATCH_FUNCTION == "workers.jobs.fetch_heads"]
    assert [len(job.args[0]) for job in jobs] == [16, 16, 4]
    numbers = [number for job in jobs for _full_name, number, _head, _base in job.args[0]]
    assert numbers == [n for n in range(1, 38) if n != 7]
    assert jobs[0].args[0][0] == (FULL_NAME, 1, HEAD, BASE)
    assert all(job.timeout == 300 and job.result_ttl == 600 for job in jobs)
    marker = f"tracker:fetch:{fetch_job_id(REPO, 1, HEAD)}"
    assert int(before) + 900 - time.time() - 1 <= redis.ttl(marker) <= 900
    # Asked again (the next batch of deliveries, the sweep): every head is on its way.
    assert enqueue_head_fetches(github, wanted) == 0
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 1, HEAD, BASE) is False
    assert enqueue_head_fetches(github, []) == 0
    assert github.count == 4


def test_heads_asked_for_in_a_batch_are_asked_again_when_it_cannot_be_queued(
    github: Queue, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuses(jobs: object, pipeline: object = None) -> None:
        raise ConnectionError("Redis went away")

    monkeypatch.setattr(github, "enqueue_many", refuses)
    with pytest.raises(ConnectionError):
        enqueue_head_fetches(github, [(FULL_NAME, REPO, 7, HEAD, BASE)])
    assert not redis.exists(MARKER)  # no job will clear it: the sweep's next ask goes through
    monkeypatch.undo()
    assert enqueue_head_fetches(github, [(FULL_NAME, REPO, 7, HEAD, BASE)]) == 1


def test_enqueue_head_fetch_refuses_while_the_marker_exists(github: Queue) -> None:
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is True
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is False
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE, at=time.time() + 60) is False
    assert github.count == 1
    # Another head, PR or repository is another marker.
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, "1" * 40, BASE) is True
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 8, HEAD, BASE) is True
    assert enqueue_head_fetch(github, "Apache/Arrow", "apache/arrow", 7, HEAD, BASE) is True
    assert github.count == 4


def test_a_rescheduling_job_passes_the_marker(github: Queue, redis: Redis) -> None:
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is True
    due = time.time() + 3600
    assert (
        enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE, at=due, attempt=1, outages=1, reschedule=True)
        is True
    )
    assert github.job_ids == [FETCH_ID]  # the next attempt waits in the scheduled registry
    registry = ScheduledJobRegistry(queue=github, connection=redis)  # type: ignore[no-untyped-call]
    assert registry.get_job_ids() == [f"{FETCH_ID}-1"]
    assert registry.get_scheduled_time(f"{FETCH_ID}-1") == datetime.fromtimestamp(int(due), UTC)
    job = github.fetch_job(f"{FETCH_ID}-1")
    assert job is not None
    assert job.get_status() == JobStatus.SCHEDULED
    assert list(job.args) == [FULL_NAME, 7, HEAD, BASE, 1, 1]
    assert redis.exists(MARKER)
    assert int(due) + 900 - time.time() - 1 <= redis.ttl(MARKER) <= 3600 + 900
    # The first attempt's job is untouched.
    first = github.fetch_job(FETCH_ID)
    assert first is not None
    assert list(first.args) == [FULL_NAME, 7, HEAD, BASE, 0, 0]
    # And the marker still keeps the sweep out.
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is False


def test_each_run_of_a_job_has_an_id_of_its_own() -> None:
    assert run_job_id(FETCH_ID, 0) == FETCH_ID
    assert run_job_id(FETCH_ID, 1) == f"{FETCH_ID}-1"
    assert run_job_id(FETCH_ID, 12) == f"{FETCH_ID}-12"


def test_a_backoff_doubles_up_to_its_longest_wait_then_gives_up() -> None:
    backoff = Backoff(first=30.0)
    for failures, wait in enumerate([30, 60, 120, 240, 480, 960, 1920]):
        delays = [backoff.delay(failures) for _ in range(200)]
        assert all(d is not None and 0.75 * wait <= d <= 1.25 * wait for d in delays)
        assert max(d or 0 for d in delays) - min(d or 0 for d in delays) > 0.2 * wait  # spread, not one moment
    assert backoff.delay(7) is None  # the 8th failure in a row is the last
    capped = Backoff(first=600.0, longest=3600.0, tries=20)
    assert all(0.75 * 3600 <= (capped.delay(10) or 0) <= 1.25 * 3600 for _ in range(50))
    assert Backoff(first=1.0, tries=1).delay(0) is None


def test_a_first_fetch_at_a_later_moment_is_scheduled(github: Queue, redis: Redis) -> None:
    due = time.time() + 120
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE, at=due) is True
    assert github.count == 0
    registry = ScheduledJobRegistry(queue=github, connection=redis)  # type: ignore[no-untyped-call]
    assert registry.get_job_ids() == [FETCH_ID]
    assert 120 + 900 - 2 <= redis.ttl(MARKER) <= 120 + 900


def test_fetch_done_clears_the_marker(github: Queue, redis: Redis) -> None:
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is True
    fetch_done(github, REPO, 7, HEAD)
    assert redis.exists(MARKER) == 0
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is True
    assert redis.exists(MARKER)


def test_fetch_done_without_a_marker_is_harmless(github: Queue, redis: Redis) -> None:
    fetch_done(github, REPO, 7, HEAD)
    assert redis.exists(MARKER) == 0
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is True


def test_fetch_done_clears_only_its_own_head(github: Queue) -> None:
    enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE)
    enqueue_head_fetch(github, FULL_NAME, REPO, 8, HEAD, BASE)
    fetch_done(github, REPO, 8, HEAD)
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE) is False
    assert enqueue_head_fetch(github, FULL_NAME, REPO, 8, HEAD, BASE) is True


# --- which jobs are waiting --------------------------------------------------------------------


def test_waiting_jobs_of_nothing(deliveries: Queue) -> None:
    assert waiting_jobs(deliveries, []) == set()


@needs_shared
def test_waiting_jobs_are_queued_scheduled_or_deferred(deliveries: Queue, github: Queue) -> None:
    queued, scheduled, never, unknown = delivery_ids(4)
    deliveries.enqueue("builtins.len", [1, 2], job_id="finished-job")
    deliveries.enqueue("builtins.int", "not a number", job_id="failed-job")
    run_burst(deliveries)
    assert Job.fetch("finished-job", connection=deliveries.connection).get_status() == JobStatus.FINISHED
    assert Job.fetch("failed-job", connection=deliveries.connection).get_status() == JobStatus.FAILED

    deliveries.enqueue_at(datetime(2099, 1, 1, tzinfo=UTC), "builtins.len", [1], job_id=f"delivery-{scheduled}")
    enqueue_deliveries(deliveries, [queued])  # not run: workers.jobs would need the worker runtime
    deliveries.enqueue("builtins.len", [1], job_id="deferred-job", depends_on=f"delivery-{queued}")
    enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE)

    asked = [
        f"delivery-{queued}",
        f"delivery-{scheduled}",
        "deferred-job",
        "finished-job",
        "failed-job",
        f"delivery-{never}",  # never enqueued
        FETCH_ID,  # on the other queue: statuses are per job, whatever its queue
    ]
    assert waiting_jobs(deliveries, asked) == {f"delivery-{queued}", f"delivery-{scheduled}", "deferred-job", FETCH_ID}
    assert waiting_jobs(deliveries, ["finished-job", "failed-job", f"delivery-{unknown}"]) == set()


# --- counts ------------------------------------------------------------------------------------


def test_queue_counts_of_empty_queues(deliveries: Queue, github: Queue) -> None:
    empty = {"queued": 0, "started": 0, "scheduled_retries": 0, "failed_jobs": 0}
    assert queue_counts(deliveries) == empty
    assert queue_counts(github) == empty
    assert waiting_on_github(github) == 0


@needs_shared
def test_queue_counts(deliveries: Queue, redis: Redis) -> None:
    deliveries.enqueue("builtins.int", "x", job_id="retried", retry=Retry(max=2, interval=600))
    deliveries.enqueue("builtins.int", "y", job_id="dead")
    deliveries.enqueue("builtins.len", [1], job_id="fine")
    run_burst(deliveries)
    enqueue_deliveries(deliveries, delivery_ids(2))
    assert queue_counts(deliveries) == {"queued": 2, "started": 0, "scheduled_retries": 1, "failed_jobs": 1}


def test_queue_counts_see_a_started_job(deliveries: Queue) -> None:
    deliveries.enqueue("tests.test_queue.counts_from_inside_a_job", job_id="counting")
    deliveries.enqueue("builtins.len", [1], job_id="behind")
    run_burst(deliveries)
    job = Job.fetch("counting", connection=deliveries.connection)
    assert job.get_status() == JobStatus.FINISHED
    assert job.return_value() == {"queued": 1, "started": 1, "scheduled_retries": 0, "failed_jobs": 0}


@needs_shared
def test_waiting_on_github_counts_queued_and_scheduled_fetches(github: Queue, deliveries: Queue) -> None:
    enqueue_head_fetch(github, FULL_NAME, REPO, 7, HEAD, BASE)
    enqueue_head_fetch(github, FULL_NAME, REPO, 8, HEAD, BASE, at=time.time() + 3600)  # behind a rate limit
    enqueue_head_fetch(github, FULL_NAME, REPO, 9, HEAD, BASE, at=time.time() + 60)
    enqueue_deliveries(deliveries, delivery_ids(3))  # deliveries are not GitHub's
    assert waiting_on_github(github) == 3
    assert queue_counts(github) == {"queued": 1, "started": 0, "scheduled_retries": 2, "failed_jobs": 0}
    github.empty()  # type: ignore[no-untyped-call]
    assert waiting_on_github(github) == 2


# --- connections -------------------------------------------------------------------------------


def test_connect_redis_options(redis_url: str) -> None:
    connection = connect_redis(redis_url)
    try:
        assert connection.ping() is True
        options = connection.connection_pool.connection_kwargs
        # The web's (the default): a hung Redis costs a request about a second, well inside
        # GitHub's 10-second limit; a refused or reset connection is retried, a timeout is not.
        assert options["socket_connect_timeout"] == WEB_REDIS.connect == 0.5
        assert options["socket_timeout"] == WEB_REDIS.socket == 1.0
        assert options["health_check_interval"] == 30
        assert options["retry"] == RedisRetry(
            ExponentialBackoff(cap=0.2, base=0.02), retries=2, supported_errors=(RedisConnectionError,)
        )
        assert options["retry"].get_retries() == 2
    finally:
        connection.close()


def test_connect_redis_for_a_worker_outlasts_its_blocking_dequeue(redis_url: str) -> None:
    connection = connect_redis(redis_url, WORKER_REDIS)
    try:
        assert connection.ping() is True
        options = connection.connection_pool.connection_kwargs
        assert options["socket_connect_timeout"] == WORKER_REDIS.connect == 2.0
        # RQ blocks in BLPOP for worker_ttl - 15 s and wants dequeue + 10 s of socket timeout.
        assert options["socket_timeout"] == WORKER_REDIS.socket == WORKER_DEQUEUE_TIMEOUT + 10 == WORKER_TTL - 5
    finally:
        connection.close()


def test_connect_redis_keeps_the_database_of_the_url(redis_url: str) -> None:
    first = connect_redis(redis_url)
    try:
        first.set("tracker:test:probe", "1")
        second = Redis.from_url(redis_url)
        assert second.get("tracker:test:probe") == b"1"
        second.close()
    finally:
        first.close()


def test_connect_redis_to_no_server_fails_fast() -> None:
    connection = connect_redis("redis://127.0.0.1:1/0")
    with pytest.raises(RedisConnectionError):
        finishes(connection.ping)  # refused at once: no retrying
    connection.close()


# --- asking for drains from a web process -----------------------------------------------------------


def test_a_started_drain_asker_asks_from_its_own_thread_once_for_many_requests(deliveries: Queue, redis: Redis) -> None:
    asker = DrainAsker(deliveries)
    asker.start()
    try:
        for _ in range(200):
            asker.ask()  # what each request does: set an Event
        deadline = time.monotonic() + 5
        while deliveries.count == 0:
            assert time.monotonic() < deadline, "the asker's thread queued no drain"
            time.sleep(0.01)
        assert deliveries.count == 1  # one drain job: the key says one waits
        assert redis.exists(DRAIN_WAITING_KEY)
    finally:
        asker.stop()
    redis.delete(DRAIN_WAITING_KEY)  # as a drain that found nothing left does
    asker.ask()  # stopped: it asks at once, in the caller's thread
    assert deliveries.count == 2


def test_a_stopping_drain_asker_makes_the_ask_a_last_request_wanted(deliveries: Queue) -> None:
    asker = DrainAsker(deliveries)
    asker.start()
    asker.ask()
    asker.stop()
    assert deliveries.count == 1


def test_a_drain_asker_never_holds_up_a_request_when_redis_is_gone(caplog: pytest.LogCaptureFixture) -> None:
    gone = connect_redis("redis://127.0.0.1:1/0")  # nothing listens there: every ask is refused
    asker = DrainAsker(delivery_queue(gone))
    asker.start()
    with caplog.at_level(logging.WARNING, logger="tracker.queue"):
        for _ in range(3):
            asker.ask()  # returns at once: the delivery is committed, the sweep will ask
            time.sleep(0.1)
        asker.ask()
        asker.stop()
    warnings = [r.getMessage() for r in caplog.records if "could not ask for a drain" in r.getMessage()]
    assert len(warnings) == 1, caplog.records  # one line for the outage, not one per request
    with pytest.raises(RedisError):
        asker.ask()  # not started any more: the caller sees the failure (the webhook logs it)
