"""From one stored delivery to the rows it adds to the derived state. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tracker.core.attributes import AttributeVersion, version_of
from tracker.core.payloads import json_bytes, parse_pull_request_event
from tracker.core.repository import repository_key
from tracker.core.timeline import Fact, facts_of
from tracker.core.window import month_of

PULL_REQUEST = "pull_request"
# Actions after which the head's files matter. Labels, edits, comments and the like never cost a
# GitHub request.
FILE_ACTIONS = frozenset({"opened", "synchronize", "reopened"})


@dataclass(frozen=True)
class Derivation:
    repo: str  # the key: the full name in lower case
    full_name: str  # as this delivery spells it
    number: int
    facts: tuple[Fact, ...]
    version: AttributeVersion
    activity_months: frozenset[str]  # months (repository time zone) holding one of the facts
    touched_months: frozenset[str]  # months whose reports may read what this delivery added
    wanted_head: tuple[str, str] | None  # (head sha, base sha) whose files should be fetched
    # The GitHub App installation that sent it (an App's webhooks): where to get a token, not a fact.
    installation_id: int | None = field(default=None, compare=False)


def derive(
    delivery_id: str,
    content_type: str,
    body: bytes,
    timezone_for: Callable[[str], str],
) -> Derivation:
    """What a `pull_request` delivery proves. Raises payloads.MalformedBody/IncompleteBody."""
    event = parse_pull_request_event(json_bytes(body, content_type))
    full_name = event.repository.full_name
    tz = timezone_for(full_name)
    facts = tuple(facts_of(event))
    version = version_of(event, delivery_id)
    activity = frozenset(month_of(fact.at, tz) for fact in facts)
    pr = event.pull_request
    wants_files = event.action in FILE_ACTIONS or (event.action == "closed" and pr.merged_at is not None)
    return Derivation(
        repo=repository_key(full_name),
        full_name=full_name,
        number=event.pull_request.number,
        facts=facts,
        version=version,
        activity_months=activity,
        touched_months=activity | {month_of(version.at, tz)},
        wanted_head=(pr.head.sha, pr.base.sha or "") if wants_files and pr.head.sha else None,
        installation_id=event.installation.id if event.installation is not None else None,
    )
