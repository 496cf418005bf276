"""The reporting window of a month at a cutoff, in the repository's time zone.

Cutoff day D is inclusive: the window runs from local 00:00 on the 1st to local 00:00 on D+1.
Instants are stored and compared as UTC epoch seconds; time zones appear only here, at the edge.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class WindowError(ValueError):
    """A month or cutoff a user gave is malformed or outside what can be reported."""


@dataclass(frozen=True)
class Month:
    year: int
    month: int

    @classmethod
    def parse(cls, text: str) -> Month:
        found = _MONTH.match(text)
        if not found or not 1 <= int(found.group(2)) <= 12 or int(found.group(1)) < 1970:
            raise WindowError(f"month {text!r} is not a month: use YYYY-MM, for example 2026-09")
        return cls(int(found.group(1)), int(found.group(2)))

    @classmethod
    def containing(cls, day: date) -> Month:
        return cls(day.year, day.month)

    @property
    def first_day(self) -> date:
        return date(self.year, self.month, 1)

    @property
    def last_day(self) -> date:
        return date(self.year, self.month, calendar.monthrange(self.year, self.month)[1])

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"


@dataclass(frozen=True)
class Window:
    """[start, end) in UTC epoch seconds for one month of one repository, up to an inclusive cutoff."""

    month: Month
    cutoff: date
    timezone: str
    start: int
    end: int
    # False while the cutoff day is still running in the repository's time zone (a report through
    # today): SEMANTICS makes the last day's report final only once that day has ended.
    ended: bool = True

    @property
    def final(self) -> bool:
        return self.cutoff == self.month.last_day and self.ended

    def contains(self, instant: int) -> bool:
        return self.start <= instant < self.end


def local_midnight(day: date, tz: ZoneInfo) -> int:
    return int(datetime.combine(day, time(0), tzinfo=tz).timestamp())


def month_window(month: Month, cutoff: date, tz_name: str, *, ended: bool = True) -> Window:
    if not month.first_day <= cutoff <= month.last_day:
        raise WindowError(
            f"cutoff {cutoff.isoformat()} is outside {month}: give a day from "
            f"{month.first_day.isoformat()} to {month.last_day.isoformat()}"
        )
    tz = ZoneInfo(tz_name)
    return Window(
        month=month,
        cutoff=cutoff,
        timezone=tz_name,
        start=local_midnight(month.first_day, tz),
        end=local_midnight(cutoff + timedelta(days=1), tz),
        ended=ended,
    )


def today_in(tz_name: str, now: datetime | None = None) -> date:
    moment = now if now is not None else datetime.now(UTC)
    return moment.astimezone(ZoneInfo(tz_name)).date()


def resolve_window(month_text: str, cutoff_text: str | None, tz_name: str, today: date) -> Window:
    """The window a user asked for. `month_text` may be `current`; the default cutoff is the month's
    last day, or today for the current month. Months and cutoffs in the future are refused. A cutoff of
    today is still running: even on the month's last day, its report is not final."""
    month = Month.containing(today) if month_text == "current" else Month.parse(month_text)
    if month.first_day > today:
        raise WindowError(f"month {month} has not started yet (today is {today.isoformat()} in {tz_name})")
    if cutoff_text is None or cutoff_text == "":
        cutoff = min(month.last_day, today)
    else:
        if not _DAY.match(cutoff_text):
            raise WindowError(f"cutoff {cutoff_text!r} is not a day: use YYYY-MM-DD, for example 2026-09-13")
        try:
            cutoff = date.fromisoformat(cutoff_text)
        except ValueError as exc:
            raise WindowError(f"cutoff {cutoff_text!r} is not a real day") from exc
        if cutoff > today:
            raise WindowError(
                f"cutoff {cutoff.isoformat()} is in the future (today is {today.isoformat()} in {tz_name})"
            )
    return month_window(month, cutoff, tz_name, ended=cutoff < today)


def month_of(instant: int, tz_name: str) -> str:
    """`YYYY-MM` of an instant in a time zone."""
    local = datetime.fromtimestamp(instant, ZoneInfo(tz_name))
    return f"{local.year:04d}-{local.month:02d}"


def iso_utc(instant: int) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch(moment: datetime) -> int:
    """UTC epoch seconds; a naive datetime is taken as UTC (GitHub's timestamps are UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())
