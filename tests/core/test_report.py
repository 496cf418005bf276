"""`tracker/core/report.py`: which section narrates each PR, and how change groups are described there.

Every case is September 2026 in Asia/Shanghai at cutoff 2026-09-13 ([2026-09-01, 2026-09-14) local),
built by hand through `build_snapshot` and `build_report`: a merged PR was opened on Sep 2 and merged
on Sep 10, an open PR was opened on Sep 3, a closed one opened on Sep 4 and closed without merge on
Sep 8. The rule under test (issue 8, item 4; README "How the narrative is built"): each PR is narrated
in the section its own state puts it in, whatever its change group; a group with merged and open
members is described in each section by its members there, each PR cited once; each PR's `group`
lists every member of its group. Every expected value is written by hand.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, date, datetime

import pytest

from tests.support.watchdog import finishes
from tracker.core.attributes import AttributeVersion
from tracker.core.classify import ChangedFile, HeadVerdict, Rules, classify_head
from tracker.core.groups import GroupInput, change_groups
from tracker.core.report import DELIVERED, IN_PROGRESS, Change, Report, build_report
from tracker.core.snapshot import build_snapshot
from tracker.core.taxonomy import HighlightConfig, ThemeConfig
from tracker.core.timeline import Fact, FactKind
from tracker.core.window import resolve_window

REPO = "NVIDIA/Megatron-LM"
WINDOW = resolve_window("2026-09", "2026-09-13", "Asia/Shanghai", date(2026, 10, 5))
MERGED, OPEN, CLOSED = "merged", "open", "closed"
ROUTER = "Fix the MoE router load balancing"
TELEMETRY = "Add a remote telemetry uploader"


def local(day: int, hour: int = 12) -> int:
    """Epoch seconds of a Shanghai wall-clock time in September 2026 (UTC+8, no DST)."""
    return int(datetime(2026, 9, day, hour, tzinfo=UTC).timestamp()) - 8 * 3600


@dataclass(frozen=True)
class PR:
    number: int
    state: str
    title: str
    base: str = "main"
    body: str = ""
    files: tuple[str, ...] = ("megatron/core/other.py",)
    labels: tuple[str, ...] = ()


FACTS = {
    MERGED: (Fact(FactKind.OPENED, local(2)), Fact(FactKind.MERGED, local(10))),
    OPEN: (Fact(FactKind.OPENED, local(3)),),
    CLOSED: (Fact(FactKind.OPENED, local(4)), Fact(FactKind.CLOSED, local(8))),
}


def report(prs: list[PR], taxonomy: tuple[ThemeConfig, ...] = ()) -> Report:
    versions: dict[int, AttributeVersion] = {}
    verdicts: dict[tuple[int, str], HeadVerdict] = {}
    for pr in prs:
        sha = f"{pr.number:040x}"
        versions[pr.number] = AttributeVersion(
            at=local(3),
            delivery_id=f"delivery-{pr.number}",
            title=pr.title,
            body=pr.body,
            base_ref=pr.base,
            head_ref=f"branch-{pr.number}",
            head_sha=sha,
            labels=pr.labels,
            draft=False,
            author="octocat",
        )
        verdicts[(pr.number, sha)] = classify_head(sha, [ChangedFile(path) for path in pr.files], Rules())
    snapshot = build_snapshot(REPO, WINDOW, {pr.number: FACTS[pr.state] for pr in prs}, versions, verdicts)
    return build_report(snapshot, {pr.number: pr.files for pr in prs}, taxonomy)


def cited(result: Report) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """Each section's changes in order: (title, "<branch> #<n>" citations)."""
    return {
        section.id: [(change.title, tuple(c.label for c in change.citations)) for change in section.changes]
        for section in result.sections
    }


def placed(result: Report) -> dict[int, tuple[str, list[int]]]:
    return {number: (place["section"], place["group"]) for number, place in result.placement().items()}


# --- issue 8: a group never moves a PR out of its own section -------------------------------------


def test_the_issue_8_probe() -> None:
    # Merged #10 on main; open #11 on dev whose body claims to cherry-pick #10 (no title or file in
    # common); open #12 with #11's title on a release branch.
    result = report(
        [
            PR(10, MERGED, ROUTER, "main", files=("megatron/core/transformer/moe/router.py",)),
            PR(11, OPEN, TELEMETRY, "dev", "This is a cherry-pick of #10", ("megatron/core/telemetry.py",)),
            PR(12, OPEN, TELEMETRY, "core_r0.18.0", files=("megatron/core/telemetry.py",)),
        ]
    )
    assert cited(result) == {
        DELIVERED: [(ROUTER, ("main #10",))],
        IN_PROGRESS: [(TELEMETRY, ("dev #11", "core_r0.18.0 #12"))],
    }
    assert placed(result) == {10: (DELIVERED, [10]), 11: (IN_PROGRESS, [11, 12]), 12: (IN_PROGRESS, [11, 12])}


def test_a_group_with_merged_and_open_members_is_described_in_both_sections() -> None:
    # #21 is #20's dev twin by title, still open: the twin is named in both PRs' group, but each PR is
    # cited in its own section only.
    result = report(
        [
            PR(20, MERGED, ROUTER, "main", files=("megatron/core/transformer/moe/router.py",)),
            PR(21, OPEN, "[dev] " + ROUTER, "dev", files=("megatron/core/transformer/moe/router.py",)),
            PR(22, OPEN, "cp: " + ROUTER + " (#20)", "core_r0.18.0", files=("megatron/core/x.py",)),
            # Same layout theme and highlight as #20 (one file, no similar title: no twin), after it.
            PR(
                23, MERGED, "Speed up the checkpoint loader", "main", files=("megatron/core/transformer/moe/router.py",)
            ),
        ]
    )
    assert cited(result) == {
        DELIVERED: [(ROUTER, ("main #20",)), ("Speed up the checkpoint loader", ("main #23",))],
        IN_PROGRESS: [(ROUTER, ("dev #21", "core_r0.18.0 #22"))],
    }
    assert placed(result) == {
        20: (DELIVERED, [20, 21, 22]),
        21: (IN_PROGRESS, [20, 21, 22]),
        22: (IN_PROGRESS, [20, 21, 22]),
        23: (DELIVERED, [23]),
    }
    changes = {change.id: change for section in result.sections for change in section.changes}
    assert sorted(changes) == ["change-20", "change-21", "change-23"]  # one id per part, each its own
    assert changes["change-21"].numbers == (21, 22)
    assert changes["change-21"].counterparts == (20, 21, 22)


def test_each_part_is_titled_by_its_own_first_member() -> None:
    result = report(
        [
            PR(30, MERGED, "[Main] Generalized fix for mxfp8 param gather", "main"),
            PR(31, OPEN, "[Dev] Generalized fix for mxfp8 param gather (cherry-pick #30)", "dev"),
        ]
    )
    assert cited(result) == {
        DELIVERED: [("Generalized fix for mxfp8 param gather", ("main #30",))],
        IN_PROGRESS: [("Generalized fix for mxfp8 param gather", ("dev #31",))],
    }


def test_a_group_all_in_one_section_is_one_change_citing_every_member() -> None:
    result = report([PR(40, MERGED, ROUTER, "main"), PR(41, MERGED, "[dev] " + ROUTER, "dev")])
    assert cited(result) == {DELIVERED: [(ROUTER, ("main #40", "dev #41"))], IN_PROGRESS: []}
    assert placed(result) == {40: (DELIVERED, [40, 41]), 41: (DELIVERED, [40, 41])}
    open_twins = report([PR(40, OPEN, ROUTER, "main"), PR(41, OPEN, "[dev] " + ROUTER, "dev")])
    assert cited(open_twins) == {DELIVERED: [], IN_PROGRESS: [(ROUTER, ("main #40", "dev #41"))]}


def test_an_open_pr_alone_with_a_merged_twin_is_never_delivered() -> None:
    # The smallest number is the open one: the parts are still placed by each PR's own state.
    result = report([PR(50, OPEN, ROUTER, "dev"), PR(51, MERGED, ROUTER, "main")])
    assert cited(result) == {DELIVERED: [(ROUTER, ("main #51",))], IN_PROGRESS: [(ROUTER, ("dev #50",))]}
    assert placed(result) == {50: (IN_PROGRESS, [50, 51]), 51: (DELIVERED, [50, 51])}


def test_a_closed_twin_is_neither_cited_nor_in_the_group() -> None:
    # Closed without merge: counted, never narrated, so no group names it either.
    result = report([PR(60, MERGED, ROUTER, "main"), PR(61, CLOSED, "[dev] " + ROUTER, "dev")])
    assert cited(result) == {DELIVERED: [(ROUTER, ("main #60",))], IN_PROGRESS: []}
    assert placed(result) == {60: (DELIVERED, [60])}


# --- cues in the body ---------------------------------------------------------------------------


def test_a_body_cue_with_a_shared_file_joins_across_sections() -> None:
    shared = "megatron/core/dist_checkpointing/loader.py"
    result = report(
        [
            PR(70, MERGED, "Speed up the checkpoint loader", "main", files=(shared,)),
            PR(71, OPEN, "Release loader fix", "dev", "This is a cherry-pick of #70", (shared, "megatron/x.py")),
        ]
    )
    assert cited(result) == {
        DELIVERED: [("Speed up the checkpoint loader", ("main #70",))],
        IN_PROGRESS: [("Release loader fix", ("dev #71",))],
    }
    assert placed(result) == {70: (DELIVERED, [70, 71]), 71: (IN_PROGRESS, [70, 71])}


def test_a_body_cue_alone_joins_nothing() -> None:
    result = report(
        [
            PR(80, MERGED, "Speed up the checkpoint loader", "main", files=("megatron/core/loader.py",)),
            PR(81, MERGED, TELEMETRY, "dev", "Mirror of #80; counterpart of #80", ("megatron/core/telemetry.py",)),
        ]
    )
    assert cited(result) == {
        DELIVERED: [("Speed up the checkpoint loader", ("main #80",)), (TELEMETRY, ("dev #81",))],
        IN_PROGRESS: [],
    }
    assert placed(result) == {80: (DELIVERED, [80]), 81: (DELIVERED, [81])}


# --- themes -------------------------------------------------------------------------------------

TAXONOMY = (
    ThemeConfig(
        id="moe",
        en="Mixture of Experts",
        zh="混合专家",
        paths=("megatron/core/transformer/moe/",),
        highlights=(HighlightConfig(id="routing", en="Routing", zh="路由", paths=("megatron/core/transformer/moe/",)),),
    ),
    ThemeConfig(
        id="telemetry",
        en="Telemetry",
        zh="遥测",
        keywords=("telemetry",),
    ),
)


def test_both_parts_of_a_group_are_described_alike() -> None:
    # Each section is grouped on its own, but a group's parts are described by its first member's title
    # and every member's labels and paths: the open dev twin's own title says "telemetry", yet it gets the
    # same theme (named by the group's title terms and the taxonomy's area) as its merged twin.
    moe = ("megatron/core/transformer/moe/router.py",)
    result = report(
        [
            PR(90, MERGED, ROUTER, "main", files=moe),
            PR(91, OPEN, "[dev] Router telemetry fix (cherry-pick #90)", "dev", files=moe),
        ],
        TAXONOMY,
    )
    themes = {
        section.id: [(theme.id, [c.id for c in theme.changes]) for theme in section.themes]
        for section in result.sections
    }
    # One change is named by the taxonomy's area and sub-area (the router's files are MoE routing).
    assert themes == {
        DELIVERED: [("mixture-of-experts", ["change-90"])],
        IN_PROGRESS: [("mixture-of-experts", ["change-91"])],
    }
    assert result.placement()[90]["highlight"] == result.placement()[91]["highlight"] == "mixture-of-experts/routing"


def test_two_themes_of_one_name_are_one() -> None:
    # Two changes with nothing in common but the taxonomy's area are two communities; named by the area
    # alone they would be two "Mixture of Experts" headings: they are one theme, each in its highlight.
    moe = "megatron/core/transformer/moe/"
    result = report(
        [
            PR(1, MERGED, "Speed up token permutation", files=(moe + "permute.py",)),
            PR(2, MERGED, "Fix the router", files=(moe + "router.py",)),
        ],
        TAXONOMY,
    )
    delivered = result.sections[0]
    assert [(theme.en, [c.id for c in theme.changes]) for theme in delivered.themes] == [
        ("Mixture of Experts", ["change-1", "change-2"])
    ]
    assert [h.en for h in delivered.themes[0].highlights] == ["Routing"]


# --- every narrated PR once, in its own section -------------------------------------------------


def random_month(rng: random.Random) -> list[PR]:
    titles = [ROUTER, "[dev] " + ROUTER, TELEMETRY, "cp: " + TELEMETRY, "Speed up the checkpoint loader", "Fix"]
    files = ["a.py", "b.py", "c.py"]
    numbers = rng.sample(range(1, 40), rng.randrange(1, 15))
    return [
        PR(
            number,
            rng.choice([MERGED, MERGED, OPEN, OPEN, CLOSED]),
            rng.choice(titles),
            rng.choice(["main", "dev", "core_r0.18.0"]),
            f"cherry-pick of #{rng.choice(numbers)}" if rng.random() < 0.4 else "",
            tuple(rng.sample(files, rng.randrange(1, 4))),
        )
        for number in numbers
    ]


@pytest.mark.parametrize("seed", range(50))
def test_every_narrated_pr_is_cited_once_in_its_own_section(seed: int) -> None:
    prs = random_month(random.Random(seed))
    result = report(prs)
    state = {pr.number: pr.state for pr in prs}
    changes: list[tuple[str, Change]] = [(s.id, c) for s in result.sections for c in s.changes]
    numbers = [n for _, change in changes for n in change.numbers]
    assert sorted(numbers) == sorted(n for n, s in state.items() if s != CLOSED)  # each narrated PR once
    for section, change in changes:
        assert {state[n] for n in change.numbers} == {MERGED if section == DELIVERED else OPEN}
    # Each PR's group is its change group among the narrated PRs, the same for every member.
    narrated = [pr for pr in prs if pr.state != CLOSED]
    expected = change_groups(
        [GroupInput(pr.number, pr.title, pr.body, pr.base, frozenset(pr.files)) for pr in narrated]
    )
    placement = result.placement()
    for group in expected:
        for number in group:
            assert placement[number]["group"] == list(group)


# --- untrusted titles ---------------------------------------------------------------------------


def test_a_title_with_a_long_whitespace_run_reports_quickly() -> None:
    # Issue 8: "a" + 100,000 spaces + "x" held every report of its month for 30 s.
    title = "a" + " " * 100_000 + "x"
    prs = [PR(n, MERGED if n % 2 else OPEN, title, "main" if n % 3 else "dev", "cp " * 30_000) for n in range(1, 21)]
    result = finishes(lambda: report(prs))
    assert [change.title for section in result.sections for change in section.changes] == [
        "A",
        "A",
    ]  # cut at MAX_TITLE, first letter up


# --- issue 32: what a highlight's line says, noise apart ---------------------------------------------------

TEMPLATE_BODY = (
    "# What does this PR do ?\n<!-- A brief description of the change -->\n"
    "Moves the router's load statistics to the GPU so that balancing no longer syncs with the host.\n\n"
    "## Contribution process\n- [ ] Pre-checks\n- [x] Tests added\n"
)


def test_a_highlight_says_the_description_summary_else_the_title() -> None:
    result = report(
        [
            PR(1, MERGED, ROUTER, body=TEMPLATE_BODY, files=("megatron/core/router.py",)),
            PR(2, MERGED, "Fix the MoE router capacity", body="<!-- template only -->\n- [ ] Pre-checks\n"),
        ]
    )
    changes = {change.numbers[0]: change for change in result.sections[0].changes}
    assert changes[1].text == (
        "Moves the router's load statistics to the GPU so that balancing no longer syncs with the host."
    )
    assert changes[2].text == changes[2].title == "Fix the MoE router capacity"


def test_a_change_reverted_in_the_window_is_one_reverted_line_not_delivered_work() -> None:
    result = report(
        [
            PR(10, MERGED, TELEMETRY, files=("megatron/telemetry.py",)),
            PR(11, MERGED, f'Revert "{TELEMETRY}"', files=("megatron/telemetry.py",)),
            PR(12, MERGED, ROUTER, files=("megatron/core/router.py",)),
        ]
    )
    delivered = result.sections[0]
    assert [change.numbers for change in delivered.changes] == [(12,)]
    assert [(undone.numbers, revert.numbers if revert else ()) for undone, revert in delivered.reverted] == [
        ((10,), (11,))
    ]
    # Still narrated: placed, in the Reverted line.
    placement = result.placement()
    assert placement[10]["theme"] == placement[11]["theme"] == "reverted" != placement[12]["theme"]


def test_upkeep_is_the_last_theme_and_leads_no_line() -> None:
    prs = [
        PR(20, MERGED, "Nightly sync main into dev (13_07_2026)", base="dev", files=("megatron/a.py", "megatron/b.py")),
        PR(21, MERGED, "Bump torch from 2.3 to 2.4", files=("requirements.txt",)),
        PR(22, MERGED, ROUTER, files=("megatron/core/router.py",)),
        PR(23, MERGED, "Fix the MoE router capacity", files=("megatron/core/router.py",)),
    ]
    themes = report(prs).sections[0].themes
    upkeep = themes[-1]
    assert (upkeep.id, upkeep.en, upkeep.zh) == (
        "build-ci-dependencies",
        "Build, CI and dependencies",
        "构建、CI 与依赖",
    )
    assert sorted(n for change in upkeep.changes for n in change.numbers) == [20, 21]
    assert [h.en for h in upkeep.highlights] == ["Dependency updates", "Branch syncs"]
    assert all(not h.shown for h in upkeep.highlights) and len(upkeep.folded) == 2
    assert 20 not in {n for theme in themes[:-1] for change in theme.changes for n in change.numbers}


def test_a_highlight_names_at_most_three_changes_the_rest_are_folded_once() -> None:
    prs = [
        PR(
            30 + i,
            MERGED,
            f"Tune the MoE router kernel variant {i}",
            files=tuple(f"megatron/core/r{j}.py" for j in range(i + 1)),
        )
        for i in range(7)
    ]
    themes = report(prs).sections[0].themes
    shown = [change for theme in themes for highlight in theme.highlights for change in highlight.shown]
    folded = [change for theme in themes for change in theme.folded]
    assert all(len(highlight.shown) <= 3 for theme in themes for highlight in theme.highlights)
    # The most significant first: the change with the most files of code.
    assert themes[0].highlights[0].shown[0].numbers == (36,)
    assert sorted(c.numbers[0] for c in [*shown, *folded]) == list(range(30, 37))
    assert all(list(t.folded) == sorted(t.folded, key=lambda c: c.numbers[0]) for t in themes)
