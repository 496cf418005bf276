"""Rendering a report as Markdown (en-US, zh-CN), HTML, or JSON. Same report, same bytes.

PR titles, labels, branch names, directory names (layout themes) and the repository name are
untrusted. Every rendered piece of them is one line without control or invisible characters
(`plain`); Markdown output then escapes what could start structure and neutralises what GitHub
would turn into a link, a mention or a reference (`md`), or puts it in a code span that cannot be
closed early (`code`); HTML output is autoescaped by Jinja2. Links are built here from the parts
(`github_url`), never taken from the data. JSON keeps the snapshot's data as it came, with the
invisible characters written as `\\u` escapes.
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache, lru_cache
from typing import Any, NamedTuple
from urllib.parse import quote

import orjson
from jinja2 import Environment, PackageLoader, StrictUndefined, Template
from markupsafe import Markup, escape

from tracker.core.classify import Category
from tracker.core.report import DELIVERED, IN_PROGRESS, OTHER_THEME, Change, Day, Highlight, Report, Section, Theme
from tracker.core.since import Since, ThemeRef
from tracker.core.snapshot import PullRequestSnapshot
from tracker.core.titles import word_count
from tracker.core.vocabulary import spaced

LANGUAGES = ("en", "zh-CN")
FORMATS = ("md", "html", "json")
# The JSON's forms (`?detail=`): every PR with its evidence, or the counts and themes alone (dashboards).
FULL, SUMMARY = "full", "summary"
DETAILS = (FULL, SUMMARY)  # what a reader may ask for (`?detail=`)
MEMBER = "member"  # the JSON a group reads of a member (`member_document`): not asked for by readers


class Document(NamedTuple):
    """A document a reader asks of a month's report: its format (json, md, html), language and detail (the
    JSON's full document or its summary)."""

    fmt: str
    lang: str = "en"
    detail: str = FULL


MEMBER_DOCUMENT = Document("json", "en", MEMBER)  # the JSON is one document in every language


_LANGUAGE_ALIASES = {"en": "en", "en-us": "en", "zh": "zh-CN", "zh-cn": "zh-CN", "zh-hans": "zh-CN"}
# Characters that can start Markdown or HTML structure inside a line; newlines are removed first.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|!~&])")
# C0 and C1 controls, DEL, the line and paragraph separators: each becomes a space. U+009B is an
# 8-bit CSI a terminal may act on when `tracker render` writes to one.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# Invisible characters that reorder or hide what a reader sees (Trojan Source, CVE-2021-42574;
# Unicode UAX #9): the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
# U+2066-U+2069), the implicit marks U+200E/U+200F and U+061C; the zero-width space, non-joiner and
# joiner (U+200B-U+200D), the word joiner U+2060 and the BOM U+FEFF; with them the other invisible
# format characters of the same blocks (U+2061-U+2064, U+206A-U+206F) and the tag characters
# (U+E0000-U+E007F), which spell hidden text. They are removed, not spaced: they sit inside words.
_INVISIBLE_CHARACTERS = "\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\U000e0000-\U000e007f"
_INVISIBLE = re.compile(f"[{_INVISIBLE_CHARACTERS}]+")
_SPACES = re.compile(r"\s+")
# What a JSON document writes as `\uXXXX` escapes: the data keeps them, the bytes do not show them.
# With them DEL, the C1 controls and U+2028/U+2029, which JavaScript before ES2019 took for line ends.
_JSON_ESCAPED = re.compile(f"[\x7f-\x9f\u2028\u2029{_INVISIBLE_CHARACTERS}]")
# What GitHub would turn into a link, a notification or a cross-reference once a report is posted to
# an issue. Two mechanisms, two remedies (checked against cmarkgfm, the bindings of GitHub's parser):
# - URL and www autolinks are made while cmark-gfm parses, at an unescaped `:` followed by `//` and
#   at a literal `www.`: a backslash escape of that `:` or `.` (CommonMark allows one before any
#   ASCII punctuation) reads the same and makes no link.
# - @mentions, team mentions, `#123`, `GH-123` and `owner/repo#123` are found by GitHub after
#   parsing, in the text of the HTML, and e-mail autolinks in cmark-gfm's post-processing, after
#   adjacent text is merged. Backslash escapes and entities (`\@`, `&#64;`, `&#35;`) are resolved by
#   then and do not help (github/markup#1168, github/cmark-gfm#181). An empty HTML comment after the
#   `@` or `#` splits the text, GitHub leaves it out of the page, and the reader sees `@user` or
#   `#123` as plain text; OpenJDK's Skara bot does the same on GitHub (openjdk/skara#1045). No
#   zero-width character: it would survive a copy and paste, and `plain` removes them on principle.
# `#123` is neutralised although a title may mean it: the number refers to the source repository, so
# it links the wrong issue when the report is posted in another repository, and in the same one
# adds a backlink to that issue at every posting. The report links each PR it narrates itself.
_GITHUB_AUTOLINK = re.compile(r"@|#(?=[0-9])|(?i:gh)-(?=[0-9])|:(?=//)|(?i:www)\.")
_GITHUB_NEUTRALISED = {"@": "@<!-- -->", "#": "#<!-- -->", ":": "\\:"}
# GitHub's rules for the owner (a user or organisation: alphanumerics and single inner hyphens, at
# most 39) and the repository name (alphanumerics, `.`, `-`, `_`, at most 100, not `.` or `..`).
_OWNER = re.compile(r"(?=[A-Za-z0-9-]{1,39}\Z)[A-Za-z0-9](?:-?[A-Za-z0-9])*")
_REPOSITORY = re.compile(r"(?!\.{1,2}\Z)[A-Za-z0-9._-]{1,100}")
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


@lru_cache(maxsize=65_536)  # a report says each base branch at every citation, and each title in several places
def plain(text: str, limit: int | None = MAX_TITLE) -> str:
    """One line, no control or invisible characters, at most `limit` characters."""
    if text.isascii() and text.isprintable():  # most titles: no control, invisible or other space character
        line = text.strip()
        if "  " in line:
            line = _SPACES.sub(" ", line)
    else:
        line = _SPACES.sub(" ", _CONTROL.sub(" ", _INVISIBLE.sub("", text)).strip())
    return line if limit is None or len(line) <= limit else line[: limit - 1].rstrip() + "…"


@lru_cache(maxsize=65_536)
def markdown_text(text: str, limit: int | None = None) -> str:
    """Untrusted text made inert in Markdown: one line, every structural character escaped, nothing
    GitHub would link, mention or reference."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", plain(text, limit))
    inert = _GITHUB_AUTOLINK.sub(_neutralise, escaped)
    # A heading drops a closing run of `#` after a space (CommonMark 4.2): escape the run's first.
    opened = inert.rstrip("#")
    if opened != inert and (not opened or opened.endswith(" ")):
        inert = opened + "\\" + inert[len(opened) :]
    return inert


def _neutralise(match: re.Match[str]) -> str:
    found = match.group()
    if found in _GITHUB_NEUTRALISED:
        return _GITHUB_NEUTRALISED[found]
    if found.endswith("-"):  # GH-123
        return found + "<!-- -->"
    return found[:-1] + "\\."  # www.


def code_span(text: str) -> str:
    """Untrusted text as a Markdown code span. Backslash escapes mean nothing inside one (CommonMark
    6.1), so the text is not escaped: the span is fenced with one backtick more than the longest run
    in the text, which cannot close it early, and padded with a space where the text touches a
    backtick (the parser strips one space on each side). GitHub links and mentions nothing in code."""
    line = plain(text, limit=None)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if not line or line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def github_url(repo: str, *path: str | int) -> str:
    """`https://github.com/<owner>/<repo>[/<path>…]` from validated parts. A name outside GitHub's
    rules (stored before the webhook checked names) has every character but `A-Za-z0-9_.-~`
    percent-encoded: it stays one path segment of a github.com URL, whatever it holds, and nothing
    of it can end a Markdown link or an HTML attribute."""
    owner, _, name = repo.partition("/")
    parts = [owner, name, *(str(part) for part in path)]
    if not (_OWNER.fullmatch(owner) and _REPOSITORY.fullmatch(name)):
        parts[:2] = [_segment(owner), _segment(name)]
    return "https://github.com/" + "/".join(parts)


def _segment(part: str) -> str:
    # `.` and `..` would be resolved away as dot-segments (RFC 3986 5.2.4): encode them too.
    encoded = quote(part, safe="")
    return encoded.replace(".", "%2E") if set(part) <= {"."} else encoded


def pull_url(repo: str, number: int) -> str:
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"not a pull request number: {number!r}")
    return f"{_pulls(repo)}/{number}"


@lru_cache(maxsize=256)  # a report cites hundreds of PRs of one repository
def _pulls(repo: str) -> str:
    return github_url(repo, "pull")


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
    environment.filters["prose"] = prose_markdown
    environment.filters["code"] = code_span
    environment.filters["plain"] = plain
    # One line without control or invisible characters, whatever its length (names, sentences).
    environment.filters["line"] = lambda text: plain(text, limit=None)
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


def coverage_notice(report: Report, lang: str) -> tuple[str, str] | None:
    """When part of the window has no complete history: (what is missing, the command that fills
    it), in `lang`. Days are ISO dates; the command names the repository, whose name GitHub's rules
    keep to letters, digits, `-`, `_` and `.`."""
    coverage = report.snapshot.coverage
    if coverage.complete:
        return None
    joiner = "、" if lang == "zh-CN" else ", "
    spans = joiner.join(
        first.isoformat() if first == last else (f"{first} 至 {last}" if lang == "zh-CN" else f"{first} to {last}")
        for first, last in coverage.missing
    )
    command = f"tracker backfill --repo {report.snapshot.repo} --month {report.snapshot.window.month}"
    if lang == "zh-CN":
        notice = f"历史记录不完整：{spans} 的活动未被完整接收（当时 webhook 尚未注册，或投递丢失），本报告可能有遗漏。"
        return (notice, command)
    return (
        f"Incomplete history: activity on {spans} was not fully received (the webhook was not registered yet, "
        "or deliveries were lost), so this report may miss some of it.",
        command,
    )


# What the overview says of a section without changes, in English and Chinese.
_NOTHING = {
    DELIVERED: ("No substantive change was delivered in this window.", "本统计窗口内没有交付实质性变更。"),
    IN_PROGRESS: ("No substantive change is in progress at the cutoff.", "截止时没有进行中的实质性变更。"),
}
# Per section: the largest themes it names, each with its headline change as far as the section's share of
# OVERVIEW_WORDS (the whole overview's) allows, then by name alone: at least MIN_AREAS, at most MAX_AREAS.
MIN_AREAS, MAX_AREAS, OVERVIEW_WORDS = 5, 8, 90


def written_by_model(report: Report, lang: str) -> tuple[list[str], list[str]]:
    """For the method section: the names of the sections with changes whose text a language model wrote,
    and of the other sections with changes (assembled deterministically)."""
    names = _SECTION_NAMES["zh-CN" if lang == "zh-CN" else "en"]
    narrated = report.narrator.get("sections", ()) if report.narrator.get("kind") == "llm" else ()
    described = [section.id for section in report.sections if section.changes]
    return (
        [names.get(section, section) for section in described if section in narrated],
        [names.get(section, section) for section in described if section not in narrated],
    )


_SECTION_NAMES = {
    "en": {DELIVERED: "Delivered", IN_PROGRESS: "In Progress"},
    "zh-CN": {DELIVERED: "“已交付成果”", IN_PROGRESS: "“进行中的方向”"},
}


def overview(report: Report, lang: str) -> str:
    """A sentence a section, from its content: how many changes in how many themes, then its largest
    themes, each with its headline change (`Theme.headline`) in words, uncited (every change is cited once,
    in its theme). Within about `OVERVIEW_WORDS` words a section, counted in English; Chinese says the same.
    A section the language-model narrator wrote says its overview instead (`Section.overview_en`, validated
    like the rest of its prose: at most half of `OVERVIEW_WORDS`)."""
    zh = lang == "zh-CN"
    budget = OVERVIEW_WORDS // max(1, sum(1 for section in report.sections if section.themes))
    return ("" if zh else " ").join(
        (s.overview_zh if zh else s.overview_en) or _section_overview(s, lang, budget) for s in report.sections
    )


def _section_overview(section: Section, lang: str, budget: int) -> str:
    zh = lang == "zh-CN"
    if not section.themes:
        return _NOTHING[section.id][1 if zh else 0]
    themes = [theme for theme in section.themes if theme.id != OTHER_THEME[0]][:MAX_AREAS]
    words, parts = 6, []  # the lead: "Delivered 177 changes in 10 themes:"
    for index, theme in enumerate(themes):
        name, headline = (theme.zh if zh else theme.en), plain(theme.headline.title)
        named = word_count(theme.en) + 1  # "Name (n)"
        led = words + named + word_count(headline) + 2 <= budget  # "Name (n, led by Title)"
        if not led and index >= MIN_AREAS and words + named > budget:
            break
        words += named + (word_count(headline) + 2 if led else 0)
        n = len(theme.changes)
        if zh:
            parts.append(f"{name}（{n} 项{f'，以“{headline}”为首' if led else ''}）")
        else:
            parts.append(f"{name} ({n}{f', led by {headline}' if led else ''})")
    n, k, rest = len(section.changes), len(section.themes), len(section.themes) - len(parts)
    if zh:
        lead = "已交付" if section.id == DELIVERED else "进行中"
        more = f"，另有 {rest} 个方向" if rest else ""
        return spaced(f"{lead} {n} 项变更，分 {k} 个方向：{'；'.join(parts)}{more}。")
    counted = f"{n} {_plural(n, 'change')} in {k} {_plural(k, 'theme')}"
    lead = f"Delivered {counted}" if section.id == DELIVERED else f"{counted} {'is' if n == 1 else 'are'} in progress"
    more = f"; and {rest} more {_plural(rest, 'theme')}" if rest else ""
    return f"{lead}: {'; '.join(parts)}{more}."


def theme_summary(theme: Theme, section: Section, lang: str) -> str:
    narrated = theme.summary_zh if lang == "zh-CN" else theme.summary_en
    if narrated:
        return narrated
    n = len(theme.changes)
    if lang == "zh-CN":
        areas = "、".join(f"{h.zh}（{len(h.changes)} 项）" for h in theme.highlights)
        verb = "交付" if section.id == "delivered" else "推进中"
        return spaced(f"{verb} {n} 项变更，涉及{areas}。")
    areas_en = [f"{_mid_sentence(h.en)} ({len(h.changes)})" for h in theme.highlights]
    # Highlight names can hold commas themselves: the list is separated by semicolons.
    joined = areas_en[0] if len(areas_en) == 1 else "; ".join(areas_en[:-1]) + "; and " + areas_en[-1]
    verb = "delivered" if section.id == "delivered" else "in progress"
    return f"{n} {_plural(n, 'change')} {verb}, on {joined}."


def _mid_sentence(name: str) -> str:
    """ "Dynamic engine" reads "dynamic engine" inside a sentence; "MoE routing" and "KV cache" stay."""
    first = name.split()[0] if name.split() else name
    camel = any(char.isupper() for char in first[1:])  # "FullyParallel", "LayerWise" keep their capitals
    return name[:1].lower() + name[1:] if name[1:2].islower() and not camel else name


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def bullet_markdown(changes: Sequence[Change], lang: str, folded: bool = False) -> str:
    """A line's text: each change's words (a highlight's line: `Change.text`; a line of a fold: the cleaned
    title), its citations right after it. In Chinese the English words are quoted."""
    texts = [change.title if folded else change.text for change in changes]
    if lang == "zh-CN":
        parts = [
            f"“{markdown_text(text, MAX_TITLE)}”（{'、'.join(citations_markdown(c))}）"
            for text, c in zip(texts, changes, strict=True)
        ]
        return "；".join(parts) + "。"
    # The first text may start a list item (a line of a fold): a title "1. …" or "# …" stays inert there.
    parts = [
        f"{(prose_markdown if i == 0 else markdown_text)(plain(text, MAX_TITLE))} ({', '.join(citations_markdown(c))})"
        for i, (text, c) in enumerate(zip(texts, changes, strict=True))
    ]
    return "; ".join(parts) + "."


def bullet_html(changes: Sequence[Change], lang: str, repo: str, folded: bool = False) -> Markup:
    """`bullet_markdown` in HTML, escaped. Written here rather than as a template macro: a big month has
    thousands of lines, and Jinja's call of a macro costs more than the text it makes."""
    zh = lang == "zh-CN"
    opening, closing, between, separator, end = ("（", "）", "、", "；", "。") if zh else (" (", ")", ", ", "; ", ".")
    quote, unquote = ("“", "”") if zh else ("", "")
    parts = []
    for change in changes:
        cited = citations_html(change, between, repo)
        text = title_html(change.title if folded else change.text)
        parts.append(f"{quote}{text}{unquote}{opening}{cited}{closing}")
    return Markup(separator.join(parts) + end)


def citations_html(change: Change, between: str, repo: str) -> str:
    """`citations_markdown` in HTML: each cited PR's link, escaped, `between` them."""
    return between.join(
        f'<a class="cite" href="{escape(pull_url(repo, c.number))}">{_label_html(c.base_ref, c.number)}</a>'
        for c in change.citations
    )


def _label_html(base_ref: str, number: int) -> str:
    """`Citation.label` as one line of HTML (`plain`, escaped); the branch cleaned alone, as it repeats."""
    branch = escape(plain(base_ref or "unknown", None))
    return f"{branch} #{number}" if branch else f"#{number}"


# A pair of backticks in escaped text (titles quote identifiers so: `norm_out`); no backtick inside.
_BACKTICKS = re.compile(r"`([^`]++)`")


def title_html(text: str) -> str:
    """Untrusted words of a line (a title, a summary sentence) as HTML: one clean line cut at `MAX_TITLE`,
    escaped, each `...` as <code>: what GitHub shows for the backticks of a title."""
    return _BACKTICKS.sub(r"<code>\1</code>", str(escape(plain(text, MAX_TITLE))))


def folded_label(theme: Theme, lang: str) -> str:
    """What a theme's fold says while closed: how many changes it holds."""
    n, more = len(theme.folded), len(theme.folded) < len(theme.changes)
    if lang == "zh-CN":
        return f"{'其余 ' if more else ''}{n} 项变更"
    return f"{n} {'more ' if more else ''}{_plural(n, 'change')}"


def reverted_markdown(section: Section, lang: str) -> str:
    """The section's Reverted line: each change undone in the window, cited, with the revert that undid it."""
    zh = lang == "zh-CN"
    parts = []
    for undone, revert in section.reverted:
        cited = ("、" if zh else ", ").join(citations_markdown(undone))
        by = ("、" if zh else ", ").join(citations_markdown(revert)) if revert else ""
        if zh:
            parts.append(f"“{markdown_text(undone.title, MAX_TITLE)}”（{cited}）{f'，已由 {by} 回退' if by else ''}")
        else:
            parts.append(f"{markdown_text(undone.title, MAX_TITLE)} ({cited}){f', reverted by {by}' if by else ''}")
    if zh:
        return f"**本窗口内已回退**（不计为交付）：{'；'.join(parts)}。"
    return f"**Reverted within the window** (not delivered work): {'; '.join(parts)}."


def reverted_html(section: Section, lang: str, repo: str) -> Markup:
    """`reverted_markdown` in HTML, escaped."""
    zh = lang == "zh-CN"

    def cited(change: Change) -> str:
        return citations_html(change, "、" if zh else ", ", repo)

    parts = []
    for undone, revert in section.reverted:
        title = title_html(undone.title)
        if zh:
            parts.append(f"“{title}”（{cited(undone)}）{f'，已由 {cited(revert)} 回退' if revert else ''}")
        else:
            parts.append(f"{title} ({cited(undone)}){f', reverted by {cited(revert)}' if revert else ''}")
    if zh:
        return Markup(f"<strong>本窗口内已回退</strong>（不计为交付）：{'；'.join(parts)}。")
    return Markup(f"<strong>Reverted within the window</strong> (not delivered work): {'; '.join(parts)}.")


# The Since section (tracker.core.since): each list's name, in its order, in English and Chinese.
_SINCE_PARTS = (
    ("newly_merged", "Newly merged", "新合并"),
    ("newly_opened", "Newly opened", "新开"),
    ("closed_unmerged", "Closed without merge", "关闭未合并"),
    ("reopened", "Reopened", "重新打开"),
    ("reclassified", "Re-classified", "重新分类"),
    ("moved", "Moved to another theme", "调整主题"),
)
# A category as the report's overview names it (its exclusion counts), in English and Chinese.
_CATEGORY_NAMES = {
    Category.SUBSTANTIVE: ("substantive", "实质性"),
    Category.TEST_ONLY: ("test-only", "纯 UT"),
    Category.CI_ONLY: ("CI-only", "纯 CI"),
    Category.TEST_CI_ONLY: ("test/CI-only", "UT/CI-only"),
    Category.FORMAT_ONLY: ("format-only", "纯格式化"),
    Category.PENDING: ("awaiting classification", "等待文件分类"),
}


class SincePart(NamedTuple):
    """One list of the Since section: its name and its PRs, each a line of Markdown and of HTML."""

    id: str
    label: str
    markdown: tuple[str, ...]
    html: tuple[Markup, ...]


class SinceView(NamedTuple):
    """The Since section as the templates lay it out: its heading, its lead and its non-empty lists; `day`, the
    earlier cutoff, which the links to the other language keep."""

    day: str
    heading: str
    lead: str
    parts: tuple[SincePart, ...]


def since_view(report: Report, since: Since, lang: str, last_week: bool = False) -> SinceView:
    """What the Since section says: "Since <day>" (or "Since Last Week", the weekly partial edition's), the two
    cutoffs, then each list with a line a PR: its title and citation, and for a re-classified PR its category
    then and now, for a moved one its theme then and now. Every PR of the lists is in the report's snapshot
    (the later one), which `tracker.core.since.difference` reads them from."""
    zh = lang == "zh-CN"
    window = report.snapshot.window
    start, end = since.since.isoformat(), since.cutoff.isoformat()
    if zh:
        day = f"{since.since.year}年{since.since.month}月{since.since.day}日"
        heading = "上周以来的变化" if last_week else f"自 {day} 以来的变化"
        lead = f"自 {start} 结束至 {end} 结束（{window.timezone}）"
        lead += "，报告统计和描述的内容没有变化。" if since.empty else "："
    else:
        heading = "Since Last Week" if last_week else f"Since {english_day(since.since)}"
        lead = f"From the end of {start} to the end of {end} ({window.timezone})"
        lead += ", nothing the report counts or describes changed." if since.empty else ":"

    def theme(ref: ThemeRef) -> str:
        return ref.zh if zh else ref.en

    lists: dict[str, list[tuple[int, str]]] = {
        "newly_merged": [(number, "") for number in since.newly_merged],
        "newly_opened": [(number, "") for number in since.newly_opened],
        "closed_unmerged": [(number, "") for number in since.closed_unmerged],
        "reopened": [(number, "") for number in since.reopened],
        "reclassified": [
            (item.number, f"{_CATEGORY_NAMES[item.before][zh]} → {_CATEGORY_NAMES[item.after][zh]}")
            for item in since.reclassified
        ],
        "moved": [(moved.number, f"{theme(moved.before)} → {theme(moved.after)}") for moved in since.moved],
    }
    prs = {pr.status.number: pr for pr in report.snapshot.pull_requests}
    parts = []
    for part, en, chinese in _SINCE_PARTS:
        lines = [_since_line(report.snapshot.repo, prs[number], note, zh) for number, note in lists[part]]
        if lines:
            markdown, html = zip(*lines, strict=True)
            parts.append(SincePart(part, chinese if zh else en, markdown, html))
    return SinceView(start, heading, lead, tuple(parts))


def _since_line(repo: str, pr: PullRequestSnapshot, note: str, zh: bool) -> tuple[str, Markup]:
    """A PR of a Since list in Markdown and in HTML: its title, its citation, then `note` (untrusted: a
    theme's name is made of titles)."""
    number = pr.status.number
    raw = pr.version.title if pr.version else f"#{number}"
    base_ref = pr.version.base_ref if pr.version else ""
    url = pull_url(repo, number)
    cited_md = f"[{markdown_text(base_ref or 'unknown')} #{number}]({url})"
    cited_html = f'<a class="cite" href="{escape(url)}">{_label_html(base_ref, number)}</a>'
    titled = title_html(raw)
    note_html = str(escape(plain(note, None)))
    if zh:
        markdown = f"“{markdown_text(raw, MAX_TITLE)}”（{cited_md}）" + (f"：{markdown_text(note)}" if note else "")
        html = f"“{titled}”（{cited_html}）" + (f"：{note_html}" if note else "")
    else:
        # The title starts a list item: "1. …" or "# …" stays inert there.
        markdown = f"{prose_markdown(plain(raw, MAX_TITLE))} ({cited_md})"
        markdown += f": {markdown_text(note)}" if note else ""
        html = f"{titled} ({cited_html})" + (f": {note_html}" if note else "")
    return markdown, Markup(html)


def sentence_markdown(highlight: Highlight, lang: str) -> str:
    """A narrated highlight: its sentence, then the citations of all of its changes, in order."""
    cited = [c for change in highlight.changes for c in citations_markdown(change)]
    if lang == "zh-CN":
        return f"{prose_markdown(highlight.sentence_zh)}（{'、'.join(cited)}）"
    return f"{prose_markdown(highlight.sentence_en)} ({', '.join(cited)})"


# What starts a block at the start of a line and `markdown_text` leaves (it escapes `*`, `>`, `_`, `` ` ``,
# `~` and `<` anywhere): an ATX heading (`#`), a bullet or a thematic break (`-`, `+`), an ordered list
# item (`3.` or `3)`, at most nine digits: CommonMark 5.2).
_BLOCK_START = re.compile(r"[#+-]|[0-9]{1,9}(?=[.)])")


def prose_markdown(text: str) -> str:
    """The narrator's prose (a sentence, a summary, an overview) inert in Markdown where it starts a line or
    a list item: `markdown_text`, and a block's first marker escaped ("3\\) ", "\\# "). The model may write
    identifiers as they are (`__init__`, `a|b`, `x<y`, backticks): a reader sees them as written."""
    inert = markdown_text(text)
    start = _BLOCK_START.match(inert)
    if start is None:
        return inert
    at = start.end() if start.group()[0].isdigit() else 0  # 3\) keeps its digits; \# escapes the mark
    return f"{inert[:at]}\\{inert[at:]}"


def citations_markdown(change: Change) -> list[str]:
    """`[<base branch> #<n>](<url>)`. The branch is escaped like any untrusted text: `_` included,
    since `release/_wip_` would render as emphasis (a `_` after punctuation can open one)."""
    return [
        f"[{markdown_text(c.base_ref or 'unknown')} #{c.number}]({pull_url(change.repo, c.number)})"
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


def render(report: Report, fmt: str, lang: str, *, since: Since | None = None, last_week: bool = False) -> str:
    """The report as `fmt` in `lang`; with `since`, its Since section (tracker.core.since: what changed since
    an earlier cutoff), headed "Since Last Week" when `last_week` (the weekly partial edition)."""
    if fmt == "json":
        return json_bytes(report_document(report, since)).decode("utf-8")
    template = f"report.{lang}.md.j2" if fmt == "md" else "report.html.j2"
    context = {
        "report": report,
        "snapshot": report.snapshot,
        "window": report.snapshot.window,
        "lang": lang,
        "title": title(report, lang),
        "coverage_notice": coverage_notice(report, lang),
        "overview": overview(report, lang),
        "theme_summary": theme_summary,
        "citations": citations_markdown,
        "bullet": bullet_markdown,
        "bullet_html": bullet_html,
        "folded_label": folded_label,
        "reverted": reverted_markdown,
        "reverted_html": reverted_html,
        "sentence": sentence_markdown,
        "repo_url": github_url(report.snapshot.repo),
        "pull_url": pull_url,
        "chart": chart(report.days),
        "other_lang": "en" if lang == "zh-CN" else "zh-CN",
        "themed": report.themed,
        "written_by_model": written_by_model(report, lang),
        "narrator_model": report.narrator.get("model", ""),
        "since": since_view(report, since, lang, last_week) if since is not None else None,
    }
    return _rendered(_environment(fmt).get_template(template), context)


def render_template_named(fmt: str, name: str, variables: dict[str, Any]) -> str:
    """Template `name` of the package's templates with `variables`, in the environment of `fmt` (HTML
    autoescaped, Markdown not) and its filters, as `render` renders a report (tracker.reports.groups)."""
    return _rendered(_environment(fmt).get_template(name), variables)


def _rendered(template: Template, variables: dict[str, Any]) -> str:
    """`template.render(**variables)`, and then the render's context emptied. Jinja's context and the
    macros the template defines refer to each other, a cycle that reference counting cannot free: every
    render would leave its context, and the whole report it holds (tens of thousands of objects for a
    big month), to the cyclic collector, which then walks them in the middle of a later request."""
    context = template.new_context(variables)
    try:
        return template.environment.concat(template.root_render_func(context))
    except Exception:
        return template.environment.handle_exception()
    finally:
        context.vars.clear()
        context.exported_vars.clear()
        context.parent.clear()


def render_bytes(report: Report, fmt: str, lang: str, detail: str = FULL, *, since: Since | None = None) -> bytes:
    """`render` as the UTF-8 bytes an answer sends; the JSON without a detour through `str` (a big month's
    JSON is 2 MB: each conversion costs milliseconds). `detail`: the JSON's `FULL` document or its
    `SUMMARY` (`summary_document`), or what a group reads of it (`MEMBER`: `member_document`); the Markdown and
    the HTML have one form. `since`: as for `render`."""
    if fmt == "json":
        if detail == MEMBER:
            return json_bytes(member_document(report))
        document = report_document(report, since)
        return json_bytes(summary_document(document) if detail == SUMMARY else document)
    return render(report, fmt, lang, since=since).encode("utf-8")


def json_bytes(document: Any, *, indent: bool = True, default: Callable[[Any], Any] | None = None) -> bytes:
    """A JSON document as UTF-8 bytes: keys in their order, non-ASCII characters as themselves, and with
    `indent` two spaces a level and a final newline (the report's and the snapshot's form), else compact
    (API answers). orjson writes, about twenty times faster than the standard library, the same bytes as
    `json.dumps(..., ensure_ascii=False, indent=2)` (or `separators=(",", ":")`), floats aside: a float
    below 1e-4 is written `1e-5`, not `1e-05` (the same number; reports hold none). What orjson refuses
    (an integer beyond 64 bits, a key that is not a string) goes through the standard library. `default`
    converts what JSON has no form for, dates and dataclasses included (orjson's own forms of them are
    not used). Then the invisible characters and C1 controls are written as `\\uXXXX` escapes."""
    options = orjson.OPT_INDENT_2 if indent else 0
    if default is not None:
        options |= orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
    try:
        data = orjson.dumps(document, default=default, option=options)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        layout: dict[str, Any] = {"indent": 2} if indent else {"separators": (",", ":")}
        data = json.dumps(document, ensure_ascii=False, default=default, **layout).encode("utf-8")
    if _has_escaped(data):
        # Only inside strings can these characters occur, where `\\uXXXX` means the same character:
        # the parsed document is unchanged, the bytes read in a terminal or a browser reorder nothing.
        data = _JSON_ESCAPED.sub(_json_escape, data.decode("utf-8")).encode("utf-8")
    return data + b"\n" if indent else data


# What `_JSON_ESCAPED` matches, in UTF-8: DEL, the C1 controls, U+061C, U+200B-U+200F, U+2028-U+202E,
# U+2060-U+2064, U+2066-U+206F, U+FEFF and the tag characters. A regular expression over a 2 MB document
# takes 15-20 ms; over its non-ASCII bytes alone (a multi-byte character keeps its bytes together when the
# ASCII ones around it are deleted) well under one, and most documents hold none of these.
_ESCAPED_UTF8 = re.compile(
    rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8b-\x8f\xa8-\xae]|\xe2\x81[\xa0-\xa4\xa6-\xaf]|\xef\xbb\xbf|\xf3\xa0[\x80\x81]"
)
_ASCII_BUT_DEL = bytes(range(0x7F))


def _has_escaped(data: bytes) -> bool:
    return not data.isascii() and _ESCAPED_UTF8.search(data.translate(None, _ASCII_BUT_DEL)) is not None


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON writes characters beyond the BMP (RFC 8259 7)
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def report_document(report: Report, since: Since | None = None) -> dict[str, Any]:
    """The JSON snapshot, with each narrated PR's section, theme and group, and the report's outline; with
    `since`, what changed since that earlier cutoff (`since`, last: a document without it is unchanged).

    The snapshot's fields are data as GitHub sent it (a consumer may need the exact title or branch),
    except `url`, a link, built like every link of the report. The outline is the report's text:
    its titles and names are cleaned like the Markdown's and the HTML's (`plain`, uncut)."""
    document = report.snapshot.as_dict()
    placement = report.placement()
    for pr in document["pull_requests"]:
        pr["url"] = pull_url(report.snapshot.repo, pr["number"])
        place = placement.get(pr["number"])
        pr["section"] = place["section"] if place else None
        pr["theme"] = place["theme"] if place else None
        pr["highlight"] = place["highlight"] if place else None
        pr["group"] = place["group"] if place else None
    document["report"] = {
        "narrator": dict(report.narrator),
        "sections": [
            {
                "id": section.id,
                "reverted": _reverted_outline(section),
                # The narrator's overview, when a model wrote the section.
                **(
                    {"overview_en": plain(section.overview_en, None), "overview_zh": plain(section.overview_zh, None)}
                    if section.overview_en
                    else {}
                ),
                "themes": [
                    {
                        "id": theme.id,
                        "en": plain(theme.en, limit=None),
                        "zh": plain(theme.zh, limit=None),
                        "terms": [plain(term, limit=None) for term in theme.terms],
                        # The narrator's summary, when a model wrote the theme.
                        **(
                            {"summary_en": plain(theme.summary_en, None), "summary_zh": plain(theme.summary_zh, None)}
                            if theme.summary_en
                            else {}
                        ),
                        "folded": [change.id for change in theme.folded],
                        "highlights": [
                            {
                                "id": highlight.id,
                                "en": plain(highlight.en, limit=None),
                                "zh": plain(highlight.zh, limit=None),
                                "changes": [_change_outline(change) for change in highlight.changes],
                                "shown": [change.id for change in highlight.shown],
                                **(
                                    {
                                        "sentence_en": plain(highlight.sentence_en, limit=None),
                                        "sentence_zh": plain(highlight.sentence_zh, limit=None),
                                    }
                                    if highlight.sentence_en
                                    else {}
                                ),
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
    if since is not None:
        changed = since.as_dict()
        for item in changed["moved"]:  # theme names are made of titles: cleaned like the outline's
            for side in ("from", "to"):
                item[side] = {**item[side], "en": plain(item[side]["en"], None), "zh": plain(item[side]["zh"], None)}
        document["since"] = changed
    return document


def member_document(report: Report) -> dict[str, Any]:
    """What a group's report reads of a member's (tracker.core.group_report.merge_group), made without the rest: the
    member's JSON document (`report_document`) with each PR's number, title and base branch only (a big month's PR
    rows and evidence are most of the cost of its JSON), and of its outline each section's reverted lines and its
    themes' ids, names and changes. Its values are the document's."""
    document = report.snapshot.as_dict(pull_requests=False)
    document["pull_requests"] = [
        {
            "number": pr.status.number,
            "title": pr.version.title if pr.version else "",
            "base_ref": pr.version.base_ref if pr.version else "",
        }
        for pr in report.snapshot.pull_requests
    ]
    sections = [
        {
            "id": section.id,
            "reverted": _reverted_outline(section),
            "themes": [
                {
                    "id": theme.id,
                    "en": plain(theme.en, limit=None),
                    "zh": plain(theme.zh, limit=None),
                    "highlights": [
                        {"changes": [_change_outline(change) for change in highlight.changes]}
                        for highlight in theme.highlights
                    ],
                }
                for theme in section.themes
            ],
        }
        for section in report.sections
    ]
    document["report"] = {"sections": sections}
    return document


def _reverted_outline(section: Section) -> list[dict[str, list[int]]]:
    return [
        {"numbers": list(undone.numbers), "by": list(revert.numbers) if revert else []}
        for undone, revert in section.reverted
    ]


def _change_outline(change: Change) -> dict[str, Any]:
    return {"id": change.id, "title": plain(change.title, limit=None), "group": list(change.numbers)}


def summary_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON's summary form (`?detail=summary`), for dashboards: the snapshot's numbers (window,
    stats, exclusions, pending, coverage) and the report's outline with the names and counts of its
    sections, themes and highlights and the daily counts; no pull request, evidence or title. Made from
    the full document, so that a month's record and its live report summarise alike."""
    summary: dict[str, Any] = {key: value for key, value in document.items() if key not in ("pull_requests", "report")}
    summary["detail"] = SUMMARY
    summary["pull_requests"] = len(document["pull_requests"])  # in the window; the full form lists them
    report = document["report"]
    summary["report"] = {
        "narrator": report["narrator"],
        "sections": [_section_summary(section) for section in report["sections"]],
        "daily": report["daily"],
    }
    return summary


def _section_summary(section: Mapping[str, Any]) -> dict[str, Any]:
    themes = [_theme_summary(theme) for theme in section["themes"]]
    return {"id": section["id"], **_totals(themes), "themes": themes}


def _theme_summary(theme: Mapping[str, Any]) -> dict[str, Any]:
    highlights = [_highlight_summary(highlight) for highlight in theme["highlights"]]
    named = {key: theme[key] for key in ("id", "en", "zh", "terms")}
    return {**named, **_totals(highlights), "highlights": highlights}


def _highlight_summary(highlight: Mapping[str, Any]) -> dict[str, Any]:
    changes = highlight["changes"]
    named = {key: highlight[key] for key in ("id", "en", "zh")}
    # A change's `group` in the outline is the PRs it cites.
    return {**named, "changes": len(changes), "pull_requests": sum(len(change["group"]) for change in changes)}


def _totals(parts: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many changes and PRs the parts narrate together."""
    return {
        "changes": sum(part["changes"] for part in parts),
        "pull_requests": sum(part["pull_requests"] for part in parts),
    }
