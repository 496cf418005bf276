"""`tracker/window.py`: the month window at an inclusive cutoff, in the repository's time zone.

Expected instants are written out by hand as UTC wall-clock times (`utc(...)`), not computed with the
code under test.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from tests.support.clock import utc
from tracker.core.window import Month, WindowError, month_of, month_window, resolve_window, today_in

SHANGHAI = "Asia/Shanghai"
NEW_YORK = "America/New_York"


# --- month_window -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tz", "month", "cutoff", "start", "end"),
    [
        # Shanghai is UTC+8 all year: local midnight is 16:00 UTC the day before.
        (SHANGHAI, Month(2026, 9), date(2026, 9, 13), utc(2026, 8, 31, 16), utc(2026, 9, 13, 16)),
        (SHANGHAI, Month(2026, 9), date(2026, 9, 1), utc(2026, 8, 31, 16), utc(2026, 9, 1, 16)),
        (SHANGHAI, Month(2026, 9), date(2026, 9, 30), utc(2026, 8, 31, 16), utc(2026, 9, 30, 16)),
        (SHANGHAI, Month(2026, 12), date(2026, 12, 31), utc(2026, 11, 30, 16), utc(2026, 12, 31, 16)),
        (SHANGHAI, Month(2027, 1), date(2027, 1, 1), utc(2026, 12, 31, 16), utc(2027, 1, 1, 16)),
        ("UTC", Month(2026, 9), date(2026, 9, 13), utc(2026, 9, 1), utc(2026, 9, 14)),
        ("UTC", Month(2026, 12), date(2026, 12, 31), utc(2026, 12, 1), utc(2027, 1, 1)),
        # New York: EST (UTC-5) until 2026-03-08 02:00, EDT (UTC-4) until 2026-11-01 02:00.
        (NEW_YORK, Month(2026, 3), date(2026, 3, 31), utc(2026, 3, 1, 5), utc(2026, 4, 1, 4)),
        (NEW_YORK, Month(2026, 3), date(2026, 3, 7), utc(2026, 3, 1, 5), utc(2026, 3, 8, 5)),
        # Cutoff on the spring-forward day: that day has 23 hours, the end is already in EDT.
        (NEW_YORK, Month(2026, 3), date(2026, 3, 8), utc(2026, 3, 1, 5), utc(2026, 3, 9, 4)),
        (NEW_YORK, Month(2026, 11), date(2026, 11, 30), utc(2026, 11, 1, 4), utc(2026, 12, 1, 5)),
        # Cutoff on the fall-back day: that day has 25 hours, the end is in EST.
        (NEW_YORK, Month(2026, 11), date(2026, 11, 1), utc(2026, 11, 1, 4), utc(2026, 11, 2, 5)),
        # Santiago springs forward at local midnight (00:00 -> 01:00 on 2026-09-06): the window of
        # cutoff 09-05 ends at the first instant of 09-06, which is 01:00 -03 = 04:00 UTC.
        ("America/Santiago", Month(2026, 9), date(2026, 9, 5), utc(2026, 9, 1, 4), utc(2026, 9, 6, 4)),
    ],
    ids=[
        "shanghai-mid-month",
        "shanghai-first-day",
        "shanghai-last-day",
        "shanghai-december",
        "shanghai-january-first",
        "utc-mid-month",
        "utc-december",
        "new-york-march-final",
        "new-york-day-before-dst",
        "new-york-dst-start-day",
        "new-york-november-final",
        "new-york-dst-end-day",
        "santiago-midnight-gap",
    ],
)
def test_window_bounds(tz: str, month: Month, cutoff: date, start: int, end: int) -> None:
    window = month_window(month, cutoff, tz)
    assert (window.start, window.end) == (start, end)
    assert window.month == month
    assert window.cutoff == cutoff
    assert window.timezone == tz


def test_new_york_march_window_is_one_hour_short_and_november_one_hour_long() -> None:
    march = month_window(Month(2026, 3), date(2026, 3, 31), NEW_YORK)
    november = month_window(Month(2026, 11), date(2026, 11, 30), NEW_YORK)
    assert march.end - march.start == 31 * 86400 - 3600
    assert november.end - november.start == 30 * 86400 + 3600


def test_cutoff_day_is_inclusive() -> None:
    window = month_window(Month(2026, 9), date(2026, 9, 13), SHANGHAI)
    # 2026-09-13 23:59:59 in Shanghai is inside; 2026-09-14 00:00:00 is not.
    assert window.contains(utc(2026, 9, 13, 15, 59, 59))
    assert not window.contains(utc(2026, 9, 13, 16))
    # 2026-09-01 00:00:00 in Shanghai is inside; one second earlier is August.
    assert window.contains(utc(2026, 8, 31, 16))
    assert not window.contains(utc(2026, 8, 31, 15, 59, 59))


def test_cutoff_day_is_inclusive_in_new_york_across_dst() -> None:
    window = month_window(Month(2026, 3), date(2026, 3, 8), NEW_YORK)
    # 2026-03-08 23:59:59 EDT is 2026-03-09 03:59:59 UTC.
    assert window.contains(utc(2026, 3, 9, 3, 59, 59))
    assert not window.contains(utc(2026, 3, 9, 4))


@pytest.mark.parametrize(
    ("month", "cutoff", "final"),
    [
        (Month(2026, 9), date(2026, 9, 30), True),
        (Month(2026, 9), date(2026, 9, 29), False),
        (Month(2026, 9), date(2026, 9, 1), False),
        (Month(2026, 9), date(2026, 9, 13), False),
        (Month(2026, 7), date(2026, 7, 31), True),
        (Month(2026, 7), date(2026, 7, 30), False),
        (Month(2026, 2), date(2026, 2, 28), True),
        (Month(2028, 2), date(2028, 2, 28), False),
        (Month(2028, 2), date(2028, 2, 29), True),
    ],
)
def test_final_only_on_the_last_day(month: Month, cutoff: date, final: bool) -> None:
    assert month_window(month, cutoff, SHANGHAI).final is final


@pytest.mark.parametrize("cutoff", [date(2026, 8, 31), date(2026, 10, 1), date(2025, 9, 13)])
def test_month_window_refuses_a_cutoff_outside_the_month(cutoff: date) -> None:
    with pytest.raises(WindowError, match=r"outside 2026-09: give a day from 2026-09-01 to 2026-09-30"):
        month_window(Month(2026, 9), cutoff, SHANGHAI)


# --- Month --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("month", "last"),
    [
        (Month(2026, 1), date(2026, 1, 31)),
        (Month(2026, 2), date(2026, 2, 28)),
        (Month(2028, 2), date(2028, 2, 29)),
        (Month(2100, 2), date(2100, 2, 28)),  # divisible by 100, not by 400: not a leap year
        (Month(2000, 2), date(2000, 2, 29)),
        (Month(2026, 4), date(2026, 4, 30)),
        (Month(2026, 12), date(2026, 12, 31)),
    ],
)
def test_month_last_day(month: Month, last: date) -> None:
    assert month.last_day == last
    assert month.first_day == date(month.year, month.month, 1)


def test_month_parse_and_str() -> None:
    assert Month.parse("2026-09") == Month(2026, 9)
    assert Month.parse("2026-12") == Month(2026, 12)
    assert str(Month(2026, 9)) == "2026-09"
    assert str(Month.parse("2027-01")) == "2027-01"


# --- resolve_window -----------------------------------------------------------------------------

TODAY = date(2026, 9, 13)


@pytest.mark.parametrize(
    "text", ["2026-13", "2026-00", "2026-9", "abc", "", "26-09", "2026/09", "2026-09-01", " 2026-09", "1969-12"]
)
def test_resolve_window_refuses_a_malformed_month(text: str) -> None:
    with pytest.raises(WindowError) as caught:
        resolve_window(text, None, SHANGHAI, TODAY)
    message = str(caught.value)
    assert repr(text) in message
    assert "YYYY-MM" in message
    assert "2026-09" in message  # an example to copy


@pytest.mark.parametrize("text", ["2026-9-1", "13/09/2026", "20260901", "2026-09-1", "yesterday", "2026-09-01T00:00"])
def test_resolve_window_refuses_a_malformed_cutoff(text: str) -> None:
    with pytest.raises(WindowError) as caught:
        resolve_window("2026-09", text, SHANGHAI, TODAY)
    message = str(caught.value)
    assert repr(text) in message
    assert "YYYY-MM-DD" in message


@pytest.mark.parametrize("text", ["2026-09-31", "2026-02-29", "2026-09-00"])
def test_resolve_window_refuses_a_day_that_does_not_exist(text: str) -> None:
    month = text[:7]
    with pytest.raises(WindowError, match="not a real day") as caught:
        resolve_window(month, text, SHANGHAI, date(2026, 10, 15))
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize("text", ["2026-08-31", "2026-10-01", "2025-09-13"])
def test_resolve_window_refuses_a_cutoff_outside_the_month(text: str) -> None:
    with pytest.raises(WindowError) as caught:
        resolve_window("2026-09", text, SHANGHAI, date(2026, 10, 15))
    message = str(caught.value)
    assert text in message
    assert "outside 2026-09" in message
    assert "2026-09-01 to 2026-09-30" in message


@pytest.mark.parametrize("text", ["2026-10", "2027-01", "2030-05"])
def test_resolve_window_refuses_a_future_month(text: str) -> None:
    with pytest.raises(WindowError) as caught:
        resolve_window(text, None, SHANGHAI, TODAY)
    message = str(caught.value)
    assert f"month {text} has not started yet" in message
    assert "2026-09-13" in message
    assert SHANGHAI in message


@pytest.mark.parametrize("text", ["2026-09-14", "2026-09-30"])
def test_resolve_window_refuses_a_future_cutoff(text: str) -> None:
    with pytest.raises(WindowError) as caught:
        resolve_window("2026-09", text, SHANGHAI, TODAY)
    message = str(caught.value)
    assert f"cutoff {text} is in the future" in message
    assert "today is 2026-09-13" in message


def test_window_error_is_a_value_error() -> None:
    assert issubclass(WindowError, ValueError)


def test_default_cutoff_of_a_past_month_is_its_last_day() -> None:
    window = resolve_window("2026-07", None, SHANGHAI, TODAY)
    assert window.cutoff == date(2026, 7, 31)
    assert window.final is True
    assert (window.start, window.end) == (utc(2026, 6, 30, 16), utc(2026, 7, 31, 16))


def test_empty_cutoff_text_means_the_default() -> None:
    assert resolve_window("2026-07", "", SHANGHAI, TODAY).cutoff == date(2026, 7, 31)


def test_default_cutoff_of_the_current_month_is_today() -> None:
    window = resolve_window("2026-09", None, SHANGHAI, TODAY)
    assert window.cutoff == date(2026, 9, 13)
    assert window.final is False
    assert window.end == utc(2026, 9, 13, 16)


def test_current_means_todays_month_up_to_today() -> None:
    window = resolve_window("current", None, SHANGHAI, TODAY)
    assert window.month == Month(2026, 9)
    assert window.cutoff == date(2026, 9, 13)
    assert window.final is False


def test_current_on_the_last_day_is_not_final_until_the_day_ends() -> None:
    # SEMANTICS, "Window": the last day's report is final only once that day has ended.
    window = resolve_window("current", None, "UTC", date(2026, 9, 30))
    assert window.month == Month(2026, 9)
    assert window.cutoff == date(2026, 9, 30) and window.final is False
    assert (window.start, window.end) == (utc(2026, 9, 1), utc(2026, 10, 1))
    # The next day, the same month at the same cutoff is final.
    assert resolve_window("2026-09", None, "UTC", date(2026, 10, 1)).final is True
    assert resolve_window("2026-09", "2026-09-30", "UTC", date(2026, 10, 1)).final is True


def test_current_with_an_explicit_cutoff() -> None:
    window = resolve_window("current", "2026-09-02", SHANGHAI, TODAY)
    assert window.cutoff == date(2026, 9, 2)
    assert window.end == utc(2026, 9, 2, 16)


def test_explicit_cutoff_today_is_allowed() -> None:
    assert resolve_window("2026-09", "2026-09-13", SHANGHAI, TODAY).cutoff == TODAY


def test_leap_february_default_cutoff_and_final() -> None:
    window = resolve_window("2028-02", None, SHANGHAI, date(2028, 3, 5))
    assert window.cutoff == date(2028, 2, 29)
    assert window.final is True
    assert (window.start, window.end) == (utc(2028, 1, 31, 16), utc(2028, 2, 29, 16))
    assert not resolve_window("2028-02", "2028-02-28", SHANGHAI, date(2028, 3, 5)).final


def test_non_leap_february_default_cutoff() -> None:
    window = resolve_window("2026-02", None, "UTC", date(2026, 3, 1))
    assert window.cutoff == date(2026, 2, 28)
    assert window.final is True
    assert window.end == utc(2026, 3, 1)


# --- today_in and month_of ----------------------------------------------------------------------


def test_today_is_taken_in_the_repository_time_zone() -> None:
    now = datetime(2026, 9, 30, 16, 0, tzinfo=UTC)
    assert today_in(SHANGHAI, now) == date(2026, 10, 1)
    assert today_in("UTC", now) == date(2026, 9, 30)
    assert today_in(NEW_YORK, now) == date(2026, 9, 30)
    assert today_in(NEW_YORK, datetime(2026, 10, 1, 3, 59, tzinfo=UTC)) == date(2026, 9, 30)
    assert today_in(NEW_YORK, datetime(2026, 10, 1, 4, 0, tzinfo=UTC)) == date(2026, 10, 1)


def test_current_follows_the_time_zone_of_today() -> None:
    # At 2026-09-30 16:00 UTC it is already October in Shanghai.
    now = datetime(2026, 9, 30, 16, 0, tzinfo=UTC)
    assert resolve_window("current", None, SHANGHAI, today_in(SHANGHAI, now)).month == Month(2026, 10)
    assert resolve_window("current", None, "UTC", today_in("UTC", now)).month == Month(2026, 9)


@pytest.mark.parametrize(
    ("instant", "tz", "month"),
    [
        (utc(2026, 8, 31, 23, 59, 59), SHANGHAI, "2026-09"),  # last second of August in UTC
        (utc(2026, 8, 31, 23, 59, 59), "UTC", "2026-08"),
        (utc(2026, 12, 31, 23, 59, 59), SHANGHAI, "2027-01"),
        (utc(2026, 2, 28, 23, 59, 59), SHANGHAI, "2026-03"),
        (utc(2026, 9, 30, 16), SHANGHAI, "2026-10"),  # a commit at 2026-09-30T16:00:00Z
        (utc(2026, 9, 30, 15, 59, 59), SHANGHAI, "2026-09"),
        (utc(2026, 9, 30, 16), "UTC", "2026-09"),
        (utc(2026, 11, 1, 3, 59, 59), NEW_YORK, "2026-10"),  # 23:59:59 EDT
        (utc(2026, 11, 1, 4), NEW_YORK, "2026-11"),
        (utc(2026, 4, 1, 3, 59, 59), NEW_YORK, "2026-03"),
        (utc(2026, 4, 1, 4), NEW_YORK, "2026-04"),
        (utc(2028, 2, 29, 12), "UTC", "2028-02"),
    ],
)
def test_month_of(instant: int, tz: str, month: str) -> None:
    assert month_of(instant, tz) == month


def test_month_of_agrees_with_the_window() -> None:
    # The first and last second of a window fall in the window's month; the second after does not.
    window = month_window(Month(2026, 9), date(2026, 9, 30), SHANGHAI)
    assert month_of(window.start, SHANGHAI) == "2026-09"
    assert month_of(window.end - 1, SHANGHAI) == "2026-09"
    assert month_of(window.end, SHANGHAI) == "2026-10"
    assert month_of(window.start - 1, SHANGHAI) == "2026-08"
