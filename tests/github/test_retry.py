"""`tracker.github.retry`: the one policy of every job that calls GitHub, fed with what the client raises
for GitHub's answers (the local fake GitHub): a rate limit waits for the moment GitHub gives and holds
every other job back until then, an outage backs off and gives up after eight, and without Redis
nothing waits."""

from __future__ import annotations

import time
from typing import Any

import pytest
from redis import Redis

from bench.fixtures.paths import needs_shared
from tracker.core.window import iso_utc
from tracker.github.client import GitHubClient, RateLimited, Unavailable
from tracker.github.quota import Quota
from tracker.github.retry import LONGEST_WAIT, OUTAGE_TRIES, held_back, next_run, rate_limited

REPO = "NVIDIA/Megatron-LM"
FIRST_WAIT = 30.0


def Scripted(*args: Any, **kwargs: Any) -> Any:  # noqa: N802  (bench.fixtures.fake_github reads ../shared as it loads)
    from bench.fixtures.fake_github import Scripted as scripted

    return scripted(*args, **kwargs)


def raised_by(github: Any, *answers: Any, timeout: float = 10.0) -> RateLimited | Unavailable:
    """What the client raises when GitHub gives `answers` to a files listing, after its own tries."""
    github.set_files(REPO, 7, "a" * 40, ["a.py"])
    github.script(r"/files", *answers)
    client = GitHubClient(github.url, "token", timeout=timeout, max_backoff=0.05)
    with client, pytest.raises((RateLimited, Unavailable)) as raised:
        client.pull_request_files(REPO, 7)
    assert isinstance(raised.value, RateLimited | Unavailable)
    return raised.value


@needs_shared
def test_a_primary_rate_limit_waits_for_the_reset_and_holds_every_job_back(github: Any, redis: Redis) -> None:
    reset = int(time.time()) + 120
    limited = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}
    exc = raised_by(github, Scripted(403, limited, {"message": "API rate limit exceeded"}))
    quota = Quota(redis)
    then = next_run(exc, 3, FIRST_WAIT, quota)
    assert then.at == reset + 1
    assert then.outages == 3  # waiting for a rate limit is no step towards giving up
    assert then.reason == f"primary rate limit: waiting until {iso_utc(reset + 1)}"
    assert then.said == "waiting for the primary rate limit"
    assert held_back(quota) == quota.blocked_until() == reset + 1  # every other job waits without asking


@needs_shared
def test_a_secondary_rate_limit_waits_its_retry_after(github: Any, redis: Redis) -> None:
    exc = raised_by(
        github, Scripted(429, {"Retry-After": "7"}, {"message": "You have exceeded a secondary rate limit"})
    )
    then = next_run(exc, 0, FIRST_WAIT, Quota(redis))
    assert then.at is not None and 6 <= then.at - time.time() <= 8
    assert then.said == "waiting for the secondary rate limit"
    assert held_back(Quota(redis)) == then.at


@needs_shared
@pytest.mark.parametrize("outage", ["5xx", "timeout"])
def test_an_outage_backs_off_doubling_up_to_an_hour_and_gives_up_after_eight(
    github: Any, redis: Redis, outage: str
) -> None:
    if outage == "5xx":
        exc = raised_by(github, Scripted(502), Scripted(503), Scripted(500))
        assert isinstance(exc, Unavailable) and "GitHub answered 500" in str(exc)
    else:
        exc = raised_by(github, *(Scripted(0, delay=0.6) for _ in range(3)), timeout=0.2)
        assert isinstance(exc, Unavailable) and "ReadTimeout" in str(exc)
    quota = Quota(redis)
    for outages in range(OUTAGE_TRIES - 1):
        before = time.time()
        then = next_run(exc, outages, FIRST_WAIT, quota)
        wait = min(LONGEST_WAIT, FIRST_WAIT * 2**outages)  # 30 s, 1 min, 2 min, ... up to an hour
        assert then.at is not None and before + 0.75 * wait <= then.at <= time.time() + 1.25 * wait
        assert then.outages == outages + 1
        assert then.reason.startswith(f"GitHub unavailable ({exc}); next try in ")
        assert then.said.startswith("GitHub unavailable; trying again in ")
    then = next_run(exc, OUTAGE_TRIES - 1, FIRST_WAIT, quota)
    assert then.at is None
    assert then.reason == f"GitHub unavailable ({exc}); giving up after 8 attempts"
    assert held_back(quota) == 0.0  # an outage holds nobody else back


def test_jobs_an_outage_failed_together_do_not_come_back_together(redis: Redis) -> None:
    comebacks = {next_run(Unavailable("down"), 2, FIRST_WAIT, Quota(redis)).at for _ in range(50)}
    assert len({round(at or 0.0) for at in comebacks}) > 10  # spread over a minute around 2 min


def test_without_redis_nothing_waits_in_a_queue() -> None:
    retry_at = time.time() + 60
    limited = next_run(RateLimited(retry_at, "primary"), 0, FIRST_WAIT, None)
    assert limited.at is None
    assert limited.reason == f"primary rate limit until {iso_utc(int(retry_at))}"
    down = next_run(Unavailable("GitHub did not answer"), 0, FIRST_WAIT, None)
    assert down.at is None
    assert down.reason == "GitHub unavailable (GitHub did not answer); giving up after 1 attempt"
    assert held_back(None) == 0.0
    assert rate_limited(RateLimited(retry_at, "secondary"), None) == retry_at  # the terminal sleeps until then


def test_a_rate_limit_holds_back_until_its_end_only(redis: Redis) -> None:
    quota = Quota(redis)
    assert held_back(quota) == 0.0
    until = time.time() + 30
    assert rate_limited(RateLimited(until, "secondary"), quota) == until
    assert held_back(quota) == until
    rate_limited(RateLimited(until - 20, "secondary"), quota)  # an earlier end never shortens a block
    assert held_back(quota) == until
    redis.flushdb()
    soon = time.time() + 0.3
    rate_limited(RateLimited(soon, "secondary"), quota)
    time.sleep(0.4)
    assert held_back(quota) == 0.0  # over (Redis may keep the key a second longer): nobody waits for it
