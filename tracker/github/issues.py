"""One GitHub issue per repository (or group) and month: the month's report, published and kept up to date.

The issue is created once and then updated in place (title and body), reopened if someone closed
it. It is found again by a hidden marker line (an HTML comment, which GitHub does not show) when its
stored number is lost:

    <!-- monthly-activity-tracker repo=<owner>/<name> month=YYYY-MM -->
    <!-- monthly-activity-tracker group=<name> month=YYYY-MM -->      (a group's month: tracker.records.groups)

A repository's marker never matches a group's: they differ in their key (`repo=`, `group=`).

Finding it: the stored number first (`GET /issues/{n}`: still in the target repository, an issue and
not a pull request, and carrying this month's marker line); otherwise the target repository's issues
are listed (`state=all`, newest first, following the `Link` headers) until one carries the marker.
A list, not the search API: search is eventually consistent, so an issue created a moment ago (by the
previous attempt of a job that timed out, say) may not be found yet, and a second one would be
created; the list reads the database. Search also has its own, much lower rate limit (30 requests a
minute, GitHub's REST documentation on rate limits), and whether it indexes the
text of an HTML comment is not documented.

Writes: at most one a publication. A create is one POST; an update (title, body, and reopening) is
one PATCH, so a refused or rate-limited request never leaves the issue half changed. When the title
and the body on GitHub are the ones we would write and the issue is open, nothing is written.
`RateLimited` from the client propagates: the caller re-schedules the publication for `retry_at`.

Mentions and autolinks in PR titles are neutralised by the renderer (`tracker.reports.render`);
nothing added here mentions anyone or refers to an issue.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Literal

from tracker.config import GROUP_NAME
from tracker.core.repository import check_full_name
from tracker.github.client import GitHubClient, RequestRefused, check_login

# GitHub refuses a longer body with 422 "body is too long (maximum is 65536 characters)" (the error
# reported in e.g. peter-evans/create-issue-from-file#1049). The REST docs state neither the limit nor
# its unit, and measurements disagree: dead-claudia/github-limits#13 found a PR body refused past
# 65,536 code points and an issue comment past 262,144 UTF-8 bytes (4 x 65,536), and
# objectstack-ai/objectstack#18793 an issue body past 262,144 bytes. So `github_length` counts UTF-16
# code units, never fewer than the code points; and 65,536 code points are at most 262,144 UTF-8
# bytes: a body within the limit here is within it on every reading.
BODY_LIMIT = 65_536

Action = Literal["created", "updated", "reopened", "unchanged"]

_MONTH = re.compile(r"\d{4}-(0[1-9]|1[0-2])")
_MARKER_LINE = re.compile(
    r"^<!-- monthly-activity-tracker (?P<kind>repo|group)=(?P<name>\S+) month=(?P<month>\d{4}-\d{2}) -->\r?$",
    re.MULTILINE,
)
# A URL that can stand in a Markdown link destination written `<...>` and means what it says.
_URL = re.compile(r"https?://[^\s<>\\\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class Publication:
    number: int
    url: str  # the issue's page (`html_url`)
    action: Action
    content_hash: str  # sha256 of the title and body published (see `content_hash`)
    truncated: bool  # the report was cut to fit GitHub's body limit


def marker(subject: str, month: str) -> str:
    """The hidden line that identifies the issue of `subject`'s `month` (YYYY-MM): `subject` is a repository's
    `owner/name`, or a group's `group:<name>` (as tracker.records.store.group_subject writes it)."""
    kind, name = _subject(subject)
    if not _MONTH.fullmatch(month):
        raise ValueError(f"not a month (YYYY-MM): {month!r}")
    return f"<!-- monthly-activity-tracker {kind}={name} month={month} -->"


def carries_marker(body: str | None, subject: str, month: str) -> bool:
    """Whether `body` has the marker line of `subject`'s `month` as a line of its own (names compared without
    regard to case, as GitHub compares owners and repositories and the config compares groups)."""
    kind, name = _subject(subject)
    for found in _MARKER_LINE.finditer(body or ""):
        if found["kind"] == kind and found["name"].lower() == name.lower() and found["month"] == month:
            return True
    return False


def _subject(subject: str) -> tuple[str, str]:
    """The marker's key and name of a repository (`owner/name`) or a group (`group:<name>`); ValueError else."""
    if subject.startswith("group:"):
        name = subject.removeprefix("group:")
        if not GROUP_NAME.fullmatch(name):
            raise ValueError(f"not a group's name: {name!r}")
        return "group", name
    check_full_name(subject)
    return "repo", subject


def github_length(text: str) -> int:
    """The length GitHub's body limit is checked against, counted on the safe side (see BODY_LIMIT)."""
    return len(text.encode("utf-16-le")) // 2


def content_hash(title: str, body: str) -> str:
    return hashlib.sha256(f"{title}\n{body}".encode()).hexdigest()


# --- fitting the report into one issue body -------------------------------------------------------


@dataclass
class _Section:
    heading: str  # the `## ` part: the heading line and the text before its first theme
    themes: list[str]


_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def _split(markdown: str) -> tuple[str, list[_Section]]:
    """The text before the first `## ` heading, and the `## ` sections with their `### ` themes.

    Lines starting with `## ` or `### ` are headings: the renderer escapes every character of the
    data that could start a line of structure, so only its templates write such lines."""
    preamble = ""
    sections: list[_Section] = []
    for line in _LINE.findall(markdown):
        if line.startswith("## "):
            sections.append(_Section(line, []))
        elif line.startswith("### ") and sections:
            sections[-1].themes.append(line)
        elif not sections:
            preamble += line
        elif sections[-1].themes:
            sections[-1].themes[-1] += line
        else:
            sections[-1].heading += line
    return preamble, sections


def link_destination(url: str) -> str:
    """`url` as a Markdown link destination, `<url>`: inside the angle brackets nothing (a parenthesis,
    a bracket) can end the link early. ValueError for a URL that is not http(s) or holds what could
    (a space, a line break, an angle bracket, a backslash)."""
    if not _URL.fullmatch(url):
        raise ValueError("a link in the issue must be an http(s) URL without spaces or angle brackets")
    return f"<{url}>"


def fit_body(markdown: str, *, marker_line: str, full_report_url: str, limit: int = BODY_LIMIT) -> str:
    """The issue body: the marker line, then the report, shortened when it is longer than GitHub
    allows (`limit`, counted by `github_length`).

    Shortened, the body keeps the title lines and the sections before the first theme (the
    overview), the final sections after the last theme (Scope and Method, which says how every
    number is counted), and every theme, so that one huge theme cannot push the others out: each
    theme starts as its heading, then in rounds each takes its next line while there is room; the
    themes that run out of room are cut there, with a line saying how many pull requests they leave
    out and linking the full report. Short themes are whole and the longest are cut to about as
    many lines each. A notice after the themes links the full report. Room for the final sections
    is kept before themes are added: added after them, they would almost never fit. Should even
    the themes' headings not all fit, the report's first themes that do are shown; should the final
    sections not fit, they go; should the overview itself not fit, it is cut after a whole line.
    """
    destination = link_destination(full_report_url)
    if not _MARKER_LINE.fullmatch(marker_line):
        raise ValueError(f"not a marker line: {marker_line!r}")
    head = marker_line + "\n"
    if github_length(head + markdown) <= limit:
        return head + markdown

    preamble, sections = _split(markdown)
    themed = [i for i, section in enumerate(sections) if section.themes]
    first = themed[0] if themed else len(sections)
    last = themed[-1] if themed else len(sections) - 1
    opening = preamble + "".join(s.heading + "".join(s.themes) for s in sections[:first])
    closing = "".join(s.heading + "".join(s.themes) for s in sections[last + 1 :])
    total = sum(len(s.themes) for s in sections)

    def notice(shown: int | None, shortened: bool) -> str:
        what = f"{shown} of {total} themes" if shown is not None else "the beginning of the report"
        if shortened:
            what += ", the longest shortened"
        return (
            f"\n\n> This issue shows {what}: GitHub allows {limit:,} characters in an issue body. "
            f"[Read the full report]({destination}).\n"
        )

    def assemble(text: str, shown: int | None, shortened: bool, end: str) -> str:
        return head + text.rstrip("\n") + notice(shown, shortened) + ("\n" + end if end else "")

    # The budget counts the text before `assemble` trims the newlines ending it, and the longest
    # notice: the body assembled is never longer.
    notice_cost = max(github_length(notice(total, True)), github_length(notice(None, False)))
    room = limit - github_length(head + opening) - notice_cost
    if room < 0:  # the overview alone is too long: whole lines of it, then the notice
        kept = ""
        for line in _LINE.findall(opening):
            if github_length(assemble(kept + line, None, False, "")) > limit:
                break
            kept += line
        body = assemble(kept, None, False, "")
        if github_length(body) > limit:
            raise ValueError(f"a body limit of {limit} leaves no room for the marker line and the notice")
        return body
    if closing and github_length(closing) + 1 <= room:
        room -= github_length(closing) + 1
    else:
        closing = ""

    # The report's first themes whose shortest forms fit (all of them, but for a tiny limit), each
    # with its section's heading before the section's first theme.
    themes: list[tuple[_Cut, str]] = []  # a theme, and what comes before it: its section's heading or ""
    for section in sections[first : last + 1]:
        for index, theme in enumerate(section.themes):
            cut, before = _Cut(theme, destination), section.heading if index == 0 else ""
            if cut.length + github_length(before) > room:
                break
            room -= cut.length + github_length(before)
            themes.append((cut, before))
        else:
            continue
        break
    # Then, in rounds, each theme not yet whole takes its next line while there is room: the longest
    # themes are the ones cut, each to about as many lines as the others.
    growing = [cut for cut, _ in themes if not cut.whole]
    while growing:
        still = []
        for cut in growing:
            cost = cut.next_cost()
            if cost <= room:
                room -= cost
                cut.take()
                if not cut.whole:
                    still.append(cut)
        growing = still
    text = opening + "".join(before + cut.text() for cut, before in themes)
    shortened = not all(cut.whole for cut, _ in themes)
    return assemble(text, len(themes) if total else None, shortened, closing)


# A pull request's citation as the renderer writes it, `[main #123](https://github.com/…)`. Only
# citations match: the renderer neutralises a `#` before a digit in any other text (`#<!-- -->123`).
_CITATION = re.compile(r"#[0-9]+\]\(https://github\.com/")


class _Cut:
    """A theme, whole or cut to its heading and first lines (whole lines: a cut inside one could
    leave an escape, a link or an HTML comment open), with a line after them that says how many pull
    requests it leaves out and links the full report. `length` is the text's."""

    def __init__(self, theme: str, destination: str) -> None:
        self.theme, self.destination = theme, destination
        self.lines = _LINE.findall(theme.rstrip("\n"))
        self.citations = [len(_CITATION.findall(line)) for line in self.lines]
        self.kept, self.used, self.left_out = 1, github_length(self.lines[0]), sum(self.citations[1:])
        self.length = self.used + github_length(self._more(self.left_out))
        if github_length(theme) <= self.length:  # no longer whole than cut
            self.kept, self.length = len(self.lines), github_length(theme)

    @property
    def whole(self) -> bool:
        return self.kept == len(self.lines)

    def next_cost(self) -> int:
        """What taking the next line adds to `length` (the whole theme's length, for the last line)."""
        if self.kept + 1 == len(self.lines):
            return github_length(self.theme) - self.length
        line = self.lines[self.kept]
        after = self.left_out - self.citations[self.kept]
        return self.used + github_length(line) + github_length(self._more(after)) - self.length

    def take(self) -> None:
        self.length += self.next_cost()
        self.used += github_length(self.lines[self.kept])
        self.left_out -= self.citations[self.kept]
        self.kept += 1

    def text(self) -> str:
        if self.whole:
            return self.theme
        return "".join(self.lines[: self.kept]) + self._more(self.left_out)

    def _more(self, left_out: int) -> str:
        what = f"{left_out} more pull request{'' if left_out == 1 else 's'}" if left_out else "more"
        return f"\n… and {what} in [the full report]({self.destination}).\n\n"  # after a line's end


# --- publishing -------------------------------------------------------------------------------------


def publish_issue(
    client: GitHubClient,
    target_repo: str,
    subject: str,
    month: str,
    title: str,
    markdown: str,
    *,
    full_report_url: str,
    known_number: int | None = None,
    creator: str | None = None,
    limit: int = BODY_LIMIT,
) -> Publication:
    """Publish `markdown` (the report of `subject`'s `month`: a repository's `owner/name` or a group's
    `group:<name>`, see `marker`) as the month's issue in `target_repo`.

    `known_number` is the issue number stored by the last publication, if any. `creator`, when
    given, is the login the tracker posts as (a user, or an app's `<slug>[bot]`): only its issues
    are taken for the month's issue, so that an issue anyone else opened with a copied marker line is
    never overwritten. Raises `RateLimited` (re-schedule for `retry_at`; nothing was written),
    `Unavailable` (GitHub did not answer; a create may or may not have happened, and the next
    attempt finds it by its marker) and `RequestRefused` (e.g. 403 without write access, 410 when
    the repository's issues are disabled).
    """
    check_full_name(target_repo)
    if creator is not None:
        check_login(creator)
    line = marker(subject, month)
    title = title.strip()
    if not title or "\n" in title or "\r" in title:
        raise ValueError("an issue title is one non-empty line")
    body = fit_body(markdown, marker_line=line, full_report_url=full_report_url, limit=limit)
    truncated = body != line + "\n" + markdown
    digest = content_hash(title, body)

    existing = _find(client, target_repo, subject, month, known_number, creator)
    if existing is None:
        created = client.create_issue(target_repo, title, body)
        return Publication(int(created["number"]), str(created["html_url"]), "created", digest, truncated)

    number = int(existing["number"])
    changes: dict[str, Any] = {}
    if existing.get("title") != title:
        changes["title"] = title
    # A body saved from GitHub's web editor comes back with CRLF line ends; the text is the same.
    if (existing.get("body") or "").replace("\r\n", "\n") != body:
        changes["body"] = body
    reopen = existing.get("state") != "open"
    if reopen:
        changes.update(state="open", state_reason="reopened")
    if not changes:
        return Publication(number, str(existing["html_url"]), "unchanged", digest, truncated)
    updated = client.update_issue(target_repo, number, changes)
    return Publication(number, str(updated["html_url"]), "reopened" if reopen else "updated", digest, truncated)


def _find(
    client: GitHubClient,
    target_repo: str,
    subject: str,
    month: str,
    known_number: int | None,
    creator: str | None,
) -> dict[str, Any] | None:
    if known_number is not None:
        try:
            issue = client.issue(target_repo, known_number)
        except RequestRefused as refused:
            if refused.status not in (404, 410):  # 404: gone or unreadable; 410: deleted
                raise
        else:
            if _is_ours(issue, target_repo, subject, month, creator):
                return issue
    for issue in client.issues(target_repo, state="all", creator=creator):
        if _is_ours(issue, target_repo, subject, month, creator):
            return issue
    return None


def _is_ours(issue: dict[str, Any], target_repo: str, subject: str, month: str, creator: str | None) -> bool:
    if "pull_request" in issue:  # GitHub's issue endpoints also answer with pull requests
        return False
    # A transferred issue answers from its new repository (GET follows GitHub's 301).
    repository_url = str(issue.get("repository_url") or "")
    if not repository_url.lower().endswith("/repos/" + target_repo.lower()):
        return False
    if creator is not None and str((issue.get("user") or {}).get("login", "")).lower() != creator.lower():
        return False
    return carries_marker(issue.get("body"), subject, month)
