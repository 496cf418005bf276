"""What a job does when GitHub makes it wait: the one policy of every job that calls GitHub.

Two levels. In place, the client (`tracker.github.client`, with tenacity) sends a request that timed
out, found no connection or got a 5xx answer up to three times within a few seconds, and never waits
for a rate limit. What that leaves reaches the job, and this module says what the job does (it
re-schedules itself through its own `tracker.queue.enqueue_*`):

- A rate limit (`RateLimited`): the job runs again at the moment GitHub gave (`retry_at`: a second
  after `X-RateLimit-Reset` for the primary limit, `Retry-After` for a secondary one, a minute for a
  secondary one that says neither), and every other job holds back until then without asking
  (`rate_limited`, `held_back`): GitHub may ban an integration that goes on asking while it is
  limited. Waiting for a rate limit never counts towards giving up.
- An outage (`Unavailable`: what the client's own tries left): the job runs again after a backoff
  (`tracker.queue.Backoff`: the job's first wait, twice as long after each outage in a row up to an
  hour, ±25 %), and fails after OUTAGE_TRIES outages in a row, to be seen in RQ's failed registry and
  the status page.
- Anything else (`RequestRefused`, `BadAnswer`) is not a matter of waiting: the same request would get
  the same answer, so the job fails at once (or records what GitHub no longer has).

Without Redis there is no queue to wait in, and the job fails with the error: a command in the
terminal sleeps through a rate limit itself (`tracker.history.github.wait_for`,
`tracker.narration.jobs.narrate_until`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tracker.core.window import iso_utc
from tracker.github.client import RateLimited, Unavailable
from tracker.github.quota import Quota
from tracker.queue import Backoff

# Runs of a job in a row that GitHub's outage may fail before the job fails for good; the longest wait
# between two of them, in seconds.
OUTAGE_TRIES = 8
LONGEST_WAIT = 3600.0


@dataclass(frozen=True)
class Next:
    """What a job does after GitHub made it wait."""

    at: float | None  # epoch seconds of its next run; None: there is none, the job fails with the error
    outages: int  # the GitHub outages in a row its next run follows
    reason: str  # for its warning and the status page: "primary rate limit: waiting until 2026-09-13T03:00:01Z"
    said: str  # what its run returns: "waiting for the primary rate limit"


def held_back(quota: Quota | None) -> float:
    """The end of a rate limit some job met, while it lasts (else 0): a job about to call GitHub
    re-schedules itself for then without asking."""
    blocked = quota.blocked_until() if quota is not None else 0.0
    return blocked if blocked > time.time() else 0.0


def rate_limited(exc: RateLimited, quota: Quota | None) -> float:
    """The moment a job that met the rate limit `exc` asks GitHub again, told to every other job."""
    if quota is not None:
        quota.block_until(exc.retry_at)
    return exc.retry_at


def next_run(exc: RateLimited | Unavailable, outages: int, first_wait: float, quota: Quota | None) -> Next:
    """What a job does after `exc`, its run having followed `outages` GitHub outages in a row;
    `first_wait`: the seconds it waits after a first outage. `quota` is None without Redis: nothing can
    wait in a queue then, and the job fails."""
    if isinstance(exc, RateLimited):
        until = iso_utc(int(exc.retry_at))
        if quota is None:
            return Next(None, outages, f"{exc.kind} rate limit until {until}", str(exc))
        at = rate_limited(exc, quota)
        return Next(
            at, outages, f"{exc.kind} rate limit: waiting until {until}", f"waiting for the {exc.kind} rate limit"
        )
    delay = Backoff(first_wait, LONGEST_WAIT, OUTAGE_TRIES).delay(outages) if quota is not None else None
    if delay is None:
        tries = outages + 1
        gave_up = f"GitHub unavailable ({exc}); giving up after {tries} attempt{'s' if tries > 1 else ''}"
        return Next(None, tries, gave_up, gave_up)
    return Next(
        time.time() + delay,
        outages + 1,
        f"GitHub unavailable ({exc}); next try in {delay:.0f} s",
        f"GitHub unavailable; trying again in {delay:.0f} s",
    )
