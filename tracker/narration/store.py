"""The validated prose of the language-model narrator (issue 13), cached so that a refresh pays only for
what changed.

A section's prose is kept under (repository, month, section, content, prompt version, model): `content` is
`content_digest` of everything the model was sent for the section, so that a section whose change groups
did not change is not asked again, and a new prompt version or another model asks again. A row also keeps
what it cost (tokens and requests), summed per month by `usage`, and the fallbacks of the run that wrote
it. `prune` removes a month's rows for inputs it no longer has, so the table stays bounded by the months'
sections. What the narrator spent is counted apart (`spend`, `spent_by_month`), request by request, and
never pruned: the month's bill includes prose it no longer has, answers refused and runs a rate limit cut.

`english` and `chinese` are `SectionProse` as JSON; None (NULL) means the section was left to the
deterministic text: the model's answers were refused (or the section is too large to send). Such a row
keeps one fallback for each time the section was asked and refused, oldest first, and `created_at` is the
last time: it is asked again `REFUSED_RETRY` after the first refusal, then twice as long after each next
one (`StoredNarration.retry_at`), or at once when forced.

The endpoint's last failure (a wrong key, a timeout, a 5xx: not an answer refused) is kept in `ledger_meta`
(`failed`, `last_error`), for the status page, until a run reaches the endpoint again (`reached`).

The prose is kept for ever, never derived: a rebuild keeps it (asking again would cost money). The tables
are declared in tracker.store.schema.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine, and_, delete, func, or_, select, update

from tracker.core.repository import repository_key
from tracker.core.window import iso_utc
from tracker.narration.schema import SectionInput, SectionProse
from tracker.store.database import insert_ignoring_duplicates
from tracker.store.schema import ledger_meta, narration_spend, narrations


def content_digest(section_input: SectionInput) -> str:
    """SHA-256 (hex) of `section_input` as canonical JSON: equal inputs give equal digests, and any change
    to what the model is sent (a title, a body, a path, an id, the outline) gives another."""
    document = json.dumps(asdict(section_input), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(document.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredNarration:
    """The prose of one section as the cache keeps it. `repo` is stored as the repository key: a record
    read back names the repository in lower case."""

    repo: str
    month: str  # "2026-09"
    section: str
    content: str  # `content_digest` of the section's input
    prompt_version: str
    model: str
    english: SectionProse | None  # None: the deterministic text
    chinese: SectionProse | None
    fallbacks: tuple[dict[str, str], ...] = ()  # each {"section", "stage", "reason"}
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    created_at: int = field(default_factory=lambda: int(time.time()))  # epoch seconds

    @property
    def refused(self) -> bool:
        return self.english is None

    @property
    def retry_at(self) -> float | None:
        """When refused prose is asked for again (epoch seconds): `REFUSED_RETRY` after the first refusal,
        doubling with each next one up to `REFUSED_RETRY_MAX`; None for prose."""
        if not self.refused:
            return None
        wait = REFUSED_RETRY * 2 ** max(0, len(self.fallbacks) - 1)
        return float(self.created_at + min(wait, REFUSED_RETRY_MAX))


# Refused prose is asked for again this long after the first refusal (seconds), then twice as long after each.
REFUSED_RETRY = 3600
REFUSED_RETRY_MAX = 7 * 24 * 3600


def refused_again(previous: StoredNarration, record: StoredNarration) -> StoredNarration:
    """`record`, refused prose of the same key as refused `previous`, with the earlier fallbacks (how many
    refusals the back-off counts) and cost added."""
    return replace(
        record,
        fallbacks=previous.fallbacks + record.fallbacks,
        prompt_tokens=previous.prompt_tokens + record.prompt_tokens,
        completion_tokens=previous.completion_tokens + record.completion_tokens,
        requests=previous.requests + record.requests,
    )


@dataclass(frozen=True)
class Usage:
    """What a month's cached prose cost: tokens and requests summed over its rows, and how many rows."""

    prompt_tokens: int
    completion_tokens: int
    requests: int
    sections: int


@dataclass(frozen=True)
class Spent:
    """Requests made to the model and the tokens they were billed."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class NarrationStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def put(self, record: StoredNarration) -> None:
        """Keep `record`; it replaces a record of the same key."""
        row = _row(record)
        with self.engine.begin() as conn:
            if insert_ignoring_duplicates(conn, narrations, [row]):
                return
            key = [narrations.c[name] == row[name] for name in _KEY]
            values = {name: value for name, value in row.items() if name not in _KEY}
            conn.execute(update(narrations).where(*key).values(**values))

    def get(
        self, repo: str, month: str, section: str, content: str, prompt_version: str, model: str
    ) -> StoredNarration | None:
        """The record of this key, or None. A record whose prose no longer parses as `SectionProse` is a
        miss too: the section is asked again."""
        query = select(narrations).where(
            narrations.c.repo == repository_key(repo),
            narrations.c.month == month,
            narrations.c.section == section,
            narrations.c.content == content,
            narrations.c.prompt_version == prompt_version,
            narrations.c.model == model,
        )
        with self.engine.connect().execution_options(read_only=True) as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        try:
            return _record(row)
        except (ValidationError, ValueError, TypeError):
            return None

    def failed(self, repo: str, month: str, error: str, at: int | None = None) -> None:
        """Keep the endpoint's last failure: what `last_error` answers until `reached`."""
        moment = int(time.time()) if at is None else at
        value = f"{moment} {repository_key(repo)} {month} {error}"
        if len(value) > _META_VALUE:  # the column's length (VARCHAR(255) on PostgreSQL)
            value = value[: _META_VALUE - 1] + "…"
        with self.engine.begin() as conn:
            if not insert_ignoring_duplicates(conn, ledger_meta, [{"key": _LAST_ERROR, "value": value}]):
                conn.execute(update(ledger_meta).where(ledger_meta.c.key == _LAST_ERROR).values(value=value))

    def reached(self) -> None:
        """The endpoint answered a run without failing: the last failure is over."""
        with self.engine.begin() as conn:
            conn.execute(delete(ledger_meta).where(ledger_meta.c.key == _LAST_ERROR))

    def last_error(self) -> dict[str, Any] | None:
        """{"at" (ISO 8601, UTC), "repo" (the repository key), "month", "error"}: the endpoint's last failure,
        if no run reached it since."""
        with self.engine.connect().execution_options(read_only=True) as conn:
            value = conn.execute(select(ledger_meta.c.value).where(ledger_meta.c.key == _LAST_ERROR)).scalar()
        if value is None:
            return None
        moment, repo, month, error = str(value).split(" ", 3)
        return {"at": iso_utc(int(moment)), "repo": repo, "month": month, "error": error}

    def usage(self, repo: str, month: str) -> Usage:
        """Tokens and requests summed over the month's records (every section, prompt version and model)."""
        query = select(
            func.coalesce(func.sum(narrations.c.prompt_tokens), 0),
            func.coalesce(func.sum(narrations.c.completion_tokens), 0),
            func.coalesce(func.sum(narrations.c.requests), 0),
            func.count(),
        ).where(narrations.c.repo == repository_key(repo), narrations.c.month == month)
        with self.engine.connect().execution_options(read_only=True) as conn:
            prompt_tokens, completion_tokens, requests, sections = conn.execute(query).one()
        return Usage(int(prompt_tokens), int(completion_tokens), int(requests), int(sections))

    def usage_by_month(self, repo: str) -> dict[str, Usage]:
        """`usage` of every month of the repository that has records, by month."""
        query = (
            select(
                narrations.c.month,
                func.sum(narrations.c.prompt_tokens),
                func.sum(narrations.c.completion_tokens),
                func.sum(narrations.c.requests),
                func.count(),
            )
            .where(narrations.c.repo == repository_key(repo))
            .group_by(narrations.c.month)
            .order_by(narrations.c.month)
        )
        with self.engine.connect().execution_options(read_only=True) as conn:
            rows = conn.execute(query).all()
        return {str(month): Usage(int(p), int(c), int(r), int(n)) for month, p, c, r, n in rows}

    def spend(self, repo: str, month: str, model: str, spent: Spent) -> None:
        """Add `spent` to the month's bill for `model` (two narrators at once each add theirs)."""
        if not spent.requests:
            return
        key = {"repo": repository_key(repo), "month": month, "model": model}
        zero = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        where = [narration_spend.c[name] == value for name, value in key.items()]
        with self.engine.begin() as conn:
            insert_ignoring_duplicates(conn, narration_spend, [key | zero])
            conn.execute(
                update(narration_spend)
                .where(*where)
                .values(
                    requests=narration_spend.c.requests + spent.requests,
                    prompt_tokens=narration_spend.c.prompt_tokens + spent.prompt_tokens,
                    completion_tokens=narration_spend.c.completion_tokens + spent.completion_tokens,
                )
            )

    def spent_by_month(self, repo: str) -> dict[str, Spent]:
        """Everything the narrator spent on each month of the repository (every model), by month."""
        query = (
            select(
                narration_spend.c.month,
                func.sum(narration_spend.c.requests),
                func.sum(narration_spend.c.prompt_tokens),
                func.sum(narration_spend.c.completion_tokens),
            )
            .where(narration_spend.c.repo == repository_key(repo))
            .group_by(narration_spend.c.month)
            .order_by(narration_spend.c.month)
        )
        with self.engine.connect().execution_options(read_only=True) as conn:
            rows = conn.execute(query).all()
        return {str(month): Spent(int(r), int(p), int(c)) for month, r, p, c in rows}

    def prune(self, repo: str, month: str, keep: Iterable[tuple[str, str]]) -> int:
        """Remove the month's records whose (section, content) is not in `keep` (prose for inputs the
        month no longer has), whatever their prompt version or model; how many were removed."""
        kept = set(keep)
        where = and_(narrations.c.repo == repository_key(repo), narrations.c.month == month)
        with self.engine.begin() as conn:
            present = conn.execute(select(narrations.c.section, narrations.c.content).where(where).distinct()).all()
            gone = [(section, content) for section, content in present if (section, content) not in kept]
            if not gone:
                return 0
            pairs = or_(*(and_(narrations.c.section == s, narrations.c.content == c) for s, c in gone))
            return int(conn.execute(delete(narrations).where(where, pairs)).rowcount)


_KEY = ("repo", "month", "section", "content", "prompt_version", "model")
_LAST_ERROR = "narrator_last_error"
_META_VALUE = 255


def _row(record: StoredNarration) -> dict[str, Any]:
    return {
        "repo": repository_key(record.repo),
        "month": record.month,
        "section": record.section,
        "content": record.content,
        "prompt_version": record.prompt_version,
        "model": record.model,
        "english": record.english.model_dump_json() if record.english is not None else None,
        "chinese": record.chinese.model_dump_json() if record.chinese is not None else None,
        "fallbacks": json.dumps([dict(f) for f in record.fallbacks], ensure_ascii=False),
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "requests": record.requests,
        "created_at": record.created_at,
    }


def _record(row: Any) -> StoredNarration:
    fallbacks = json.loads(row.fallbacks)
    if not isinstance(fallbacks, list) or not all(isinstance(f, dict) for f in fallbacks):
        raise ValueError("fallbacks is not a JSON list of objects")
    return StoredNarration(
        repo=row.repo,
        month=row.month,
        section=row.section,
        content=row.content,
        prompt_version=row.prompt_version,
        model=row.model,
        english=SectionProse.model_validate_json(row.english) if row.english is not None else None,
        chinese=SectionProse.model_validate_json(row.chinese) if row.chinese is not None else None,
        fallbacks=tuple({str(k): str(v) for k, v in f.items()} for f in fallbacks),
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        requests=row.requests,
        created_at=row.created_at,
    )
