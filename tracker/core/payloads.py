"""Pydantic models of GitHub webhook bodies.

One model, `PullRequestEvent`, is checked in the request (straight from the raw bytes, which is
cheap) and parsed again by the worker, so a body the webhook accepts is one the worker can always
parse (a body that passed a looser check and then failed in the worker would retry for minutes and
end failed). It ignores unknown keys and tolerates absent optional ones, because GitHub keeps adding
fields and GitHub Enterprise Server sends older shapes; what it does read is checked strictly.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import parse_qs

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from tracker.core.repository import check_full_name

_LENIENT = ConfigDict(extra="ignore", frozen=True)

# GitHub's numbers and ids (a PR's number, an installation's id, a hook's id) are positive and fit the
# signed 64-bit integers GitHub and our tables keep them in: a larger one is no delivery GitHub sent,
# and would fail in the worker, where the ledger and the API paths need it, after the webhook's 202.
_GITHUB_ID = Field(gt=0, lt=2**63)
GitHubId = Annotated[StrictInt, _GITHUB_ID]
_DECIMAL_ID = re.compile(r"[1-9][0-9]{0,18}")


def github_id(text: str) -> int | None:
    """The id `text` spells when it is one GitHub could send (a decimal in GitHubId's range), else None:
    for ids that arrive as text (an unsigned header, a row an older release kept)."""
    return int(text) if _DECIMAL_ID.fullmatch(text) and int(text) < 2**63 else None


FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"


class MalformedBody(ValueError):
    """The body is not JSON (or a form without a `payload` field)."""


class IncompleteBody(ValueError):
    """The body is JSON but lacks a field the tracker needs; `field` is its dotted path."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


def json_bytes(body: bytes, content_type: str | None) -> bytes:
    """The JSON document of a delivery: the body itself, or the `payload` field of a form body."""
    if content_type and content_type.split(";", 1)[0].strip().lower() == FORM_CONTENT_TYPE:
        try:
            fields = parse_qs(body.decode("utf-8"), strict_parsing=True)
        except (UnicodeDecodeError, ValueError) as exc:
            raise MalformedBody("the form body could not be decoded") from exc
        payloads = fields.get("payload")
        if not payloads:
            raise MalformedBody("the form body has no payload field")
        return payloads[0].encode("utf-8")
    return body


def check_shape(document: bytes) -> PullRequestEvent:
    """Validate a `pull_request` body as the worker will parse it; raise MalformedBody or IncompleteBody."""
    return parse_pull_request_event(document)


def _explain(exc: ValidationError) -> MalformedBody | IncompleteBody:
    first = exc.errors(include_url=False)[0]
    if first["type"] in {"json_invalid", "json_type"}:
        return MalformedBody(f"the body is not valid JSON ({first['msg']})")
    field = ".".join(str(part) for part in first["loc"]) or "(body)"
    if first["type"] == "missing":
        problem = "is missing"
    elif first["type"] == "value_error":
        problem = str(first["ctx"]["error"])  # our own sentence, as written
    else:
        problem = first["msg"].lower()
    return IncompleteBody(field, problem)


# --- the full event, parsed by the worker -------------------------------------------------------


class Label(BaseModel):
    model_config = _LENIENT
    name: str


class User(BaseModel):
    model_config = _LENIENT
    login: str | None = None


class BranchRef(BaseModel):
    model_config = _LENIENT
    ref: str | None = None
    # A commit id (SHA-1, or SHA-256 on GitHub Enterprise): it becomes part of API paths.
    sha: Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{7,64}$")] | None = None


# Instants GitHub can have written: none before GitHub existed, none centuries ahead (a year 9999
# overflows when shifted into a time zone, and a report can never show it).
_EARLIEST, _LATEST = datetime(2007, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)


def _plausible(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("has no time zone")
    if not _EARLIEST <= value < _LATEST:
        raise ValueError("is not a time GitHub could have written")
    return value


Instant = Annotated[datetime, AfterValidator(_plausible)]


class PullRequest(BaseModel):
    model_config = _LENIENT
    number: GitHubId
    title: str = ""
    body: str | None = None
    state: str = "open"
    draft: bool = False
    merged: bool | None = None
    created_at: Instant
    updated_at: Instant
    closed_at: Instant | None = None
    merged_at: Instant | None = None
    html_url: str | None = None
    user: User = User()
    base: BranchRef = BranchRef()
    head: BranchRef = BranchRef()
    labels: list[Label] = []

    @field_validator("title", mode="before")
    @classmethod
    def _null_title(cls, value: object) -> object:
        return "" if value is None else value

    @field_validator("draft", mode="before")
    @classmethod
    def _null_draft(cls, value: object) -> object:
        return False if value is None else value

    @field_validator("labels", mode="before")
    @classmethod
    def _null_labels(cls, value: object) -> object:
        return [] if value is None else value


class Repository(BaseModel):
    model_config = _LENIENT
    full_name: str

    @field_validator("full_name")
    @classmethod
    def _github_name(cls, value: str) -> str:
        return check_full_name(value)


class Installation(BaseModel):
    """The GitHub App installation that sent a delivery (only in a GitHub App's webhooks)."""

    model_config = _LENIENT
    id: GitHubId


class PullRequestEvent(BaseModel):
    """A `pull_request` delivery as the worker sees it."""

    model_config = _LENIENT
    action: str = Field(min_length=1)
    installation: Installation | None = None
    number: Annotated[int, _GITHUB_ID] | None = None  # not strict, as before: only the bounds are new
    pull_request: PullRequest
    repository: Repository
    before: str | None = None
    after: str | None = None


def parse_pull_request_event(document: bytes) -> PullRequestEvent:
    try:
        return PullRequestEvent.model_validate_json(document)
    except ValidationError as exc:
        raise _explain(exc) from exc


class Hook(BaseModel):
    model_config = _LENIENT
    type: str | None = None
    events: list[str] = []


class PingEvent(BaseModel):
    """GitHub sends `ping` when a hook is created; it has no `action`. The hook's id is read from the
    body, which the signature covers, never from the X-GitHub-Hook-ID header, which anyone replaying
    a captured ping can set at will."""

    model_config = _LENIENT
    zen: str | None = None
    hook_id: GitHubId
    hook: Hook = Hook()

    @model_validator(mode="before")
    @classmethod
    def _hook_id_of_the_hook(cls, value: object) -> object:
        # GitHub documents `hook_id`; a body without it may still carry `hook.id`.
        if isinstance(value, dict) and value.get("hook_id") is None and isinstance(value.get("hook"), dict):
            return {**value, "hook_id": value["hook"].get("id")}
        return value


def parse_ping(document: bytes) -> PingEvent:
    try:
        return PingEvent.model_validate_json(document)
    except ValidationError as exc:
        raise _explain(exc) from exc
