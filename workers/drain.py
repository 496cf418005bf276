"""The drain: pending deliveries processed in batches, many per job and per transaction.

The web process stores a delivery and asks for a drain (`tracker.queue.ask_for_drain`): one SET
that queues a job only when no drain waits to start or is at work, so a stream of deliveries costs
one job, not one job, its RQ bookkeeping and a transaction each. A drain job takes the ledger's
pending deliveries in arrival order, up to BATCH at a time, and applies each batch in one
transaction, until none is left or its time is up (it then queues the next drain). It keeps the
key while it works and deletes it only when it finds nothing left, then looks once more.

The ledger decides what is pending, never a job: a drain killed mid-batch committed nothing, and
the next drain (the sweep asks for one for anything pending past its grace) takes the same
deliveries again. Applying is idempotent, so two drains, a drain and a retry, or a redelivery count
nothing twice; one drain at a time holds the lock, so two workers do not do the same work.

A delivery that cannot be applied (a body the parser refuses, a row the database refuses) must not
hold up the others: it is recorded as failed once in the ledger (attempts = 1) and handed to a job
of its own (workers.jobs.process_delivery) with RQ's retries, after which it is `failed` and waits
for `tracker retry-failed`. Drains only take deliveries never tried before.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Sequence
from typing import cast

from redis import Redis
from redis.exceptions import LockNotOwnedError
from redis.lock import Lock

from tracker.core.derive import PULL_REQUEST, Derivation, derive
from tracker.metrics import observe_processed
from tracker.queue import (
    DRAIN_WAITING_KEY,
    DRAIN_WAITING_TTL,
    ask_for_drain,
    enqueue_deliveries,
    enqueue_head_fetches,
    redis_run,
)
from tracker.reports.warm import ask_for_warm
from tracker.services import Services
from tracker.store.ledger import Delivery
from workers.runtime import current

log = logging.getLogger(__name__)

# Deliveries per transaction: ~6 MB of bodies, a fraction of a second of work. (Tests of several
# worker processes set TRACKER_DRAIN_BATCH small, to have several batches.)
BATCH = int(os.environ.get("TRACKER_DRAIN_BATCH", "250"))
BUDGET_SECONDS = 20.0  # then the job ends and queues the next, so other queues get their turn
LOCK_KEY = "tracker:drain:lock"
LOCK_WAIT = 1.0  # seconds a drain waits for another to finish
LOCK_TIMEOUT = 30  # seconds; a killed drain's lock lapses after this, a live one renews it per batch
# After a batch of more than one delivery but fewer than BATCH, the drain waits this long before it
# looks again, so that a steady stream of deliveries makes batches of a few dozen rather than a few.
# (Not after a batch of one: a quiet hook's drain ends at once, and holds its lock no longer.)
LINGER = 0.05


def drain_deliveries() -> str:
    """Process pending deliveries in batches until none is left or the budget is spent."""
    services = current()
    connection = services.require_redis()
    # A drain that finds another at work does not wait for it (that parked a worker the head fetches
    # needed): it asks for another drain a second later, which sees whatever the first one missed.
    lock = take_lock(connection)
    if lock is None:
        ask_for_drain(services.delivery_queue, force=True, at=time.time() + 1)
        return "another drain held the lock; asked for another in a second"
    started, cpu = time.monotonic(), time.process_time()
    processed = batches = 0
    ledger = services.ledger
    try:
        while True:
            ledger.take_inbox(BATCH)  # what the webhook wrote since (SQLite: tracker.store.inbox)
            batch = ledger.fresh_pending(BATCH)
            if not batch:
                # The end: from now on a delivery stored asks for a drain. One stored before this DEL
                # saw the key and asked for nothing, but it was committed first, so this look sees it.
                connection.delete(DRAIN_WAITING_KEY)
                ledger.take_inbox(BATCH)
                batch = ledger.fresh_pending(BATCH)
                if not batch:
                    break
            connection.set(DRAIN_WAITING_KEY, 1, ex=DRAIN_WAITING_TTL)  # at work: no other job is needed
            processed += process_batch(services, batch)
            batches += 1
            lock.reacquire()
            if time.monotonic() - started > BUDGET_SECONDS:
                ask_for_drain(services.delivery_queue, force=True)
                break
            if 1 < len(batch) < BATCH:  # a stream (one at a time is no stream: end at once)
                time.sleep(LINGER)  # let a few more arrive: a batch costs about as much as 20 deliveries
    except BaseException:
        connection.delete(DRAIN_WAITING_KEY)  # the next delivery asks for a drain; the sweep asks too
        raise
    finally:
        try:
            lock.release()
        except Exception:  # it lapsed (a very long batch): the next drain takes it
            log.warning("the drain lock had lapsed before it was released")
    cpu_ms = (time.process_time() - cpu) * 1000
    return f"processed {processed} deliveries in {batches} batches ({cpu_ms:.0f} ms of CPU)"


def take_lock(connection: Redis) -> Lock | None:
    """The drain lock, or None when another drain holds it. Its token names the Redis server's run
    (`run_id`, new at each start), the machine and the process that holds it. A lock is taken over at once
    rather than after LOCK_TIMEOUT when its drain cannot be running: it was taken before Redis last
    restarted (that drain lost its connection with the restart and fails at its next Redis command), or
    by a process of this machine that no longer exists (a worker killed mid-drain). Should the first
    still be finishing a batch, applying is idempotent."""
    lock: Lock = connection.lock(LOCK_KEY, timeout=LOCK_TIMEOUT, blocking_timeout=LOCK_WAIT)
    run = redis_run(connection)
    token = f"{run}:{_HOST}:{os.getpid()}:{uuid.uuid4().hex}"
    if lock.acquire(token=token, blocking=False):
        return lock
    holder = cast(bytes | None, connection.get(LOCK_KEY))
    if holder is not None and _holder_gone(holder.decode(errors="replace"), run):
        try:
            lock.do_release(holder.decode())  # only if it is still that token
            log.info("took over the drain lock of a drain that is no longer running")
        except LockNotOwnedError:  # it lapsed, or another drain took it over first
            pass
    return lock if lock.acquire(token=token) else None


_HOST = socket.gethostname()


def _holder_gone(holder: str, run: str) -> bool:
    """Whether the drain that holds the lock (its token, `take_lock`'s) cannot be running."""
    parts = holder.split(":")
    if run and parts[0] != run:
        return True  # taken before Redis restarted
    if len(parts) != 4 or parts[1] != _HOST or not parts[2].isdigit():
        return False  # another machine's (or an older token): it lapses after LOCK_TIMEOUT
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def process_batch(services: Services, batch: Sequence[Delivery]) -> int:
    """Apply `batch` (arrival order) in one transaction; a delivery that fails is set aside for a job
    of its own. Returns how many were newly processed."""
    items: list[tuple[str, Derivation | None]] = []
    refused: list[tuple[str, Exception]] = []
    for delivery in batch:
        if delivery.event != PULL_REQUEST:
            items.append((delivery.id, None))
            continue
        try:
            items.append(
                (delivery.id, derive(delivery.id, delivery.content_type, delivery.body, services.config.timezone_for))
            )
        except Exception as exc:
            refused.append((delivery.id, exc))
    try:
        applied = services.state.apply_batch(items)
    except Exception:
        log.warning("a batch of %d deliveries failed as a whole; applying them one at a time", len(items))
        applied = []
        for delivery_id, derivation in items:
            try:
                if services.state.apply(delivery_id, derivation):
                    applied.append(delivery_id)
            except Exception as exc:
                refused.append((delivery_id, exc))
    if refused:
        set_aside(services, refused)
    done = set(applied)
    observe_processed(services.redis, [(d.repo, d.received_at) for d in batch if d.id in done])  # lag, last delivery
    follow_up(services, [d for delivery_id, d in items if d is not None and delivery_id in done])
    return len(applied)


def set_aside(services: Services, refused: Sequence[tuple[str, Exception]]) -> None:
    """Record each failure in the ledger and give the delivery a job of its own, with retries."""
    for delivery_id, exc in refused:
        log.warning(
            "delivery %s failed (%s: %s); retrying it on its own",
            delivery_id,
            type(exc).__name__,
            exc,
            extra={"delivery_id": delivery_id},
        )
        services.ledger.record_attempt_failed(delivery_id, f"{type(exc).__name__}: {exc}", final=False)
    enqueue_deliveries(services.delivery_queue, [delivery_id for delivery_id, _ in refused])


def follow_up(services: Services, derivations: Sequence[Derivation]) -> None:
    """What applied deliveries ask for beyond their rows: the GitHub App installation they name (so
    the App's tokens need no lookup), the months they changed warmed again (tracker.reports.warm), and the
    files of heads not seen before."""
    installations = {d.full_name: d.installation_id for d in derivations if d.installation_id is not None}
    if installations:
        for full_name, installation_id in installations.items():
            services.installations.record(full_name, installation_id)
    if services.redis is None:
        return
    for full_name, month in sorted({(d.full_name, month) for d in derivations for month in d.touched_months}):
        ask_for_warm(services, full_name, month)  # the month's report precomputed once the backlog is done
    wanted = {(d.repo, d.number, d.wanted_head[0]): d.wanted_head for d in derivations if d.wanted_head is not None}
    full_names = {d.repo: d.full_name for d in derivations}
    unknown = services.heads.unknown(list(wanted))
    enqueue_head_fetches(
        services.github_queue,
        [(full_names[repo], repo, number, sha, wanted[repo, number, sha][1]) for repo, number, sha in unknown],
    )
