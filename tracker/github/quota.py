"""What the GitHub client has seen of its quota, shared through Redis by every worker."""

from __future__ import annotations

import time
from typing import Any

from redis import Redis

from tracker.core.window import iso_utc
from tracker.github.client import RateLimitState

_RATE = "tracker:github:rate"
_COUNTS = "tracker:github:requests"
_BLOCKED = "tracker:github:blocked_until"
_LAST_ERROR = "tracker:github:last_error"
# How long status keeps showing the last error after it happened.
_LAST_ERROR_SECONDS = 7 * 86400


class Quota:
    def __init__(self, connection: Redis) -> None:
        self.redis = connection

    def record(self, state: RateLimitState, not_modified: bool) -> None:
        """One answer from GitHub: its rate-limit headers and whether it was a 304."""
        self.record_answers(state, 0 if not_modified else 1, 1 if not_modified else 0)

    def record_answers(self, state: RateLimitState | None, answered: int, not_modified: int) -> None:
        """Several answers at once (`QuotaTally`): the last one's rate-limit headers and the counts."""
        pipe = self.redis.pipeline(transaction=False)
        given = (
            ()
            if state is None
            else (
                ("limit", state.limit),
                ("remaining", state.remaining),
                ("reset", state.reset),
                ("resource", state.resource),
            )
        )
        fields: dict[str | bytes, str | int] = {name: value for name, value in given if value is not None}
        if fields:
            fields["seen_at"] = int(time.time())
            pipe.hset(_RATE, mapping=fields)  # type: ignore[arg-type]
        if answered:
            pipe.hincrby(_COUNTS, "answered", answered)
        if not_modified:
            pipe.hincrby(_COUNTS, "not_modified", not_modified)
        if len(pipe):
            pipe.execute()

    def block_until(self, moment: float) -> None:
        """Nobody calls GitHub before `moment` (a rate limit was hit)."""
        current = self.blocked_until()
        if moment > current:
            self.redis.set(_BLOCKED, str(moment), exat=int(moment) + 1)

    def blocked_until(self) -> float:
        value = self.redis.get(_BLOCKED)
        return float(value) if value else 0.0

    def record_error(self, message: str, next_try: float | None) -> None:
        """The last GitHub fetch that failed or must wait: why (no token in it: the caller's
        message names the reason, never the credentials), when, and when it is tried next (None:
        not by itself)."""
        fields: dict[str | bytes, str | int] = {"message": message[:500], "at": int(time.time())}
        if next_try is not None:
            fields["next_try"] = int(next_try)
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(_LAST_ERROR)
        pipe.hset(_LAST_ERROR, mapping=fields)  # type: ignore[arg-type]
        pipe.expire(_LAST_ERROR, _LAST_ERROR_SECONDS)
        pipe.execute()

    def last_error(self) -> dict[str, Any] | None:
        """`{message, at, next_try}` of the last recorded error (times as UTC text), or None."""
        stored = {_text(k): _text(v) for k, v in self.redis.hgetall(_LAST_ERROR).items()}
        if "message" not in stored:
            return None
        next_try = int(stored["next_try"]) if "next_try" in stored else None
        return {
            "message": stored["message"],
            "at": iso_utc(int(stored.get("at", 0))),
            "next_try": iso_utc(next_try) if next_try is not None else None,
        }

    def summary(self) -> dict[str, Any]:
        rate = {_text(k): _text(v) for k, v in self.redis.hgetall(_RATE).items()}
        counts = {_text(k): int(v) for k, v in self.redis.hgetall(_COUNTS).items()}
        reset = int(rate["reset"]) if "reset" in rate else None
        blocked = self.blocked_until()
        return {
            "limit": int(rate["limit"]) if "limit" in rate else None,
            "remaining": int(rate["remaining"]) if "remaining" in rate else None,
            "reset": iso_utc(reset) if reset else None,
            "resource": rate.get("resource"),
            "requests": counts.get("answered", 0) + counts.get("not_modified", 0),
            "not_modified": counts.get("not_modified", 0),
            "blocked_until": (iso_utc(int(blocked)) if blocked > time.time() else None),
            "last_error": self.last_error(),
        }


class QuotaTally:
    """`Quota.record` for the answers of one job, written to Redis once (`flush`) instead of a round
    trip per answer: the rate-limit figures are for `/api/v1/status`, a job's seconds late. A rate
    limit itself is never tallied: the job blocks the others at once (`Quota.block_until`)."""

    def __init__(self, quota: Quota) -> None:
        self.quota = quota
        self.state: RateLimitState | None = None
        self.answered = self.not_modified = 0

    def record(self, state: RateLimitState, not_modified: bool) -> None:
        self.state = state
        if not_modified:
            self.not_modified += 1
        else:
            self.answered += 1

    def flush(self) -> None:
        if self.state is not None or self.answered or self.not_modified:
            self.quota.record_answers(self.state, self.answered, self.not_modified)
        self.state, self.answered, self.not_modified = None, 0, 0


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
