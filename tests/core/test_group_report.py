"""tracker/core/group_report.py: members' report documents merged into a group's, by hand-made documents."""

from __future__ import annotations

from typing import Any

from tracker.core.group_report import area, merge_group

STATS = {"opened": 0, "merged": 0, "closed_unmerged": 0, "active_at_cutoff": 0}
EXCLUDED = {"test_only": 0, "ci_only": 0, "test_ci_only": 0, "format_only": 0}


def document(
    repo: str, themes: list[tuple[str, list[list[int]]]], *, reverted: Any = (), **stats: int
) -> dict[str, Any]:
    """A member's JSON document: its delivered themes (name, each change's numbers), its numbers."""
    numbers = sorted({n for _, changes in themes for change in changes for n in change})
    numbers += sorted({n for line in reverted for n in (*line["numbers"], *line["by"])})
    return {
        "repo": repo,
        "cutoff": "2026-05-31",
        "timezone": "Asia/Shanghai",
        "final": True,
        "stats": {**STATS, **{k: v for k, v in stats.items() if k in STATS}},
        "excluded": {**EXCLUDED, **{k: v for k, v in stats.items() if k in EXCLUDED}},
        "pending_classification": stats.get("pending", 0),
        "coverage": {"complete": True},
        "pull_requests": [{"number": n, "title": f"{repo} change {n}", "base_ref": "main"} for n in numbers],
        "report": {
            "sections": [
                {
                    "id": "delivered",
                    "reverted": list(reverted),
                    "themes": [
                        {
                            "id": name.lower().replace(" ", "-"),
                            "en": name,
                            "zh": name,
                            "highlights": [
                                {"id": "h", "changes": [{"id": f"change-{c[0]}", "title": f"t{c[0]}", "group": c}]}
                                for c in changes
                            ],
                        }
                        for name, changes in themes
                    ],
                },
                {"id": "in_progress", "reverted": [], "themes": []},
            ]
        },
    }


def test_area_is_what_a_name_ends_with() -> None:
    assert area("GTP and CUDA graphs · Tensor Parallel") == "Tensor Parallel"
    assert area("Mixture of Experts") == "Mixture of Experts"


def test_themes_of_one_area_merge_and_name_their_repositories() -> None:
    a = document(
        "acme/a",
        [("Router · MoE", [[1], [2, 3]]), ("Other changes", [[4]]), ("Docs", [[5]])],
        opened=4,
        merged=3,
        test_only=1,
    )
    b = document("acme/b", [("Dispatcher · moe", [[7]]), ("Checkpointing", [[8], [9], [10]])], merged=2, pending=1)
    report = merge_group("g", "2026-05", "2026-05-31", [a, b])
    delivered = report.sections[0]
    # By size, "Other changes" last whatever its size; ties in the members' order.
    assert [(t.en, t.repos, t.changes) for t in delivered.themes] == [
        ("MoE", ("acme/a", "acme/b"), 3),
        ("Checkpointing", ("acme/b",), 3),
        ("Docs", ("acme/a",), 1),
        ("Other changes", ("acme/a",), 1),
    ]
    moe = delivered.themes[0]
    assert [(p.repo, p.en) for p in moe.parts] == [("acme/a", "Router · MoE"), ("acme/b", "Dispatcher · moe")]
    assert [c.repo for p in moe.parts for ch in p.changes for c in ch.cited] == ["acme/a"] * 3 + ["acme/b"]
    assert moe.pull_requests == 4
    totals = report.totals
    assert (totals.stats["opened"], totals.stats["merged"], totals.excluded["test_only"], totals.pending) == (
        4,
        5,
        1,
        1,
    )
    assert report.final and not report.hidden


def test_every_narrated_pr_is_cited_once_with_its_repository() -> None:
    reverted = [{"numbers": [20], "by": [21]}]
    a = document("acme/a", [("Docs", [[1], [2]])], reverted=reverted)
    b = document("acme/b", [("Docs", [[1, 2]])])  # the same numbers in another repository are other PRs
    report = merge_group("g", "2026-05", "2026-05-31", [a, b], hidden=True, waiting=["acme/c"])
    delivered = report.sections[0]
    cited = [(c.repo, c.number) for t in delivered.themes for p in t.parts for ch in p.changes for c in ch.cited]
    cited += [(c.repo, c.number) for line in delivered.reverted for c in (*line.cited, *line.by)]
    assert sorted(cited) == [("acme/a", 1), ("acme/a", 2), ("acme/a", 20), ("acme/a", 21), ("acme/b", 1), ("acme/b", 2)]
    assert delivered.reverted[0].title == "acme/a change 20"
    assert report.hidden and report.waiting == ("acme/c",)


def test_an_empty_group_has_no_rows_and_zero_totals() -> None:
    report = merge_group("g", "2026-05", "2026-05-15", [], hidden=True)
    assert report.members == () and not report.final
    assert set(report.totals.stats.values()) == {0}
    assert [section.themes for section in report.sections] == [(), ()]
