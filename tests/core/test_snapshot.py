"""`tracker/core/snapshot.py`: `build_snapshot` and `MonthSnapshot.as_dict`, from inputs built by hand.

Every case is the September 2026 window of a repository in Asia/Shanghai at cutoff 2026-09-13, i.e.
[2026-09-01 00:00, 2026-09-14 00:00) local = [2026-08-31T16:00Z, 2026-09-13T16:00Z), unless it says
otherwise. Times are written in Shanghai local time (UTC+8, no DST). The expected statistics, exclusion
counts and evidence are written by hand from SEMANTICS ("Statistics", "Exclusions").
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

import pytest

from tracker.core.attributes import AttributeVersion, version_at
from tracker.core.classify import Category, ChangedFile, HeadVerdict, Rules, classify_head
from tracker.core.snapshot import MonthSnapshot, build_snapshot
from tracker.core.timeline import Fact, FactKind
from tracker.core.window import Window, resolve_window

REPO = "NVIDIA/Megatron-LM"
SHANGHAI = "Asia/Shanghai"
TODAY = date(2026, 10, 5)
WINDOW = resolve_window("2026-09", "2026-09-13", SHANGHAI, TODAY)
FINAL = resolve_window("2026-09", "2026-09-30", SHANGHAI, TODAY)
RULES = Rules()

# Patches as GitHub's files endpoint returns them (hunks only).
REINDENT = "@@ -1,2 +1,2 @@\n def f():\n-  return 1\n+    return 1\n"
REAL_CHANGE = "@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def local(month: int, day: int, hour: int = 12, minute: int = 0, second: int = 0) -> int:
    """Epoch seconds of a Shanghai wall-clock time in 2026."""
    return int(datetime(2026, month, day, hour, minute, second, tzinfo=UTC).timestamp()) - 8 * 3600


def opened(at: int) -> Fact:
    return Fact(FactKind.OPENED, at)


def commit(at: int) -> Fact:
    return Fact(FactKind.COMMIT, at)


def closed(at: int) -> Fact:
    return Fact(FactKind.CLOSED, at)


def reopened(at: int) -> Fact:
    return Fact(FactKind.REOPENED, at)


def merged(at: int) -> Fact:
    return Fact(FactKind.MERGED, at)


AUG = local(8, 20)
AFTER = local(9, 20)  # after the cutoff, still September


def version(
    number: int,
    at: int = AUG,
    title: str | None = None,
    head_sha: str | None = None,
    base_ref: str = "main",
    labels: tuple[str, ...] = (),
) -> AttributeVersion:
    return AttributeVersion(
        at=at,
        delivery_id=f"delivery-{number}-{at}",
        title=title if title is not None else f"Change number {number}",
        body="",
        base_ref=base_ref,
        head_ref=f"feature-{number}",
        head_sha=head_sha if head_sha is not None else f"sha{number}",
        labels=labels,
        draft=False,
        author="octocat",
    )


def code(head_sha: str, *paths: str, patch: str = REAL_CHANGE) -> HeadVerdict:
    return classify_head(head_sha, [ChangedFile(path=path, patch=patch) for path in paths], RULES)


def stats(snapshot: MonthSnapshot) -> tuple[int, int, int, int]:
    s = snapshot.stats
    return (s.opened, s.merged, s.closed_unmerged, s.active_at_cutoff)


def by_number(snapshot: MonthSnapshot) -> dict[int, dict[str, Any]]:
    return {pr["number"]: pr for pr in snapshot.as_dict()["pull_requests"]}


NOT_COUNTED = {"opened": False, "merged": False, "closed_unmerged": False, "active_at_cutoff": False}
NO_EXCLUSIONS = {"test_only": 0, "ci_only": 0, "test_ci_only": 0, "format_only": 0}


def test_the_window() -> None:
    assert (WINDOW.start, WINDOW.end) == (local(9, 1, 0), local(9, 14, 0))
    document = build_snapshot(REPO, WINDOW, {}, {}).as_dict()
    assert document == {
        "repo": REPO,
        "month": "2026-09",
        "cutoff": "2026-09-13",
        "timezone": SHANGHAI,
        "final": False,
        "window": {"start": "2026-08-31T16:00:00Z", "end": "2026-09-13T16:00:00Z"},
        "stats": {"opened": 0, "merged": 0, "closed_unmerged": 0, "active_at_cutoff": 0},
        "excluded": NO_EXCLUSIONS,
        "pending_classification": 0,
        "coverage": {"complete": True, "missing": []},
        "pull_requests": [],
    }


# --- the four statistics ------------------------------------------------------------------------

# Every PR substantive. Per PR: (opened, merged, closed_unmerged, active_at_cutoff), by hand.
COUNTS: dict[int, tuple[list[Fact], tuple[int, int, int, int] | None]] = {
    101: ([opened(local(9, 2))], (1, 0, 0, 1)),  # opened, still open
    102: ([opened(AUG), commit(local(9, 5))], (0, 0, 0, 1)),  # earlier PR, committed in the window
    103: ([opened(local(9, 3)), merged(local(9, 10))], (1, 1, 0, 0)),
    104: ([opened(local(8, 10)), closed(local(9, 4))], (0, 0, 1, 0)),
    105: ([opened(local(9, 1, 0)), closed(local(9, 5)), reopened(local(9, 6))], (1, 0, 0, 1)),  # closed, reopened: 0
    106: ([opened(local(8, 5)), closed(local(9, 8)), reopened(AFTER)], (0, 0, 1, 0)),  # reopened after the cutoff: 1
    107: ([opened(local(8, 1))], None),  # only a label this month: not in the month
    108: ([opened(local(9, 12)), merged(local(9, 14, 0, 30))], (1, 0, 0, 1)),  # merged after the cutoff
    109: ([opened(local(8, 25)), closed(local(8, 28)), reopened(local(9, 3))], (0, 0, 0, 0)),  # reopened only
    110: ([opened(local(8, 31, 23, 59, 59)), merged(local(9, 1, 0, 0, 0))], (0, 1, 0, 0)),  # August PR, September merge
    111: ([opened(local(9, 14, 0, 0, 0))], None),  # the first second after the cutoff
    112: ([opened(local(8, 2)), merged(local(8, 30))], None),  # merged last month: nothing carries over
    113: ([opened(local(9, 2)), closed(local(9, 3)), reopened(local(9, 4)), closed(local(9, 9))], (1, 0, 1, 0)),
}


def _all_substantive(timelines: dict[int, list[Fact]]) -> MonthSnapshot:
    versions = {n: version(n) for n in timelines}
    verdicts = {(n, f"sha{n}"): code(f"sha{n}", f"megatron/core/m{n}.py") for n in timelines}
    return build_snapshot(REPO, WINDOW, timelines, versions, verdicts)


def test_the_four_statistics() -> None:
    snapshot = _all_substantive({n: facts for n, (facts, _) in COUNTS.items()})
    # opened: 101 103 105 108 113; merged: 103 110; closed without merge: 104 106 113; active: 101 102 105 108.
    assert stats(snapshot) == (5, 2, 3, 4)
    assert snapshot.excluded == NO_EXCLUSIONS
    assert snapshot.pending_classification == 0
    assert [pr.status.number for pr in snapshot.pull_requests] == [101, 102, 103, 104, 105, 106, 108, 109, 110, 113]


@pytest.mark.parametrize("number", sorted(COUNTS))
def test_each_pr_is_counted_by_hand(number: int) -> None:
    facts, expected = COUNTS[number]
    snapshot = _all_substantive({number: facts})
    if expected is None:
        assert snapshot.pull_requests == ()
        assert stats(snapshot) == (0, 0, 0, 0)
        return
    assert stats(snapshot) == expected
    (pr,) = by_number(snapshot).values()
    assert pr["category"] == "substantive"
    names = ["opened", "merged", "closed_unmerged", "active_at_cutoff"]
    assert pr["counted"] == dict(zip(names, map(bool, expected), strict=True))


def test_times_of_each_pr() -> None:
    snapshot = _all_substantive({n: facts for n, (facts, _) in COUNTS.items()})
    prs = {pr.status.number: pr for pr in snapshot.pull_requests}
    assert prs[103].merged_at == local(9, 10)
    assert prs[108].merged_at is None  # merged after the cutoff
    assert prs[110].created_at == local(8, 31, 23, 59, 59)
    assert prs[104].closed_at == local(9, 4)
    assert prs[105].closed_at is None  # closed and reopened inside the window
    assert prs[106].closed_at == local(9, 8)
    assert prs[113].closed_at == local(9, 9)  # the last close inside the window
    document = by_number(snapshot)
    assert document[103]["merged_at"] == "2026-09-10T04:00:00Z"
    assert document[110]["created_at"] == "2026-08-31T15:59:59Z"
    assert document[110]["merged_at"] == "2026-08-31T16:00:00Z"
    assert document[106]["state_at_cutoff"] == "closed"
    assert document[109]["activity"] == {
        "opened": False,
        "committed": False,
        "closed": False,
        "reopened": True,
        "merged": False,
    }
    assert document[109]["counted"] == NOT_COUNTED


def test_the_final_report_sees_the_whole_month() -> None:
    snapshot = _all_substantive({n: facts for n, (facts, _) in COUNTS.items()})
    final = build_snapshot(
        REPO,
        FINAL,
        {n: facts for n, (facts, _) in COUNTS.items()},
        {n: version(n) for n in COUNTS},
        {(n, f"sha{n}"): code(f"sha{n}", f"megatron/core/m{n}.py") for n in COUNTS},
    )
    assert final.as_dict()["final"] is True
    # At the month's end: 111 opened (and open); 108 merged on the 14th; 106 reopened on the 20th, so
    # open and not closed; 102 has its commit; 101 and 105 still open.
    # opened: 101 103 105 108 111 113; merged: 103 108 110; closed: 104 113; active: 101 102 105 111.
    assert stats(final) == (6, 3, 2, 4)
    assert stats(snapshot) != stats(final)


# --- exclusions ---------------------------------------------------------------------------------


def _exclusion_inputs() -> tuple[
    dict[int, list[Fact]], dict[int, AttributeVersion], dict[tuple[int, str], HeadVerdict]
]:
    timelines = {
        201: [opened(local(9, 2))],  # test only
        202: [opened(local(9, 3)), merged(local(9, 5))],  # CI only
        203: [opened(AUG), closed(local(9, 6))],  # tests and CI only
        204: [opened(AUG), commit(local(9, 7))],  # format only (title)
        205: [opened(local(9, 4))],  # "format" in the title, but a real change
        206: [opened(local(9, 3)), merged(local(9, 9))],  # code plus tests
        207: [opened(local(8, 10)), closed(local(8, 12)), reopened(local(9, 8))],  # test only, reopened only
        208: [opened(local(9, 10))],  # format only (label)
        209: [opened(local(8, 3)), merged(local(8, 9))],  # test only, nothing in the window
    }
    versions = {
        201: version(201, title="Add router tests"),
        202: version(202, title="ci: pin the runner image"),
        203: version(203, title="Test harness and CI script"),
        204: version(204, title="Auto-format megatron/core"),
        205: version(205, title="Format the log line of the router"),
        206: version(206, title="Fix the router"),
        207: version(207, title="More router tests"),
        208: version(208, title="Tidy the router", labels=("formatting",)),
        209: version(209, title="Old tests"),
    }
    verdicts = {
        (201, "sha201"): code("sha201", "tests/unit_tests/test_router.py"),
        (202, "sha202"): code("sha202", ".github/workflows/ci.yml", "ci/run.sh"),
        (203, "sha203"): code("sha203", "tests/functional/test_a.py", "tools/ci/launch.sh"),
        (204, "sha204"): code("sha204", "megatron/core/a.py", "megatron/core/b.py", patch=REINDENT),
        (205, "sha205"): code("sha205", "megatron/core/router.py"),
        (206, "sha206"): code("sha206", "megatron/core/router.py", "tests/unit_tests/test_router.py"),
        (207, "sha207"): code("sha207", "test/test_more.py"),
        (208, "sha208"): code("sha208", "megatron/core/router.py", patch=REINDENT),
        (209, "sha209"): code("sha209", "tests/old.py"),
    }
    return timelines, versions, verdicts


def test_excluded_prs_leave_the_statistics_and_are_counted_by_category() -> None:
    snapshot = build_snapshot(REPO, WINDOW, *_exclusion_inputs())
    # Only 205 (opened, open) and 206 (opened, merged) count.
    assert stats(snapshot) == (2, 1, 0, 1)
    # Every excluded PR with activity in the window, whatever the activity (207 was only reopened);
    # 209 had none and is in no count.
    assert snapshot.excluded == {"test_only": 2, "ci_only": 1, "test_ci_only": 1, "format_only": 2}
    assert snapshot.pending_classification == 0
    assert [pr.status.number for pr in snapshot.pull_requests] == [201, 202, 203, 204, 205, 206, 207, 208]


def test_excluded_prs_keep_their_evidence() -> None:
    document = by_number(build_snapshot(REPO, WINDOW, *_exclusion_inputs()))
    assert document[201]["category"] == "test_only"
    assert document[201]["evidence"] == {
        "head_sha": "sha201",
        "files": 1,
        "rule": "all_files_test",
        "matching_files": 1,
        "examples": ["tests/unit_tests/test_router.py"],
    }
    assert document[202]["category"] == "ci_only"
    assert document[202]["evidence"]["rule"] == "all_files_ci"
    assert document[202]["evidence"]["examples"] == [".github/workflows/ci.yml", "ci/run.sh"]
    assert document[203]["category"] == "test_ci_only"
    assert document[203]["evidence"]["rule"] == "all_files_test_or_ci"
    assert document[203]["evidence"]["matching_files"] == 2
    assert document[204]["category"] == "format_only"
    assert document[204]["evidence"]["rule"] == "whitespace_only_with_format_signal"
    assert document[204]["evidence"]["signal"] == "title"
    assert document[204]["evidence"]["head_sha"] == "sha204"
    assert document[204]["evidence"]["examples"] == ["megatron/core/a.py", "megatron/core/b.py"]
    assert document[208]["category"] == "format_only"
    assert document[208]["evidence"]["signal"] == "label:formatting"
    for number in (201, 202, 203, 204, 207, 208):
        assert document[number]["counted"] == NOT_COUNTED
    # The statuses are still reported: merged 202 is merged, closed 203 closed.
    assert document[202]["state_at_cutoff"] == "merged"
    assert document[203]["state_at_cutoff"] == "closed"


def test_a_format_signal_without_whitespace_only_patches_stays_substantive() -> None:
    document = by_number(build_snapshot(REPO, WINDOW, *_exclusion_inputs()))
    assert document[205]["category"] == "substantive"
    assert document[205]["evidence"]["signal"] == "title"
    assert document[205]["evidence"]["note"] == "not every patch is whitespace-only"
    assert document[205]["counted"] == {
        "opened": True,
        "merged": False,
        "closed_unmerged": False,
        "active_at_cutoff": True,
    }
    assert document[206]["category"] == "substantive"
    assert document[206]["evidence"]["rule"] == "code_changed"
    assert document[206]["evidence"]["examples"] == ["megatron/core/router.py"]


def test_the_rules_given_are_the_rules_used() -> None:
    timelines, versions, _ = _exclusion_inputs()
    rules = Rules(ci_paths=(".github/",), test_paths=("spec/",))
    verdicts = {
        (201, "sha201"): classify_head("sha201", [ChangedFile("spec/router_spec.py", patch=REAL_CHANGE)], rules),
        (202, "sha202"): classify_head("sha202", [ChangedFile("ci/run.sh", patch=REAL_CHANGE)], rules),
    }
    only = {n: timelines[n] for n in (201, 202)}
    snapshot = build_snapshot(REPO, WINDOW, only, versions, verdicts, rules)
    assert by_number(snapshot)[201]["category"] == "test_only"
    assert by_number(snapshot)[202]["category"] == "substantive"  # ci/ is no CI path under these rules
    assert stats(snapshot) == (1, 1, 0, 0)


def test_the_format_pattern_given_is_the_one_used() -> None:
    timelines, versions, verdicts = _exclusion_inputs()
    only = {n: timelines[n] for n in (204, 208)}
    strict = Rules(format_pattern=r"\bstyle-only\b")
    snapshot = build_snapshot(REPO, WINDOW, only, versions, verdicts, strict)
    assert [pr.category for pr in snapshot.pull_requests] == [Category.SUBSTANTIVE, Category.SUBSTANTIVE]
    assert snapshot.excluded["format_only"] == 0
    assert stats(snapshot) == (1, 0, 0, 2)  # 208 opened and open; 204 committed in the window and open


# --- pending and unavailable heads --------------------------------------------------------------


def test_a_pr_without_a_verdict_is_pending_and_not_counted() -> None:
    timelines = {
        301: [opened(local(9, 2))],  # no verdict at all
        302: [opened(local(9, 3)), commit(local(9, 6))],  # a verdict for its old head only
        303: [opened(local(9, 4))],  # a verdict for its head: counted
        304: [opened(local(9, 5)), merged(local(9, 7))],  # no version known, so no head
        305: [opened(AUG), closed(local(9, 2))],  # no verdict; its files would have been tests
    }
    versions = {
        301: version(301, local(9, 2)),
        302: version(302, local(9, 6), head_sha="new302"),
        303: version(303, local(9, 4)),
        305: version(305, local(9, 2)),
    }
    verdicts = {
        (302, "old302"): code("old302", "megatron/core/a.py"),
        (303, "sha303"): code("sha303", "megatron/core/b.py"),
        (305, "other"): code("other", "tests/test_x.py"),
    }
    snapshot = build_snapshot(REPO, WINDOW, timelines, versions, verdicts)
    assert stats(snapshot) == (1, 0, 0, 1)  # 303 alone
    assert snapshot.pending_classification == 4
    assert snapshot.excluded == NO_EXCLUSIONS  # pending is not silently excluded either
    document = by_number(snapshot)
    for number in (301, 302, 304, 305):
        assert document[number]["category"] == "pending"
        assert document[number]["evidence"] == {"rule": "files_not_known_yet"}
        assert document[number]["counted"] == NOT_COUNTED
    assert document[302]["head_sha"] == "new302"
    assert document[304]["title"] == ""
    assert document[304]["base_ref"] == ""
    assert document[304]["head_sha"] == ""
    assert document[304]["state_at_cutoff"] == "merged"
    assert document[303]["category"] == "substantive"


def test_a_head_marked_unavailable_says_so_and_stays_pending() -> None:
    timelines = {
        401: [opened(local(9, 2))],
        402: [opened(local(9, 3))],  # an old head is gone, the current one has files
    }
    versions = {401: version(401, head_sha="gone401"), 402: version(402, head_sha="new402")}
    verdicts = {(402, "new402"): code("new402", "megatron/core/c.py")}
    unavailable = frozenset({(401, "gone401"), (402, "old402")})
    snapshot = build_snapshot(REPO, WINDOW, timelines, versions, verdicts, unavailable=unavailable)
    document = by_number(snapshot)
    assert document[401]["category"] == "pending"
    assert document[401]["evidence"] == {"rule": "files_unavailable", "head_sha": "gone401"}
    assert document[401]["counted"] == NOT_COUNTED
    assert document[402]["category"] == "substantive"
    assert document[402]["evidence"]["rule"] == "code_changed"
    assert snapshot.pending_classification == 1
    assert stats(snapshot) == (1, 0, 0, 1)


# --- attributes as of the window end ------------------------------------------------------------

# PR 501's attributes over time: a title, base branch and head at each version.
HISTORY = [
    version(501, local(9, 2), "Draft: router", head_sha="h1", base_ref="dev"),
    version(501, local(9, 10), "Fix the MoE router load balancing", head_sha="h2", base_ref="main", labels=("moe",)),
    version(501, AFTER, "Auto-format the MoE router", head_sha="h3", base_ref="core_r0.18.0", labels=("formatting",)),
]
HISTORY_VERDICTS = {
    (501, "h1"): code("h1", "tests/unit_tests/test_router.py"),
    (501, "h2"): code("h2", "megatron/core/router.py", patch=REINDENT),  # whitespace-only, but no signal at h2
    (501, "h3"): code("h3", "megatron/core/router.py", patch=REINDENT),
}
HISTORY_TIMELINE = {501: [opened(local(9, 2)), commit(local(9, 10)), commit(AFTER)]}


def _as_of(window: Window) -> MonthSnapshot:
    chosen = version_at(HISTORY, window.end)
    assert chosen is not None
    return build_snapshot(REPO, window, HISTORY_TIMELINE, {501: chosen}, HISTORY_VERDICTS)


def test_titles_base_branches_and_heads_are_as_of_the_window_end() -> None:
    (pr,) = by_number(_as_of(WINDOW)).values()
    assert pr["title"] == "Fix the MoE router load balancing"
    assert pr["base_ref"] == "main"
    assert pr["head_sha"] == "h2"
    assert pr["labels"] == ["moe"]
    # The title at the cutoff says nothing of formatting; the later retitle does not reach back.
    assert pr["category"] == "substantive"
    assert pr["evidence"]["head_sha"] == "h2"


def test_the_final_report_shows_the_later_attributes() -> None:
    (pr,) = by_number(_as_of(FINAL)).values()
    assert pr["title"] == "Auto-format the MoE router"
    assert pr["base_ref"] == "core_r0.18.0"
    assert pr["head_sha"] == "h3"
    assert pr["category"] == "format_only"
    assert pr["evidence"]["signal"] == "title"


def test_an_earlier_cutoff_shows_the_first_head() -> None:
    window = resolve_window("2026-09", "2026-09-05", SHANGHAI, TODAY)
    snapshot = _as_of(window)
    (pr,) = by_number(snapshot).values()
    assert (pr["title"], pr["base_ref"], pr["head_sha"]) == ("Draft: router", "dev", "h1")
    assert pr["category"] == "test_only"  # the head at the cutoff touched tests only
    assert snapshot.excluded["test_only"] == 1
    assert stats(snapshot) == (0, 0, 0, 0)


# --- as_dict ------------------------------------------------------------------------------------


def _everything() -> tuple[
    dict[int, list[Fact]], dict[int, AttributeVersion], dict[tuple[int, str], HeadVerdict], frozenset[tuple[int, str]]
]:
    timelines, versions, verdicts = _exclusion_inputs()
    for number, (facts, _) in COUNTS.items():
        timelines[number] = facts
        versions[number] = version(number, labels=("b", "a") if number % 2 else ())
        verdicts[(number, f"sha{number}")] = code(f"sha{number}", f"megatron/core/m{number}.py")
    timelines[401] = [opened(local(9, 2))]
    versions[401] = version(401, head_sha="gone401")
    timelines[301] = [opened(local(9, 2))]
    return timelines, versions, verdicts, frozenset({(401, "gone401")})


def _shuffled(
    seed: int,
    timelines: dict[int, list[Fact]],
    versions: dict[int, AttributeVersion],
    verdicts: dict[tuple[int, str], HeadVerdict],
) -> tuple[dict[int, list[Fact]], dict[int, AttributeVersion], dict[tuple[int, str], HeadVerdict]]:
    rng = random.Random(seed)

    def reorder(items: Sequence[Any]) -> list[Any]:
        copy = list(items)
        rng.shuffle(copy)
        return copy

    # Facts in any order, some twice (a delivery received twice re-proves its facts).
    shuffled_timelines = {n: reorder(facts + facts[:1]) for n, facts in reorder(list(timelines.items()))}
    return shuffled_timelines, dict(reorder(list(versions.items()))), dict(reorder(list(verdicts.items())))


def test_as_dict_is_json() -> None:
    timelines, versions, verdicts, unavailable = _everything()
    document = build_snapshot(REPO, WINDOW, timelines, versions, verdicts, unavailable=unavailable).as_dict()
    text = json.dumps(document, sort_keys=False, allow_nan=False)
    assert json.loads(text) == document  # no tuples, sets or other values JSON would change
    assert document["stats"] == {"opened": 7, "merged": 3, "closed_unmerged": 3, "active_at_cutoff": 5}
    assert document["excluded"] == {"test_only": 2, "ci_only": 1, "test_ci_only": 1, "format_only": 2}
    assert document["pending_classification"] == 2  # 301 (no verdict) and 401 (unavailable)
    assert by_number_labels(document, 101) == ["b", "a"]  # as the version holds them


def by_number_labels(document: dict[str, Any], number: int) -> list[str]:
    (pr,) = [pr for pr in document["pull_requests"] if pr["number"] == number]
    labels: list[str] = pr["labels"]
    return labels


@pytest.mark.parametrize("seed", range(10))
def test_as_dict_does_not_depend_on_input_order(seed: int) -> None:
    timelines, versions, verdicts, unavailable = _everything()
    expected = build_snapshot(REPO, WINDOW, timelines, versions, verdicts, unavailable=unavailable).as_dict()
    again = build_snapshot(
        REPO, WINDOW, *_shuffled(seed, timelines, versions, verdicts), unavailable=unavailable
    ).as_dict()
    assert again == expected
    assert json.dumps(again) == json.dumps(expected)  # the same keys in the same order, too
    numbers = [pr["number"] for pr in again["pull_requests"]]
    assert numbers == sorted(numbers)


def test_a_pr_as_dict_has_every_field() -> None:
    snapshot = _all_substantive({103: COUNTS[103][0]})
    (pr,) = snapshot.as_dict()["pull_requests"]
    assert pr == {
        "number": 103,
        "url": "https://github.com/NVIDIA/Megatron-LM/pull/103",
        "title": "Change number 103",
        "base_ref": "main",
        "head_sha": "sha103",
        "author": "octocat",
        "labels": [],
        "draft": False,
        "state_at_cutoff": "merged",
        "created_at": "2026-09-03T04:00:00Z",
        "merged_at": "2026-09-10T04:00:00Z",
        "activity": {"opened": True, "committed": False, "closed": False, "reopened": False, "merged": True},
        "category": "substantive",
        "evidence": {
            "head_sha": "sha103",
            "files": 1,
            "rule": "code_changed",
            "matching_files": 1,
            "examples": ["megatron/core/m103.py"],
        },
        "counted": {"opened": True, "merged": True, "closed_unmerged": False, "active_at_cutoff": False},
    }
