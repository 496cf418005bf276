"""`tracker/core/coverage.py` (which local days of a report's window no complete history covers) and
`tracker.store.month_state.best_facts` (of several reports of one fact, the one a report uses).

Expected days are written by hand from README "History before the hook, and gaps after it".
"""

from __future__ import annotations

import random
from datetime import date

from hypothesis import given
from hypothesis import strategies as st

from tests.support.clock import utc
from tracker.core.coverage import Coverage, window_coverage
from tracker.core.window import Month, Window, month_window
from tracker.store.month_state import best_facts

# May 2026 through the 31st, in Shanghai: 2026-04-30T16:00Z to 2026-05-31T16:00Z.
MAY = month_window(Month(2026, 5), date(2026, 5, 31), "Asia/Shanghai")
MAY_UTC = month_window(Month(2026, 5), date(2026, 5, 31), "UTC")
LATER = utc("2026-07-01T00:00:00Z")


def missing(intervals: list[tuple[int, int]], now: int = LATER, window: Window = MAY) -> list[tuple[str, str]]:
    coverage = window_coverage(intervals, window, now)
    return [(first.isoformat(), last.isoformat()) for first, last in coverage.missing]


def test_a_fully_covered_window_is_complete() -> None:
    coverage = window_coverage([(MAY.start - 3600, MAY.end + 3600)], MAY, LATER)
    assert coverage.complete and coverage.missing == ()


def test_an_uncovered_window_misses_every_day() -> None:
    assert missing([]) == [("2026-05-01", "2026-05-31")]


def test_a_gap_inside_one_day_makes_the_day_missing() -> None:
    # 11:00 to 13:00 on May 10 in Shanghai.
    intervals = [(MAY.start, utc("2026-05-10T03:00:00Z")), (utc("2026-05-10T05:00:00Z"), MAY.end)]
    assert missing(intervals) == [("2026-05-10", "2026-05-10")]


def test_days_are_local_days_of_the_window() -> None:
    # 23:00 on May 10 to 01:00 on May 11 in Shanghai; 15:00 to 17:00 on May 10 in UTC.
    gap = [(utc("2026-04-01T00:00:00Z"), utc("2026-05-10T15:00:00Z")), (utc("2026-05-10T17:00:00Z"), LATER)]
    assert missing(gap) == [("2026-05-10", "2026-05-11")]
    assert missing(gap, window=MAY_UTC) == [("2026-05-10", "2026-05-10")]


def test_a_gap_ending_at_local_midnight_misses_only_the_days_before() -> None:
    # Webhooks from midnight of May 6 (Shanghai): May 1 to 5 are missing, not May 6.
    assert missing([(utc("2026-05-05T16:00:00Z"), LATER)]) == [("2026-05-01", "2026-05-05")]


def test_adjacent_and_overlapping_intervals_in_any_order_make_one() -> None:
    middle = utc("2026-05-15T00:00:00Z")
    assert missing([(middle, MAY.end), (MAY.start, middle)]) == []
    assert missing([(middle - 60, MAY.end), (MAY.start, middle), (middle - 3600, middle + 3600)]) == []


def test_two_gaps_are_two_ranges() -> None:
    intervals = [
        (utc("2026-05-02T16:00:00Z"), utc("2026-05-10T16:00:00Z")),  # May 3 to 10
        (utc("2026-05-20T16:00:00Z"), LATER),  # May 21 on
    ]
    assert missing(intervals) == [("2026-05-01", "2026-05-02"), ("2026-05-11", "2026-05-20")]


def test_coverage_ending_before_now_leaves_the_rest_missing() -> None:
    # A backfill up to May 20 (Shanghai), and nothing since.
    assert missing([(MAY.start, utc("2026-05-20T16:00:00Z"))]) == [("2026-05-21", "2026-05-31")]


def test_a_window_reaching_past_now_counts_only_up_to_now() -> None:
    now = utc("2026-05-15T04:00:00Z")  # noon on May 15 in Shanghai
    assert missing([(MAY.start, now)], now=now) == []
    assert missing([(MAY.start, utc("2026-05-12T16:00:00Z"))], now=now) == [("2026-05-13", "2026-05-15")]


def test_a_window_that_has_not_begun_is_not_missing_anything() -> None:
    assert window_coverage([], MAY, MAY.start - 1).complete


def test_as_dict() -> None:
    gap = Coverage(((date(2026, 7, 1), date(2026, 7, 9)), (date(2026, 7, 20), date(2026, 7, 20))))
    assert gap.as_dict() == {
        "complete": False,
        "missing": [{"from": "2026-07-01", "to": "2026-07-09"}, {"from": "2026-07-20", "to": "2026-07-20"}],
    }
    assert Coverage().as_dict() == {"complete": True, "missing": []}


# --- best_facts: one fact per identity, at the best instant its sources gave ------------------------

WEBHOOK_TIME, EVENT_TIME, COMMIT_DATE = 0, 1, 2
SHA = "c" * 40


def test_a_webhooks_push_time_beats_a_force_push_time_beats_a_commit_date() -> None:
    rows = [
        (7, "commit", SHA, 100, COMMIT_DATE),  # the commit's own date: earliest, and the worst
        (7, "commit", SHA, 300, WEBHOOK_TIME),
        (7, "commit", SHA, 200, EVENT_TIME),
        (7, "opened", "50", 50, EVENT_TIME),
        (7, "opened", "50", 50, WEBHOOK_TIME),
        (8, "commit", SHA, 90, COMMIT_DATE),  # another PR, same sha: another fact
    ]
    assert best_facts(rows) == {
        (7, "commit", SHA): (7, 300, "commit"),
        (7, "opened", "50"): (7, 50, "opened"),
        (8, "commit", SHA): (8, 90, "commit"),
    }


def test_of_equal_rank_the_earliest_wins() -> None:
    rows = [(7, "commit", SHA, 250, WEBHOOK_TIME), (7, "commit", SHA, 240, WEBHOOK_TIME)]
    assert best_facts(rows) == {(7, "commit", SHA): (7, 240, "commit")}


rows_strategy = st.lists(
    st.tuples(
        st.sampled_from([7, 8]),
        st.sampled_from(["commit", "closed"]),
        st.sampled_from(["a" * 40, "b" * 40]),
        st.integers(min_value=0, max_value=50),
        st.sampled_from([WEBHOOK_TIME, EVENT_TIME, COMMIT_DATE]),
    ),
    max_size=30,
)


@given(rows=rows_strategy, seed=st.integers())
def test_best_facts_choose_lowest_rank_then_earliest_whatever_the_row_order(
    rows: list[tuple[int, str, str, int, int]], seed: int
) -> None:
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    chosen = best_facts(shuffled)
    assert chosen == best_facts(rows)
    assert set(chosen) == {(number, kind, ident) for number, kind, ident, _, _ in rows}
    for (number, kind, ident), (chosen_number, at, chosen_kind) in chosen.items():
        reports = [(rank, when) for n, k, i, when, rank in rows if (n, k, i) == (number, kind, ident)]
        best_rank = min(rank for rank, _ in reports)
        assert (chosen_number, chosen_kind) == (number, kind)
        assert at == min(when for rank, when in reports if rank == best_rank)
