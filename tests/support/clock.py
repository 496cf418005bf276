"""Instants as the tests write them: ISO-8601 text (`...Z` or an offset), or UTC calendar fields."""

from __future__ import annotations

from datetime import UTC, datetime


def at(text: str) -> datetime:
    """The instant an ISO-8601 text with a zone (`Z` or an offset) names, as a UTC datetime."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} names no time zone")
    return moment.astimezone(UTC)


def utc(text_or_year: str | int, month: int = 1, day: int = 1, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    """Epoch seconds of an ISO-8601 instant (`utc("2026-05-01T00:00:00Z")`) or of UTC calendar fields
    (`utc(2026, 5, 1)`)."""
    if isinstance(text_or_year, str):
        return int(at(text_or_year).timestamp())
    return int(datetime(text_or_year, month, day, hour, minute, second, tzinfo=UTC).timestamp())
