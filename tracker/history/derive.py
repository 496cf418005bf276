"""A PR's history rebuilt from GitHub's REST API (backfill, reconciliation): the same facts and
attribute versions a webhook delivery yields, from the PR object and its issue timeline. Pure.

What the REST API tells, and how it maps onto the webhook path's facts (SEMANTICS, "Events"):
- opened: the PR's `created_at`; merged: `merged_at`; closed, reopened: the timeline events' times.
  GitHub records a merge as a `merged` and a `closed` event at one instant; like a webhook, which
  records no close for a merged PR, the close at the merge instant is not a fact.
- commit activity: GitHub keeps no push times for ordinary pushes. A `head_ref_force_pushed` event
  has its time (rank EVENT_TIME); a `committed` event only the commit's own date (rank COMMIT_DATE,
  "estimated" in the evidence). Each is identified by the head sha it made, as a webhook's push is,
  so the same push seen both ways counts once, at the webhook's time. Commits dated at or before
  the PR's opening are part of the opening, not activity.
- attributes: the PR object is the state now; walking the timeline back undoes each `renamed`,
  `labeled`/`unlabeled`, `ready_for_review`/`convert_to_draft`, and the head at an instant is the
  last head known by then. The timeline records neither earlier bodies nor earlier base branches:
  those versions carry today's (a webhook delivery's version wins at the same instant).

The files a report needs are those of the head each PR had at the end of each day of the range
(the cutoffs a report can have): `heads_needed`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tracker.core.attributes import AttributeVersion, version_at
from tracker.core.derive import Derivation
from tracker.core.payloads import IncompleteBody, Instant, MalformedBody, PullRequest, _explain
from tracker.core.repository import check_full_name, repository_key
from tracker.core.timeline import COMMIT_DATE, EVENT_TIME, Fact, FactKind
from tracker.core.window import Month, WindowError, epoch, local_midnight, month_of

BACKFILL, RECONCILIATION = "backfill", "reconciliation"

_LENIENT = ConfigDict(extra="ignore", frozen=True)


class _Named(BaseModel):
    model_config = _LENIENT
    name: str = ""


class _Rename(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    from_: str = Field("", alias="from")
    to: str = ""


class _Signature(BaseModel):
    # Any date git allows (a wrong clock, a tool that sets a constant date): a commit's own date is
    # clamped to the PR's life where it is used, so it is never checked as a GitHub time.
    model_config = _LENIENT
    date: datetime | None = None


class TimelineEvent(BaseModel):
    """One item of `GET /repos/{o}/{r}/issues/{n}/timeline`: only what a history needs."""

    model_config = _LENIENT
    event: str = ""
    created_at: Instant | None = None
    sha: str | None = None  # `committed`
    commit_id: str | None = None
    committer: _Signature | None = None  # `committed`
    author: _Signature | None = None
    label: _Named | None = None
    rename: _Rename | None = None


class Observation(BaseModel):
    """What a backfill or a reconciliation stores for one PR: GitHub's answers, as read."""

    model_config = _LENIENT
    full_name: str
    range: tuple[int, int]  # the instants [start, end) the run was for
    pull_request: PullRequest
    timeline: list[TimelineEvent] = []


def observation_document(
    full_name: str, range_: tuple[int, int], pull_request: dict[str, Any], timeline: Sequence[dict[str, Any]]
) -> bytes:
    """The stored form: canonical JSON, so an unchanged PR gives the same bytes (and id) again."""
    document = {"full_name": full_name, "range": list(range_), "pull_request": pull_request, "timeline": timeline}
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def observation_id(source: str, full_name: str, number: int, document: bytes) -> str:
    digest = hashlib.sha256(document).hexdigest()[:32]
    return f"{source}:{repository_key(full_name)}#{number}:{digest}"


def parse_observation(document: bytes) -> Observation:
    try:
        observation = Observation.model_validate_json(document)
    except ValidationError as exc:
        raise _explain(exc) from exc
    try:
        check_full_name(observation.full_name)
    except ValueError as exc:
        raise IncompleteBody("full_name", str(exc)) from exc
    return observation


def history_range(month: str | None, since: str | None, tz_name: str, now: int) -> tuple[int, int]:
    """The instants [start, end) of `--month YYYY-MM` (its whole month, up to now) or `--since
    YYYY-MM-DD` (from that local midnight to now), in the repository's time zone. WindowError for
    anything else: both or neither, a malformed value, a range that has not begun."""
    tz = ZoneInfo(tz_name)
    if (month is None) == (since is None):
        raise WindowError("give either a month (YYYY-MM) or a first day (YYYY-MM-DD), not both or neither")
    if month is not None:
        parsed = Month.parse(month)
        start = local_midnight(parsed.first_day, tz)
        end = min(local_midnight(parsed.last_day + timedelta(days=1), tz), now)
    else:
        try:
            day = date.fromisoformat(since or "")
        except ValueError:
            raise WindowError(f"{since!r} is not a day: use YYYY-MM-DD, for example 2026-07-01") from None
        if day.year < 2007:
            raise WindowError(f"{since} is before GitHub existed")
        start, end = local_midnight(day, tz), now
    if start >= end:
        raise WindowError("that range has not begun yet")
    return start, end


@dataclass(frozen=True)
class History:
    derivations: tuple[Derivation, ...]  # the facts on the first, one attribute version each
    heads: tuple[tuple[str, str], ...]  # (head sha, base sha) whose files the range's reports read


_SHA_LENGTHS = range(7, 65)


def _sha(value: str | None) -> str | None:
    if value and len(value) in _SHA_LENGTHS and all(c in "0123456789abcdefABCDEF" for c in value):
        return value.lower()
    return None


def derive_history(observation_id: str, document: bytes, timezone_for: Callable[[str], str]) -> History:
    """The facts and versions one stored observation proves. Raises MalformedBody/IncompleteBody."""
    observation = parse_observation(document)
    full_name = observation.full_name
    pr = observation.pull_request
    tz = timezone_for(full_name)
    created = epoch(pr.created_at)
    updated = max(epoch(pr.updated_at), created)
    merged_at = epoch(pr.merged_at) if pr.merged_at is not None else None

    facts: list[Fact] = [Fact(FactKind.OPENED, created, rank=EVENT_TIME)]
    if merged_at is not None:
        facts.append(Fact(FactKind.MERGED, merged_at, rank=EVENT_TIME))
    elif pr.state == "closed" and pr.closed_at is not None:
        facts.append(Fact(FactKind.CLOSED, epoch(pr.closed_at), rank=EVENT_TIME))

    # (instant, order in the timeline, event): the instants changes happened at.
    dated: list[tuple[int, int, TimelineEvent]] = []
    heads: list[tuple[int, str]] = []  # (instant, head sha) in the order GitHub listed them
    for position, item in enumerate(observation.timeline):
        if item.event == "committed":
            sha = _sha(item.sha)
            signature = item.committer or item.author
            if sha is None or signature is None or signature.date is None:
                continue
            at = min(max(_epoch_any(signature.date), created), updated)
            heads.append((at, sha))
            if at > created:
                facts.append(Fact(FactKind.COMMIT, at, ident=sha, rank=COMMIT_DATE))
                dated.append((at, position, item))
            continue
        if item.created_at is None:
            continue
        at = epoch(item.created_at)
        if item.event == "head_ref_force_pushed":
            sha = _sha(item.commit_id)
            if sha is not None:
                heads.append((at, sha))
            facts.append(Fact(FactKind.COMMIT, at, ident=sha or "", rank=EVENT_TIME))
        elif item.event == "closed":
            if at != merged_at:
                facts.append(Fact(FactKind.CLOSED, at, rank=EVENT_TIME))
        elif item.event == "reopened":
            facts.append(Fact(FactKind.REOPENED, at, rank=EVENT_TIME))
        elif item.event == "merged":
            facts.append(Fact(FactKind.MERGED, merged_at if merged_at is not None else at, rank=EVENT_TIME))
        elif item.event not in ("renamed", "labeled", "unlabeled", "ready_for_review", "convert_to_draft"):
            continue
        dated.append((at, position, item))

    versions = _versions(observation_id, observation, created, dated, heads)
    activity = frozenset(month_of(fact.at, tz) for fact in facts)
    repo = repository_key(full_name)
    needed = heads_needed(versions, observation.range, tz, created, _closed_for_good(facts))
    base_sha = _sha(pr.base.sha) or ""
    derivations = []
    wanted = set(needed)
    for index, version in enumerate(versions):
        head = version.head_sha if version.head_sha in wanted else None
        wanted.discard(version.head_sha)
        derivations.append(
            Derivation(
                repo=repo,
                full_name=full_name,
                number=pr.number,
                facts=tuple(facts) if index == 0 else (),
                version=version,
                activity_months=activity if index == 0 else frozenset(),
                touched_months=(activity if index == 0 else frozenset()) | {month_of(version.at, tz)},
                wanted_head=(head, base_sha) if head else None,
            )
        )
    return History(tuple(derivations), tuple((sha, base_sha) for sha in needed))


def _versions(
    observation_id: str,
    observation: Observation,
    created: int,
    dated: list[tuple[int, int, TimelineEvent]],
    heads: list[tuple[int, str]],
) -> list[AttributeVersion]:
    """The PR's attributes after each dated change, walking back from today's."""
    pr = observation.pull_request
    now = AttributeVersion(
        at=max(epoch(pr.updated_at), created),
        delivery_id=observation_id,
        title=pr.title,
        body=pr.body or "",
        base_ref=pr.base.ref or "",
        head_ref=pr.head.ref or "",
        head_sha=(_sha(pr.head.sha) or ""),
        labels=tuple(sorted(label.name for label in pr.labels)),
        draft=pr.draft,
        author=pr.user.login or "",
        observed=False,
    )
    changes = sorted(dated, key=lambda item: (item[0], item[1]))
    title, labels, draft = now.title, set(now.labels), now.draft
    states: list[tuple[int, str, frozenset[str], bool]] = []  # after each change, latest first
    for at, _position, item in reversed(changes):
        if at > now.at:
            continue
        states.append((at, title, frozenset(labels), draft))
        if item.event == "renamed" and item.rename is not None:
            title = item.rename.from_
        elif item.event == "labeled" and item.label is not None:
            labels.discard(item.label.name)
        elif item.event == "unlabeled" and item.label is not None:
            labels.add(item.label.name)
        elif item.event == "ready_for_review":
            draft = True
        elif item.event == "convert_to_draft":
            draft = False
    states.append((created, title, frozenset(labels), draft))

    def head_at(at: int) -> str:
        known = [sha for when, sha in heads if when <= at]
        if known:
            return known[-1]
        return heads[0][1] if heads else now.head_sha

    versions = {
        at: replace(now, at=at, title=t, labels=tuple(sorted(ls)), draft=d, head_sha=head_at(at))
        for at, t, ls, d in reversed(states)
    }
    versions[now.at] = now
    return [versions[at] for at in sorted(versions)]


def _epoch_any(moment: datetime) -> int:
    """Epoch seconds of any date (one without a time zone is UTC), however far from GitHub's times."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int((moment - _EPOCH).total_seconds())


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _closed_for_good(facts: Sequence[Fact]) -> int | None:
    """When the PR last stopped being open (merged, or closed and not reopened since), if it did."""
    ends = [f.at for f in facts if f.kind in (FactKind.MERGED, FactKind.CLOSED)]
    reopens = [f.at for f in facts if f.kind is FactKind.REOPENED]
    if not ends:
        return None
    last = max(ends)
    return None if reopens and max(reopens) > last else last


def heads_needed(
    versions: Sequence[AttributeVersion], range_: tuple[int, int], tz_name: str, created: int, ended: int | None
) -> list[str]:
    """The distinct heads the PR had at the end of each local day of the range while it existed,
    up to the day it was merged or closed for good: what a report at any cutoff in the range reads."""
    start, end = range_
    first = max(start, created)
    last = min(end, ended + 1 if ended is not None else end)
    if first >= last or not versions:
        return []
    tz = ZoneInfo(tz_name)
    day = datetime.fromtimestamp(first, tz).date()
    needed: list[str] = []
    while True:
        day_end = int(datetime.combine(day + timedelta(days=1), datetime.min.time(), tz).timestamp())
        chosen = version_at(versions, min(day_end, last))
        if chosen is not None and chosen.head_sha and chosen.head_sha not in needed:
            needed.append(chosen.head_sha)
        if day_end >= last:
            return needed
        day += timedelta(days=1)


__all__ = [
    "BACKFILL",
    "RECONCILIATION",
    "History",
    "IncompleteBody",
    "MalformedBody",
    "derive_history",
    "heads_needed",
    "history_range",
    "observation_document",
    "observation_id",
    "parse_observation",
]
