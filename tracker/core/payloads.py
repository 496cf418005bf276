"""Pydantic models of GitHub webhook bodies.

Two depths on purpose. `PullRequestShape` is checked in the request (straight from the raw bytes,
which is cheap) and holds only what the tracker cannot work without; `PullRequestEvent` is parsed
by the worker. Both ignore unknown keys and tolerate absent optional ones, because GitHub keeps
adding fields and GitHub Enterprise Server sends older shapes.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

_LENIENT = ConfigDict(extra="ignore", frozen=True)

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


# --- the minimal shape, checked in the request -------------------------------------------------


class _PullRequestTimes(BaseModel):
    model_config = _LENIENT
    number: int
    created_at: datetime
    updated_at: datetime


class _RepositoryName(BaseModel):
    model_config = _LENIENT
    full_name: str = Field(min_length=3)


class PullRequestShape(BaseModel):
    model_config = _LENIENT
    action: str = Field(min_length=1)
    pull_request: _PullRequestTimes
    repository: _RepositoryName


def check_shape(document: bytes) -> PullRequestShape:
    """Validate the minimal shape of a `pull_request` body; raise MalformedBody or IncompleteBody."""
    try:
        return PullRequestShape.model_validate_json(document)
    except ValidationError as exc:
        raise _explain(exc) from exc


def _explain(exc: ValidationError) -> MalformedBody | IncompleteBody:
    first = exc.errors(include_url=False)[0]
    if first["type"] in {"json_invalid", "json_type"}:
        return MalformedBody(f"the body is not valid JSON ({first['msg']})")
    field = ".".join(str(part) for part in first["loc"]) or "(body)"
    problem = "is missing" if first["type"] == "missing" else first["msg"].lower()
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
    sha: str | None = None


class PullRequest(BaseModel):
    model_config = _LENIENT
    number: int
    title: str = ""
    body: str | None = None
    state: str = "open"
    draft: bool = False
    merged: bool | None = None
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None
    merged_at: datetime | None = None
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


class PullRequestEvent(BaseModel):
    """A `pull_request` delivery as the worker sees it."""

    model_config = _LENIENT
    action: str
    number: int | None = None
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
    """GitHub sends `ping` when a hook is created; it has no `action`."""

    model_config = _LENIENT
    zen: str | None = None
    hook_id: int | None = None
    hook: Hook = Hook()


def parse_ping(document: bytes) -> PingEvent:
    try:
        return PingEvent.model_validate_json(document)
    except ValidationError as exc:
        raise _explain(exc) from exc
