"""Who may read a report.

Anyone may read the reports of a public repository (the default). A repository configured with
`public: false` (`tracker.config`) answers only to

- the admin: `Authorization: Bearer <TRACKER_ADMIN_TOKEN>`, compared in constant time; or
- the holder of a signed link: `?token=<t>`, made by `tracker link`. The token is an itsdangerous
  `URLSafeTimedSerializer` token keyed by TRACKER_LINK_SECRET (salted for this one use, so the same
  secret could sign nothing else we accept). It binds the repository (case-insensitively, as GitHub
  names them), the month, the cutoff or none (then any cutoff of that month), and a lifetime counted
  from the signing time that itsdangerous stamps into it. Languages and formats are free: a link to
  a month's HTML also opens its Markdown and JSON.

To a reader without access a private repository is a name the tracker knows nothing of: the same
status, body and headers as an unknown name (`NotShown`, which the routes answer as they answer an
unknown repository, with `unknown_or_private`'s sentence), so nothing tells an outsider which names
exist. That reader is one with no credential, a bearer token that is not the admin's, a link that is
tampered, signed with another secret or made for another repository, or any link while
TRACKER_LINK_SECRET is not set. The holder of a link made for this repository has been let in before
and learns more, each a 403 with a JSON `{"error": ...}` saying what to do: the link expired (and
when), or it is for another month or cutoff. No secret and no token ever appears in an answer or a
log line.

A page opened with a link keeps working as the reader moves on: `carry_token` adds the token to the
HTML report's own links (language switch, Markdown, JSON) and to its cutoff picker, a GET form.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from itsdangerous import BadData, TimestampSigner, URLSafeTimedSerializer
from markupsafe import escape

from tracker.config import TrackerConfig
from tracker.core.window import Window
from tracker.settings import Settings

log = logging.getLogger(__name__)

TOKEN_PARAMETER = "token"
# The salt makes the signing key of links differ from any other use of the same secret; the version
# lets a later format refuse these tokens rather than misread them.
_SALT = "tracker.report-link.v1"
MAX_LIFETIME = timedelta(days=366)
_DURATION = re.compile(r"(\d+)([mhdw])")
_UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
NO_STORE = {"Cache-Control": "private, no-store"}

TAMPERED = "the link is not valid (tampered or signed with another secret)"


class AccessDenied(Exception):
    """A report request refused; `status` and `message` are the answer."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = {**NO_STORE, **(headers or {})}

    def answer(self) -> tuple[dict[str, str], int, dict[str, str]]:
        return {"error": self.message}, self.status, self.headers


class NotShown(LookupError):
    """A private repository, asked for by a reader without access: answer as for an unknown name."""


class LinkRefused(ValueError):
    """A token that is not a valid link now: tampered, signed with another secret, or expired."""


class DurationError(ValueError):
    pass


# --- links ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """What a verified link grants."""

    repo: str  # lower case: GitHub matches owner/name without regard to case
    month: str  # YYYY-MM
    cutoff: str | None  # YYYY-MM-DD, or None for any cutoff of the month
    expires_at: datetime  # UTC


class _ClockedSigner(TimestampSigner):
    """itsdangerous' timestamp signer on a given clock, so a link can be signed as of another moment
    (tests sign links that have already expired instead of sleeping)."""

    def __init__(self, *args: Any, clock: Callable[[], float] = time.time, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clock = clock

    def get_timestamp(self) -> int:
        return int(self._clock())


def _serializer(secret: str, clock: Callable[[], float] = time.time) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt=_SALT, signer=_ClockedSigner, signer_kwargs={"clock": clock})


def sign_link(
    secret: str,
    repo: str,
    month: str,
    cutoff: str | None,
    lifetime: timedelta,
    now: datetime | None = None,
) -> str:
    """A token for `repo`'s `month` (at `cutoff`, or any cutoff when None), valid for `lifetime` from
    `now` (default: the present)."""
    seconds = int(lifetime.total_seconds())
    if not 1 <= seconds <= MAX_LIFETIME.total_seconds():
        raise DurationError(f"a link lives from a second to {MAX_LIFETIME.days} days")
    payload = {"r": repo.lower(), "m": month, "c": cutoff, "x": seconds}
    clock = (lambda: now.timestamp()) if now is not None else time.time
    return str(_serializer(secret, clock).dumps(payload))


def read_link(secret: str, token: str, now: datetime | None = None) -> Link:
    """The link a token stands for, if its signature holds and it has not expired at `now`.
    Raises LinkRefused saying which; its message holds neither the token nor the secret."""
    link = _signed_link(secret, token)
    _check_unexpired(link, now)
    return link


def _signed_link(secret: str, token: str) -> Link:
    """The link a token stands for, if its signature holds, expired or not. Raises LinkRefused."""
    try:
        # No max_age here: a link's lifetime is inside the signed payload, known only once the
        # signature is checked; the expiry is then itsdangerous' signing time plus that lifetime.
        payload, signed_at = _serializer(secret).loads(token, return_timestamp=True)
    except BadData:  # a wrong signature, a mangled token, another secret: the exception quotes them
        raise LinkRefused(TAMPERED) from None
    if not _well_formed(payload):
        raise LinkRefused(TAMPERED)  # signed with our secret and salt but not by us: treat as forged
    expires_at = signed_at + timedelta(seconds=payload["x"])
    return Link(repo=payload["r"], month=payload["m"], cutoff=payload["c"], expires_at=expires_at)


def _check_unexpired(link: Link, now: datetime | None) -> None:
    if (now or datetime.now(UTC)) >= link.expires_at:
        raise LinkRefused(f"the link expired at {utc_text(link.expires_at)}: ask for a new one")


def _well_formed(payload: object) -> bool:
    if not isinstance(payload, dict) or set(payload) != {"r", "m", "c", "x"}:
        return False
    lifetime = payload["x"]
    return (
        isinstance(payload["r"], str)
        and isinstance(payload["m"], str)
        and (payload["c"] is None or isinstance(payload["c"], str))
        and isinstance(lifetime, int)
        and not isinstance(lifetime, bool)
        and 0 < lifetime <= MAX_LIFETIME.total_seconds()
    )


def utc_text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(text: str) -> timedelta:
    """`30m`, `12h`, `7d` or `2w`: a link's lifetime, from a minute to MAX_LIFETIME."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise DurationError(f"{text!r} is not a duration: use minutes, hours, days or weeks, e.g. 30m, 12h, 7d, 2w")
    lifetime = int(found.group(1)) * _UNITS[found.group(2)]
    if not timedelta(minutes=1) <= lifetime <= MAX_LIFETIME:
        raise DurationError(f"{text!r}: a link lives from 1m to {MAX_LIFETIME.days}d")
    return lifetime


def link_url(base_url: str, repo: str, month: str, fmt: str, token: str, cutoff: str | None = None) -> str:
    """`<base>/reports/<owner>/<name>/<month>.<fmt>?token=…[&cutoff=…]`."""
    owner, _, name = repo.partition("/")
    path = f"/reports/{quote(owner, safe='')}/{quote(name, safe='')}/{month}.{fmt}"
    query = {TOKEN_PARAMETER: token, **({"cutoff": cutoff} if cutoff else {})}
    return base_url.rstrip("/") + path + "?" + urlencode(query)


# --- the check a request makes --------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """Why a request may read a repository's reports."""

    private: bool
    link: Link | None = None
    token: str | None = None  # the verified link token, for the page's own links

    def require(self, repo: str, window: Window) -> None:
        """A link opens only the month (and cutoff) it was made for. Raises AccessDenied."""
        if self.link is None:
            return
        month, cutoff = str(window.month), window.cutoff.isoformat()
        if self.link.month != month:
            raise AccessDenied(403, f"the link is for {repo} {self.link.month}, not {month}: ask for a link to {month}")
        if self.link.cutoff is not None and self.link.cutoff != cutoff:
            raise AccessDenied(403, f"the link is for {repo} {month} at the cutoff {self.link.cutoff}, not {cutoff}")

    @property
    def headers(self) -> dict[str, str]:
        # A private report is never kept by a shared cache, nor by the browser's disk cache.
        return dict(NO_STORE) if self.private else {}


def authorize(
    settings: Settings,
    config: TrackerConfig,
    repo: str,
    authorization: str | None,
    token: str | None,
    now: datetime | None = None,
) -> Grant:
    """May this request read `repo`'s reports? `authorization` is the Authorization header, `token`
    the `?token=` parameter. Raises NotShown for a reader without access to a private repository,
    and AccessDenied (403) for the holder of this repository's link that has expired."""
    if config.is_public(repo):
        return Grant(private=False)  # a token, even a bad one, changes nothing for a public repository
    if admin_request(settings, authorization):
        return Grant(private=True)
    if token:
        if settings.link_secret is None:
            # The reader is told nothing more than for an unknown name; the operator is told why.
            log.warning("a signed link was refused: TRACKER_LINK_SECRET is not set on this server")
            raise NotShown(repo)
        try:
            link = _signed_link(settings.link_secret.get_secret_value(), token)
        except LinkRefused:
            raise NotShown(repo) from None
        if link.repo != repo.lower():
            raise NotShown(repo)
        try:
            _check_unexpired(link, now)
        except LinkRefused as exc:
            raise AccessDenied(403, str(exc)) from None
        return Grant(private=True, link=link, token=token)
    raise NotShown(repo)


def unknown_or_private(repo: str) -> str:
    """What a reader without access to private repositories is told of a name with nothing to show:
    the same sentence whether no delivery of it has arrived or it is private (a report's answer
    lists, besides, the repositories this reader may see)."""
    return (
        f"no reports of {repo} to show: no deliveries have been received for it, or it is private and needs "
        f"Authorization: Bearer <TRACKER_ADMIN_TOKEN> or a signed link (`tracker link --repo {repo} --month YYYY-MM`)"
    )


def may_be_private(config: TrackerConfig) -> bool:
    """Whether any repository may be private: `defaults` or one repository says `public: false`."""
    return config.defaults.public is False or any(own.public is False for own in config.repositories.values())


def is_admin(settings: Settings, bearer: str) -> bool:
    token = settings.admin_token
    return token is not None and hmac.compare_digest(bearer.encode(), token.get_secret_value().encode())


def admin_request(settings: Settings, authorization: str | None) -> bool:
    """Whether the Authorization header carries the admin token (the index and the repository list
    show private repositories to the admin only)."""
    bearer = bearer_token(authorization)
    return bearer is not None and is_admin(settings, bearer)


def bearer_token(authorization: str | None) -> str | None:
    """The credentials of an `Authorization: Bearer …` header, else None."""
    scheme, _, credentials = (authorization or "").strip().partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


# --- the page's own links -------------------------------------------------------------------------

# The HTML report links its other forms relatively (`2026-09.html?lang=…`, `.md?…`, `.json?…`) and
# has a GET form for the cutoff. Jinja2 autoescapes every value in the page (`"` and `<` included),
# so these patterns can only match the template's own markup, never text from a pull request.
_OWN_LINK = re.compile(r'(\shref=")(\d{4}-\d{2}(?:\.(?:html|md|json)|/prs\.html))\?')
_GET_FORM = re.compile(r'<form\s[^>]*\bmethod="get"[^>]*>', re.IGNORECASE)


def carry_token(html: str, token: str) -> str:
    """The HTML report with the link's token in its own links and forms, so the language switch,
    the cutoff picker, the Markdown and JSON links and the drill-down pages of its numbers keep working for
    the link's holder."""
    in_query = escape(quote(token, safe=""))
    html = _OWN_LINK.sub(lambda m: f"{m.group(1)}{m.group(2)}?{TOKEN_PARAMETER}={in_query}&amp;", html)
    field = f'<input type="hidden" name="{TOKEN_PARAMETER}" value="{escape(token)}">'
    return _GET_FORM.sub(lambda m: m.group(0) + field, html)
