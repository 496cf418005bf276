"""Group reports: one report a month over several repositories (`groups:` in TRACKER_CONFIG, issue 34).

- `GET /reports/groups/<name>/<YYYY-MM|current>.<md|html|json>?cutoff=YYYY-MM-DD&lang=en|zh-CN`;
- `GET /api/v1/groups/<name>/months/<YYYY-MM|current>?cutoff=…`: the JSON document.

Each member is shown to whoever may read its own reports (tracker.web.access.authorize and `Grant.require`, as
its routes ask): a public one to anyone, a private one to the admin (`Authorization: Bearer`) or the holder of a
signed link to that repository's month (`?token=`, which may be given once per member). A member this reader may
not read is left out of the table, the totals and the themes, and is never named: the report says only that
some members are not shown. A group none of whose members this reader may read is answered as an unknown group.

A repository of the GitHub account `groups` keeps its reports at /reports/groups/<repo>/…, as any repository, as
long as no group has the name of that repository.

A finalised member's month at its last day is its record, as its own route serves it (`?live=1`: the ledger
now, for every member). A finalised group's month at its last day is the group's record (tracker.records.groups),
byte for byte, to a reader who may read every member it names; anyone else gets the merge of what they may see.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from flask import Blueprint, Response, request
from markupsafe import escape

from tracker.core.window import Window, WindowError
from tracker.reports.collector import collector_paused
from tracker.reports.groups import (
    GroupRequest,
    UnknownGroup,
    group_bytes,
    group_record_for,
    member_path,
    resolve_group,
)
from tracker.reports.render import FORMATS, Document, UnknownLanguage, language
from tracker.services import Services
from tracker.web.access import (
    NO_STORE,
    TOKEN_PARAMETER,
    AccessDenied,
    NotShown,
    admin_request,
    authorize,
    carry_token,
)
from tracker.web.api import error_answer, report
from tracker.web.context import clipped, query_argument
from tracker.web.context import services as current_services

blueprint = Blueprint("groups", __name__)

_MEDIA_TYPES = {"md": "text/markdown; charset=utf-8", "html": "text/html; charset=utf-8", "json": "application/json"}
# The most `?token=` values a request may give: one per member of a large group is plenty.
MAX_TOKENS = 50


@blueprint.get("/api/v1/groups/<name>/months/<month>")
def group_month(name: str, month: str) -> Any:
    """The group's JSON document (the same as /reports/groups/<name>/<month>.json)."""
    return _answer(name, month, "json", "en")


@blueprint.get("/reports/groups/<name>/<file>")
def group_report(name: str, file: str) -> Any:
    """`<YYYY-MM|current>.<md|html|json>?cutoff=YYYY-MM-DD&lang=en|zh-CN`."""
    services = current_services()
    if services.config.group_named(name) is None and services.state.repository_name(f"groups/{name}") is not None:
        return report("groups", name, file)  # a repository of the GitHub account `groups`, and no group of that name
    month, _, fmt = file.rpartition(".")
    if fmt not in FORMATS or not month:
        return {"error": f"{clipped(file)!r}: ask for <YYYY-MM or current>.md, .html or .json"}, 404
    try:
        lang = language(query_argument("lang"))
    except UnknownLanguage as exc:
        return error_answer(fmt, 400, str(exc))
    return _answer(name, month, fmt, lang)


class Readers:
    """Which members this request may read, and the link token that opens each private one it may."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.authorization = request.headers.get("Authorization")
        self.tokens = [token for token in request.args.getlist(TOKEN_PARAMETER)[:MAX_TOKENS] if token]
        self.private = False  # a private member was asked about: the answer differs by reader
        self.opened: dict[str, str] = {}  # member -> the token of the link that opened it

    def may_read(self, repo: str, window: Window) -> bool:
        settings, config = self.services.settings, self.services.config
        if config.is_public(repo):
            return True
        self.private = True
        if admin_request(settings, self.authorization):
            return True
        for token in self.tokens:
            try:
                grant = authorize(settings, config, repo, None, token)
                grant.require(repo, window)  # a link opens its month (and cutoff) only
            except (NotShown, AccessDenied):
                continue
            if grant.token is not None:
                self.opened[repo.lower()] = grant.token
            return True
        return False

    @property
    def headers(self) -> dict[str, str]:
        # An answer that depends on who asks is never kept by a shared cache.
        return dict(NO_STORE) if self.private else {}


def _answer(name: str, month: str, fmt: str, lang: str) -> Any:
    services = current_services()
    readers = Readers(services)
    try:
        group = resolve_group(services, clipped(name), clipped(month), query_argument("cutoff"), readers.may_read)
    except UnknownGroup:
        return unknown_group_answer(fmt, services, clipped(name))
    except WindowError as exc:
        return error_answer(fmt, 400, str(exc), readers.headers)
    if group.hidden and not group.members and not group.waiting:
        # Nothing of it this reader may see: as for a name that is not a group, so its existence says nothing.
        return unknown_group_answer(fmt, services, clipped(name))
    live = request.args.get("live") == "1"
    record = None if live else group_record_for(services, group, readers.may_read)
    headers = readers.headers
    if record is not None:  # the group's finalised month, byte for byte, to a reader who may see all it names
        body = record.document(fmt, lang).encode("utf-8")
        headers["X-Tracker-Record"] = f"revision={record.revision}; content-hash={record.content_hash}"
    else:
        with collector_paused():
            body = group_bytes(services, group, Document(fmt, lang), services.redis, live=live)
    if fmt == "html" and readers.opened:
        body = _with_tokens(body.decode("utf-8"), group, readers).encode("utf-8")
    return Response(body, content_type=_MEDIA_TYPES[fmt], headers=headers)


def unknown_group_answer(fmt: str, services: Services, name: str) -> Any:
    """404 for a name that is not a group this reader may see, naming the groups they may: the admin every one,
    anyone else those with a public member (a group of private repositories alone is not named to them)."""
    config = services.config
    admin = admin_request(services.settings, request.headers.get("Authorization"))
    tracked = services.state.repository_names() if config.groups and not admin else []
    groups = [
        group
        for group in config.groups
        if admin or any(config.is_public(member) for member in config.members_of(group, tracked))
    ]
    known = f"the groups: {', '.join(groups)}" if groups else "no groups are configured (`groups:` in TRACKER_CONFIG)"
    return error_answer(fmt, 404, f"no group {name!r} to show; {known}", NO_STORE, extra={"groups": groups})


def _with_tokens(html: str, group: GroupRequest, readers: Readers) -> str:
    """The HTML with the link tokens that opened members: every one in the page's own links and its cutoff form
    (so the page keeps opening the members it opened), and each member's own in the link to its report. After
    the cache, which keeps one copy for every reader."""
    for token in dict.fromkeys(readers.opened.values()):
        html = carry_token(html, token)
    for member in group.members:
        own = readers.opened.get(member.repo.lower())
        if own is not None:
            link = f'href="{escape(member_path(member.repo, str(group.month), "html"))}?'
            html = html.replace(link, f"{link}{TOKEN_PARAMETER}={escape(quote(own, safe=''))}&amp;")
    return html
