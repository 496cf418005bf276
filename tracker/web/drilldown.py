"""Drill-down pages: the pull requests behind each number of a report, with their evidence (issue 34).

- `GET /api/v1/repos/<o>/<r>/months/<M>/prs?stat=<name>&cutoff=YYYY-MM-DD` and the same document at
  `/reports/<o>/<r>/<M>/prs.json`: `{"repo", "month", "stat", "cutoff", "count", "prs": [{"number", "title",
  "base_ref", "evidence"}]}` (tracker.core.drilldown says what each number counts and which evidence each
  PR carries);
- `/reports/<o>/<r>/<M>/prs.html?stat=<name>&lang=en|zh-CN&cutoff=…`: the page the report's stat cards,
  exclusion counts and theme counts link to (relatively: `2026-09/prs.html?…` from `2026-09.html`);
- `?theme=<theme id>&section=delivered|in_progress` in place of `stat`: a theme's changes and their PRs;
  its `count` is the theme's count in the report, its changes.

A page is answered as the report it came from is: the same access rules (a private repository answers
the admin and the holder of a link to the month, whose token the page's own links carry), the same 400 and
404 answers, and for a finalised month at its last day the month's record (`?live=1`: the ledger now), so
that the count equals the number that linked to it. Otherwise a statistic or an exclusion reads the
month's digest kept in Redis (tracker.reports.digests.cached_fold, with each PR's evidence for an
exclusion), or the database when Redis is away; a theme reads the report's JSON document, which names each
theme's changes (tracker.reports.cache.rendered_bytes: from the render cache, else rendered and kept there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson
from flask import Blueprint, Response, render_template, request
from markupsafe import Markup, escape

from tracker.core.drilldown import (
    EXCLUSIONS,
    PENDING,
    SECTIONS,
    SELECTIONS,
    DrillDown,
    MonthView,
    Row,
    UnknownSelection,
    UnknownTheme,
    drill_stat,
    drill_theme,
    view_of_document,
    view_of_snapshot,
)
from tracker.core.report import DELIVERED, IN_PROGRESS
from tracker.core.snapshot import build_snapshot
from tracker.core.window import WindowError
from tracker.records.finalize import served_record
from tracker.reports.cache import rendered_bytes
from tracker.reports.collector import collector_paused
from tracker.reports.digests import cached_fold
from tracker.reports.loading import UnknownRepository, resolve
from tracker.reports.render import (
    MAX_TITLE,
    Document,
    UnknownLanguage,
    github_url,
    json_bytes,
    language,
    plain,
    pull_url,
)
from tracker.reports.request import MonthRequest
from tracker.services import Services
from tracker.web.access import NO_STORE, TOKEN_PARAMETER, AccessDenied, Grant, NotShown, authorize
from tracker.web.api import error_answer, not_found_answer
from tracker.web.context import asked_repository, clipped, query_argument
from tracker.web.context import services as current_services

blueprint = Blueprint("drilldown", __name__)

_JSON = "application/json"
_HTML = "text/html; charset=utf-8"


@blueprint.get("/api/v1/repos/<owner>/<repo>/months/<month>/prs")
def month_prs(owner: str, repo: str, month: str) -> Any:
    """The PRs behind one number of the month's report, with their evidence (JSON)."""
    return _answer(owner, repo, month, "json", "en")


@blueprint.get("/reports/<owner>/<repo>/<month>/prs.<fmt>")
def report_prs(owner: str, repo: str, month: str, fmt: str) -> Any:
    """The drill-down page (`prs.html`) or its JSON (`prs.json`, the API's document)."""
    if fmt not in ("html", "json"):
        return {"error": f"prs.{clipped(fmt)}: ask for prs.html or prs.json"}, 404
    try:
        lang = language(query_argument("lang"))
    except UnknownLanguage as exc:
        return error_answer(fmt, 400, str(exc))
    return _answer(owner, repo, month, fmt, lang)


@dataclass(frozen=True)
class Selection:
    """What a request asks to open: a statistic or count (`stat`), or a theme of a section."""

    stat: str | None
    theme: str | None
    section: str | None

    def query(self) -> dict[str, str]:
        """The selection as the query of a link."""
        if self.stat is not None:
            return {"stat": self.stat}
        return {"theme": self.theme or "", "section": self.section or ""}


def _selection() -> Selection:
    """The selection the query names, checked before the month is read. Raises UnknownSelection with what
    to ask instead."""
    stat, theme, section = query_argument("stat"), query_argument("theme"), query_argument("section")
    if (stat is None) == (theme is None):
        raise UnknownSelection(
            f"ask for one number of the report: stat=<{'|'.join(SELECTIONS)}>, "
            f"or theme=<theme id>&section=<{'|'.join(SECTIONS)}>"
        )
    if stat is not None and stat not in SELECTIONS:
        raise UnknownSelection(f"stat={stat!r} is not a number of the report: use one of {', '.join(SELECTIONS)}")
    if theme is not None and section not in SECTIONS:
        raise UnknownSelection(f"theme= needs section={' or section='.join(SECTIONS)} (a theme id is its section's)")
    return Selection(stat, theme, section)


def _answer(owner: str, repo: str, month: str, fmt: str, lang: str) -> Any:
    name = asked_repository(owner, repo)
    with collector_paused():  # as a report's: a big month's read makes a few hundred thousand objects
        return _answered(current_services(), name, month, fmt, lang)


def _answered(services: Services, name: str, month: str, fmt: str, lang: str) -> Any:
    try:
        grant, wanted, selection, view = load(services, name, month)
    except AccessDenied as exc:
        return error_answer(fmt, exc.status, exc.message, exc.headers) if fmt == "html" else exc.answer()
    except NotShown:
        return not_found_answer(fmt, name, None)
    except UnknownRepository as exc:
        return not_found_answer(fmt, name, exc)
    except (WindowError, UnknownSelection) as exc:
        # As the report's route: a public repository's month to date is the way on.
        public = services.config.is_public(name)
        links, headers = ([name], {}) if public else ([], dict(NO_STORE))
        return error_answer(fmt, 400, str(exc), headers, repositories=links, heading="The month to date:")
    headers = dict(grant.headers)
    try:
        drill = (
            drill_stat(view, selection.stat)
            if selection.stat is not None
            else drill_theme(view, selection.section or "", selection.theme or "")
        )
    except UnknownTheme as exc:
        report = f"{wanted.window.month}.html?cutoff={_cutoff(wanted)}"
        return error_answer(fmt, 404, f"{exc}: the report ({report}) names the themes of each cutoff", headers)
    if fmt == "json":
        document = {"repo": wanted.repo, "month": str(wanted.window.month), **drill.as_dict(_cutoff(wanted))}
        return Response(json_bytes(document), content_type=_JSON, headers=headers)
    page = render_template("drilldown.html", **_page(wanted, selection, drill, lang, grant))
    return Response(page, content_type=_HTML, headers=headers)


def _cutoff(wanted: MonthRequest) -> str:
    return wanted.window.cutoff.isoformat()


def load(services: Services, name: str, month: str) -> tuple[Grant, MonthRequest, Selection, MonthView]:
    """Who may read it, the month asked for, what is asked of it, and the month as the drill-down reads it.
    Every call into the loading of reports is here: access as the report's (`authorize`, then `resolve`, then
    the link's month and cutoff), then the month's record at its last day (`?live=1` aside), else its digest
    from Redis (`cached_fold`; a theme: the report's JSON document, `rendered_bytes`), else the database.
    Raises AccessDenied, NotShown, UnknownRepository, WindowError or UnknownSelection (checked after access,
    so that a reader without access learns nothing of a private repository from it)."""
    grant = authorize(
        services.settings,
        services.config,
        name,
        request.headers.get("Authorization"),
        request.args.get(TOKEN_PARAMETER),
    )
    selection = _selection()
    wanted = resolve(services, name, clipped(month), query_argument("cutoff"))
    grant.require(wanted.repo, wanted.window)
    record = None if request.args.get("live") == "1" else served_record(services.records, wanted)
    if record is not None:
        return grant, wanted, selection, view_of_document(orjson.loads(record.document("json", "")))
    # Only an exclusion shows the classification's evidence: a statistic reads the month as the HTML report
    # does, without it (the same digest fields and held window, and less to parse).
    evidence = selection.stat in (*EXCLUSIONS, PENDING)
    if selection.theme is not None:
        # The report's JSON document, which names each theme's changes: kept by the render cache (the warm
        # job renders the month to date's; a theme's first page at another cutoff renders it for the rest).
        document = rendered_bytes(services, wanted, Document("json"), cache=services.redis)
        view = view_of_document(orjson.loads(document))
    else:
        folded = cached_fold(services, services.redis, wanted, evidence=evidence)
        view = view_of_snapshot(folded.snapshot, folded.paths) if folded is not None else _from_tables(services, wanted)
    return grant, wanted, selection, view


def _from_tables(services: Services, wanted: MonthRequest) -> MonthView:
    """The month read from its tables (Redis away), as tracker.reports.loading.report_for reads it then."""
    window = wanted.window
    inputs = services.state.month_inputs(wanted.repo, str(window.month), window.end, bodies=False)
    rules = services.config.rules_for(wanted.repo)
    snapshot = build_snapshot(
        wanted.repo, window, inputs.timelines, inputs.versions, inputs.verdicts, rules, inputs.unavailable
    )
    return view_of_snapshot(snapshot, inputs.paths)


# --- the page ---------------------------------------------------------------------------------------

# What each number is called on the report (its stat cards and its exclusion line) and what it counts.
_NAMES = {
    "opened": ("opened", "新开"),
    "merged": ("merged", "合并"),
    "closed_unmerged": ("closed without merge", "关闭未合并"),
    "active_at_cutoff": ("active at cutoff", "截止时仍在进行"),
    "test_only": ("test-only", "纯 UT"),
    "ci_only": ("CI-only", "纯 CI"),
    "test_ci_only": ("test/CI-only", "UT/CI-only"),
    "format_only": ("format-only", "纯格式化"),
    PENDING: ("awaiting classification", "等待文件分类"),
}
_MEANINGS = {
    "opened": (
        "Substantive pull requests opened inside the window.",
        "本统计窗口内新开的实质性 PR。",
    ),
    "merged": (
        "Substantive pull requests merged inside the window.",
        "本统计窗口内合并的实质性 PR。",
    ),
    "closed_unmerged": (
        "Substantive pull requests closed without merge inside the window and still closed at the cutoff.",
        "本统计窗口内关闭未合并、截止时仍为关闭状态的实质性 PR。",
    ),
    "active_at_cutoff": (
        "Substantive pull requests open at the cutoff that were opened or pushed to inside the window.",
        "截止时仍开启、且在本统计窗口内新开或有新提交的实质性 PR。",
    ),
    "test_only": (
        "Excluded: every file the head at the cutoff changes is a test file.",
        "不计入：截止时的 head 只改动测试文件。",
    ),
    "ci_only": (
        "Excluded: every file the head at the cutoff changes is a CI file.",
        "不计入：截止时的 head 只改动 CI 文件。",
    ),
    "test_ci_only": (
        "Excluded: the head at the cutoff changes test and CI files, and nothing else.",
        "不计入：截止时的 head 只改动测试与 CI 文件。",
    ),
    "format_only": (
        "Excluded: the title or a label says formatting, and every patch of the head at the cutoff is whitespace-only.",
        "不计入：标题或标签表明是格式化，且截止时 head 的每个补丁只改动空白。",
    ),
    PENDING: (
        "Not counted yet: the files of the head at the cutoff are not known yet.",
        "暂不计入：截止时 head 的文件尚未获取。",
    ),
}
_SECTION_NAMES = {DELIVERED: ("Delivered", "已交付成果"), IN_PROGRESS: ("In Progress", "进行中的方向")}
# The evidence a row shows, in this order, with its label in each language (the JSON has all of it).
_FACTS = (
    ("state_at_cutoff", "state at the cutoff", "截止时状态"),
    ("in_window", "in the window", "窗口内"),
    ("opened_at", "opened", "新开于"),
    ("merged_at", "merged", "合并于"),
    ("closed_at", "closed", "关闭于"),
    ("head_sha", "head at the cutoff", "截止时 head"),
    ("rule", "rule", "规则"),
    ("files", "files", "文件数"),
    ("matching_files", "matching files", "匹配文件数"),
    ("signal", "format signal", "格式化信号"),
    ("note", "note", "说明"),
    ("files_truncated", "files truncated", "文件列表被截断"),
)
_SHORT_SHA = 12
# The states and kinds of fact the Chinese page names in words (the JSON keeps the identifiers).
_CHINESE_VALUES = {
    "open": "开启",
    "closed": "已关闭",
    "merged": "已合并",
    "opened": "新开",
    "committed": "有提交",
    "reopened": "重新打开",
}


def _page(wanted: MonthRequest, selection: Selection, drill: DrillDown, lang: str, grant: Grant) -> dict[str, Any]:
    """What drilldown.html shows, every untrusted text one clean line (`plain`; the template escapes it)."""
    zh = lang == "zh-CN"
    window, repo = wanted.window, wanted.repo
    month, cutoff = str(window.month), _cutoff(wanted)
    token = {TOKEN_PARAMETER: grant.token} if grant.token is not None else {}

    def link(path: str, query: dict[str, str]) -> str:
        return f"../{path}?{urlencode({**token, **query})}"

    theme = drill.theme
    if theme is None:
        stat = drill.stat or ""
        english = _NAMES[stat][0]
        name = _NAMES[stat][1] if zh else english[:1].upper() + english[1:]
        meaning = _MEANINGS[stat][1 if zh else 0]
    else:
        name = plain(theme.zh if zh else theme.en, None)
        section = _SECTION_NAMES[theme.section][1 if zh else 0]
        meaning = (
            f"“{section}”中该主题的变更及其引用的 PR。"
            if zh
            else f"The changes of this theme in {section}, and the pull requests they cite."
        )
    unit = ("项变更" if zh else "changes") if theme is not None else ("个 PR" if zh else "pull requests")
    selected = selection.query()
    return {
        "lang": "zh-CN" if zh else "en",
        "zh": zh,
        "repo": plain(repo, None),
        "repo_url": github_url(repo),
        "month": month,
        "first_day": window.month.first_day.isoformat(),
        "last_day": window.month.last_day.isoformat(),
        "cutoff": cutoff,
        "timezone": window.timezone,
        "name": name,
        "meaning": meaning,
        "count": drill.count,
        "unit": unit,
        "theme": theme is not None,
        "rows": _rows_html(drill.rows, repo, zh),
        "report_link": link(f"{month}.html", {"lang": lang, "cutoff": cutoff}),
        "other_lang": link(f"{month}/prs.html", {**selected, "lang": "en" if zh else "zh-CN", "cutoff": cutoff}),
        "json_link": link(f"{month}/prs.json", {**selected, "cutoff": cutoff}),
        "form_action": f"../{month}/prs.html",
        "hidden": [*token.items(), *selected.items(), ("lang", lang)],
    }


def _rows_html(rows: Sequence[Row], repo: str, zh: bool) -> Markup:
    """The list's items: each PR's link, title and evidence, escaped; on a theme's page each change an item
    holding its PRs. Written here rather than in the template: a big month lists a thousand PRs, and Jinja's
    lookups of their fields cost more than the text they make (as `render.bullet_html`)."""
    items = []
    for index, row in enumerate(rows):
        item = _row_html(row, repo, zh)
        if row.change is not None:
            if index == 0 or rows[index - 1].change != row.change:
                item = f'<li class="change" id="{escape(row.change)}"><ul>\n{item}'
            if index == len(rows) - 1 or rows[index + 1].change != row.change:
                item += "</ul></li>"
        items.append(item)
    return Markup("\n".join(items))


def _row_html(row: Row, repo: str, zh: bool) -> str:
    evidence = row.evidence
    label = f"{plain(row.base_ref or 'unknown', None)} #{row.number}"
    parts = [
        f'<li class="pr" id="pr-{row.number}"><a class="cite" href="{escape(pull_url(repo, row.number))}">'
        f"{escape(label)}</a> {escape(plain(row.title, MAX_TITLE))}"
    ]
    facts = []
    for key, english, chinese in _FACTS:
        value = evidence.get(key)
        if value is None or value == [] or value is False:
            continue
        if key == "head_sha":
            shown = f"<code>{escape(str(value)[:_SHORT_SHA])}</code>"
        elif key in ("state_at_cutoff", "in_window"):
            kinds = [str(kind) for kind in (value if isinstance(value, list) else [value])]
            shown = str(escape(("、" if zh else ", ").join(_CHINESE_VALUES.get(k, k) if zh else k for k in kinds)))
        elif isinstance(value, list):
            shown = str(escape(plain(", ".join(str(item) for item in value), None)))
        else:
            shown = str(escape(plain(str(value), None)))
        facts.append(f'<div class="{key}"><dt>{chinese if zh else english}</dt><dd>{shown}</dd></div>')
    if facts:
        parts.append(f'<dl class="evidence">{"".join(facts)}</dl>')
    # The files that decided an exclusion: every changed path of its head when kept, else its examples.
    paths = evidence.get("paths")
    listed = paths if paths is not None else evidence.get("examples")
    if listed:
        if paths is not None:
            files = "file" if len(paths) == 1 else "files"
            summary = f"改动的 {len(paths)} 个文件" if zh else f"{len(paths)} changed {files}"
        else:
            summary = "文件示例" if zh else "examples of its files"
        shown_paths = "".join(f"<li><code>{escape(plain(str(path), None))}</code></li>" for path in listed)
        parts.append(f'<details class="paths"><summary>{summary}</summary><ul>{shown_paths}</ul></details>')
    return "\n  ".join(parts) + "</li>"
