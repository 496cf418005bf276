"""The jobs RQ runs, by the names stored in Redis with each job (`workers.jobs.<name>`, tracker.queue): those
names never change, whatever moves behind them. Each job takes ids and plain values, looks up the worker's
services (workers.runtime) and does its work; running one twice changes nothing. The delivery and head jobs
are the workers' own and are written here; the others are one call into the feature they serve: history
(tracker.history.jobs), month end and publishing (tracker.records), narration (tracker.narration.jobs), the
warm (tracker.reports.warm)."""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from contextlib import AbstractContextManager, ExitStack, nullcontext

from rq import get_current_job

from tracker.core.derive import PULL_REQUEST, derive
from tracker.core.repository import repository_key
from tracker.github.client import GitHubClient, RateLimited, RequestRefused, Unavailable
from tracker.github.fetch import fetch_and_store
from tracker.github.quota import QuotaTally
from tracker.github.retry import held_back, next_run
from tracker.history import jobs as history
from tracker.history.github import DAILY
from tracker.narration import jobs as narration
from tracker.narration.client import ChatClient
from tracker.queue import enqueue_finalize, enqueue_finalize_group, enqueue_head_fetch, fetch_done, fetches_done
from tracker.records import jobs as records
from tracker.records import publish
from tracker.records.finalize import due_months, finalize
from tracker.records.groups import due_group_months
from tracker.reports import warm
from tracker.reports.warm import ask_for_warm
from tracker.services import Services
from tracker.store.heads import UNAVAILABLE, DeferredHeads, StoredHeads
from workers.drain import follow_up
from workers.retention import apply_retention
from workers.runtime import current

log = logging.getLogger(__name__)


def process_delivery(delivery_id: str) -> str:
    """Derive a stored delivery's facts and attribute versions into the per-month state, and ask
    for the files of a head not seen before: one delivery on its own (a retry of one that failed in
    a drain's batch, `tracker retry-failed`, the demo); new deliveries go through workers.drain."""
    services = current()
    delivery = services.ledger.get(delivery_id)
    if delivery is None:
        return "unknown delivery"
    try:
        derivation = None
        if delivery.event == PULL_REQUEST:
            derivation = derive(delivery.id, delivery.content_type, delivery.body, services.config.timezone_for)
        applied = services.state.apply(delivery.id, derivation)
    except Exception as exc:
        job = get_current_job()
        final = job is None or not job.retries_left
        try:
            services.ledger.record_attempt_failed(delivery_id, f"{type(exc).__name__}: {exc}", final=final)
        except Exception:  # the ledger itself may be what failed; RQ still retries the job
            log.exception(
                "could not record the failure of delivery %s", delivery_id, extra={"delivery_id": delivery_id}
            )
        raise
    if derivation is not None:
        follow_up(services, [derivation])
    return "processed" if applied else "already processed"


class _Batch:
    """What the heads of one `fetch_heads` job share.

    - One GitHub client per repository, opened when a head first needs it and closed with the job: its
      connection (a TCP and TLS handshake away from github.com) serves every head of the batch.
    - What the ledger says of the batch's heads, read in two queries instead of one per head: which are
      stored already, and which PRs it shows at a later head (their files listing would be that head's:
      `fetch.fetch_and_store(moved_on=True)` asks the compare endpoint at once, one request instead of two).
    - The heads' files and verdicts, written in one transaction when the job ends (`DeferredHeads`).
    - Whether GitHub's rate limit holds fetches back, read once (a limit the job meets itself holds its
      other heads back too); GitHub's rate-limit headers (`QuotaTally`) and the fetch markers of the
      heads done, written to Redis once when the job ends instead of a round trip or two per head."""

    def __init__(self, stack: ExitStack, wanted: list[tuple[str, int, str, str]]) -> None:
        services = current()
        self.stack = stack
        self.open: dict[str, GitHubClient] = {}
        heads = [(repository_key(full_name), number, sha) for full_name, number, sha, _base in wanted]
        self.unknown = set(services.heads.unknown(heads))
        self.moved_on = services.heads.moved_on(list(self.unknown))
        self.heads = DeferredHeads(services.heads)
        quota = services.quota()
        self.blocked_until = held_back(quota)
        self.tally = QuotaTally(quota) if quota is not None else None
        self.done: list[tuple[str, int, str]] = []

    def borrow(self, full_name: str) -> AbstractContextManager[GitHubClient]:
        client = self.open.get(full_name)
        if client is None:
            tally = self.tally.record if self.tally is not None else None
            client = self.open[full_name] = self.stack.enter_context(current().github(full_name, on_response=tally))
        return nullcontext(client)

    def finish(self) -> None:
        """Write what the job kept: the heads' files (should that fail, their markers stay, and the heads
        are asked for again), then, in Redis, the answers' tally and the fetch markers of the heads done."""
        services = current()
        queue = services.github_queue if services.redis is not None else None
        try:
            warm_months(services, self.heads.flush())
        finally:
            if self.tally is not None:
                self.tally.flush()
        if queue is not None and self.done:
            fetches_done(queue, self.done)
        self.done = []


def fetch_head_files(
    full_name: str,
    number: int,
    head_sha: str,
    base_sha: str,
    attempt: int = 0,
    outages: int = 0,
    batch: _Batch | None = None,
) -> str:
    """Fetch and classify one head's files. Waiting (rate limits, outages) re-schedules the job
    (tracker.github.retry): `attempt` numbers its runs, `outages` counts the GitHub outages in a row
    before this one. A fetch that fails or must wait logs a warning with the reason and records it for
    `/api/v1/status` (`github.last_error`); neither ever holds the token. `batch`: what the job
    fetching several heads (`fetch_heads`) shares, else this head has a client of its own."""
    from redis.exceptions import RedisError

    from tracker import logs
    from tracker.core.window import iso_utc

    services = current()
    repo = repository_key(full_name)
    store = batch.heads if batch is not None else DeferredHeads(services.heads)  # a batch writes when it ends
    queue = services.github_queue if services.redis is not None else None
    head = (repo, number, head_sha)

    def done() -> None:
        if batch is not None:
            batch.done.append(head)  # its marker deleted with the others' when the job ends
        elif queue is not None:
            fetch_done(queue, repo, number, head_sha)

    if batch is not None:  # stored before the job, or kept by it already (an earlier head's listing)
        known = head not in batch.unknown or head in batch.heads.pending
    else:
        known = store.known(repo, number, head_sha)
    if known:
        done()
        return "already known"
    quota = services.quota()
    what = f"the files of {full_name}#{number} at {head_sha[:12]}"
    where = {"repository": full_name}  # a JSON log line's field (tracker.logs)

    def again(at: float, next_outages: int) -> None:
        assert queue is not None
        enqueue_head_fetch(
            queue,
            full_name,
            repo,
            number,
            head_sha,
            base_sha,
            at=at,
            attempt=attempt + 1,
            outages=next_outages,
            reschedule=True,
        )

    def failed(reason: str, next_try: float | None) -> None:
        token = services.settings.github_token
        reason = logs.redact(reason, [token.get_secret_value() if token is not None else None])
        log.warning("GitHub: %s: %s", what, reason, extra=where)
        if quota is not None:
            try:
                quota.record_error(f"{what}: {reason}", next_try)
            except RedisError as exc:  # the job's outcome matters more than the status line
                log.warning("could not record the GitHub error in Redis (%s)", type(exc).__name__, extra=where)

    blocked = batch.blocked_until if batch is not None else held_back(quota)
    if queue is not None and blocked > time.time():
        # The rate limit was logged once, when it was hit; every fetch held back by it is routine.
        log.debug("%s waits for the rate limit until %s", what, iso_utc(int(blocked)), extra=where)
        again(blocked, outages)
        return "waiting for the rate limit"
    try:
        with batch.borrow(full_name) if batch is not None else services.github(full_name) as client:
            outcome = fetch_and_store(
                client,
                store,
                full_name,
                number,
                head_sha,
                base_sha,
                services.config.rules_for(full_name),
                moved_on=batch is not None and head in batch.moved_on,
            )
    except (RateLimited, Unavailable) as exc:
        then = next_run(exc, outages, services.github_backoff, quota)
        failed(then.reason, then.at)
        if then.at is None:
            raise
        if batch is not None and isinstance(exc, RateLimited):  # the batch's other heads wait too
            batch.blocked_until = max(batch.blocked_until, then.at)
        again(then.at, then.outages)
        return then.said
    except RequestRefused as exc:
        if exc.status not in (404, 410, 422):
            hint = ""
            if exc.status == 401:
                hint = ": bad credentials, check GITHUB_TOKEN (or the GitHub App's settings)"
            elif exc.status == 403:
                hint = ": the token may not read this repository"
            failed(f"{exc}{hint}", None)
            raise
        # The PR or commit is gone (deleted fork, force-pushed away): nothing to wait for.
        log.info("GitHub: %s: unavailable (%s); recorded as such", what, exc.status, extra=where)
        store.store(
            repo, number, head_sha, [], truncated=False, source=UNAVAILABLE, rules=services.config.rules_for(full_name)
        )
        outcome = f"files unavailable: {exc}"
    if batch is None:
        warm_months(services, store.flush())
    done()
    return outcome


def warm_months(services: Services, stored: StoredHeads) -> None:
    """Ask for the reports of the months whose PRs gained a head's files to be computed again (tracker.reports.warm):
    a head's verdict changes what the month's report says, as a delivery does."""
    for repo, month in stored.months:
        ask_for_warm(services, repo, month)


def fetch_heads(wanted: list[tuple[str, int, str, str]]) -> str:
    """Fetch and classify the files of several heads, (full name, number, head sha, base sha) each, one
    after the other (tracker.queue.enqueue_head_fetches): what `fetch_head_files` does for one, without
    a job's bookkeeping per head. A head that must wait is re-scheduled in a job of its own; one that
    fails does not stop the others, and the job fails after the last one, naming the failures."""
    started = time.process_time()
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    with ExitStack() as stack:
        batch = _Batch(stack, wanted)
        try:
            for full_name, number, head_sha, base_sha in wanted:
                try:
                    outcome = fetch_head_files(full_name, number, head_sha, base_sha, batch=batch)
                except Exception as exc:
                    failures.append(f"{full_name}#{number} at {head_sha[:12]}: {type(exc).__name__}: {exc}")
                    continue
                outcomes[_OUTCOME.split(outcome, maxsplit=1)[0].strip()] += 1
        finally:
            batch.finish()
    summary = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))
    if failures:
        raise FetchFailed(f"{len(failures)} of {len(wanted)} heads failed ({'; '.join(failures)})")
    return f"{len(wanted)} heads: {summary} ({(time.process_time() - started) * 1000:.0f} ms of CPU)"


# Where an outcome's particulars begin ("stored from compare (the PR is now at ...)", "files
# unavailable: 404 ...", "GitHub unavailable; trying again in 30 s"): a batch counts what comes before.
_OUTCOME = re.compile(r"[^A-Za-z ]")


class FetchFailed(RuntimeError):
    """Some heads of a batch could not be fetched (each was logged, and is in the job's error)."""


def due_work() -> str:
    """The periodic look for what is due (RQ's cron scheduler runs it every few minutes): every
    month that ended, plus the grace, without a record is finalised, then every group's (once its members are
    recorded: a group still waiting is looked at again next time), and old cache entries and runs are
    dropped (workers.retention). Level-triggered: a missed run
    is caught up by the next, and two schedulers queue each month once (the records' primary key
    keeps a race to one record anyway)."""
    services = current()
    settings = services.settings
    due = due_months(services, grace_seconds=settings.finalize_grace)
    queued = 0
    for full_name, month in due:
        if services.redis is None:
            record, _ = finalize(services, full_name, month, trigger="schedule")
            log.info("schedule: %s %s ended: finalised as revision %d", full_name, month, record.revision)
            continue
        deadline = time.time() + settings.finalize_wait
        if enqueue_finalize(
            services.records_queue, full_name, month, force=False, trigger="schedule", deadline=deadline
        ):
            log.info("schedule: %s %s ended without a record: its finalisation is queued", full_name, month)
            queued += 1
    groups = due_group_months(services, grace_seconds=settings.finalize_grace)
    for name, month in groups:
        # A group waits for its members' records: its job says so, and it is due again at the next look.
        if services.redis is None:
            log.info(
                "schedule: the group %s %s: %s",
                name,
                month,
                records.finalize_group_month(services, name, month, trigger="schedule"),
            )
        elif enqueue_finalize_group(services.records_queue, name, month, force=False, trigger="schedule"):
            log.info("schedule: the group %s %s ended without a record: its finalisation is queued", name, month)
            queued += 1
    partial = publish.publish_due_partials(services)
    reconciling = history.reconciliations_due(services)
    narrating = narration.narrations_due(services)
    dropped = apply_retention(services)
    return (
        f"{len(due)} months due"
        + (f", {len(groups)} groups' months due" if groups else "")
        + f", {queued} finalisations queued"
        + (f"; {partial}" if partial else "")
        + (f"; {reconciling} reconciliations queued" if reconciling else "")
        + (f"; {narrating} narrations queued" if narrating else "")
        + (f"; dropped {dropped}" if dropped else "")
    )


# --- the features' jobs ------------------------------------------------------------------------------


def finalize_month(
    full_name: str, month: str, force: bool = False, trigger: str = "api", deadline: float = 0.0, attempt: int = 0
) -> str:
    return records.finalize_month(current(), full_name, month, force, trigger, deadline, attempt)


def finalize_group_month(name: str, month: str, force: bool = False, trigger: str = "api") -> str:
    return records.finalize_group_month(current(), name, month, force, trigger)


def publish_month(full_name: str, month: str, edition: str, outages: int = 0) -> str:
    return publish.publish_month(current(), full_name, month, edition, outages)


def publish_group_month(name: str, month: str, outages: int = 0) -> str:
    return publish.publish_group(current(), name, month, outages)


def narrate_month(full_name: str, month: str, client: ChatClient | None = None) -> str:
    return narration.narrate_month(current(), full_name, month, client)


def read_history_job(
    kind: str, full_name: str, start: int, end: int, attempt: int = 0, files: str = DAILY, outages: int = 0
) -> str:
    return history.read_history_job(current(), kind, full_name, start, end, attempt, files, outages)


def warm_month(full_name: str, month: str) -> str:
    return warm.warm_when_rested(current(), full_name, month)
