"""The Since section in the documents (`tracker/reports/render.py`, the templates) and in the render cache's
key (`tracker/reports/cache.py`): Markdown in both languages, HTML and JSON; a document without `since` is
the one it was (the golden files of tests/reports/test_report.py say so byte for byte)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from tests.core.test_since import CODE, TESTS, Story, report_at, window
from tests.core.test_snapshot import local
from tracker.config import TrackerConfig
from tracker.core.report import Report
from tracker.core.since import Moved, Since, ThemeRef, since_of
from tracker.core.timeline import Fact, FactKind
from tracker.reports.cache import render_key
from tracker.reports.render import SUMMARY, Document, render, render_bytes, report_document, summary_document
from tracker.reports.request import MonthRequest

HOSTILE = "<img src=x onerror=alert(1)> @team #12 [x](javascript:alert(1))"
EARLY, LATE = date(2026, 9, 5), date(2026, 9, 12)


def month() -> tuple[Report, Report, Since]:
    """PR 7 turns test-only on Sep 10; PR 8 is merged and PR 9 opened after Sep 5; PR 10 (a hostile title)
    closed without merge after Sep 5; PR 11 closed before and reopened after."""
    stories = []
    seven = Story(7, "Fix MoE router load balancing", "megatron/core/transformer/moe/router.py")
    seven.facts = [Fact(FactKind.OPENED, local(9, 2)), Fact(FactKind.COMMIT, local(9, 10), "sha7-1")]
    seven.heads = [("sha7-0", local(9, 2), CODE), ("sha7-1", local(9, 10), TESTS)]
    stories.append(seven)
    eight = Story(8, "Speed up distributed checkpoint save", "megatron/core/dist_checkpointing/torch.py")
    eight.facts = [Fact(FactKind.OPENED, local(9, 3)), Fact(FactKind.MERGED, local(9, 8))]
    nine = Story(9, "Inference KV cache paging", "megatron/core/inference/contexts/dynamic_context.py")
    nine.facts = [Fact(FactKind.OPENED, local(9, 9))]
    ten = Story(10, HOSTILE, "megatron/core/hostile.py")
    ten.facts = [Fact(FactKind.OPENED, local(9, 1)), Fact(FactKind.CLOSED, local(9, 11))]
    eleven = Story(11, "Pipeline parallel schedule interleaving", "megatron/core/pipeline_parallel/schedules.py")
    eleven.facts = [
        Fact(FactKind.OPENED, local(9, 1)),
        Fact(FactKind.CLOSED, local(9, 2)),
        Fact(FactKind.REOPENED, local(9, 7)),
    ]
    for story in (eight, nine, ten, eleven):
        story.heads = [(f"sha{story.number}-0", story.facts[0].at, CODE)]
        stories.append(story)
    earlier, later = report_at(stories, window(EARLY)), report_at(stories, window(LATE))
    return earlier, later, since_of(earlier, later)


def test_the_json_document_gains_since_and_is_otherwise_the_same() -> None:
    _, later, since = month()
    plain_document = report_document(later)
    document = report_document(later, since)
    assert "since" not in plain_document
    assert {k: v for k, v in document.items() if k != "since"} == plain_document
    assert document["since"] == {
        "from": "2026-09-05",
        "newly_merged": [8],
        "newly_opened": [9],
        "closed_unmerged": [10],
        "reopened": [11],
        "reclassified": [{"number": 7, "from": "substantive", "to": "test_only"}],
        "moved": [],
    }
    assert json.loads(render_bytes(later, "json", "en", since=since))["since"] == document["since"]
    # The summary keeps it: a few numbers.
    summary = json.loads(render_bytes(later, "json", "en", SUMMARY, since=since))
    assert summary["since"] == document["since"] == summary_document(document)["since"]
    assert render_bytes(later, "json", "en") == render_bytes(later, "json", "en", since=None)


def section(markdown: str, heading: str) -> str:
    start = markdown.index(f"\n## {heading}\n")
    return markdown[start : markdown.index("\n## ", start + 1)]


def test_markdown_in_both_languages() -> None:
    _, later, since = month()
    english = render(later, "md", "en", since=since)
    # The other language's link keeps `since`; the rest is the report without it.
    assert "(2026-09.md?lang=zh-CN&cutoff=2026-09-12&since=2026-09-05)" in english
    without = english.replace(section(english, "Since September 5, 2026"), "").replace("&since=2026-09-05", "")
    assert without == render(later, "md", "en")
    part = section(english, "Since September 5, 2026")
    assert "From the end of 2026-09-05 to the end of 2026-09-12 (Asia/Shanghai):" in part
    assert "- **Newly merged** (1):\n  - Speed up distributed checkpoint save ([main #8](" in part
    assert "- **Re-classified** (1):\n  - Fix MoE router load balancing ([main #7](" in part
    assert "): substantive → test-only" in part
    for label in ("Newly opened** (1)", "Closed without merge** (1)", "Reopened** (1)"):
        assert label in part
    assert "Moved to another theme" not in part  # an empty list is not said
    # The order of the report: the overview, then the section, then Delivered.
    assert english.index("## Overview") < english.index("## Since") < english.index("## Delivered")
    chinese = render(later, "md", "zh-CN", since=since)
    part_zh = section(chinese, "自 2026年9月5日 以来的变化")
    assert "自 2026-09-05 结束至 2026-09-12 结束（Asia/Shanghai）：" in part_zh
    assert "- **新合并**（1）：\n  - “Speed up distributed checkpoint save”（[main #8](" in part_zh
    assert "：实质性 → 纯 UT" in part_zh
    for label in ("新开**（1）", "关闭未合并**（1）", "重新打开**（1）", "重新分类**（1）"):
        assert label in part_zh
    assert chinese.replace(part_zh, "").replace("&since=2026-09-05", "") == render(later, "md", "zh-CN")
    weekly = render(later, "md", "en", since=since, last_week=True)
    assert "\n## Since Last Week\n" in weekly
    assert "\n## 上周以来的变化\n" in render(later, "md", "zh-CN", since=since, last_week=True)


def test_a_hostile_title_is_inert_in_every_form() -> None:
    _, later, since = month()
    for lang in ("en", "zh-CN"):
        markdown = render(later, "md", lang, since=since)
        line = next(line for line in markdown.splitlines() if "/pull/10)" in line and "img" in line)
        assert "\\<img" in line and "@<!-- -->team" in line and "#<!-- -->12" in line and "\\[x\\]" in line
        page = render(later, "html", lang, since=since)
        assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_html_in_both_languages() -> None:
    _, later, since = month()
    page = render(later, "html", "en", since=since)
    block = page[page.index('<section aria-labelledby="since">') : page.index("</section>", page.index('id="since"'))]
    assert '<h2 id="since">Since September 5, 2026</h2>' in block
    assert '<li><a href="#since">Since September 5, 2026</a></li>' in page  # in the contents
    assert 'href="2026-09.html?lang=zh-CN&amp;cutoff=2026-09-12&amp;since=2026-09-05"' in page
    assert '<input type="hidden" name="since" value="2026-09-05">' in page  # the cutoff picker keeps it
    assert 'name="since"' not in render(later, "html", "en")
    assert '<h3 id="since-newly_merged">Newly merged <span class="count">1</span></h3>' in block
    assert re.search(
        r'Fix MoE router load balancing \(<a class="cite" href="[^"]+/pull/7">main #7</a>\): '
        r"substantive → test-only",
        block,
    )
    chinese = render(later, "html", "zh-CN", since=since)
    assert '<h2 id="since">自 2026年9月5日 以来的变化</h2>' in chinese
    assert "：实质性 → 纯 UT" in chinese
    assert 'id="since"' not in render(later, "html", "en")


def test_moved_prs_name_both_themes_in_their_language() -> None:
    _, later, _ = month()
    moved_from = ThemeRef("in_progress", "moe", "MoE <b>", "混合专家")
    moved_to = ThemeRef("in_progress", "inference", "Inference", "推理")
    since = Since(EARLY, LATE, moved=(Moved(9, moved_from, moved_to),))
    assert "Inference KV cache paging ([main #9](" in render(later, "md", "en", since=since)
    assert ": MoE \\<b\\> → Inference" in render(later, "md", "en", since=since)
    assert "：混合专家 → 推理" in render(later, "md", "zh-CN", since=since)
    assert ": MoE &lt;b&gt; → Inference</li>" in render(later, "html", "en", since=since)
    assert report_document(later, since)["since"]["moved"] == [
        {"number": 9, "from": moved_from.as_dict(), "to": moved_to.as_dict()}
    ]


def test_nothing_changed_is_said() -> None:
    _, later, _ = month()
    same = since_of(later, later)
    english = render(later, "md", "en", since=same)
    assert "From the end of 2026-09-12 to the end of 2026-09-12 (Asia/Shanghai), nothing the report" in english
    assert "报告统计和描述的内容没有变化。" in render(later, "md", "zh-CN", since=same)


@dataclass
class FakeState:
    def month_version(self, repo: str, month: str) -> tuple[int, str]:
        return 3, "generation"


@dataclass
class FakeServices:
    state: Any
    config: TrackerConfig


def test_the_render_key_holds_since_and_is_unchanged_without_it() -> None:
    services: Any = FakeServices(FakeState(), TrackerConfig())
    request = MonthRequest("NVIDIA/Megatron-LM", window(LATE))
    document = Document("md", "en")
    plain_key = render_key(services, request, document)
    assert render_key(services, request, document, None) == plain_key
    keys = {render_key(services, request, document, day) for day in (date(2026, 9, 1), EARLY, LATE)}
    assert len(keys) == 3 and plain_key not in keys
