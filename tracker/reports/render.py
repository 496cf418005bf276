"""Rendering a report as Markdown (en-US, zh-CN), HTML, or JSON. Same report, same bytes.

PR titles and labels are untrusted: Markdown output neutralises them (`md` filter), HTML output
is autoescaped by Jinja2, and JSON is JSON.
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from tracker.core.report import Change, Day, Report, Section, Theme

LANGUAGES = ("en", "zh-CN")
FORMATS = ("md", "html", "json")
_LANGUAGE_ALIASES = {"en": "en", "en-us": "en", "zh": "zh-CN", "zh-cn": "zh-CN", "zh-hans": "zh-CN"}
# Characters that can start Markdown or HTML structure inside a line; newlines are removed first.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|!~&])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
MAX_TITLE = 200


class UnknownLanguage(ValueError):
    pass


def language(value: str | None) -> str:
    if value is None or value == "":
        return "en"
    try:
        return _LANGUAGE_ALIASES[value.lower()]
    except KeyError:
        raise UnknownLanguage(f"language {value!r} is not offered: use en or zh-CN") from None


def plain(text: str, limit: int | None = MAX_TITLE) -> str:
    """One line, no control characters, at most `limit` characters."""
    line = _CONTROL.sub(" ", text).strip()
    line = re.sub(r"\s+", " ", line)
    return line if limit is None or len(line) <= limit else line[: limit - 1].rstrip() + "…"


def markdown_text(text: str, limit: int | None = None) -> str:
    """Untrusted text made inert in Markdown: one line, every structural character escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", plain(text, limit))


@cache
def _environment(kind: str) -> Environment:
    environment = Environment(
        # tracker/reports/templates, shipped as package data: found in any install, editable or not.
        loader=PackageLoader("tracker.reports", "templates"),
        autoescape=kind == "html",
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters["md"] = markdown_text
    environment.filters["plain"] = plain
    return environment


# --- wording ----------------------------------------------------------------------------------


def month_name(report: Report) -> str:
    month = report.snapshot.window.month
    return f"{calendar.month_name[month.month]} {month.year}"


def english_day(day: Any) -> str:
    return f"{calendar.month_name[day.month]} {day.day}, {day.year}"


def title(report: Report, lang: str) -> str:
    snapshot = report.snapshot
    name = snapshot.repo.split("/", 1)[-1]
    window = snapshot.window
    if lang == "zh-CN":
        month = f"{window.month.year}年{window.month.month}月"
        mark = "最终版，截至" if window.final else "截至"
        return f"{name} 月度活动报告 — {month}（{mark}{window.cutoff.isoformat()}）"
    mark = "Final, through" if window.final else "through"
    return f"{name} Monthly Activity Report — {month_name(report)} ({mark} {english_day(window.cutoff)})"


def _names(themes: Sequence[Theme], lang: str, limit: int = 3) -> str:
    names = [theme.zh if lang == "zh-CN" else theme.en for theme in themes[:limit]]
    if lang == "zh-CN":
        return "、".join(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# (English lead, Chinese lead, English when empty, Chinese when empty) for each section.
_OVERVIEW = {
    "delivered": (
        "Delivered work centred on",
        "已交付成果集中在",
        "No substantive change was delivered in this window.",
        "本统计窗口内没有交付实质性变更。",
    ),
    "in_progress": (
        "Work in progress continues on",
        "进行中的工作主要涉及",
        "No substantive change is in progress at the cutoff.",
        "截止时没有进行中的实质性变更。",
    ),
}


def overview(report: Report, lang: str) -> str:
    """One sentence a section: its leading themes and how many changes in how many themes."""
    zh = lang == "zh-CN"
    parts = []
    for section in report.sections:
        lead_en, lead_zh, empty_en, empty_zh = _OVERVIEW[section.id]
        n, k = len(section.changes), len(section.themes)
        if not k:
            parts.append(empty_zh if zh else empty_en)
        elif zh:
            parts.append(f"{lead_zh}{_names(section.themes, lang)}（{k} 个方向共 {n} 项变更）。")
        else:
            counts = f"{n} {_plural(n, 'change')} in {k} {_plural(k, 'theme')}"
            parts.append(f"{lead_en} {_names(section.themes, lang)} ({counts}).")
    return ("" if zh else " ").join(parts)


def theme_summary(theme: Theme, section: Section, lang: str) -> str:
    n = len(theme.changes)
    if lang == "zh-CN":
        areas = "、".join(f"{h.zh}（{len(h.changes)} 项）" for h in theme.highlights)
        verb = "交付" if section.id == "delivered" else "推进中"
        return f"{verb} {n} 项变更，涉及{areas}。"
    areas_en = [f"{_mid_sentence(h.en)} ({len(h.changes)})" for h in theme.highlights]
    # Highlight names can hold commas themselves: the list is separated by semicolons.
    joined = areas_en[0] if len(areas_en) == 1 else "; ".join(areas_en[:-1]) + "; and " + areas_en[-1]
    verb = "delivered" if section.id == "delivered" else "in progress"
    return f"{n} {_plural(n, 'change')} {verb}, on {joined}."


def _mid_sentence(name: str) -> str:
    """ "Dynamic engine" reads "dynamic engine" inside a sentence; "MoE routing" and "KV cache" stay."""
    return name[:1].lower() + name[1:] if name[1:2].islower() else name


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def citations_markdown(change: Change) -> list[str]:
    """`[<base branch> #<n>](<url>)`. A branch name keeps its `_` (intraword, it emphasises nothing,
    and git refs cannot hold `[`); anything else structural is escaped."""
    return [
        f"[{markdown_text(c.base_ref or 'unknown').replace(chr(92) + '_', '_')} #{c.number}]({c.url})"
        for c in change.citations
    ]


def chart(days: Sequence[Day]) -> dict[str, Any]:
    """Bars of an inline SVG: opened, merged and closed without merge per day."""
    width, height, top, bottom, left = 720, 220, 12, 28, 28
    peak = max([1] + [max(d.opened, d.merged, d.closed) for d in days])
    slot = (width - left) / max(1, len(days))
    bar = max(1.0, slot / 4)
    scale = (height - top - bottom) / peak
    bars, labels = [], []
    for i, day in enumerate(days):
        x = left + i * slot + bar / 2
        for j, (kind, value) in enumerate((("opened", day.opened), ("merged", day.merged), ("closed", day.closed))):
            h = value * scale
            bars.append(
                {
                    "kind": kind,
                    "x": round(x + j * bar, 1),
                    "y": round(height - bottom - h, 1),
                    "w": round(bar, 1),
                    "h": round(h, 1),
                    "title": f"{day.day.isoformat()}: {value} {kind}",
                }
            )
        if day.day.day == 1 or day.day.day % 5 == 0:
            labels.append({"x": round(x + bar * 1.5, 1), "text": str(day.day.day)})
    ticks = [{"y": round(height - bottom - v * scale, 1), "text": str(v)} for v in sorted({0, peak // 2, peak})]
    return {"width": width, "height": height, "bars": bars, "labels": labels, "ticks": ticks, "base": height - bottom}


# --- output -------------------------------------------------------------------------------------


def render(report: Report, fmt: str, lang: str) -> str:
    if fmt == "json":
        return json.dumps(report_document(report), ensure_ascii=False, indent=2) + "\n"
    template = f"report.{lang}.md.j2" if fmt == "md" else "report.html.j2"
    context = {
        "report": report,
        "snapshot": report.snapshot,
        "window": report.snapshot.window,
        "lang": lang,
        "title": title(report, lang),
        "overview": overview(report, lang),
        "theme_summary": theme_summary,
        "citations": citations_markdown,
        "chart": chart(report.days),
        "other_lang": "en" if lang == "zh-CN" else "zh-CN",
        "themed": report.themed,
    }
    return _environment(fmt).get_template(template).render(**context)


def report_document(report: Report) -> dict[str, Any]:
    """The JSON snapshot, with each narrated PR's section, theme and group, and the report's outline."""
    document = report.snapshot.as_dict()
    placement = report.placement()
    for pr in document["pull_requests"]:
        place = placement.get(pr["number"])
        pr["section"] = place["section"] if place else None
        pr["theme"] = place["theme"] if place else None
        pr["highlight"] = place["highlight"] if place else None
        pr["group"] = place["group"] if place else None
    document["report"] = {
        "sections": [
            {
                "id": section.id,
                "themes": [
                    {
                        "id": theme.id,
                        "en": theme.en,
                        "zh": theme.zh,
                        "highlights": [
                            {
                                "id": highlight.id,
                                "en": highlight.en,
                                "zh": highlight.zh,
                                "changes": [
                                    {"id": change.id, "title": change.title, "group": list(change.numbers)}
                                    for change in highlight.changes
                                ],
                            }
                            for highlight in theme.highlights
                        ],
                    }
                    for theme in section.themes
                ],
            }
            for section in report.sections
        ],
        "daily": [
            {"day": d.day.isoformat(), "opened": d.opened, "merged": d.merged, "closed": d.closed} for d in report.days
        ],
    }
    return document
