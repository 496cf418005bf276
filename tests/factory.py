"""Pull-request deliveries built on GitHub's own example payload, for tests and benchmarks.

GitHub publishes no merged `closed` example and no `edited` one (fixtures README, "Gaps"): those
shapes are derived here from `pull_request.opened.json` by setting the fields GitHub documents
(`merged`, `merged_at`, `closed_at`, `state`; `changes` for edits), and say so in their delivery ids.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

if TYPE_CHECKING:
    from tracker.store import ledger

_TEMPLATE: dict[str, Any] | None = None


def _template() -> dict[str, Any]:
    global _TEMPLATE
    if _TEMPLATE is None:
        from tests.paths import WEBHOOKS, require_shared

        require_shared()  # a test that builds a payload is skipped in a clone without ../shared
        _TEMPLATE = json.loads((WEBHOOKS / "pull_request.opened.json").read_text())
    return _TEMPLATE


def iso(moment: datetime | str) -> str:
    if isinstance(moment, str):
        return moment
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Delivery:
    event: str
    delivery_id: str
    body: bytes

    def as_record(self) -> dict[str, Any]:
        return {"event": self.event, "delivery_id": self.delivery_id, "body": self.body.decode()}

    def as_ledger_delivery(self, *, form: bool = False, received_at: int | None = None) -> ledger.Delivery:
        """The delivery as the webhook stores it: a JSON body, or the form encoding GitHub also sends."""
        from tracker.core.payloads import FORM_CONTENT_TYPE
        from tracker.store.ledger import Delivery as Stored
        from tracker.store.ledger import now_ms

        payload = json.loads(self.body)
        return Stored(
            id=self.delivery_id,
            event=self.event,
            action=payload["action"],
            repo=payload["repository"]["full_name"],
            hook_id="4242",
            content_type=FORM_CONTENT_TYPE if form else "application/json",
            headers={"X-GitHub-Event": self.event, "X-GitHub-Delivery": self.delivery_id},
            body=urlencode({"payload": self.body.decode()}).encode() if form else self.body,
            received_at=now_ms() if received_at is None else received_at,
        )


def pr_payload(
    action: str,
    number: int,
    *,
    created_at: datetime | str,
    updated_at: datetime | str | None = None,
    closed_at: datetime | str | None = None,
    merged_at: datetime | str | None = None,
    repo: str = "NVIDIA/Megatron-LM",
    title: str | None = None,
    base: str = "main",
    head_sha: str | None = None,
    labels: tuple[str, ...] = (),
    draft: bool = False,
    body: str | None = "",
) -> dict[str, Any]:
    """A `pull_request` body for `action` with the given state, on GitHub's example payload."""
    payload = copy.deepcopy(_template())
    pr = payload["pull_request"]
    payload["action"] = action
    payload["number"] = number
    owner, name = repo.split("/", 1)
    payload["repository"]["full_name"] = repo
    payload["repository"]["name"] = name
    payload["repository"]["owner"]["login"] = owner
    pr["number"] = number
    pr["title"] = title if title is not None else f"Change number {number}"
    pr["body"] = body
    pr["html_url"] = f"https://github.com/{repo}/pull/{number}"
    pr["created_at"] = iso(created_at)
    pr["updated_at"] = iso(updated_at if updated_at is not None else created_at)
    pr["closed_at"] = iso(closed_at) if closed_at is not None else None
    pr["merged_at"] = iso(merged_at) if merged_at is not None else None
    pr["merged"] = merged_at is not None
    pr["state"] = "closed" if (closed_at is not None or merged_at is not None) else "open"
    pr["draft"] = draft
    pr["base"]["ref"] = base
    pr["head"]["sha"] = head_sha or hashlib.sha1(f"{repo}#{number}".encode()).hexdigest()
    pr["labels"] = [{"id": i, "name": label, "color": "ededed", "default": False} for i, label in enumerate(labels)]
    if action == "synchronize":
        payload["before"] = hashlib.sha1(f"before-{pr['head']['sha']}".encode()).hexdigest()
        payload["after"] = pr["head"]["sha"]
    return payload


def delivery(event: str, payload: dict[str, Any], delivery_id: str | None = None) -> Delivery:
    raw = json.dumps(payload).encode()
    return Delivery(event, delivery_id or hashlib.sha256(raw).hexdigest()[:32], raw)


@dataclass
class PullRequestStory:
    """A PR's life as a series of deliveries, each carrying the PR's state at that moment."""

    number: int
    created_at: datetime
    repo: str = "NVIDIA/Megatron-LM"
    base: str = "main"
    title: str | None = None
    deliveries: list[Delivery] = field(default_factory=list)
    _closed_at: datetime | None = None
    _merged_at: datetime | None = None
    _head: int = 0

    def _emit(self, action: str, at: datetime, **extra: Any) -> PullRequestStory:
        fields: dict[str, Any] = {
            "created_at": self.created_at,
            "updated_at": at,
            "closed_at": self._closed_at,
            "merged_at": self._merged_at,
            "repo": self.repo,
            "base": self.base,
            "title": self.title,
            "head_sha": hashlib.sha1(f"{self.repo}#{self.number}@{self._head}".encode()).hexdigest(),
        }
        fields.update(extra)
        payload = pr_payload(action, self.number, **fields)
        tag = f"{self.repo}#{self.number}:{action}@{iso(at)}:{len(self.deliveries)}"
        self.deliveries.append(delivery("pull_request", payload, hashlib.sha256(tag.encode()).hexdigest()[:32]))
        return self

    def opened(self) -> PullRequestStory:
        return self._emit("opened", self.created_at)

    def pushed(self, at: datetime) -> PullRequestStory:
        self._head += 1
        return self._emit("synchronize", at)

    def labeled(self, at: datetime, *labels: str) -> PullRequestStory:
        return self._emit("labeled", at, labels=labels)

    def retitled(self, at: datetime, title: str) -> PullRequestStory:
        self.title = title
        return self._emit("edited", at)

    def closed(self, at: datetime) -> PullRequestStory:
        self._closed_at = at
        return self._emit("closed", at)

    def merged(self, at: datetime) -> PullRequestStory:
        self._closed_at = at
        self._merged_at = at
        return self._emit("closed", at)

    def reopened(self, at: datetime) -> PullRequestStory:
        self._closed_at = None
        return self._emit("reopened", at)
