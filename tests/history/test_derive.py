"""`tracker/history/derive.py`: a PR's history rebuilt from GitHub's REST answers (the PR object and its
issue timeline) gives the facts and attribute versions a webhook delivery would have.

Documents are built by hand in the shape GitHub's REST API answers (only the fields a history reads),
and every expected value is written from README "History before the hook, and gaps after it".
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bench.fixtures.paths import FIXTURES, needs_shared
from tests.support.clock import utc
from tests.support.watchdog import finishes
from tracker.core.attributes import AttributeVersion, version_at
from tracker.core.payloads import IncompleteBody, MalformedBody
from tracker.core.window import WindowError
from tracker.history.derive import (
    History,
    derive_history,
    heads_needed,
    history_range,
    observation_document,
)

REPO = "octo-org/octo-repo"
SHANGHAI = "Asia/Shanghai"
OBSERVATION = "backfill:octo-org/octo-repo#7:0123abcd"
HEAD = "a" * 40
BASE = "b" * 40
C1, C2, C3 = "1" * 40, "2" * 40, "3" * 40
CREATED = "2026-05-04T02:00:00Z"


def iso(instant: int) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# May 2026 in Shanghai: 2026-05-01 00:00 +08:00 to 2026-06-01 00:00 +08:00.
MAY = (utc("2026-04-30T16:00:00Z"), utc("2026-05-31T16:00:00Z"))


def pull(**changes: Any) -> dict[str, Any]:
    """PR #7 as `GET /repos/{o}/{r}/pulls` lists it: open, opened on May 4."""
    pr: dict[str, Any] = {
        "number": 7,
        "title": "Faster data loader",
        "body": "Today's description",
        "state": "open",
        "draft": False,
        "created_at": CREATED,
        "updated_at": "2026-05-20T00:00:00Z",
        "closed_at": None,
        "merged_at": None,
        "user": {"login": "octocat"},
        "base": {"ref": "main", "sha": BASE},
        "head": {"ref": "loader", "sha": HEAD},
        "labels": [],
    }
    pr.update(changes)
    return pr


def committed(sha: str, date: str) -> dict[str, Any]:
    return {"event": "committed", "sha": sha, "committer": {"date": date}, "author": {"date": date}}


def event(name: str, created_at: str, **fields: Any) -> dict[str, Any]:
    return {"event": name, "created_at": created_at, **fields}


def history(
    pr: dict[str, Any], timeline: list[dict[str, Any]], tz: str = "UTC", range_: tuple[int, int] = MAY
) -> History:
    document = observation_document(REPO, range_, pr, timeline)
    return derive_history(OBSERVATION, document, lambda _name: tz)


def facts(found: History) -> set[tuple[str, int, str, int]]:
    """(kind, instant, identity, rank) of every fact; the first derivation carries them all."""
    assert all(not d.facts for d in found.derivations[1:])
    return {(f.kind.value, f.at, f.identity, f.rank) for f in found.derivations[0].facts}


def versions(found: History) -> list[AttributeVersion]:
    return [d.version for d in found.derivations]


def at_instant(found: History, text: str) -> AttributeVersion:
    """The version a report whose window ends just after `text` shows."""
    chosen = version_at(versions(found), utc(text) + 1)
    assert chosen is not None
    return chosen


# --- facts ----------------------------------------------------------------------------------------


def test_opened_and_merged_come_from_the_pull_request_and_the_close_of_the_merge_is_no_fact() -> None:
    merged = "2026-05-09T08:00:00Z"
    pr = pull(state="closed", merged_at=merged, closed_at=merged, updated_at=merged)
    found = history(pr, [event("merged", merged, commit_id=HEAD), event("closed", merged, commit_id=HEAD)])
    assert facts(found) == {
        ("opened", utc(CREATED), str(utc(CREATED)), 1),
        ("merged", utc(merged), str(utc(merged)), 1),
    }
    assert found.derivations[0].activity_months == {"2026-05"}
    assert found.derivations[0].repo == REPO and found.derivations[0].number == 7


def test_a_real_close_and_reopen_before_the_merge_are_facts() -> None:
    closed, reopened, merged = "2026-05-05T10:00:00Z", "2026-05-06T10:00:00Z", "2026-05-09T08:00:00Z"
    pr = pull(state="closed", merged_at=merged, closed_at=merged, updated_at=merged)
    timeline = [
        event("closed", closed),
        event("reopened", reopened),
        event("merged", merged),
        event("closed", merged),
    ]
    assert {(kind, at) for kind, at, _, _ in facts(history(pr, timeline))} == {
        ("opened", utc(CREATED)),
        ("closed", utc(closed)),
        ("reopened", utc(reopened)),
        ("merged", utc(merged)),
    }


def test_a_pr_closed_without_merging_is_closed_when_github_says() -> None:
    closed = "2026-05-07T12:00:00Z"
    pr = pull(state="closed", closed_at=closed, updated_at=closed)
    assert {(kind, at) for kind, at, _, _ in facts(history(pr, [event("closed", closed)]))} == {
        ("opened", utc(CREATED)),
        ("closed", utc(closed)),
    }


def test_commits_are_commit_facts_by_sha_at_their_own_date_and_not_before_the_opening() -> None:
    timeline = [
        committed(C1, "2026-05-03T09:00:00Z"),  # before the PR was opened: part of the opening
        committed(C2, CREATED),  # at the opening instant: likewise
        committed("ABCDEF" + "0" * 34, "2026-05-06T09:00:00Z"),
    ]
    assert facts(history(pull(), timeline)) == {
        ("opened", utc(CREATED), str(utc(CREATED)), 1),
        ("commit", utc("2026-05-06T09:00:00Z"), "abcdef" + "0" * 34, 2),  # rank COMMIT_DATE, sha in lower case
    }


def test_a_commit_is_dated_by_its_committer_before_its_author() -> None:
    rebased = {
        "event": "committed",
        "sha": C1,
        "author": {"date": "2026-04-01T00:00:00Z"},  # written long ago ...
        "committer": {"date": "2026-05-06T09:00:00Z"},  # ... rebased and pushed in May
    }
    authored_only = {"event": "committed", "sha": C2, "author": {"date": "2026-05-07T09:00:00Z"}}
    commits = {
        (at, ident) for kind, at, ident, _ in facts(history(pull(), [rebased, authored_only])) if kind == "commit"
    }
    assert commits == {(utc("2026-05-06T09:00:00Z"), C1), (utc("2026-05-07T09:00:00Z"), C2)}


def test_a_force_push_is_commit_activity_at_its_recorded_time() -> None:
    pushed = "2026-05-08T03:00:00Z"
    found = history(pull(), [event("head_ref_force_pushed", pushed, commit_id=HEAD)])
    assert ("commit", utc(pushed), HEAD, 1) in facts(found)  # rank EVENT_TIME


def test_events_github_reports_but_a_history_does_not_use_change_nothing() -> None:
    noise = [event("commented", "2026-05-05T00:00:00Z"), event("mentioned", "2026-05-06T00:00:00Z")]
    found = history(pull(), noise)
    assert facts(found) == {("opened", utc(CREATED), str(utc(CREATED)), 1)}
    assert [v.at for v in versions(found)] == [utc(CREATED), utc("2026-05-20T00:00:00Z")]


# --- attribute versions ---------------------------------------------------------------------------


def test_versions_walk_back_renames_labels_and_draft_state() -> None:
    # Today: "Faster data loader", labelled bug and perf, ready for review.
    pr = pull(labels=[{"name": "perf"}, {"name": "bug"}], draft=False)
    timeline = [
        event("renamed", "2026-05-05T00:00:00Z", rename={"from": "WIP loader", "to": "Data loader"}),
        event("labeled", "2026-05-06T00:00:00Z", label={"name": "bug"}),
        event("unlabeled", "2026-05-07T00:00:00Z", label={"name": "wip"}),
        event("ready_for_review", "2026-05-08T00:00:00Z"),
        event("convert_to_draft", "2026-05-09T00:00:00Z"),
        event("ready_for_review", "2026-05-10T00:00:00Z"),
        event("renamed", "2026-05-11T00:00:00Z", rename={"from": "Data loader", "to": "Faster data loader"}),
        event("labeled", "2026-05-12T00:00:00Z", label={"name": "perf"}),
    ]
    found = history(pr, timeline)
    expected = {
        CREATED: ("WIP loader", ("wip",), True),
        "2026-05-05T00:00:00Z": ("Data loader", ("wip",), True),
        "2026-05-06T00:00:00Z": ("Data loader", ("bug", "wip"), True),
        "2026-05-07T00:00:00Z": ("Data loader", ("bug",), True),
        "2026-05-08T00:00:00Z": ("Data loader", ("bug",), False),
        "2026-05-09T00:00:00Z": ("Data loader", ("bug",), True),
        "2026-05-10T00:00:00Z": ("Data loader", ("bug",), False),
        "2026-05-11T00:00:00Z": ("Faster data loader", ("bug",), False),
        "2026-05-12T00:00:00Z": ("Faster data loader", ("bug", "perf"), False),
        "2026-05-20T00:00:00Z": ("Faster data loader", ("bug", "perf"), False),
    }
    for instant, (title, labels, draft) in expected.items():
        shown = at_instant(found, instant)
        assert (shown.title, shown.labels, shown.draft) == (title, labels, draft), instant
    # A window ending at the first rename's instant still shows the title the PR was opened with.
    before = version_at(versions(found), utc("2026-05-05T00:00:00Z"))
    assert before is not None and before.title == "WIP loader"


@needs_shared
def test_githubs_own_example_timeline() -> None:
    # GitHub's example answer of the timeline endpoint: locked, labeled "beta", renamed, commented.
    timeline = json.loads((FIXTURES / "rest" / "issues.list-events-for-timeline.200.json").read_text())
    pr = pull(
        title="Secret scanning: dry-runs for enterprise-level custom patterns",
        labels=[{"name": "beta"}],
        created_at="2022-04-13T20:00:00Z",
        updated_at="2022-05-20T00:00:00Z",
    )
    found = history(pr, timeline, range_=(utc("2022-04-01T00:00:00Z"), utc("2022-06-01T00:00:00Z")))
    opened = at_instant(found, "2022-04-13T20:00:00Z")
    assert (opened.title, opened.labels) == (
        "Secret scanning: dry-runs for enterprise-level custom patterns (cloud)",
        (),
    )
    assert at_instant(found, "2022-04-13T20:49:34Z").labels == ("beta",)
    assert at_instant(found, "2022-05-18T19:29:01Z").title == pr["title"]
    assert facts(found) == {("opened", utc("2022-04-13T20:00:00Z"), str(utc("2022-04-13T20:00:00Z")), 1)}


def test_labels_given_at_the_opening_are_there_from_the_start() -> None:
    # GitHub records labels chosen on the "new PR" page as `labeled` at the opening instant.
    found = history(pull(labels=[{"name": "bug"}]), [event("labeled", CREATED, label={"name": "bug"})])
    assert at_instant(found, CREATED).labels == ("bug",)


def test_the_head_at_an_instant_is_the_last_head_known_by_then() -> None:
    timeline = [
        committed(C1, "2026-05-03T09:00:00Z"),  # the head the PR was opened with
        committed(C2, "2026-05-05T09:00:00Z"),
        event("head_ref_force_pushed", "2026-05-07T09:00:00Z", commit_id=HEAD),
    ]
    found = history(pull(), timeline)
    assert at_instant(found, CREATED).head_sha == C1
    assert at_instant(found, "2026-05-05T08:59:59Z").head_sha == C1
    assert at_instant(found, "2026-05-05T09:00:00Z").head_sha == C2
    assert at_instant(found, "2026-05-06T23:00:00Z").head_sha == C2
    assert at_instant(found, "2026-05-07T09:00:00Z").head_sha == HEAD
    assert at_instant(found, "2026-05-30T00:00:00Z").head_sha == HEAD


def test_versions_are_rebuilt_not_observed_and_carry_todays_body_and_base() -> None:
    timeline = [event("renamed", "2026-05-05T00:00:00Z", rename={"from": "Loader", "to": "Faster data loader"})]
    found = history(pull(), timeline)
    assert [v.at for v in versions(found)] == [utc(CREATED), utc("2026-05-05T00:00:00Z"), utc("2026-05-20T00:00:00Z")]
    for version in versions(found):
        assert version.observed is False
        assert version.delivery_id == OBSERVATION
        assert (version.body, version.base_ref, version.head_ref, version.author) == (
            "Today's description",
            "main",
            "loader",
            "octocat",
        )


# --- the heads a report in the range reads ----------------------------------------------------------


def pushes_around_shanghai_midnight() -> History:
    """Opened with C1; C2 pushed at 23:59 Shanghai time on May 5, C3 two minutes later (May 6)."""
    timeline = [
        committed(C1, "2026-05-03T09:00:00Z"),
        committed(C2, "2026-05-05T15:59:00Z"),
        committed(C3, "2026-05-05T16:01:00Z"),
    ]
    return history(pull(head={"ref": "loader", "sha": C3}), timeline, tz=SHANGHAI)


def test_heads_needed_are_the_heads_at_each_local_day_end() -> None:
    found = pushes_around_shanghai_midnight()
    # Shanghai: May 4 ends on C1, May 5 on C2, May 6 and later on C3.
    assert found.heads == ((C1, BASE), (C2, BASE), (C3, BASE))
    # The same versions in UTC: both pushes are on May 5, which ends on C3.
    assert heads_needed(versions(found), MAY, "UTC", utc(CREATED), None) == [C1, C3]


def test_derivations_ask_for_the_files_of_each_needed_head_once() -> None:
    found = pushes_around_shanghai_midnight()
    wanted = [d.wanted_head for d in found.derivations if d.wanted_head is not None]
    assert wanted == [(C1, BASE), (C2, BASE), (C3, BASE)]


def version(at: str, head: str) -> AttributeVersion:
    return AttributeVersion(utc(at), "obs", "t", "", "main", "b", head, (), False, "octocat", observed=False)


# Opened with C1 on May 4 (UTC), C2 on May 5, C3 pushed on May 6 before the merge at 09:30 the same
# day; then two heads no report can show: one later that day and one two days later.
LIFE = [
    version(CREATED, C1),
    version("2026-05-05T10:00:00Z", C2),
    version("2026-05-06T09:00:00Z", C3),
    version("2026-05-06T20:00:00Z", "4" * 40),
    version("2026-05-08T00:00:00Z", "5" * 40),
]
MERGED = utc("2026-05-06T09:30:00Z")


def test_heads_needed_stop_at_the_merge() -> None:
    assert heads_needed(LIFE, MAY, "UTC", utc(CREATED), MERGED) == [C1, C2, C3]
    # Never merged, the PR ends May 6 on the head pushed at 20:00: C3 was the head at no day's end.
    assert heads_needed(LIFE, MAY, "UTC", utc(CREATED), None) == [C1, C2, "4" * 40, "5" * 40]


def test_heads_needed_start_at_the_range() -> None:
    from_may_6 = (utc("2026-05-06T00:00:00Z"), utc("2026-05-31T00:00:00Z"))
    assert heads_needed(LIFE, from_may_6, "UTC", utc(CREATED), MERGED) == [C3]


@pytest.mark.parametrize(
    "range_",
    [
        (utc("2026-04-01T00:00:00Z"), utc(CREATED)),  # ends as the PR is opened
        (utc("2026-05-07T00:00:00Z"), utc("2026-05-31T00:00:00Z")),  # begins after the merge
    ],
    ids=["before-opening", "after-merge"],
)
def test_no_heads_for_a_range_the_pr_was_not_open_in(range_: tuple[int, int]) -> None:
    assert heads_needed(LIFE, range_, "UTC", utc(CREATED), MERGED) == []


def test_a_pr_merged_before_the_range_needs_no_files_but_keeps_its_facts() -> None:
    merged = "2026-04-20T00:00:00Z"
    pr = pull(created_at="2026-04-10T00:00:00Z", state="closed", merged_at=merged, closed_at=merged)
    found = history(pr, [committed(C1, "2026-04-09T00:00:00Z")])
    assert found.heads == ()
    assert all(d.wanted_head is None for d in found.derivations)
    assert ("merged", utc(merged)) in {(kind, at) for kind, at, _, _ in facts(found)}


# --- the range of a run ---------------------------------------------------------------------------

LATER = utc("2026-11-30T00:00:00Z")


def test_a_month_is_its_local_month() -> None:
    assert history_range("2026-05", None, SHANGHAI, LATER) == MAY


def test_the_running_month_ends_now() -> None:
    now = utc("2026-05-10T07:00:00Z")
    assert history_range("2026-05", None, SHANGHAI, now) == (MAY[0], now)


def test_since_a_day_runs_from_its_local_midnight_to_now() -> None:
    assert history_range(None, "2026-05-10", SHANGHAI, LATER) == (utc("2026-05-09T16:00:00Z"), LATER)
    assert history_range(None, "2026-05-10", "UTC", LATER) == (utc("2026-05-10T00:00:00Z"), LATER)


@pytest.mark.parametrize(
    ("month", "since", "now", "message"),
    [
        ("2026-05", "2026-05-10", LATER, "not both or neither"),
        (None, None, LATER, "not both or neither"),
        ("2026-13", None, LATER, "is not a month"),
        ("May 2026", None, LATER, "is not a month"),
        (None, "2026-02-30", LATER, "is not a day"),
        (None, "10/05/2026", LATER, "is not a day"),
        (None, "2006-12-31", LATER, "before GitHub existed"),
        ("2026-06", None, utc("2026-05-20T00:00:00Z"), "has not begun"),
        (None, "2026-05-21", utc("2026-05-20T00:00:00Z"), "has not begun"),
        # Midnight of June 1 in Shanghai: June has begun, but nothing of it has happened yet.
        ("2026-06", None, MAY[1], "has not begun"),
    ],
)
def test_a_range_that_cannot_be_read_is_refused(month: str | None, since: str | None, now: int, message: str) -> None:
    with pytest.raises(WindowError, match=message):
        history_range(month, since, SHANGHAI, now)


# --- malformed and hostile documents ----------------------------------------------------------------


def raw(document: bytes) -> History:
    return derive_history(OBSERVATION, document, lambda _name: "UTC")


def test_a_document_that_is_not_json_is_malformed() -> None:
    with pytest.raises(MalformedBody):
        raw(b"{not json")


def stored(**fields: Any) -> bytes:
    """An observation document with some of its fields replaced, as a damaged ledger row might be."""
    document: dict[str, Any] = {"full_name": REPO, "range": list(MAY), "pull_request": pull(), "timeline": []}
    document.update(fields)
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (stored(pull_request=None), "pull_request"),
        (stored(pull_request={k: v for k, v in pull().items() if k != "created_at"}), "pull_request.created_at"),
        (stored(pull_request=pull(number="seven")), "pull_request.number"),
        (stored(pull_request=pull(head={"sha": "../../admin"})), "pull_request.head.sha"),
        (stored(timeline=[event("closed", "yesterday")]), "timeline.0.created_at"),
        (stored(timeline="x"), "timeline"),
        (stored(range=[0]), "range.1"),  # the end of the range
    ],
    ids=["no-pull-request", "no-created-at", "number", "head-sha", "event-time", "timeline", "range"],
)
def test_a_document_without_what_a_history_needs_is_incomplete(document: bytes, field: str) -> None:
    with pytest.raises(IncompleteBody) as raised:
        raw(document)
    assert raised.value.field == field


def test_a_document_naming_no_github_repository_is_incomplete() -> None:
    with pytest.raises((IncompleteBody, MalformedBody)):
        raw(stored(full_name="not a repo/x"))


def test_a_commit_dated_before_github_existed_is_part_of_the_opening() -> None:
    found = history(pull(), [committed(C1, "1970-01-01T00:00:00Z")])
    assert facts(found) == {("opened", utc(CREATED), str(utc(CREATED)), 1)}
    assert at_instant(found, CREATED).head_sha == C1


def test_hostile_strings_pass_through_as_data_and_quickly() -> None:
    title = "<script>alert(1)</script>" + "x" * 99_975
    label = '<img src=x onerror="alert(1)">**[bold](javascript:alert(1))**'
    timeline = [
        event("renamed", "2026-05-05T00:00:00Z", rename={"from": "# Heading\n<b>old</b>", "to": title}),
        event("labeled", "2026-05-06T00:00:00Z", label={"name": label}),
    ] + [committed(f"{n:040x}", iso(utc("2026-05-07T00:00:00Z") + 60 * n)) for n in range(1, 2001)]
    found = finishes(lambda: history(pull(title=title, labels=[{"name": label}]), timeline))
    assert len(title) == 100_000
    assert at_instant(found, CREATED).title == "# Heading\n<b>old</b>"
    assert at_instant(found, CREATED).labels == ()
    assert at_instant(found, "2026-05-06T00:00:00Z").title == title
    assert at_instant(found, "2026-05-06T00:00:00Z").labels == (label,)
    assert versions(found)[-1].title == title
