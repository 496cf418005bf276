"""A group's report: the month of several repositories at a cutoff (`groups:` in TRACKER_CONFIG), loaded,
cached and rendered as Markdown (en, zh-CN), HTML and JSON.

A group's month is resolved in the group's time zone (`defaults.timezone`, else TRACKER_TIMEZONE); each member's
in its own, at the same cutoff (or its today, for a member where that day has not come yet). Which members a
reader sees is the caller's to say (`may_read`: tracker.web.groups asks tracker.web.access): a member the reader
may not read is never resolved, read or named, only counted as `hidden`.

Each member's part is what its own report's JSON document says, as its route serves it: its month's record at
the month's last day when it has one (unless `live`), else the values of that document a group reads
(tracker.reports.render.MEMBER_DOCUMENT: no PR's evidence, each PR's number, title and base branch only),
rendered and kept by the render cache (tracker.reports.cache.rendered_bytes; the warm job keeps the month to
date's of every repository in a group), where the group's other documents at that cutoff find it.
tracker.core.group_report merges them. The rendered group is kept in the same cache, keyed by each member's own
key (its render key, or its record's revision), the members shown and the code's fingerprint, so a member that
changes changes the group.
"""

from __future__ import annotations

import calendar
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any
from urllib.parse import quote

import orjson
from markupsafe import Markup, escape
from redis import Redis

from tracker.config import TrackerConfig
from tracker.core.group_report import (
    STATISTICS,
    Cited,
    GroupReport,
    GroupTheme,
    Member,
    Part,
    Reverted,
    merge_group,
)
from tracker.core.report import DELIVERED
from tracker.core.window import Month, Window, WindowError, month_window, resolve_window, today_in
from tracker.records.finalize import month_end, served_record
from tracker.records.store import GroupRecord, MonthRecord
from tracker.reports.cache import kept_or_made, render_key, rendered_bytes
from tracker.reports.collector import collector_paused
from tracker.reports.fingerprint import CODE
from tracker.reports.render import (
    MAX_TITLE,
    MEMBER_DOCUMENT,
    Document,
    code_span,
    english_day,
    json_bytes,
    markdown_text,
    plain,
    prose_markdown,
    pull_url,
    render_template_named,
    title_html,
)
from tracker.reports.request import MonthRequest, ReportServices

log = logging.getLogger(__name__)


class UnknownGroup(LookupError):
    """No group of that name in the configuration."""


@dataclass(frozen=True)
class GroupRequest:
    """A group's month at a cutoff, over the members a reader may see."""

    name: str  # as configured
    month: Month
    cutoff: date
    timezone: str  # the group's: the one its month and cutoff were resolved in
    members: tuple[MonthRequest, ...]  # shown, with deliveries, in the group's order
    hidden: bool  # some members are not shown to this reader
    waiting: tuple[str, ...]  # shown members with no delivery yet


def group_timezone(config: TrackerConfig) -> str:
    return config.defaults.timezone or config.fallback_timezone


def resolve_group(
    services: ReportServices,
    name: str,
    month: str,
    cutoff: str | None,
    may_read: Callable[[str, Window], bool],
    today: date | None = None,
) -> GroupRequest:
    """Group `name` (any case) for `month` (`YYYY-MM` or `current`) at `cutoff` (`YYYY-MM-DD` or None: the
    month's last day, or today), each member that `may_read(repo, its window)` allows resolved. Raises
    UnknownGroup, or WindowError for a bad month or cutoff."""
    config = services.config
    group = config.group_named(name)
    if group is None:
        raise UnknownGroup(name)
    zone = group_timezone(config)
    window = resolve_window(month, cutoff, zone, today if today is not None else today_in(zone))
    shown: list[MonthRequest] = []
    waiting: list[str] = []
    hidden = False
    for repo in config.members_of(group, services.state.repository_names()):
        own = window_of_member(config, repo, window, today)
        if own is None:
            continue  # the month has not begun where the repository is: nothing of it yet
        if not may_read(repo, own):
            hidden = True
            continue
        stored = services.state.repository_name(repo)
        if stored is None:
            waiting.append(repo)
        else:
            shown.append(MonthRequest(stored, own))
    return GroupRequest(group, window.month, window.cutoff, zone, tuple(shown), hidden, tuple(waiting))


def window_of_member(config: TrackerConfig, repo: str, window: Window, today: date | None = None) -> Window | None:
    """The member's window of the group's month at the group's cutoff, in the member's time zone, as its own
    route resolves that cutoff (the member's today when the cutoff is later there); None before its month."""
    zone = config.timezone_for(repo)
    its_today = today if today is not None else today_in(zone)
    cutoff = min(window.cutoff, its_today)
    if cutoff < window.month.first_day:
        return None
    try:
        return resolve_window(str(window.month), cutoff.isoformat(), zone, its_today)
    except WindowError:
        return None


# --- loading ------------------------------------------------------------------------------------------


def group_bytes(
    services: ReportServices, group: GroupRequest, document: Document, cache: Redis | None, *, live: bool = False
) -> bytes:
    """The group's report as `document` (format and language), from the cache when no member changed."""
    records = {} if live else {member: served_record(services.records, member) for member in group.members}

    def render() -> bytes:
        with collector_paused():
            return render_group(group_report(services, group, cache, records), document.fmt, document.lang)

    key = group_key(services, group, document, records) if cache is not None else None
    return kept_or_made(cache, key, render)


def group_record_for(
    services: ReportServices, group: GroupRequest, may_read: Callable[[str, Window], bool], now: float | None = None
) -> GroupRecord | None:
    """The group's record (tracker.records.groups) that answers `group` at its month's last day, once that day has
    ended in the group's time zone, for a reader who may read every member the record names (the admin, or any
    reader when none is private); None otherwise: the caller then merges what this reader may see. A record is
    the admin's view: to anyone else it would name a private member."""
    if group.hidden or group.cutoff != group.month.last_day:
        return None
    if month_end(str(group.month), group.timezone) > (time.time() if now is None else now):
        return None
    record = services.records.latest_group(group.name, str(group.month))
    if record is None:
        return None
    window = month_window(group.month, group.cutoff, group.timezone)
    for member in record.members:  # as configured when it was frozen: a member since removed is still named
        own = window_of_member(services.config, member["repo"], window)
        if own is None or not may_read(member["repo"], own):
            return None
    return record


def group_report(
    services: ReportServices,
    group: GroupRequest,
    cache: Redis | None,
    records: Mapping[MonthRequest, MonthRecord | None],
) -> GroupReport:
    """What the group reads of each member's report (its record's JSON document, else its `MEMBER_DOCUMENT` from
    the render cache, rendered and kept there when missing), merged."""
    documents = []
    for member in group.members:
        record = records.get(member)
        data = (
            record.document("json", "")
            if record is not None
            else rendered_bytes(services, member, MEMBER_DOCUMENT, cache=cache)
        )
        documents.append(orjson.loads(data))
    return merge_group(
        group.name,
        str(group.month),
        group.cutoff.isoformat(),
        documents,
        hidden=group.hidden,
        waiting=group.waiting,
    )


def group_key(
    services: ReportServices,
    group: GroupRequest,
    document: Document,
    records: Mapping[MonthRequest, MonthRecord | None],
) -> str:
    """The cache key of a rendered group: each member's own key (its record's revision, else its part's render
    key: its month's version, cutoff, the configuration), who is shown, and the document asked for."""
    parts = [CODE, "group", group.name, str(group.month), group.cutoff.isoformat(), group.timezone]
    parts += [document.fmt, document.lang if document.fmt != "json" else ""]
    parts += [f"hidden={group.hidden}", *(f"waiting={repo}" for repo in group.waiting)]
    for member in group.members:
        record = records.get(member)
        if record is not None:
            parts.append(f"record={member.repo}:{record.revision}:{record.content_hash}")
        else:
            parts.append(render_key(services, member, MEMBER_DOCUMENT))
    return "tracker:render:group:" + hashlib.sha256("|".join(parts).encode()).hexdigest()


# --- rendering ----------------------------------------------------------------------------------------

# The table's columns: a statistic or an exclusion, its header in English and Chinese.
COLUMNS = (
    ("opened", "Opened", "新开"),
    ("merged", "Merged", "合并"),
    ("closed_unmerged", "Closed without merge", "关闭未合并"),
    ("active_at_cutoff", "Active at cutoff", "截止时仍在进行"),
    ("test_only", "Test-only", "纯 UT"),
    ("ci_only", "CI-only", "纯 CI"),
    ("test_ci_only", "Test/CI-only", "UT/CI-only"),
    ("format_only", "Format-only", "纯格式化"),
)
SECTION_NAMES = {DELIVERED: ("Delivered", "已交付成果"), "in_progress": ("In Progress", "进行中的方向")}
EMPTY_SECTION = {
    DELIVERED: ("No substantive pull request was merged in this window.", "本统计窗口内没有合并实质性 PR。"),
    "in_progress": (
        "No substantive pull request is open at the cutoff with activity in this window.",
        "截止时没有在本窗口内有进展且仍在进行的实质性 PR。",
    ),
}


def render_group(report: GroupReport, fmt: str, lang: str) -> bytes:
    """The group report as `fmt` (json, md, html) in `lang` (the JSON is one document in every language)."""
    if fmt == "json":
        return json_bytes(group_document(report))
    zh = lang == "zh-CN"
    context = {
        "group": report,
        "zh": zh,
        "lang": "zh-CN" if zh else "en",
        "other_lang": "en" if zh else "zh-CN",
        "title": group_title(report, zh),
        "columns": [(key, chinese if zh else english) for key, english, chinese in COLUMNS],
        "rows": [_row(member, report.month, fmt, zh) for member in report.members],
        "totals": _values(report.totals),
        "themes_shown": any(section.themes for section in report.sections),
        "sections": [_section_view(section, report.month, fmt, zh) for section in report.sections],
        "pending": [(member.repo, member.pending) for member in report.members if member.pending],
        "incomplete": [member.repo for member in report.members if not member.coverage_complete],
        "zones": sorted({member.timezone for member in report.members}),
        "code": code_span,
        "md": markdown_text,
        "first_day": Month.parse(report.month).first_day.isoformat(),
        "last_day": Month.parse(report.month).last_day.isoformat(),
    }
    template = f"group.{'zh-CN' if zh else 'en'}.md.j2" if fmt == "md" else "group.html.j2"
    return render_template_named(fmt, template, context).encode("utf-8")


def group_title(report: GroupReport, zh: bool) -> str:
    month, cutoff = Month.parse(report.month), date.fromisoformat(report.cutoff)
    if zh:
        mark = "最终版，截至" if report.final else "截至"
        return f"{report.name} 仓库组月度活动报告 — {month.year}年{month.month}月（{mark}{report.cutoff}）"
    mark = "Final, through" if report.final else "through"
    name = f"{calendar.month_name[month.month]} {month.year}"
    return f"{report.name} Group Monthly Activity Report — {name} ({mark} {english_day(cutoff)})"


def member_path(repo: str, month: str, fmt: str) -> str:
    """A member's report relative to the group's (`/reports/groups/<name>/<month>.<fmt>`)."""
    owner, _, name = repo.partition("/")
    return f"../../{quote(owner, safe='')}/{quote(name, safe='')}/{month}.{fmt}"


def _values(member: Member) -> list[int]:
    return [member.stats[key] if key in STATISTICS else member.excluded[key] for key, _, _ in COLUMNS]


def _row(member: Member, month: str, fmt: str, zh: bool) -> dict[str, Any]:
    query = f"?lang={'zh-CN' if zh else 'en'}&cutoff={member.cutoff}"
    return {"repo": member.repo, "link": member_path(member.repo, month, fmt) + query, "values": _values(member)}


def _section_view(section: Any, month: str, fmt: str, zh: bool) -> dict[str, Any]:
    return {
        "id": section.id,
        "name": SECTION_NAMES[section.id][zh],
        "empty": EMPTY_SECTION[section.id][zh],
        "themes": [_theme_view(theme, section.id, fmt, zh) for theme in section.themes],
        "reverted": _reverted(section.reverted, fmt, zh) if section.reverted else "",
    }


def _theme_view(theme: GroupTheme, section: str, fmt: str, zh: bool) -> dict[str, Any]:
    repos = theme.repos
    n = theme.changes
    if zh:
        summary = f"{n} 项变更，涉及 {len(repos)} 个仓库：{'、'.join(repos)}。"
    else:
        counted = f"{n} {'change' if n == 1 else 'changes'}"
        spans = f"{len(repos)} {'repository' if len(repos) == 1 else 'repositories'}"
        summary = f"{counted} in {spans}: {', '.join(repos)}."
    body = _parts_markdown(theme.parts, theme, zh) if fmt == "md" else _parts_html(theme.parts, theme, zh)
    return {"id": theme.id, "name": theme.zh if zh else theme.en, "summary": summary, "count": n, "body": body}


def _cited_markdown(cited: Sequence[Cited]) -> list[str]:
    """`[owner/repo#N](url)` for each PR, the repository's name escaped like any text."""
    return [f"[{markdown_text(c.repo)}#{c.number}]({pull_url(c.repo, c.number)})" for c in cited]


def _cited_html(cited: Sequence[Cited]) -> list[str]:
    return [
        f'<a class="cite" href="{escape(pull_url(c.repo, c.number))}">{escape(plain(c.repo, None))}#{c.number}</a>'
        for c in cited
    ]


def _part_name(part: Part, theme: GroupTheme, zh: bool) -> str:
    """The member theme's own name when it says more than the group theme's (its distinctive terms)."""
    own = part.zh if zh else part.en
    return own if own.casefold() != (theme.zh if zh else theme.en).casefold() else ""


def _parts_markdown(parts: Sequence[Part], theme: GroupTheme, zh: bool) -> str:
    """A theme's list: a line a part (its repository, its own name, how many changes), then a line a change
    (its cleaned title, then its citations). Written here rather than in the template, as a big month's lines
    are (`render.bullet_markdown`)."""
    lines = []
    for part in parts:
        name, n = _part_name(part, theme, zh), len(part.changes)
        named = f" · {markdown_text(name)}" if name else ""
        if zh:
            lines.append(f"- {code_span(part.repo)}{named}（{n} 项变更）：")
        else:
            lines.append(f"- {code_span(part.repo)}{named} ({n} {'change' if n == 1 else 'changes'}):")
        for change in part.changes:
            cited = _cited_markdown(change.cited)
            if zh:
                lines.append(f"  - “{markdown_text(change.title, MAX_TITLE)}”（{'、'.join(cited)}）")
            else:
                lines.append(f"  - {prose_markdown(plain(change.title, MAX_TITLE))} ({', '.join(cited)})")
    return "\n".join(lines)


def _parts_html(parts: Sequence[Part], theme: GroupTheme, zh: bool) -> Markup:
    """`_parts_markdown` in HTML, every untrusted text one clean line, escaped."""
    items = []
    for part in parts:
        name, n = _part_name(part, theme, zh), len(part.changes)
        named = f" · {escape(plain(name, None))}" if name else ""
        count = f"{n} 项变更" if zh else f"{n} {'change' if n == 1 else 'changes'}"
        changes = []
        for change in part.changes:
            title = title_html(change.title)
            cited = ("、" if zh else ", ").join(_cited_html(change.cited))
            changes.append(f"<li>“{title}”（{cited}）</li>" if zh else f"<li>{title} ({cited})</li>")
        items.append(
            f'<li class="part"><code>{escape(plain(part.repo, None))}</code>{named} <span class="count">{count}</span>'
            f"<ul>{''.join(changes)}</ul></li>"
        )
    return Markup("\n".join(items))


def _reverted(reverted: Sequence[Reverted], fmt: str, zh: bool) -> str | Markup:
    """A section's reverted changes of every member, each with the revert that undid it: one line."""
    between = "、" if zh else ", "
    parts = []
    for line in reverted:
        if fmt == "md":
            title, cited, by = (
                markdown_text(line.title, MAX_TITLE),
                between.join(_cited_markdown(line.cited)),
                between.join(_cited_markdown(line.by)),
            )
        else:
            title = title_html(line.title)
            cited, by = between.join(_cited_html(line.cited)), between.join(_cited_html(line.by))
        if zh:
            parts.append(f"“{title}”（{cited}）{f'，已由 {by} 回退' if by else ''}")
        else:
            parts.append(f"{title} ({cited}){f', reverted by {by}' if by else ''}")
    if fmt == "md":
        if zh:
            return f"**本窗口内已回退**（不计为交付）：{'；'.join(parts)}。"
        return f"**Reverted within the window** (not delivered work): {'; '.join(parts)}."
    if zh:
        return Markup(f"<strong>本窗口内已回退</strong>（不计为交付）：{'；'.join(parts)}。")
    return Markup(f"<strong>Reverted within the window</strong> (not delivered work): {'; '.join(parts)}.")


def group_document(report: GroupReport) -> dict[str, Any]:
    """The group's JSON: its members' rows and totals, then its sections' themes, each PR with its repository.
    Names and titles are cleaned as the repositories' outlines are (`plain`, uncut); links are built here."""

    def prs(cited: Sequence[Cited]) -> list[dict[str, Any]]:
        return [
            {"repo": c.repo, "number": c.number, "base_ref": c.base_ref, "url": pull_url(c.repo, c.number)}
            for c in cited
        ]

    def row(member: Member) -> dict[str, Any]:
        return {
            "stats": dict(member.stats),
            "excluded": dict(member.excluded),
            "pending_classification": member.pending,
        }

    return {
        "group": report.name,
        "month": report.month,
        "cutoff": report.cutoff,
        "final": report.final,
        # Some members are not shown to this reader (private): the rows, totals and themes leave them out.
        "hidden_members": report.hidden,
        "waiting": list(report.waiting),
        "members": [
            {
                "repo": member.repo,
                "cutoff": member.cutoff,
                "timezone": member.timezone,
                "final": member.final,
                **row(member),
                "coverage_complete": member.coverage_complete,
            }
            for member in report.members
        ],
        "totals": row(report.totals),
        "sections": [
            {
                "id": section.id,
                "themes": [
                    {
                        "id": theme.id,
                        "en": plain(theme.en, None),
                        "zh": plain(theme.zh, None),
                        "repos": list(theme.repos),
                        "changes": theme.changes,
                        "pull_requests": theme.pull_requests,
                        "parts": [
                            {
                                "repo": part.repo,
                                "theme": part.theme,
                                "en": plain(part.en, None),
                                "zh": plain(part.zh, None),
                                "changes": [
                                    {"id": change.id, "title": plain(change.title, None), "prs": prs(change.cited)}
                                    for change in part.changes
                                ],
                            }
                            for part in theme.parts
                        ],
                    }
                    for theme in section.themes
                ],
                "reverted": [
                    {"repo": line.repo, "title": plain(line.title, None), "prs": prs(line.cited), "by": prs(line.by)}
                    for line in section.reverted
                ],
            }
            for section in report.sections
        ],
    }
