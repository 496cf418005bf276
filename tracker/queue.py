"""The delivery queue on Redis (RQ). Jobs take a delivery id and nothing else."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry as RedisRetry
from rq import Queue, Retry
from rq.job import JOB_ID_PATTERN, Job, JobStatus
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

QUEUE_NAME = "deliveries"
GITHUB_QUEUE_NAME = "github"
JOB_FUNCTION = "workers.jobs.process_delivery"
FETCH_FUNCTION = "workers.jobs.fetch_head_files"
# Retries back off; after the last one the delivery is marked failed in the ledger and waits for
# `tracker retry-failed`. The sweep re-enqueues anything still pending whatever happened to Redis.
RETRY = Retry(max=4, interval=[5, 30, 120, 600])
JOB_TIMEOUT = 300
RESULT_TTL = 600
FETCH_MARKER_GRACE = 900

log = logging.getLogger(__name__)


def connect_redis(url: str) -> Redis:
    # Few, short retries: when Redis is down the webhook must still answer well inside GitHub's
    # 10-second limit (the delivery is in the ledger; the sweep enqueues it later).
    return Redis.from_url(
        url,
        socket_connect_timeout=2,
        socket_timeout=10,
        health_check_interval=30,
        retry=RedisRetry(ExponentialBackoff(cap=0.2, base=0.02), retries=2),
    )


def delivery_queue(connection: Redis) -> Queue:
    return Queue(QUEUE_NAME, connection=connection)


def github_queue(connection: Redis) -> Queue:
    """Jobs that call GitHub, apart, so that a rate limit never holds up deliveries."""
    return Queue(GITHUB_QUEUE_NAME, connection=connection)


def job_id(prefix: str, key: str) -> str:
    """RQ accepts letters, digits, `_` and `-` in job ids; anything else is hashed."""
    if JOB_ID_PATTERN.fullmatch(key) and len(key) <= 100:
        return f"{prefix}-{key}"
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:40]}"


def fetch_job_id(repo: str, number: int, head_sha: str) -> str:
    return job_id("files", f"{repo}#{number}@{head_sha}")


def enqueue_head_fetch(
    queue: Queue,
    full_name: str,
    repo: str,
    number: int,
    head_sha: str,
    base_sha: str,
    *,
    at: float | None = None,
    attempt: int = 0,
    reschedule: bool = False,
) -> bool:
    """Ask for a head's files, `at` a moment or now; False when a job for that head is already on
    its way (a marker in Redis says so until shortly after the job is due, so the sweep does not
    pile up requests behind a rate limit). A job re-scheduling itself passes `reschedule`."""
    identifier = fetch_job_id(repo, number, head_sha)
    marker = f"tracker:fetch:{identifier}"
    due = at if at is not None else time.time()
    if not queue.connection.set(marker, attempt, exat=int(due) + FETCH_MARKER_GRACE, nx=not reschedule):
        return False
    arguments = (full_name, number, head_sha, base_sha, attempt)
    # Each attempt has its own job id: a running job must not overwrite itself when it re-schedules.
    options = {
        "job_id": identifier if attempt == 0 else f"{identifier}-{attempt}",
        "job_timeout": JOB_TIMEOUT,
        "result_ttl": RESULT_TTL,
    }
    if at is None:
        queue.enqueue(FETCH_FUNCTION, *arguments, **options)
    else:
        queue.enqueue_at(datetime.fromtimestamp(at, UTC), FETCH_FUNCTION, *arguments, **options)
    return True


def enqueue_deliveries(queue: Queue, delivery_ids: Iterable[str]) -> int:
    """Enqueue processing jobs in one round trip; returns how many."""
    ids = list(delivery_ids)
    if not ids:
        return 0
    jobs = [
        Queue.prepare_data(
            JOB_FUNCTION,
            args=(delivery_id,),
            job_id=job_id("delivery", delivery_id),
            timeout=JOB_TIMEOUT,
            result_ttl=RESULT_TTL,
            retry=RETRY,
            description=f"process delivery {delivery_id}",
        )
        for delivery_id in ids
    ]
    queue.enqueue_many(jobs)
    return len(ids)


def waiting_jobs(queue: Queue, job_ids: Sequence[str]) -> set[str]:
    """Those of `job_ids` whose job is queued, scheduled or deferred (not lost, not dead)."""
    pipe = queue.connection.pipeline(transaction=False)
    for identifier in job_ids:
        pipe.hget(Job.key_for(identifier), "status")
    statuses = pipe.execute()
    alive = {JobStatus.QUEUED.value, JobStatus.SCHEDULED.value, JobStatus.DEFERRED.value}
    return {
        identifier
        for identifier, status in zip(job_ids, statuses, strict=True)
        if status is not None and (status.decode() if isinstance(status, bytes) else status) in alive
    }


def fetch_done(queue: Queue, repo: str, number: int, head_sha: str) -> None:
    queue.connection.delete(f"tracker:fetch:{fetch_job_id(repo, number, head_sha)}")


def waiting_on_github(queue: Queue) -> int:
    """Fetch jobs queued or scheduled (rate limits and backoffs wait in the scheduled registry)."""
    scheduled = ScheduledJobRegistry(queue=queue, connection=queue.connection)  # type: ignore[no-untyped-call]
    return int(queue.count + scheduled.count)


def queue_counts(queue: Queue) -> dict[str, int]:
    connection = queue.connection
    return {
        "queued": queue.count,
        "started": StartedJobRegistry(queue=queue, connection=connection).count,
        "scheduled_retries": ScheduledJobRegistry(queue=queue, connection=connection).count,  # type: ignore[no-untyped-call]
        "failed_jobs": FailedJobRegistry(queue=queue, connection=connection).count,
    }
