"""Noise among delivered changes: reverts within the window, and maintenance (tracker.core.noise).

Titles are real Megatron-LM ones where the rule was found there, and the shapes git, GitHub's revert
button, Dependabot, Renovate and release tools write elsewhere.
"""

from __future__ import annotations

import pytest

from tests.support.watchdog import finishes
from tracker.core.groups import MAX_TITLE
from tracker.core.noise import (
    BUILD,
    DEPENDENCIES,
    MAINTENANCE_THEME,
    SYNC,
    VERSION,
    NoiseInput,
    is_maintenance,
    maintenance_kind,
    reversions,
)


def item(number: int, title: str, base: str = "main", body: str = "", at: int | None = None) -> NoiseInput:
    return NoiseInput(number, title, body, base, at if at is not None else number)


# --- reverts -----------------------------------------------------------------------------------------


def test_a_github_revert_and_its_original_are_not_delivered() -> None:
    items = [
        item(5170, "Remove checkpoint-time GPU cache reclaim workaround"),
        item(5200, "Add MoE router kernel"),
        item(5366, 'Revert "Remove checkpoint-time GPU cache reclaim workaround (#5170)"'),
    ]
    found = reversions(items)
    assert found.pairs == ((5366, 5170),)
    assert found.hidden == {5170, 5366}


@pytest.mark.parametrize(
    "revert",
    [
        'Revert "Fix the router load balance"',  # git, without the number
        "Revert “Fix the router load balance”",  # curly quotes
        "revert: fix the router load balance",  # conventional commits
        "revert(moe): Fix the router load balance",
        "[dev] Revert: Fix the router load balance",
        "Revert Fix the router load balance",  # no quotes, the whole title
    ],
)
def test_a_revert_is_matched_by_the_title_it_quotes(revert: str) -> None:
    items = [item(1, "fix(moe): Fix the router load balance"), item(2, revert)]
    assert reversions(items).pairs == ((2, 1),)


def test_a_revert_is_matched_by_the_number_its_body_names() -> None:
    items = [
        item(1, "Add the fused attention kernel"),
        item(2, "Revert the fused attention default", body="Reverts NVIDIA/Megatron-LM#1\n\nIt broke CI."),
        item(3, "Add another thing"),
        item(4, "Revert x", body="This reverts #3."),
    ]
    assert reversions(items, "NVIDIA/Megatron-LM").pairs == ((2, 1), (4, 3))
    # The same number in another repository is another PR: no title matches either.
    assert reversions(items[:2], "other/repo").pairs == ()


def test_a_number_in_the_middle_of_a_body_sentence_is_not_a_revert() -> None:
    items = [item(1, "Add the fused attention kernel"), item(2, "Revert the default", body="This partly reverts #1.")]
    assert reversions(items).pairs == ()


def test_a_title_that_only_mentions_reverting_is_ordinary_work() -> None:
    items = [
        item(1, "Add the default for the optimizer"),
        item(2, "Revert the default of the optimizer"),  # says revert, names no PR of the window
        item(3, "Revert unintended code owner change"),
        item(4, "ci: revert bad uv.lock bump and label future bumps"),
        item(5, "[Dev] Fix full CUDA graph capture reverted by pull main"),
    ]
    assert reversions(items) == reversions([])


def test_a_revert_whose_original_is_outside_the_window_stays_delivered() -> None:
    items = [
        item(3736, "revert of #2658"),
        item(6292, 'Revert "Add Agent Compose package and runtime interface skeleton"'),
    ]
    assert reversions(items).hidden == frozenset()


def test_a_revert_of_a_revert_relands_the_original() -> None:
    items = [
        item(1, "Add Python-side guardrail for HybridEP"),
        item(2, 'Revert "Add Python-side guardrail for HybridEP (#1)"'),
        item(3, 'Revert "Revert "Add Python-side guardrail for HybridEP (#1)" (#2)"'),
    ]
    found = reversions(items)
    assert found.pairs == ((2, 1), (3, 2))
    assert found.hidden == {2, 3}  # the change is delivered once, by #1; both reverts are noise
    # A third revert takes it out again: nothing of the chain is delivered.
    third = item(4, 'Revert "Revert "Revert "Add Python-side guardrail for HybridEP"""')
    assert reversions([*items, third]).hidden == {1, 2, 3, 4}


def test_a_revert_of_a_revert_whose_original_is_outside_cancels_out() -> None:
    items = [item(2, 'Revert "Old change of last month (#1)"'), item(3, 'Revert "Revert "Old change of last month""')]
    assert reversions(items).hidden == {2, 3}


def test_twins_reverted_on_each_branch_pair_within_their_branch() -> None:
    items = [
        item(10, "[dev] Fix mfsdp unwrap stuck at MegatronFSDP", "dev"),
        item(11, "Fix mfsdp unwrap stuck at MegatronFSDP", "main"),
        item(20, 'Revert "[dev] Fix mfsdp unwrap stuck at MegatronFSDP (#10)"', "dev"),
        item(21, 'Revert "Fix mfsdp unwrap stuck at MegatronFSDP"', "main"),
    ]
    found = reversions(items)
    assert found.pairs == ((20, 10), (21, 11))
    assert found.hidden == {10, 11, 20, 21}
    # Reverted on main only: the dev twin is still delivered.
    assert reversions(items[:2] + items[3:]).hidden == {11, 21}


def test_a_revert_never_pairs_with_a_change_merged_after_it() -> None:
    items = [item(2, 'Revert "Fix the router load balance"', at=1), item(1, "Fix the router load balance", at=2)]
    assert reversions(items).pairs == ()


def test_a_relanded_change_with_the_same_title_is_delivered() -> None:
    items = [
        item(1, "Replace rampup batch size scheduler with custom step schedules"),
        item(2, "revert: replace rampup batch size scheduler with custom step schedules (#1)"),
        item(3, "Replace rampup batch size scheduler with custom step schedules"),
    ]
    assert reversions(items).hidden == {1, 2}


def test_a_title_cut_with_an_ellipsis_matches_by_its_beginning() -> None:
    original = "Add conditions_embeddings argument to TransformerBlock, TransformerLayer for DiT"
    items = [item(1, original), item(2, 'Revert "Add conditions_embeddings argument to TransformerBlock, Trans…')]
    assert reversions(items).pairs == ((2, 1),)
    # Too short a beginning names nothing.
    assert reversions([item(1, original), item(2, 'Revert "Add cond…')]).pairs == ()


# --- maintenance ---------------------------------------------------------------------------------------

LOCK = ["pyproject.toml", "uv.lock"]


@pytest.mark.parametrize(
    ("title", "paths", "kind"),
    [
        ("chore: nightly sync main into dev (13_07_2026)", ["megatron/a.py"] * 3, SYNC),
        ("Sync main into dev", ["megatron/a.py"], SYNC),
        ("Merge branch 'main' into dev", ["megatron/a.py"], SYNC),
        ("Sync with upstream", ["src/a.py"], SYNC),
        ("Bump version to 0.18.0", ["megatron/core/package_info.py"], VERSION),
        ("Update MINOR version to 19", ["megatron/core/package_info.py"], VERSION),
        ("Release v1.2.3", ["src/a.py"], VERSION),
        ("chore(release): 1.2.3", ["CHANGELOG.md", "src/a.py"], VERSION),
        ("chore(main): release 2.0.0", ["src/a.py"], VERSION),
        ("Update version.py", ["pkg/version.py"], VERSION),
        ("Bump torch from 2.3 to 2.4", ["requirements.txt"], DEPENDENCIES),
        ("Bump actions/checkout from 3 to 4 in /.github/workflows", ["Dockerfile"], DEPENDENCIES),
        ("Update dependency eslint to v9 [SECURITY]", ["package.json", "yarn.lock"], DEPENDENCIES),
        ("chore(deps): update all non-major dependencies", ["package.json"], DEPENDENCIES),
        ("build: bump TransformerEngine to release_v2.14", LOCK, DEPENDENCIES),
        ("bump NVRx", LOCK, DEPENDENCIES),
        ("Bump eopt version", ["megatron/core/optimizer/muon.py", *LOCK], DEPENDENCIES),
        ("chore: Bump TE to latest 2.14", LOCK, DEPENDENCIES),
        ("build: upgrade mamba-ssm to 2.3.2.post1, causal-conv1d to 1.6.2.post1", ["uv.lock"], DEPENDENCIES),
        ("build: widen flashinfer-python pin to <0.7.0", LOCK, DEPENDENCIES),
        ("Update DEEPEP_COMMIT in Dockerfile.ci.dev to commit de0dd1…", ["docker/Dockerfile.ci.dev"], DEPENDENCIES),
        ("chore(beep boop 🤖): Bump `uv.lock` (core_r0.17.0) (2026-05-04)", LOCK, DEPENDENCIES),
        ("chore: update pytest version to 9.1.1 in pyproject.toml and uv.lock", LOCK, DEPENDENCIES),
        ("Add zstandard package to Docker LTS requirements", ["docker/lts/requirements.txt", *LOCK], DEPENDENCIES),
        ("Refresh the lock", ["uv.lock", ".github/workflows/ci.yml"], DEPENDENCIES),  # files alone
        ("Point the submodule at the fix", [".gitmodules"], DEPENDENCIES),
        ("fix(ci): replace setup-python with apt-get", ["megatron/a.py"], BUILD),
        ("build: add dynamic git-versioning", ["megatron/core/package_info.py"], BUILD),
        ("Fix Dockerfile warnings", ["docker/Dockerfile.ci.dev", "docker/Dockerfile.lts"], BUILD),
    ],
)
def test_maintenance(title: str, paths: list[str], kind: str) -> None:
    assert maintenance_kind(title, paths) == kind
    assert is_maintenance(title, paths)


@pytest.mark.parametrize(
    ("title", "paths"),
    [
        ("Bump FLA to 0.5.1 and integrate GDN2 kernels", ["megatron/core/ssm/gdn.py", *LOCK]),
        ("Bump version of the API", ["megatron/core/api.py", "pyproject.toml"]),
        ("Update dependency documentation", ["docs/deps.md", "requirements.txt", "src/a.py"]),
        ("Update docs", ["README.md"]),
        ("Update MoE router to v2", ["megatron/core/moe/router.py"]),  # no file where versions are declared
        ("Add manual sync workflow from main to dev", ["tools/sync.py"]),
        ("Fix Slack sync for users with email privacy", ["tools/slack.py"]),
        ("Merge MoE layers into TransformerBlock", ["megatron/core/block.py"]),
        ("Release MTP assertion when EP overlap with PP=1", ["megatron/core/mtp.py"]),
        ("Release testing/0170", ["megatron/core/a.py"]),
        ("Adding NVRx as a dependency and keeping the current code base", ["megatron/a.py", *LOCK]),
        ("Add a console script", ["pyproject.toml"]),  # a manifest alone can be a real change
        ("Upgrade GitHub Actions for Node 24 compatibility", ["megatron/a.py", "pyproject.toml"]),
        ("Avoid unnecessary MoE router host synchronization", ["megatron/core/router.py"]),
    ],
)
def test_real_work_is_not_maintenance(title: str, paths: list[str]) -> None:
    assert maintenance_kind(title, paths) is None


def test_dependency_bots_and_labels() -> None:
    assert maintenance_kind("Update the router", ["src/router.py"], "dependabot[bot]") == DEPENDENCIES
    assert maintenance_kind("Update the router", ["src/router.py"], "renovate[bot]") == DEPENDENCIES
    # Another bot writes ordinary work: a coding agent, a cherry-pick bot.
    assert maintenance_kind("Add the MoE router", ["src/router.py"], "copilot-swe-agent[bot]") is None
    assert maintenance_kind("Add the MoE router", ["src/router.py"], "github-actions[bot]") is None
    # A dependency label counts for a change of manifests only, not beside code.
    assert maintenance_kind("Require numpy 2", ["pyproject.toml"], labels=["dependencies"]) == DEPENDENCIES
    assert maintenance_kind("Require numpy 2", ["pyproject.toml"]) is None
    assert (
        maintenance_kind("Use numpy 2 in the loader", ["pyproject.toml", "src/a.py"], labels=["dependencies"]) is None
    )


def test_the_theme_names() -> None:
    assert MAINTENANCE_THEME == ("build-ci-dependencies", "Build, CI and dependencies", "构建、CI 与依赖")


# --- hostile input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "title",
    [
        "x" * 65_536,
        'Revert "' * 10_000 + "Fix" + '"' * 10_000,
        "revert: " * 10_000 + "Fix",
        "Bump " + "a " * 65_536 + "to 1.2",
        "sync " * 20_000 + "main into dev",
        "(" * 65_536,
        "Revert “" + "…" * 65_536,
    ],
    ids=["long", "nested-quotes", "nested-conventional", "long-bump", "syncs", "parentheses", "ellipses"],
)
def test_hostile_titles_finish(title: str) -> None:
    items = [item(n, title) for n in range(1, 201)]
    body = "Reverts #1\n" * 5_000 + "Reverts owner/" + "x" * 60_000
    items.append(item(500, title, body=body))
    finishes(lambda: (reversions(items), maintenance_kind(title, ["uv.lock"] * 1000)))


def test_a_nested_revert_is_read_up_to_max_title() -> None:
    inner = "Fix the router load balance"
    nested = 'Revert "' * 5 + inner + '"' * 5
    items = [item(1, 'Revert "' * 4 + inner + '"' * 4), item(2, nested)]
    assert reversions(items).pairs == ((2, 1),)
    too_long = 'Revert "' * (MAX_TITLE // 8 + 1) + inner
    assert reversions([item(1, inner), item(2, too_long)]).pairs == ()


def test_many_reverts_of_one_title_finish() -> None:
    items = [item(n, "Fix the router" if n % 2 else 'Revert "Fix the router"') for n in range(1, 3001)]
    found = None

    def run() -> None:
        nonlocal found
        found = reversions(items)

    finishes(run)
    assert found is not None and len(found.pairs) == 1500  # each revert undoes the one just before it
    assert all(revert == reverted + 1 for revert, reverted in found.pairs)
