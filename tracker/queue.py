"""The delivery queue on Redis (RQ). Jobs take a delivery id and nothing else."""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from redis import ConnectionPool, Redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.retry import Retry as RedisRetry
from rq import Queue, Retry
from rq.job import JOB_ID_PATTERN, Job, JobStatus
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

QUEUE_NAME = "deliveries"
GITHUB_QUEUE_NAME = "github"
# The *_FUNCTION names are the jobs RQ runs, as stored in Redis with each job: functions of workers/jobs.py
# and workers/drain.py, whose names never change (tests/test_architecture.py); the work behind each lives
# with its feature and may move.
JOB_FUNCTION = "workers.jobs.process_delivery"
DRAIN_FUNCTION = "workers.drain.drain_deliveries"
# Set while a drain job waits to start or is at work: the request path queues one only when it can
# set this key, so a stream of deliveries costs one SET per request and one job, not one job each.
# The drain deletes it once it finds nothing pending, then looks once more. It expires, in case a
# worker died holding the job (a live drain sets it again before each batch).
DRAIN_WAITING_KEY = "tracker:drain:waiting"
DRAIN_WAITING_TTL = 30
FETCH_FUNCTION = "workers.jobs.fetch_head_files"
# New heads are fetched FETCH_BATCH to a job (one job's RQ bookkeeping costs about as much CPU as a
# fetch from a GitHub that answers at once), in several jobs so that several workers fetch at once.
FETCH_BATCH_FUNCTION = "workers.jobs.fetch_heads"
FETCH_BATCH = 16
RECORDS_QUEUE_NAME = "records"
FINALIZE_FUNCTION = "workers.jobs.finalize_month"
FINALIZE_GROUP_FUNCTION = "workers.jobs.finalize_group_month"
DUE_WORK_FUNCTION = "workers.jobs.due_work"
PUBLISH_FUNCTION = "workers.jobs.publish_month"
PUBLISH_GROUP_FUNCTION = "workers.jobs.publish_group_month"
NARRATE_FUNCTION = "workers.jobs.narrate_month"
HISTORY_FUNCTION = "workers.jobs.read_history_job"
WARM_FUNCTION = "workers.jobs.warm_month"
# Retries back off; after the last one the delivery is marked failed in the ledger and waits for
# `tracker retry-failed`. The sweep re-enqueues anything still pending whatever happened to Redis.
RETRY = Retry(max=4, interval=[5, 30, 120, 600])
JOB_TIMEOUT = 300
# A backfill of a busy month reads a timeline per PR: allow it hours (it checkpoints each PR anyway).
HISTORY_JOB_TIMEOUT = 6 * 3600
RESULT_TTL = 600
NARRATE_JOB_TIMEOUT = 1800  # a section a request or two, each up to TRACKER_LLM_TIMEOUT
FETCH_MARKER_GRACE = 900

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backoff:
    """When a job whose run failed for a reason that passes (an outage) runs again, and when it stops
    trying: `first` seconds after its first failure, twice as long after each further one in a row, up
    to `longest`; each wait is drawn within ±25 % of that, so that the jobs one outage failed together do
    not all come back in the same second. The `tries`-th failed run in a row is the last."""

    first: float
    longest: float = 3600.0
    tries: int = 8

    def delay(self, failures: int) -> float | None:
        """Seconds until the next run of a job whose run just failed, `failures` failed runs in a row
        before it; None when it was the last try."""
        if failures + 1 >= self.tries:
            return None
        return min(self.longest, self.first * 2.0**failures) * random.uniform(0.75, 1.25)


def run_job_id(identifier: str, attempt: int) -> str:
    """The job id of the `attempt`-th re-scheduled run of the job `identifier` (0: its first run). Each
    run has an id of its own: a running job that re-schedules itself under its own id loses its next
    run, since RQ saves the job as finished over the scheduled one when the run ends, and expires it
    with its result (RESULT_TTL), before a rate limit of an hour is over."""
    return identifier if attempt == 0 else f"{identifier}-{attempt}"


@dataclass(frozen=True)
class RedisTimeouts:
    """How long one Redis call may wait, in seconds: for the connection, and for each answer."""

    connect: float
    socket: float


# The request path. GitHub counts a delivery as failed when the answer takes over 10 seconds, and
# the webhook answers 202 once the delivery is in the ledger whatever Redis does (the sweep enqueues
# it later): a Redis that hangs (SIGSTOP, swapped out, a stalled disk under its AOF) costs a request
# about a second, never more. A timed-out call is not retried; a refused or reset one is, quickly.
WEB_REDIS = RedisTimeouts(connect=0.5, socket=1.0)

# RQ workers block in BLPOP for their dequeue timeout, which RQ derives from the worker TTL
# (`worker_ttl - 15`), and RQ raises a connection's socket timeout below `dequeue + 10` to that, but
# only in the pool's settings: a connection the pool made before the worker was built keeps the short
# one and times out every BLPOP. So workers connect with the long timeout from the start.
# A short TTL keeps the work loop turning (it runs RQ's maintenance, which is where a worker takes
# over the scheduler lock of one that was killed) at least every WORKER_DEQUEUE_TIMEOUT seconds.
WORKER_TTL = 30
WORKER_DEQUEUE_TIMEOUT = WORKER_TTL - 15
WORKER_REDIS = RedisTimeouts(connect=2.0, socket=WORKER_DEQUEUE_TIMEOUT + 10)

# /healthz answers within a second (load balancers and `tracker run` users poll it): one PING on a
# connection of its own, no retries.
PROBE_TIMEOUT = 0.5

# What a probe connection copies from the connection it stands in for (never the pool's internals).
_ADDRESS_OPTIONS = ("host", "port", "path", "db", "username", "password", "credential_provider", "protocol")


def connect_redis(url: str, timeouts: RedisTimeouts = WEB_REDIS) -> Redis:
    """A Redis client for `url`; web processes and one-shot commands use the short timeouts, workers
    WORKER_REDIS. Nothing connects until the first command."""
    return Redis.from_url(
        url,
        socket_connect_timeout=timeouts.connect,
        socket_timeout=timeouts.socket,
        health_check_interval=30,
        # A pooled connection Redis closed (a restart) is replaced at once; a hung server is not
        # asked twice.
        retry=RedisRetry(ExponentialBackoff(cap=0.2, base=0.02), retries=2, supported_errors=(RedisConnectionError,)),
    )


def redis_address(connection: Redis) -> str:
    """Where `connection` points, for messages (no credentials)."""
    options = connection.connection_pool.connection_kwargs
    if "path" in options:
        return f"unix://{options['path']}"
    return f"{options.get('host', 'localhost')}:{options.get('port', 6379)}/{options.get('db', 0)}"


def redis_failure(connection: Redis, timeout: float = PROBE_TIMEOUT) -> Exception | None:
    """None when the Redis of `connection` answers a PING within `timeout` seconds, else the error.
    The PING goes over a connection of its own, so neither the pool's longer timeouts nor its
    retries nor a health check before it can stretch the wait."""
    pool = connection.connection_pool
    options: dict[str, Any] = {
        key: value for key, value in pool.connection_kwargs.items() if key in _ADDRESS_OPTIONS or key.startswith("ssl")
    }
    probe_pool = ConnectionPool(
        connection_class=pool.connection_class,
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        retry=RedisRetry(NoBackoff(), 0),
        **options,
    )
    try:
        Redis(connection_pool=probe_pool).ping()
    except (RedisError, OSError) as exc:
        return exc
    finally:
        probe_pool.disconnect()
    return None


def wait_for_redis(
    connection: Redis, stop: threading.Event, who: str, *, first: float = 0.25, longest: float = 5.0
) -> bool:
    """True once Redis answers; False when `stop` is set first. Asks again after `first` seconds,
    twice as long each time up to `longest`, and logs one line when it starts waiting and one when
    Redis is back: an outage is two lines in the log, not a traceback every few seconds."""
    failure = redis_failure(connection, timeout=2.0)
    if failure is None:
        return True
    log.warning(
        "%s: Redis at %s does not answer (%s: %s); waiting for it",
        who,
        redis_address(connection),
        type(failure).__name__,
        failure,
    )
    started = time.monotonic()
    delay = first
    while not stop.wait(delay):
        if redis_failure(connection, timeout=2.0) is None:
            log.info("%s: Redis answers again (waited %.0f s)", who, time.monotonic() - started)
            return True
        delay = min(delay * 2, longest)
    return False


def delivery_queue(connection: Redis) -> Queue:
    return Queue(QUEUE_NAME, connection=connection)


def github_queue(connection: Redis) -> Queue:
    """Jobs that call GitHub, apart, so that a rate limit never holds up deliveries."""
    return Queue(GITHUB_QUEUE_NAME, connection=connection)


def records_queue(connection: Redis) -> Queue:
    """Month-end work: finalising months, publishing them, and the periodic look for what is due."""
    return Queue(RECORDS_QUEUE_NAME, connection=connection)


def finalize_job_id(full_name: str, month: str, force: bool) -> str:
    return job_id("finalize", f"{full_name.lower()}@{month}{'+force' if force else ''}")


def enqueue_publish(
    queue: Queue, full_name: str, month: str, edition: str, *, at: float | None = None, outages: int = 0
) -> None:
    """Ask for one edition of a month to be published (again): publishing is idempotent, so a second
    job for the same edition writes nothing new. `outages`: the GitHub outages in a row a re-scheduled
    publication follows (tracker.github.retry)."""
    options = {
        "job_timeout": JOB_TIMEOUT,
        "result_ttl": RESULT_TTL,
        "description": f"publish the {edition} edition of {month} of {full_name}",
    }
    _enqueue(queue, PUBLISH_FUNCTION, (full_name, month, edition, outages), options, at)


def enqueue_publish_group(queue: Queue, name: str, month: str, *, at: float | None = None, outages: int = 0) -> None:
    """Ask for a group's recorded month to be published (again), as `enqueue_publish` a repository's."""
    options = {
        "job_timeout": JOB_TIMEOUT,
        "result_ttl": RESULT_TTL,
        "description": f"publish {month} of the group {name}",
    }
    _enqueue(queue, PUBLISH_GROUP_FUNCTION, (name, month, outages), options, at)


def enqueue_narrate(queue: Queue, full_name: str, month: str, *, at: float | None = None) -> None:
    """Ask for the language-model narrator's prose of a month (tracker.narration.jobs): idempotent, a second job
    finds every section narrated and asks the model nothing."""
    options = {
        "job_timeout": NARRATE_JOB_TIMEOUT,
        "result_ttl": RESULT_TTL,
        "description": f"narrate {month} of {full_name}",
    }
    _enqueue(queue, NARRATE_FUNCTION, (full_name, month), options, at)


def enqueue_finalize(
    queue: Queue,
    full_name: str,
    month: str,
    *,
    force: bool,
    trigger: str,
    deadline: float,
    attempt: int = 0,
    at: float | None = None,
) -> str | None:
    """Ask for a month's finalisation, now or `at` a moment; None when one is already waiting (so the
    periodic look for due months, or two of them, queue it once). Returns the job id."""
    identifier = finalize_job_id(full_name, month, force)
    if attempt == 0 and waiting_jobs(queue, [identifier]):
        return None
    arguments = (full_name, month, force, trigger, deadline, attempt)
    options = {
        "job_id": run_job_id(identifier, attempt),
        "job_timeout": JOB_TIMEOUT,
        "result_ttl": RESULT_TTL,
        "description": f"finalise {month} of {full_name}",
    }
    _enqueue(queue, FINALIZE_FUNCTION, arguments, options, at)
    return str(options["job_id"])


def finalize_group_job_id(name: str, month: str, force: bool) -> str:
    return job_id("finalize-group", f"{name.lower()}@{month}{'+force' if force else ''}")


def enqueue_finalize_group(queue: Queue, name: str, month: str, *, force: bool, trigger: str) -> str | None:
    """Ask for a group's month's finalisation (tracker.records.groups); None when one is already waiting (so
    the periodic look for due months, or two of them, queue it once). Returns the job id."""
    identifier = finalize_group_job_id(name, month, force)
    if waiting_jobs(queue, [identifier]):
        return None
    options = {
        "job_id": run_job_id(identifier, 0),
        "job_timeout": JOB_TIMEOUT,
        "result_ttl": RESULT_TTL,
        "description": f"finalise {month} of the group {name}",
    }
    _enqueue(queue, FINALIZE_GROUP_FUNCTION, (name, month, force, trigger), options, None)
    return str(options["job_id"])


def enqueue_head_fetches(queue: Queue, wanted: Sequence[tuple[str, str, int, str, str]]) -> int:
    """Ask for the files of many heads, (full name, repo, number, head sha, base sha) each, in a few
    round trips: the heads without a fetch on its way (the same markers as `enqueue_head_fetch`) go to
    jobs of FETCH_BATCH heads each. A head a batch cannot fetch yet (a rate limit, an outage) is
    re-scheduled in a job of its own. Returns how many heads were asked for."""
    if not wanted:
        return 0
    expires = int(time.time()) + FETCH_MARKER_GRACE
    run = redis_run(queue.connection)
    pipe = queue.connection.pipeline(transaction=False)
    for _full_name, repo, number, head_sha, _base_sha in wanted:
        pipe.set(fetch_marker(repo, number, head_sha), run, exat=expires, nx=True)
    asked = [head for head, marked in zip(wanted, pipe.execute(), strict=True) if marked]
    if not asked:
        return 0
    jobs = [
        Queue.prepare_data(
            FETCH_BATCH_FUNCTION,
            args=([(full_name, number, head_sha, base_sha) for full_name, _repo, number, head_sha, base_sha in chunk],),
            timeout=JOB_TIMEOUT,
            result_ttl=RESULT_TTL,
            description=f"fetch the files of {len(chunk)} heads",
        )
        for chunk in (asked[start : start + FETCH_BATCH] for start in range(0, len(asked), FETCH_BATCH))
    ]
    try:
        queue.enqueue_many(jobs)
    except BaseException:  # no job will clear the markers: let the next ask (the sweep's) through
        queue.connection.delete(*(fetch_marker(repo, number, sha) for _f, repo, number, sha, _b in asked))
        raise
    return len(asked)


def job_id(prefix: str, key: str) -> str:
    """RQ accepts letters, digits, `_` and `-` in job ids; anything else is hashed."""
    if JOB_ID_PATTERN.fullmatch(key) and len(key) <= 100:
        return f"{prefix}-{key}"
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:40]}"


def fetch_job_id(repo: str, number: int, head_sha: str) -> str:
    return job_id("files", f"{repo}#{number}@{head_sha}")


def fetch_marker(repo: str, number: int, head_sha: str) -> str:
    """Set while a fetch of the head's files is on its way (until it is done, or its grace lapses). Its
    value is the Redis run that set it (`redis_run`): see `forget_markers_of_earlier_runs`."""
    return f"tracker:fetch:{fetch_job_id(repo, number, head_sha)}"


def redis_run(connection: Redis) -> str:
    """The Redis server's run id, new at each start, or "" where INFO is refused (some hosted Redis)."""
    try:
        return str(connection.info("server").get("run_id", ""))
    except ResponseError:
        return ""


def forget_markers_of_earlier_runs(connection: Redis, heads: Sequence[tuple[str, int, str]]) -> int:
    """Delete the fetch markers of these heads (repo, number, sha) that a Redis run before this one set.
    A Redis restarted from its append-only file brings the markers back, but not a job a worker had
    already taken; without this, such a head would wait for its marker to lapse (15 minutes). A marker
    whose job did come back only costs a second fetch, which finds the head known. How many it deleted."""
    run = redis_run(connection)
    if not run or not heads:
        return 0
    keys = [fetch_marker(repo, number, sha) for repo, number, sha in heads]
    values = connection.mget(keys)
    stale = [key for key, value in zip(keys, values, strict=True) if value is not None and value != run.encode()]
    return int(connection.delete(*stale)) if stale else 0


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
    outages: int = 0,
    reschedule: bool = False,
) -> bool:
    """Ask for a head's files, `at` a moment or now; False when a job for that head is already on
    its way (a marker in Redis says so until shortly after the job is due, so the sweep does not
    pile up requests behind a rate limit). A job re-scheduling itself passes `reschedule`, the number
    of its next run (`attempt`) and the GitHub outages in a row that run follows (`outages`)."""
    identifier = fetch_job_id(repo, number, head_sha)
    marker = fetch_marker(repo, number, head_sha)
    due = at if at is not None else time.time()
    run = redis_run(queue.connection)
    if not queue.connection.set(marker, run, exat=int(due) + FETCH_MARKER_GRACE, nx=not reschedule):
        return False
    arguments = (full_name, number, head_sha, base_sha, attempt, outages)
    options = {
        "job_id": run_job_id(identifier, attempt),
        "job_timeout": JOB_TIMEOUT,
        "result_ttl": RESULT_TTL,
    }
    _enqueue(queue, FETCH_FUNCTION, arguments, options, at)
    return True


def history_job_id(kind: str, full_name: str, start: int) -> str:
    """Named by where the range starts, like the run (tracker.history.store.run_id): a range that
    ends now is the same job however late it is asked for again."""
    return job_id(kind, f"{full_name.lower()}@{start}")


def enqueue_history(
    queue: Queue,
    kind: str,
    full_name: str,
    start: int,
    end: int,
    *,
    at: float | None = None,
    attempt: int = 0,
    files: str = "daily",
    outages: int = 0,
) -> str | None:
    """Ask for a backfill or reconciliation of [start, end) of a repository, now or `at` a moment (a
    rate limit, an outage: the run's `attempt`-th re-scheduled run, after `outages` GitHub outages in
    a row); None when the same run is already waiting. Returns the job id."""
    identifier = history_job_id(kind, full_name, start)
    if attempt == 0 and waiting_jobs(queue, [identifier]):
        return None
    options = {
        "job_id": run_job_id(identifier, attempt),
        "job_timeout": HISTORY_JOB_TIMEOUT,
        "result_ttl": RESULT_TTL,
        "description": f"{kind} {full_name} from {start} to {end}",
    }
    _enqueue(queue, HISTORY_FUNCTION, (kind, full_name, start, end, attempt, files, outages), options, at)
    return str(options["job_id"])


def ask_for_drain(queue: Queue, *, force: bool = False, at: float | None = None) -> bool:
    """Make sure a drain job (workers.drain) will look at the ledger's pending deliveries after this
    call; True when this call queued one. Without `force`, none is queued while one waits to start
    (it will see what was stored before this call). The sweep forces one."""
    if not queue.connection.set(DRAIN_WAITING_KEY, 1, nx=not force, ex=DRAIN_WAITING_TTL):
        return False
    options = {"job_timeout": JOB_TIMEOUT, "result_ttl": RESULT_TTL, "description": "process the pending deliveries"}
    _enqueue(queue, DRAIN_FUNCTION, (), options, at)
    return True


class DrainAsker:
    """Asks for a drain on behalf of a web process's requests (`ask`), from a thread of its own once
    `start`ed: a request then costs setting an Event, never a Redis round trip, and a stream of
    requests costs one ask per ASK_EVERY seconds, not one each. A Redis that is slow or gone holds up
    that thread, never a webhook answer (the delivery is committed first: the sweep asks for it
    later, as when a request's own ask failed). Until `start` (tests, one-shot commands) and after
    `stop`, `ask` asks at once, in the caller's thread."""

    ASK_EVERY = 0.01  # seconds: at most this much later than an ask of its own would have been

    def __init__(self, queue: Queue) -> None:
        self._queue = queue
        self._wanted = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="drain-asker", daemon=True)
            self._thread.start()

    def ask(self) -> None:
        if self._thread is None:
            ask_for_drain(self._queue)
        else:
            self._wanted.set()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread, having asked once more if a request wanted it since the last ask."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        pending = self._wanted.is_set()
        self._stopping.set()
        self._wanted.set()  # wakes the thread, which sees it is stopping
        thread.join(timeout)
        if pending:
            self._ask_once()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            if self._stopping.is_set():
                return
            self._wanted.clear()
            self._ask_once()
            self._stopping.wait(self.ASK_EVERY)

    def _ask_once(self) -> None:
        try:
            ask_for_drain(self._queue)
        except Exception as exc:  # stored is accepted: the sweep asks for a drain once Redis is back
            if not self._failing:
                log.warning("could not ask for a drain (%s: %s); the sweep will", type(exc).__name__, exc)
            self._failing = True
        else:
            if self._failing:
                log.info("asking for drains again")
            self._failing = False


def enqueue_deliveries(queue: Queue, delivery_ids: Iterable[str]) -> int:
    """Enqueue one processing job per delivery (retries of those that failed once, `retry-failed`)
    in one round trip; returns how many."""
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
    """Those of `job_ids` whose job is really waiting: queued and still in its queue, scheduled, or
    deferred. A job's hash alone is not enough: a worker killed right after it popped a job (BLPOP)
    leaves the hash saying `queued` with the job in no queue any more."""
    pipe = queue.connection.pipeline(transaction=False)
    for identifier in job_ids:
        pipe.hmget(Job.key_for(identifier), "status", "origin")
    rows = pipe.execute()
    later = {JobStatus.SCHEDULED.value, JobStatus.DEFERRED.value}
    alive: set[str] = set()
    queued: list[tuple[str, str]] = []
    for identifier, (status, origin) in zip(job_ids, rows, strict=True):
        status = status.decode() if isinstance(status, bytes) else status
        if status in later:
            alive.add(identifier)
        elif status == JobStatus.QUEUED.value and origin is not None:
            queued.append((identifier, origin.decode() if isinstance(origin, bytes) else origin))
    if queued:
        pipe = queue.connection.pipeline(transaction=False)
        for identifier, origin in queued:
            pipe.lpos(Queue.redis_queue_namespace_prefix + origin, identifier)
        for (identifier, _), position in zip(queued, pipe.execute(), strict=True):
            if position is not None:
                alive.add(identifier)
    return alive


def fetch_done(queue: Queue, repo: str, number: int, head_sha: str) -> None:
    queue.connection.delete(fetch_marker(repo, number, head_sha))


def fetches_done(queue: Queue, heads: Sequence[tuple[str, int, str]]) -> None:
    """`fetch_done` for many heads (repo, number, sha), in one round trip."""
    if heads:
        queue.connection.delete(*(fetch_marker(repo, number, sha) for repo, number, sha in heads))


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


def _enqueue(
    queue: Queue, function: str, arguments: tuple[Any, ...], options: dict[str, Any], at: float | None
) -> None:
    """Run `function(*arguments)` now, or from `at` (epoch seconds) on through RQ's scheduler."""
    if at is None:
        queue.enqueue(function, *arguments, **options)
    else:
        queue.enqueue_at(datetime.fromtimestamp(at, UTC), function, *arguments, **options)
