"""Prometheus metrics: what every process counts, and what `/metrics` reads from Redis when scraped.

Counted where it happens (one line at each place): webhook deliveries received, accepted and rejected
by reason (tracker.web.metrics), the processing lag of each delivery the drain applies
(workers.drain), each job's duration and failure by job function (workers.runtime), GitHub's answers
by status class (tracker.github.client), the time to answer a report by format (tracker.web.api), and
the months finalised and published (workers.jobs, tracker.records.publish). Read at scrape time, so they are
right whichever process answers: the jobs waiting in each RQ queue, GitHub's quota as the workers last
saw it, and the age of the newest delivery processed for each repository.

`tracker run` starts many processes (gunicorn's web processes, the RQ workers), each counting its
own. prometheus-client's multiprocess mode adds them up: each process writes its values to files in
the directory PROMETHEUS_MULTIPROC_DIR names, and a scrape reads every file there. The client reads
that variable once, when it is imported, to choose how values are kept; so does this module, to know
how to collect (it is prometheus-client's variable, not a setting). `tracker run` makes a new
directory for each run under the data directory (`run_directory`), hands it to every child in the
environment, and removes it when it stops. Without the variable (tests, `tracker web` alone) each
process keeps its values in memory and answers with its own.

Labels never carry a secret or a payload, and their values come from fixed sets: reasons and answers
listed here, formats the routes accept, job functions of the `workers` package, repositories the
ledger knows (only the public ones while `/metrics` is open to anyone: tracker.web.metrics).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import multiprocess as prometheus_multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from redis import Redis
from redis.exceptions import RedisError

from tracker.core.repository import repository_key

log = logging.getLogger(__name__)

# prometheus-client's own variable (read by it when imported): the directory every process writes to.
MULTIPROCESS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
MULTIPROCESS_DIRECTORY = os.environ.get(MULTIPROCESS_VARIABLE) or None
# Where the workers keep, per repository key, when the newest delivery they processed was received
# (epoch milliseconds).
LAST_DELIVERY_KEY = "tracker:metrics:last_delivery"
# What `/metrics` answers with (the Prometheus text format).
CONTENT_TYPE = CONTENT_TYPE_LATEST

# --- deliveries ----------------------------------------------------------------------------------

# Why POST /webhook did not accept a delivery for processing (README, "What POST /webhook answers").
# `duplicate`, `unknown_event` and `ping` are ordinary answers; the others are requests GitHub does not
# send with the right secret.
REJECTION_REASONS = (
    "bad_signature",  # 401: missing or wrong X-Hub-Signature-256
    "missing_headers",  # 400: no X-GitHub-Event, or no well-formed X-GitHub-Delivery
    "malformed",  # 400: a body that is not JSON (or form-encoded JSON), a ping without its hook
    "oversized",  # 413: over GitHub's 25 MB cap
    "unsupported_content_type",  # 415
    "incomplete",  # 422: a pull_request body without a field the tracker needs
    "unknown_event",  # 204: an event other than pull_request and ping
    "duplicate",  # 200: a delivery id, or a body, already stored
    "ping",  # 200: GitHub's ping, recorded as the hook's, not a delivery
    "other",  # an answer this list does not know yet
)

DELIVERIES_RECEIVED = Counter(
    "tracker_webhook_deliveries_received",
    "Requests to POST /webhook (a request that failed with 500 is counted here only).",
)
DELIVERIES_ACCEPTED = Counter(
    "tracker_webhook_deliveries_accepted", "Deliveries stored in the ledger for processing (answered 202)."
)
DELIVERIES_REJECTED = Counter(
    "tracker_webhook_deliveries_rejected", "Requests to POST /webhook not stored for processing, by reason.", ["reason"]
)
PROCESSING_LAG = Histogram(
    "tracker_delivery_processing_lag_seconds",
    "Time from a delivery's receipt to its facts being in the month state (observed by the drain).",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600),
)

# --- jobs ----------------------------------------------------------------------------------------

JOB_DURATION = Histogram(
    "tracker_job_duration_seconds",
    "Time an RQ job took in a worker, by job function (failed jobs included).",
    ["job"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
JOB_FAILURES = Counter("tracker_job_failures", "RQ jobs that raised (each attempt), by job function.", ["job"])
# Job functions are importable names in the `workers` package (ARCHITECTURE.md); anything else is `other`.
_JOB_FUNCTION = re.compile(r"workers(?:\.[a-z_][a-z0-9_]*){1,3}")

# --- GitHub --------------------------------------------------------------------------------------

GITHUB_ANSWERS = ("2xx", "3xx", "4xx", "5xx", "no_answer")
GITHUB_REQUESTS = Counter(
    "tracker_github_requests",
    "Requests sent to GitHub's REST API, by answer: the status class (3xx is nearly all 304 Not Modified, "
    "which GitHub does not count against the quota), or no_answer (a timeout or a connection error).",
    ["answer"],
)

# --- reports and month end -----------------------------------------------------------------------

REPORT_FORMATS = ("md", "html", "json")
REPORT_RENDER = Histogram(
    "tracker_report_render_seconds",
    "Time to answer a report request that succeeded, by format: from the month's record, the cache, or rendered.",
    ["format"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
MONTHS_FINALIZED = Counter("tracker_months_finalized", "Months frozen as a new record (revision) by a worker.")
PUBLICATION_KINDS = ("files", "issue")
PUBLICATION_EDITIONS = ("final", "partial")
PUBLICATIONS = Counter(
    "tracker_publications",
    "Editions of a month published by a worker (written, updated or found unchanged), by target kind and edition.",
    ["kind", "edition"],
)

# Every label value of a fixed set exists from the start, at 0, so that a rate over it is defined.
for _reason in REJECTION_REASONS:
    DELIVERIES_REJECTED.labels(reason=_reason)
for _answer in GITHUB_ANSWERS:
    GITHUB_REQUESTS.labels(answer=_answer)
for _format in REPORT_FORMATS:
    REPORT_RENDER.labels(format=_format)


# --- what the code calls -------------------------------------------------------------------------


def rejected(reason: str) -> None:
    DELIVERIES_REJECTED.labels(reason=reason if reason in REJECTION_REASONS else "other").inc()


def observe_processed(connection: Redis | None, deliveries: Sequence[tuple[str | None, int]]) -> None:
    """Deliveries a drain just applied, as (repository full name, received_at in epoch ms): their lag,
    and each repository's newest receipt (one HSET). A Redis that fails here fails no delivery."""
    now = time.time()
    newest: dict[str, int] = {}
    for full_name, received_at in deliveries:
        PROCESSING_LAG.observe(max(0.0, now - received_at / 1000))
        if full_name:
            key = repository_key(full_name)
            newest[key] = max(received_at, newest.get(key, 0))
    if connection is None or not newest:
        return
    try:
        connection.hset(LAST_DELIVERY_KEY, mapping=newest)  # type: ignore[arg-type]
    except RedisError as exc:
        log.debug("could not record the newest deliveries in Redis (%s)", type(exc).__name__)


def job_label(function_name: str | None) -> str:
    return function_name if function_name and _JOB_FUNCTION.fullmatch(function_name) else "other"


def timed_job(function_name: str | None, perform: Callable[[], bool]) -> bool:
    """Run `perform` (RQ's perform_job: True when the job succeeded), timing it under the job's function."""
    label = job_label(function_name)
    started = time.perf_counter()
    succeeded = False
    try:
        succeeded = perform()
    finally:
        JOB_DURATION.labels(job=label).observe(time.perf_counter() - started)
        if not succeeded:
            JOB_FAILURES.labels(job=label).inc()
    return succeeded


def github_answered(status: int | None) -> None:
    """One request to GitHub, by its answer's status code (None: no answer)."""
    answer = "no_answer" if status is None else f"{status // 100}xx"
    GITHUB_REQUESTS.labels(answer=answer if answer in GITHUB_ANSWERS else "no_answer").inc()


def report_answered(fmt: str, seconds: float) -> None:
    if fmt in REPORT_FORMATS:
        REPORT_RENDER.labels(format=fmt).observe(seconds)


def finalized() -> None:
    MONTHS_FINALIZED.inc()


def published(kind: str, edition: str) -> None:
    PUBLICATIONS.labels(
        kind=kind if kind in PUBLICATION_KINDS else "other",
        edition=edition if edition in PUBLICATION_EDITIONS else "other",
    ).inc()


# --- a scrape ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuotaSeen:
    remaining: int | None
    limit: int | None


@dataclass(frozen=True)
class ScrapeSources:
    """Where a scrape reads what no process counts. Each is asked once per scrape; one that fails
    leaves its metrics out and sets `tracker_metrics_source_up{source}` to 0."""

    redis: Redis | None
    queues: Mapping[str, str]  # queue name -> its Redis list (RQ's `rq:queue:<name>`)
    quota: Callable[[], QuotaSeen]  # GitHub's quota as the workers last recorded it
    repositories: Callable[[], Sequence[str]]  # the full names whose labels it may show (tracker.web.metrics)


class ScrapeCollector:
    """The metrics computed when `/metrics` is asked: a few Redis commands and one small ledger query."""

    def __init__(self, sources: ScrapeSources) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "tracker_metrics_source_up",
            "Whether a scrape could read its source (redis, ledger): 0 leaves that source's metrics out.",
            labels=["source"],
        )
        redis_up = self.sources.redis is not None
        ledger_up = True
        try:
            yield from self._from_redis()
        except RedisError as exc:
            log.warning("/metrics: Redis failed (%s); its metrics are left out", type(exc).__name__)
            redis_up = False
        try:
            yield from self._delivery_ages()
        except RedisError as exc:
            log.warning("/metrics: Redis failed (%s); the delivery ages are left out", type(exc).__name__)
            redis_up = False
        except Exception as exc:  # the ledger: SQLAlchemy's errors, whatever the driver
            log.warning("/metrics: the ledger failed (%s); the delivery ages are left out", type(exc).__name__)
            ledger_up = False
        up.add_metric(["redis"], 1 if redis_up else 0)
        up.add_metric(["ledger"], 1 if ledger_up else 0)
        yield up

    def _from_redis(self) -> Iterator[Metric]:
        connection = self.sources.redis
        if connection is None:
            return
        names = sorted(self.sources.queues)
        pipe = connection.pipeline(transaction=False)
        for name in names:
            pipe.llen(self.sources.queues[name])
        lengths = pipe.execute()
        queued = GaugeMetricFamily("tracker_queue_jobs", "Jobs waiting in each RQ queue (LLEN).", labels=["queue"])
        for name, length in zip(names, lengths, strict=True):
            queued.add_metric([name], int(length))
        quota = self.sources.quota()
        families = [queued]
        if quota.remaining is not None:
            families.append(
                GaugeMetricFamily(
                    "tracker_github_quota_remaining_requests",
                    "Requests GitHub's rate limit allowed until its reset, at the workers' last answer from GitHub.",
                    value=quota.remaining,
                )
            )
        if quota.limit is not None:
            families.append(
                GaugeMetricFamily(
                    "tracker_github_quota_limit_requests",
                    "Requests GitHub's rate limit allows per hour, at the workers' last answer from GitHub.",
                    value=quota.limit,
                )
            )
        yield from families

    def _delivery_ages(self) -> Iterator[Metric]:
        connection = self.sources.redis
        if connection is None:
            return
        stored = connection.hgetall(LAST_DELIVERY_KEY)
        newest = {_text(key): int(value) for key, value in stored.items()}
        if not newest:
            return
        ages = GaugeMetricFamily(
            "tracker_repository_last_delivery_age_seconds",
            "Seconds since the newest delivery processed for each repository the ledger knows was received.",
            labels=["repository"],
        )
        now_ms = time.time() * 1000
        for full_name in self.sources.repositories():  # only names the ledger knows: a bounded set
            received = newest.get(repository_key(full_name))
            if received is not None:
                ages.add_metric([full_name], round(max(0.0, now_ms - received) / 1000, 3))
        yield ages


class _ThisProcess:
    """The metrics this process counted (prometheus-client's default registry: ours, and the process's
    own CPU, memory and garbage-collection figures)."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def exposition(sources: ScrapeSources) -> bytes:
    """The text `/metrics` answers: every process's counts (multiprocess mode) or this one's, and
    what `sources` say now."""
    registry = CollectorRegistry(auto_describe=False)
    if MULTIPROCESS_DIRECTORY is not None:
        prometheus_multiprocess.MultiProcessCollector(registry, path=MULTIPROCESS_DIRECTORY)  # type: ignore[no-untyped-call]
    else:
        registry.register(_ThisProcess())
    registry.register(ScrapeCollector(sources))
    return generate_latest(registry)


# --- the multiprocess directory ------------------------------------------------------------------


def run_directory(data_dir: Path) -> Path:
    """A new, empty directory for one `tracker run`'s metrics files, `<data dir>/metrics/run-<pid>`.
    Those of runs whose supervisor is gone (killed before it could remove its own) are removed first."""
    parent = data_dir / "metrics"
    parent.mkdir(parents=True, exist_ok=True)
    for old in parent.glob("run-*"):
        pid = old.name.removeprefix("run-")
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    directory = parent / f"run-{os.getpid()}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    return directory


def remove_run_directory(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def child_exit(_server: Any, worker: Any) -> None:
    """gunicorn's `child_exit` hook: a web process that exited keeps its counts, but no live gauge."""
    if MULTIPROCESS_DIRECTORY is not None:
        prometheus_multiprocess.mark_process_dead(worker.pid, MULTIPROCESS_DIRECTORY)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
