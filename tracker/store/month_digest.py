"""A month's report inputs at every cutoff, read once: what a worker precomputes so that a request at
any cutoff of the month does not read the database (issue 14).

A report window ends at one of the month's local midnights (the day after its cutoff), so a month has at
most 31 windows. `read_digest` reads what `MonthState.month_inputs` reads for all of them at once: the
month's PRs (the activity index), the best instant of each of their facts, the version each PR has at each
window end (`attributes.version_at`, kept once per run of ends it holds for), and the verdict, changed
paths and availability of every head those versions name. `MonthDigest.inputs_at(end)` then gives, in
memory, exactly the `MonthInputs` that `month_inputs(repo, month, end)` reads from the database (a test
compares them at every cutoff). `encode` and `decode` turn it into JSON bytes and back, for Redis
(tracker.reports.digests keeps it under the month's version, so any change makes it a miss).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields
from typing import Any

import orjson
from sqlalchemy import Engine, select

from tracker.core.attributes import AttributeVersion, version_at
from tracker.core.classify import Category, HeadVerdict
from tracker.core.repository import repository_key
from tracker.core.timeline import Fact, FactKind
from tracker.store.month_state import MonthInputs, best_facts, head_details, version_candidates, version_from_row
from tracker.store.schema import month_activity, pr_facts, pr_versions

FORMAT = 2  # of `encode`; part of the cache key
_KINDS = {kind.value: kind for kind in FactKind}
_CATEGORIES = {category.value: category for category in Category}
_VERSION_FIELDS = tuple(field.name for field in fields(AttributeVersion))  # a version is a list in this order


@dataclass(frozen=True)
class MonthDigest:
    """Plain data (what JSON holds), so that reading one back costs a parse and nothing more: the
    objects a cutoff needs are built by `inputs_at`, for that cutoff only (a month names about three
    times as many versions and heads as any one cutoff reads)."""

    ends: list[int]  # the window end of each cutoff day, ascending
    facts: list[list[Any]]  # [number, instant, kind]: each fact at its best instant
    # [number, [[index of the first end it is chosen for, [version fields in _VERSION_FIELDS order]], ...]],
    # in the order of the ends
    versions: list[list[Any]]
    # [number, head sha, category, whitespace only, evidence as JSON text (parsed only when read)]
    verdicts: list[list[Any]]
    path_table: list[str]  # every changed path once
    paths: list[list[Any]]  # [number, head sha, [positions in path_table]]
    unavailable: list[list[Any]]  # [number, head sha]

    def inputs_at(self, end: int) -> MonthInputs | None:
        """What `MonthState.month_inputs` reads for a window ending at `end`; None when `end` is not one
        of this digest's ends."""
        if end not in self.ends:
            return None
        index = self.ends.index(end)
        timelines: dict[int, list[Fact]] = defaultdict(list)
        for number, at, kind in self.facts:
            if at < end:
                timelines[number].append(Fact(_KINDS[kind], at))
        versions: dict[int, AttributeVersion] = {}
        for number, chosen in self.versions:
            held = [fields for first, fields in chosen if first <= index]
            if held:
                versions[number] = _attributes(held[-1])
        heads = {(number, version.head_sha) for number, version in versions.items()}
        return MonthInputs(
            timelines=dict(timelines),
            versions=versions,
            verdicts={
                (number, sha): HeadVerdict(sha, _CATEGORIES[category], whitespace_only, orjson.loads(evidence))
                for number, sha, category, whitespace_only, evidence in self.verdicts
                if (number, sha) in heads
            },
            unavailable=frozenset((number, sha) for number, sha in self.unavailable if (number, sha) in heads),
            paths={
                number: [self.path_table[position] for position in positions]
                for number, sha, positions in self.paths
                if (number, sha) in heads
            },
        )


def read_digest(engine: Engine, full_name: str, month: str, ends: Sequence[int]) -> MonthDigest:
    """The month's inputs at each of `ends` (ascending), in one read."""
    repo = repository_key(full_name)
    ends = tuple(ends)
    with engine.connect().execution_options(read_only=True) as conn:
        numbers = list(
            conn.execute(
                select(month_activity.c.number).where(month_activity.c.repo == repo, month_activity.c.month == month)
            ).scalars()
        )
        if not numbers or not ends:
            return MonthDigest(list(ends), [], [], [], [], [], [])
        fact_rows = conn.execute(
            select(pr_facts.c.number, pr_facts.c.kind, pr_facts.c.ident, pr_facts.c.at, pr_facts.c.rank).where(
                pr_facts.c.repo == repo, pr_facts.c.number.in_(numbers)
            )
        ).all()
        # Every version before the last end, and the earliest ones at or after it (which `version_at`
        # falls back to for a PR with no version before an end).
        known: dict[int, list[AttributeVersion]] = defaultdict(list)
        for row in conn.execute(
            select(pr_versions).where(
                pr_versions.c.repo == repo, pr_versions.c.number.in_(numbers), pr_versions.c.at < ends[-1]
            )
        ):
            known[row.number].append(version_from_row(row))
        for number, rows in version_candidates(conn, repo, numbers, ends[-1]).items():
            known[number].extend(version for version in rows if version.at >= ends[-1])
        versions: list[list[Any]] = []
        named: set[tuple[int, str]] = set()
        for number, rows in known.items():
            chosen: list[tuple[int, AttributeVersion]] = []
            for index, end in enumerate(ends):
                version = version_at(rows, end)
                if version is not None and (not chosen or chosen[-1][1] != version):
                    chosen.append((index, version))
            versions.append([number, [[first, _fields(version)] for first, version in chosen]])
            named.update((number, version.head_sha) for _, version in chosen)
        heads = sorted(named)
        verdict_rows, path_rows, gone = head_details(conn, repo, heads)
    table: dict[str, int] = {}
    paths: dict[tuple[int, str], list[int]] = defaultdict(list)
    for number, sha, path in path_rows:
        paths[(number, sha)].append(table.setdefault(path, len(table)))
    return MonthDigest(
        ends=list(ends),
        facts=[list(fact) for fact in best_facts(fact_rows).values()],
        versions=versions,
        verdicts=[
            [row.number, row.head_sha, row.category, bool(row.whitespace_only), row.evidence] for row in verdict_rows
        ],
        path_table=list(table),
        paths=[[number, sha, positions] for (number, sha), positions in paths.items()],
        unavailable=[[number, sha] for number, sha in gone],
    )


def encode(digest: MonthDigest) -> bytes:
    return orjson.dumps({"format": FORMAT, **{field.name: getattr(digest, field.name) for field in fields(digest)}})


def decode(data: bytes) -> MonthDigest | None:
    """The digest `encode` made, or None for another format."""
    document = orjson.loads(data)
    if not isinstance(document, dict) or document.pop("format", None) != FORMAT:
        return None
    return MonthDigest(**document)


_LABELS = _VERSION_FIELDS.index("labels")


def _fields(version: AttributeVersion) -> list[Any]:
    values = list(astuple(version))
    values[_LABELS] = list(version.labels)  # as JSON gives it back
    return values


def _attributes(values: list[Any]) -> AttributeVersion:
    values = values.copy()  # the digest may be read at another cutoff
    values[_LABELS] = tuple(values[_LABELS])
    return AttributeVersion(*values)
