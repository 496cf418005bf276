"""The worker process: the services object its job functions work with, and its work loop.

A worker process installs the one it built at start-up (`install`); job functions look it up with
`current()`. A process that never installed one (RQ started some other way) builds it from the
environment on first use. Tests install the app's own.

`work` runs RQ's SimpleWorker for as long as the process lives, whatever Redis does: while Redis
is unreachable (not started yet, killed, restarting) it waits, with one line in the log, instead of
exiting with a traceback for its supervisor to restart it every few seconds.

RQ's own lines go through the process's logging (tracker.logs), at WARNING unless -v: its per-job
chatter ("Job OK", "result is kept for …", "started with PID …", "cleaning registries …") shows only
with -v; a job's failure always.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from redis.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Queue, SimpleWorker
from rq.exceptions import StopRequested
from rq.job import Job
from rq.scheduler import RQScheduler

from tracker import logs, metrics
from tracker.queue import GITHUB_QUEUE_NAME, QUEUE_NAME, RECORDS_QUEUE_NAME, WORKER_TTL, wait_for_redis
from tracker.services import Services
from tracker.settings import load_settings
from workers.sweep import sweep

log = logging.getLogger(__name__)

_installed: Services | None = None

# How often RQ's maintenance may run: cleaning the registries, and starting a scheduler when the
# scheduler lock is free. RQ's default is 10 minutes, so after the worker holding the lock was
# killed (the lock lapses 61 s later) retries and rate-limit waits stayed unscheduled for up to
# 11 minutes. The work loop comes round at least every WORKER_DEQUEUE_TIMEOUT seconds.
MAINTENANCE_INTERVAL = 10
# After RQ's work loop returned without a stop request (a Redis error it does not retry), wait this
# long before the next round, twice as long each time up to the longest, while rounds stay short.
_FIRST_PAUSE, _LONGEST_PAUSE, _SHORT_ROUND = 1.0, 30.0, 60.0


# The queues a worker may listen on, in the order it takes their jobs.
QUEUES = (QUEUE_NAME, RECORDS_QUEUE_NAME, GITHUB_QUEUE_NAME)


# Linux's autogroup scheduling (kernel.sched_autogroup_enabled, on by default on desktop and many
# server kernels) first shares the CPU between sessions, then between the processes of a session by
# their nice values: a worker that `tracker run` starts in a session of its own competed with the web
# processes, each in its own session, as an equal whatever its nice (measured: a worker at nice 10 took
# nearly a core while the webhook's answers waited). The session's own nice is in this file.
AUTOGROUP = "/proc/self/autogroup"


def lower_cpu_priority(nice: int, autogroup: str = AUTOGROUP) -> bool:
    """Lower this process's CPU priority by `nice` (os.nice) and, when it leads a session of its own
    (as `tracker run` starts it), its session's autogroup to the same nice: on Linux with autogroup
    scheduling a process's nice counts only against the processes of its own session. True when the
    autogroup was lowered. A process in someone else's session (a shell's) leaves that session alone."""
    if nice <= 0:
        return False
    os.nice(nice)
    if os.getsid(0) != os.getpid() or not os.path.exists(autogroup):
        return False
    try:
        with open(autogroup, "w", encoding="ascii") as handle:
            handle.write(str(nice))
    except OSError as exc:  # a kernel without autogroup, or a setting it refuses: the plain nice stays
        log.debug("could not lower this session's autogroup nice: %s", exc)
        return False
    return True


def install(services: Services | None) -> None:
    global _installed
    _installed = services


def current() -> Services:
    global _installed
    if _installed is None:
        _installed = Services.from_settings(load_settings())
    return _installed


class _RedisLost(StopRequested):
    """Ends RQ's work loop the way a stop request does (RQ's own loop would retry Redis forever, an
    error line each time, and never sweep what the queue lost meanwhile)."""


class Scheduler(RQScheduler):
    """RQ's scheduler process, which ends quietly when Redis goes away.

    systemd stops a service by sending SIGTERM to every process of it at once (KillMode=control-group,
    its default), the embedded Redis among them: the scheduler, in its loop or giving its locks back,
    then found no server, and wrote a traceback into the log (partly as raw lines, from the process's
    end). Now it says so in one line and ends; its locks lapse by themselves, and RQ's maintenance in
    the workers starts a scheduler again once one can take the locks."""

    def work(self) -> None:
        try:
            super().work()  # type: ignore[no-untyped-call]
        except (RedisConnectionError, RedisTimeoutError) as exc:
            log.info("scheduler: Redis went away (%s); it ends, and its locks lapse by themselves", exc)


class Worker(SimpleWorker):
    """RQ's SimpleWorker, with a short TTL and maintenance interval (see above), that leaves its
    work loop when Redis goes away (`work` waits for it and sweeps), and has no pub/sub thread: that
    thread serves `rq` command-line requests the tracker never sends, and while Redis is down it
    logs an error every 2 seconds. A stop request (SIGTERM, Ctrl-C) also sets `stop`, so the loop
    around it can tell a stop from a lost Redis."""

    def __init__(
        self, services: Services, stop: threading.Event, queues: Sequence[str] = QUEUES, **options: Any
    ) -> None:
        super().__init__(
            # Deliveries first; then month-end work (short, and waiting for the rest); GitHub fetches last.
            [queue for name, queue in _queues(services) if name in queues],
            connection=services.require_redis(),
            worker_ttl=WORKER_TTL,
            maintenance_interval=MAINTENANCE_INTERVAL,
            **options,
        )
        self.stop_event = stop
        self.lost_redis: RedisError | None = None

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        # RQ sends one at every turn of its work loop and of its dequeue loop, whose own retries
        # would otherwise catch a lost connection.
        try:
            super().heartbeat(timeout, pipeline)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            if pipeline is not None:
                raise
            self.lost_redis = exc
            raise _RedisLost from exc

    def execute_job(self, job: Job, queue: Queue) -> None:
        # Every line logged while the job runs, RQ's own ("Job OK", a failure) included, carries its id.
        with logs.context(job_id=job.id):
            super().execute_job(job, queue)

    def perform_job(self, job: Job, queue: Queue, *args: Any) -> bool:  # timed and counted by job function
        return metrics.timed_job(job.func_name, lambda: bool(super(Worker, self).perform_job(job, queue, *args)))

    def subscribe(self) -> None:
        pass

    def unsubscribe(self) -> None:
        pass

    def request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_event.set()
        super().request_stop(signum, frame)  # type: ignore[no-untyped-call]


def _queues(services: Services) -> list[tuple[str, Queue]]:
    return [
        (QUEUE_NAME, services.delivery_queue),
        (RECORDS_QUEUE_NAME, services.records_queue),
        (GITHUB_QUEUE_NAME, services.github_queue),
    ]


def work(services: Services, *, burst: bool = False, queues: Sequence[str] = QUEUES) -> None:
    """Sweep, then process jobs until SIGTERM or Ctrl-C (or, with `burst`, until the queues are
    empty). SimpleWorker runs jobs in this process: jobs are short and idempotent, and forking a work
    horse per job costs about 14 ms of CPU against 3 ms (measured with no-op jobs on 2 cores)."""
    install(services)
    stop = threading.Event()
    if burst:
        sweep(services, grace_seconds=0)
        Worker(services, stop, queues).work(burst=True, with_scheduler=True, logging_level=logs.rq_level())
        return
    connection = services.require_redis()
    pause = _FIRST_PAUSE
    while True:
        _stop_on_signals(stop)  # RQ's own handlers stay installed after its loop returns
        if not wait_for_redis(connection, stop, "worker"):
            return
        started = time.monotonic()
        try:
            # What the ledger holds and the queue lost (a Redis restarted from its AOF may miss the
            # last second of writes; one that lost its files misses everything).
            sweep(services, grace_seconds=0)
            if stop.is_set():
                return
            worker = Worker(services, stop, queues)
            # The worker that takes the scheduler lock forks our `Scheduler`; RQ's maintenance restarts
            # it in whichever worker takes the lock over, and stops it with the worker.
            worker.scheduler = Scheduler(worker.queues, connection=connection, logging_level=logs.rq_level())
            worker.scheduler.acquire_locks(auto_start=True)  # type: ignore[no-untyped-call]
            worker.work(logging_level=logs.rq_level())
            if worker.lost_redis is not None:
                raise worker.lost_redis
        except RedisError as exc:
            log.warning("worker: Redis failed (%s: %s)", type(exc).__name__, exc)
        if stop.is_set():
            return
        if time.monotonic() - started >= _SHORT_ROUND:
            pause = _FIRST_PAUSE
        if stop.wait(pause):
            return
        pause = min(pause * 2, _LONGEST_PAUSE)


def _stop_on_signals(stop: threading.Event) -> None:
    def _stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
