"""The delivery queue on Redis (RQ). Jobs take a delivery id and nothing else."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry as RedisRetry
from rq import Queue, Retry
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

QUEUE_NAME = "deliveries"
JOB_FUNCTION = "workers.jobs.process_delivery"
# Retries back off; after the last one the delivery is marked failed in the ledger and waits for
# `tracker retry-failed`. The sweep re-enqueues anything still pending whatever happened to Redis.
RETRY = Retry(max=4, interval=[5, 30, 120, 600])
JOB_TIMEOUT = 300
RESULT_TTL = 600

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


def enqueue_deliveries(queue: Queue, delivery_ids: Iterable[str]) -> int:
    """Enqueue processing jobs in one round trip; returns how many."""
    ids = list(delivery_ids)
    if not ids:
        return 0
    jobs = [
        Queue.prepare_data(
            JOB_FUNCTION,
            args=(delivery_id,),
            job_id=f"delivery-{delivery_id}",
            timeout=JOB_TIMEOUT,
            result_ttl=RESULT_TTL,
            retry=RETRY,
            description=f"process delivery {delivery_id}",
        )
        for delivery_id in ids
    ]
    queue.enqueue_many(jobs)
    return len(ids)


def queue_counts(queue: Queue) -> dict[str, int]:
    connection = queue.connection
    return {
        "queued": queue.count,
        "started": StartedJobRegistry(queue=queue, connection=connection).count,
        "scheduled_retries": ScheduledJobRegistry(queue=queue, connection=connection).count,  # type: ignore[no-untyped-call]
        "failed_jobs": FailedJobRegistry(queue=queue, connection=connection).count,
    }
