"""The baseline of bench/worker.py: RQ jobs that do nothing, run the way `tracker worker` runs its own.

Jobs are enqueued with the tracker's options (timeout, result TTL, retries, description: the same
Redis bookkeeping), and `python bench/_noop_jobs.py` runs a SimpleWorker over them in burst mode with
the logging `tracker` sets up, so the difference to `tracker worker --burst` is the tracker's work.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from rq import Queue, SimpleWorker

from tracker.queue import JOB_TIMEOUT, RESULT_TTL, RETRY, connect_redis

QUEUE_NAME = "bench-noop"
JOB_FUNCTION = "_noop_jobs.noop"


def noop(delivery_id: str) -> str:
    return "processed"


def enqueue_noops(queue: Queue, ids: Sequence[str]) -> None:
    for start in range(0, len(ids), 500):
        queue.enqueue_many(
            [
                Queue.prepare_data(
                    JOB_FUNCTION,
                    args=(delivery_id,),
                    job_id=f"noop-{delivery_id}",
                    timeout=JOB_TIMEOUT,
                    result_ttl=RESULT_TTL,
                    retry=RETRY,
                    description=f"process delivery {delivery_id}",
                )
                for delivery_id in ids[start : start + 500]
            ]
        )


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    connection = connect_redis(os.environ["REDIS_URL"])
    queue = Queue(QUEUE_NAME, connection=connection)
    SimpleWorker([queue], connection=connection).work(burst=True, with_scheduler=True)


if __name__ == "__main__":
    main()
