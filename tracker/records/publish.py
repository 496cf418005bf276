"""Publishing a month where its repository's config says: Markdown files in a directory, and one
GitHub issue per month, updated in place.

The final edition publishes the month's record (the frozen bytes); a partial edition (weekly, when
configured) renders the month to date, with a "Since Last Week" section: what changed since the cutoff
of the month's previous partial edition (tracker.core.since). Every publication is recorded with its
content hash and result, and shown in status. Publishing the same content again writes nothing.

A group's finalised month (tracker.records.groups) is published where the group's own `publish` says: to files
under `reports/groups/<name>/` of its directory, and as one issue per group and month in its `issue_repository`
(found again by the marker `group=<name>`, never a repository's: tracker.github.issues). Its final edition only:
a group has no weekly partial. It is the admin's act, and the files and the issue hold every member, private ones
too (the group's record is the admin's view). Publications are recorded under the group's `group_subject`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from urllib.parse import urljoin

from tracker import metrics
from tracker.config import PublishConfig
from tracker.core.since import Since, publication_cutoff
from tracker.core.window import Month, month_window, today_in
from tracker.github.client import GitHubError, RateLimited, Unavailable
from tracker.github.issues import link_destination, publish_issue
from tracker.github.retry import held_back, next_run
from tracker.queue import enqueue_publish, enqueue_publish_group
from tracker.records.store import group_key, group_subject
from tracker.reports.loading import report_for, since_for
from tracker.reports.render import render
from tracker.reports.request import MonthRequest
from tracker.services import Services

log = logging.getLogger(__name__)

FINAL, PARTIAL = "final", "partial"
LANGUAGE_FOLDERS = {"en": "en-US", "zh-CN": "zh-CN"}
PARTIAL_EVERY = timedelta(days=7)


def publish(services: Services, full_name: str, month: str) -> str:
    """After a finalisation: queue the final edition's publication (run it here without Redis)."""
    if not services.config.publishing_for(full_name).enabled:
        return ""
    if services.redis is None:
        return publish_month(services, full_name, month, FINAL)
    enqueue_publish(services.records_queue, full_name, month, FINAL)
    return "publication queued"


def publish_group(services: Services, name: str, month: str, outages: int = 0) -> str:
    """Publish a group's recorded month where the group's `publish` says (a configured name): files under
    `directory`, the issue in `issue_repository` (waiting for GitHub as a repository's issue does: the job
    `workers.jobs.publish_group_month` runs this again later)."""
    target = services.config.group_publishing(name)
    if not target.enabled:
        return ""
    record = services.records.latest_group(name, month)
    if record is None:
        return "nothing to publish: the group's month has no record"
    subject = group_subject(name)
    english, chinese = record.document("md", "en"), record.document("md", "zh-CN")
    results = []
    if target.directory is not None:
        folder = group_folder(target.directory, name)
        results.append(_publish_files(services, target, folder, subject, month, FINAL, english, chinese))
        metrics.published("files", FINAL)
    if target.issue_repository is not None:

        def again(at: float, outages: int) -> None:
            enqueue_publish_group(services.records_queue, name, month, at=at, outages=outages)

        path = f"groups/{group_key(name)}"
        results.append(_publish_issue(services, target, subject, path, month, FINAL, english, outages, again))
    return "; ".join(results)


def publish_due_partials(services: Services) -> str:
    """Queue the month-to-date edition of every repository that asks for weekly partial
    publications and has had none for a week."""
    queued = 0
    for full_name in services.state.repository_names():
        if not services.config.publishing_for(full_name).weekly_partial:
            continue
        month = str(Month.containing(today_in(services.config.timezone_for(full_name))))
        last = services.records.last_publication_at(full_name, month, PARTIAL)
        if last is not None and time.time() - last / 1000 < PARTIAL_EVERY.total_seconds():
            continue
        if services.redis is None:
            publish_month(services, full_name, month, PARTIAL)
        else:
            enqueue_publish(services.records_queue, full_name, month, PARTIAL)
        queued += 1
    return f"{queued} partial publications queued" if queued else ""


def publish_month(services: Services, full_name: str, month: str, edition: str, outages: int = 0) -> str:
    """The job: publish one edition of a month to every configured target. For the issue it waits for
    GitHub as every job does (tracker.github.retry: the job runs again later; `outages` counts the
    GitHub outages in a row before this run). Running again is safe after an outage too: a create
    that GitHub may have done without answering is found by its marker (tracker.github.issues)."""
    target = services.config.publishing_for(full_name)
    documents = _documents(services, full_name, month, edition)
    if documents is None:
        return "nothing to publish: the month has no record"
    english, chinese = documents
    results = []
    if target.directory is not None:
        folder = target.directory / "reports"
        results.append(_publish_files(services, target, folder, full_name, month, edition, english, chinese))
        metrics.published("files", edition)
    if target.issue_repository is not None:

        def again(at: float, outages: int) -> None:
            enqueue_publish(services.records_queue, full_name, month, edition, at=at, outages=outages)

        results.append(_publish_issue(services, target, full_name, full_name, month, edition, english, outages, again))
    return "; ".join(results)


def _documents(services: Services, full_name: str, month: str, edition: str) -> tuple[str, str] | None:
    if edition == FINAL:
        record = services.records.latest(full_name, month)
        if record is None:
            return None
        return record.document("md", "en"), record.document("md", "zh-CN")
    stored = services.state.repository_name(full_name) or full_name
    timezone = services.config.timezone_for(stored)
    parsed = Month.parse(month)
    cutoff = min(parsed.last_day, today_in(timezone))
    request = MonthRequest(stored, month_window(parsed, cutoff, timezone))
    report = report_for(services, request)
    earlier = last_partial_cutoff(services, full_name, parsed, cutoff, timezone)
    since: Since | None = since_for(services, request, earlier, report) if earlier is not None else None
    english = render(report, "md", "en", since=since, last_week=True)
    return english, render(report, "md", "zh-CN", since=since, last_week=True)


def last_partial_cutoff(services: Services, full_name: str, month: Month, cutoff: date, timezone: str) -> date | None:
    """The earlier cutoff of a partial edition's "Since Last Week": the cutoff of the month's previous partial
    edition (the day it ran, `publication_cutoff`); None for the month's first, which is all new. A partial
    edition that ran already today (this one, run again after GitHub made it wait: its files are written) is
    not the previous one: the section then starts `PARTIAL_EVERY` before the cutoff, or at the month's first
    day."""
    last = services.records.last_publication_at(full_name, str(month), PARTIAL)
    if last is None:
        return None
    day = publication_cutoff(last // 1000, month, timezone)
    if day >= cutoff:
        day = max(month.first_day, cutoff - PARTIAL_EVERY)
    return day


def file_path(directory: Path, month: str, lang: str) -> Path:
    """A repository's month under its `publish.directory`."""
    return month_file(directory / "reports", month, lang)


def group_folder(directory: Path, name: str) -> Path:
    """Where a group's months go under its `publish.directory` (beside its repositories' when they share it)."""
    return directory / "reports" / "groups" / name


def group_file_path(directory: Path, name: str, month: str, lang: str) -> Path:
    return month_file(group_folder(directory, name), month, lang)


def month_file(folder: Path, month: str, lang: str) -> Path:
    year, number = month.split("-")
    return folder / LANGUAGE_FOLDERS[lang] / year / f"{number}.md"


def as_file(markdown: str, month: str, lang: str) -> str:
    """The report as a file beside its translation: the link to the other language becomes the
    relative path of the other file (`../../zh-CN/2026/09.md`)."""
    other = "zh-CN" if lang == "en" else "en"
    year, number = month.split("-")
    lines = markdown.split("\n")
    for index, line in enumerate(lines[:6]):
        if line.startswith("> ") and f"({month}.md?lang={other}&cutoff=" in line:
            start = line.index(f"({month}.md?lang={other}&cutoff=")
            end = line.index(")", start)
            lines[index] = f"{line[:start]}(../../{LANGUAGE_FOLDERS[other]}/{year}/{number}.md){line[end + 1 :]}"
            break
    return "\n".join(lines)


# A group report's link to a member's report, relative to the group's. Only the renderer's templates write one:
# it escapes a `]` of the data (`\]`), which is no link's end.
_MEMBER_LINK = re.compile(r"(?<!\\)\]\((\.\./\.\./[^()\s<>\\]+)\)")


def as_issue(markdown: str, month: str, path: str, report_url: str | None) -> str:
    """The report as an issue body: the link to the Chinese report points at this service when its
    address is configured (`/reports/<path>/`: a repository's `owner/name`, or `groups/<name>`; a relative
    link would point into github.com), else the line goes; so do a group's links to its members' reports
    (`../../<owner>/<name>/…`), which stay as they are without the address. The address is written `<…>`
    (`link_destination`), so nothing in it can end the link."""
    if report_url is not None:
        page = f"{report_url.rstrip('/')}/reports/{path}/{month}.md"
        markdown = _MEMBER_LINK.sub(lambda found: f"]({link_destination(urljoin(page, found[1]))})", markdown)
    lines = markdown.split("\n")
    for index, line in enumerate(lines[:6]):
        marker = f"({month}.md?lang=zh-CN&cutoff="
        if line.startswith("> ") and marker in line:
            if report_url is None:
                del lines[index : index + 2]  # the line and the blank line after it
            else:
                start = line.index(marker)
                end = line.index(")", start)
                url = f"{report_url.rstrip('/')}/reports/{path}/{month}.md?lang=zh-CN"
                lines[index] = f"{line[:start]}({link_destination(url)}){line[end + 1 :]}"
            break
    return "\n".join(lines)


def write_atomically(path: Path, text: str) -> bool:
    """Write `text` to `path` through a temporary file and a rename (readers never see half a file);
    False when the file already holds exactly that text."""
    data = text.encode("utf-8")
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def _publish_files(
    services: Services,
    target: PublishConfig,
    folder: Path,
    full_name: str,
    month: str,
    edition: str,
    english: str,
    chinese: str,
) -> str:
    """Write the month's two files under `folder` (`en-US/YYYY/MM.md`, `zh-CN/YYYY/MM.md`) and record the
    publication under `full_name` (a repository, or a group's `group_subject`)."""
    assert target.directory is not None
    files = {lang: as_file(text, month, lang) for lang, text in (("en", english), ("zh-CN", chinese))}
    written = [write_atomically(month_file(folder, month, lang), text) for lang, text in files.items()]
    result = "written" if any(written) else "unchanged"
    services.records.record_publication(
        full_name,
        month,
        kind="files",
        edition=edition,
        target=str(target.directory),
        content_hash=_hash(files["en"] + files["zh-CN"]),
        result=result,
    )
    return f"files {result}"


def _publish_issue(
    services: Services,
    target: PublishConfig,
    subject: str,
    path: str,
    month: str,
    edition: str,
    english: str,
    outages: int,
    again: Callable[[float, int], None],
) -> str:
    """Publish the month's issue of `subject` (a repository's `owner/name`, or a group's `group_subject`; its
    report served at `/reports/<path>/`), or, while GitHub makes it wait, ask `again(at, outages)` for a later
    run (tracker.github.retry)."""
    quota = services.quota()
    blocked = held_back(quota)
    if blocked:
        again(blocked, outages)
        return "issue waiting for the rate limit"
    try:
        published = _write_issue(services, target, subject, path, month, edition, english)
    except (RateLimited, Unavailable) as exc:
        then = next_run(exc, outages, services.github_backoff, quota)
        if then.at is None:
            raise
        again(then.at, then.outages)
        return f"issue {then.said}"
    metrics.published("issue", edition)
    return published


def _write_issue(
    services: Services, target: PublishConfig, subject: str, path: str, month: str, edition: str, english: str
) -> str:
    assert target.issue_repository is not None
    known = services.records.last_issue_number(subject, month)
    # Without this service's address: the repository's page; a group's (its subject is not its path): the
    # repository of its issues.
    full_report_url = f"https://github.com/{path if subject == path else target.issue_repository}"
    if target.report_url:
        full_report_url = f"{target.report_url.rstrip('/')}/reports/{path}/{month}.html"
    # The report's first line, without its Markdown escapes: an issue title is plain text.
    title = re.sub(r"\\(.)", r"\1", english.split("\n", 1)[0].removeprefix("# ").strip())
    body = as_issue(english, month, path, target.report_url)

    def recorded(target_name: str, content_hash: str, result: str, detail: str) -> None:
        services.records.record_publication(
            subject,
            month,
            kind="issue",
            edition=edition,
            target=target_name,
            content_hash=content_hash,
            result=result,
            detail=detail,
        )

    try:
        with services.github(target.issue_repository) as client:
            outcome = publish_issue(
                client,
                target.issue_repository,
                subject,
                month,
                title,
                body,
                full_report_url=full_report_url,
                known_number=known,
                creator=target.issue_author,
            )
    except GitHubError as exc:
        if not isinstance(exc, RateLimited):  # a rate limit is a pause (re-scheduled), not a failure
            recorded(target.issue_repository, _hash(english), "failed", str(exc))
        raise
    recorded(f"{target.issue_repository}#{outcome.number}", outcome.content_hash, outcome.action, outcome.url)
    return f"issue #{outcome.number} {outcome.action}"


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
