"""`tracker/core/drilldown.py`: each number of a report lists exactly the PRs it counts, with their evidence.

The statistics over the hand-written cases of tests/core/test_snapshot.py (their counts written from
SEMANTICS), plus a PR of each exclusion and one awaiting classification; the themes over generated months
of real PRs; and the same rows from a month's record (its report's JSON document) as from the report.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.fixtures.paths import needs_shared
from tests.core.test_snapshot import (
    COUNTS,
    REINDENT,
    REPO,
    RULES,
    WINDOW,
    code,
    local,
    merged,
    opened,
    version,
)
from tracker.core.classify import Category, ChangedFile, classify_head
from tracker.core.drilldown import (
    EXCLUSIONS,
    PENDING,
    STATISTICS,
    DrillDown,
    UnknownSelection,
    UnknownTheme,
    drill_stat,
    drill_theme,
    view_of_document,
    view_of_snapshot,
)
from tracker.core.snapshot import MonthSnapshot, build_snapshot
from tracker.core.timeline import Fact
from tracker.core.window import iso_utc

# Beside COUNTS' substantive PRs: one PR of each exclusion, one whose head's files are not known yet.
EXCLUDED_FILES = {
    201: ("Add unit tests", ("tests/unit/test_a.py", "tests/unit/test_b.py"), Category.TEST_ONLY),
    202: ("Bump the CI image", (".github/workflows/ci.yml",), Category.CI_ONLY),
    203: ("Tests and CI", ("tests/test_c.py", "ci/run.sh"), Category.TEST_CI_ONLY),
    204: ("Formatting of the trainer", ("megatron/trainer.py",), Category.FORMAT_ONLY),
}
PENDING_PR = 205


def month() -> tuple[MonthSnapshot, dict[int, list[str]]]:
    timelines: dict[int, list[Fact]] = {number: facts for number, (facts, _) in COUNTS.items()}
    versions = {number: version(number) for number in timelines}
    verdicts = {(number, f"sha{number}"): code(f"sha{number}", f"megatron/core/m{number}.py") for number in timelines}
    paths = {number: [f"megatron/core/m{number}.py"] for number in timelines}
    for number, (title, files, _) in EXCLUDED_FILES.items():
        timelines[number] = [opened(local(9, 2)), merged(local(9, 4))]
        versions[number] = version(number, title=title)
        patch = REINDENT if number == 204 else "@@ -1 +1 @@\n-x = 1\n+x = 2\n"
        changed = [ChangedFile(path=path, patch=patch) for path in files]
        verdicts[(number, f"sha{number}")] = classify_head(f"sha{number}", changed, RULES)
        paths[number] = list(files)
    timelines[PENDING_PR] = [opened(local(9, 6))]
    versions[PENDING_PR] = version(PENDING_PR)
    snapshot = build_snapshot(REPO, WINDOW, timelines, versions, verdicts, RULES)
    return snapshot, {pr.status.number: paths.get(pr.status.number, []) for pr in snapshot.pull_requests}


def numbers(drill: DrillDown) -> list[int]:
    return [row.number for row in drill.rows]


def test_each_statistic_lists_the_prs_it_counts_and_no_other() -> None:
    snapshot, paths = month()
    view = view_of_snapshot(snapshot, paths)
    for index, stat in enumerate(STATISTICS):
        drill = drill_stat(view, stat)
        expected = sorted(n for n, (_, counts) in COUNTS.items() if counts is not None and counts[index])
        assert numbers(drill) == expected  # by hand, in tests/core/test_snapshot.py
        assert drill.count == len(drill.rows) == snapshot.stats.as_dict()[stat]
    for stat in EXCLUSIONS:
        drill = drill_stat(view, stat)
        assert drill.count == snapshot.excluded[stat] == 1
        assert numbers(drill) == [n for n, (_, _, category) in EXCLUDED_FILES.items() if category.value == stat]
    pending = drill_stat(view, PENDING)
    assert numbers(pending) == [PENDING_PR] and pending.count == snapshot.pending_classification


def test_a_statistics_evidence_is_the_facts_and_instants_that_put_the_pr_there() -> None:
    view = view_of_snapshot(month()[0])
    [merged_row] = [row for row in drill_stat(view, "merged").rows if row.number == 103]
    assert merged_row.evidence == {
        "state_at_cutoff": "merged",
        "in_window": ["opened", "merged"],
        "opened_at": "2026-09-03T04:00:00Z",
        "merged_at": "2026-09-10T04:00:00Z",
        "closed_at": None,
        "head_sha": "sha103",
    }
    closed_rows = {row.number: row.evidence for row in drill_stat(view, "closed_unmerged").rows}
    assert closed_rows[104]["closed_at"] == "2026-09-04T04:00:00Z"
    assert closed_rows[113]["closed_at"] == "2026-09-09T04:00:00Z"  # the last close inside the window
    assert closed_rows[106]["state_at_cutoff"] == "closed"  # reopened after the cutoff
    active = {row.number: row.evidence for row in drill_stat(view, "active_at_cutoff").rows}
    assert active[102]["in_window"] == ["committed"]  # an earlier PR pushed to in the window
    assert active[108]["merged_at"] is None  # merged after the cutoff: not by then


def test_an_exclusions_evidence_is_its_head_and_the_files_that_decided_it() -> None:
    snapshot, paths = month()
    view = view_of_snapshot(snapshot, paths)
    [test_only] = drill_stat(view, "test_only").rows
    assert test_only.evidence == {
        "head_sha": "sha201",
        "files": 2,
        "rule": "all_files_test",
        "matching_files": 2,
        "examples": ["tests/unit/test_a.py", "tests/unit/test_b.py"],
        "paths": ["tests/unit/test_a.py", "tests/unit/test_b.py"],
    }
    [format_only] = drill_stat(view, "format_only").rows
    assert format_only.evidence["rule"] == "whitespace_only_with_format_signal"
    assert format_only.evidence["signal"] == "title"
    [pending] = drill_stat(view, PENDING).rows
    assert pending.evidence == {"rule": "files_not_known_yet", "head_sha": "sha205", "paths": []}
    # Without the paths (a record keeps none): the evidence's examples, and paths None.
    assert drill_stat(view_of_snapshot(snapshot), "test_only").rows[0].evidence["paths"] is None


def test_the_answer_is_the_apis() -> None:
    view = view_of_snapshot(month()[0])
    document = drill_stat(view, "closed_unmerged").as_dict("2026-09-13")
    assert list(document) == ["stat", "cutoff", "count", "prs"]
    assert (document["stat"], document["cutoff"], document["count"]) == ("closed_unmerged", "2026-09-13", 3)
    assert list(document["prs"][0]) == ["number", "title", "base_ref", "evidence"]


def test_what_no_report_shows_is_refused() -> None:
    view = view_of_snapshot(month()[0])
    with pytest.raises(UnknownSelection, match="use one of opened, merged"):
        drill_stat(view, "substantive")
    with pytest.raises(UnknownSelection, match="delivered or in_progress"):
        drill_theme(view, "elsewhere", "other")
    with pytest.raises(UnknownTheme, match="no theme 'other' in the section delivered"):
        drill_theme(view, "delivered", "other")


# --- themes, and the report's JSON document ---------------------------------------------------------------


def without_what_a_document_lacks(drill: DrillDown) -> DrillDown:
    """The drill-down with the close instants and changed paths left out (the JSON document keeps neither)."""
    rows = tuple(
        replace(row, evidence={k: v for k, v in row.evidence.items() if k not in ("closed_at", "paths")})
        for row in drill.rows
    )
    return replace(drill, rows=rows)


@needs_shared
@pytest.mark.parametrize(("size", "seed", "themed"), [(60, 1, False), (300, 2, True), (900, 3, False)])
def test_a_theme_count_lists_its_changes_and_the_document_says_what_the_snapshot_says(
    size: int, seed: int, themed: bool
) -> None:
    from tests.core.test_clusters import generated_month, megatron_taxonomy
    from tracker.reports.render import report_document

    report = generated_month(size, seed, megatron_taxonomy() if themed else ())
    view = view_of_document(report_document(report))  # what the report's JSON, or a record, says
    prs = {pr.status.number: pr for pr in report.snapshot.pull_requests}
    placed = report.placement()
    seen: list[int] = []
    for section in report.sections:
        for theme in section.themes:
            drill = drill_theme(view, section.id, theme.id)
            assert drill.count == len(theme.changes)  # the number the report shows
            assert sorted(numbers(drill)) == sorted(n for change in theme.changes for n in change.numbers)
            assert {row.change for row in drill.rows} == {change.id for change in theme.changes}
            for row in drill.rows:
                assert placed[row.number]["theme"] == theme.id
                pr = prs[row.number]
                assert row.evidence["state_at_cutoff"] == pr.status.state.value
                assert row.evidence["opened_at"] == iso_utc(pr.created_at)
                assert row.evidence["merged_at"] == (iso_utc(pr.merged_at) if pr.merged_at is not None else None)
            seen += numbers(drill)
    assert sorted(seen) == sorted(n for n, place in placed.items() if place["theme"] != "reverted")
    # The statistics and exclusions read from the document list what they list from the snapshot.
    live = view_of_snapshot(report.snapshot)
    for stat in (*STATISTICS, *EXCLUSIONS, PENDING):
        assert without_what_a_document_lacks(drill_stat(view, stat)) == without_what_a_document_lacks(
            drill_stat(live, stat)
        )
