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
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from sqlalchemy import Engine, select, tuple_

from tracker.core.attributes import AttributeVersion, version_at
from tracker.core.classify import Category, HeadVerdict
from tracker.core.repository import repository_key
from tracker.core.timeline import Fact, FactKind
from tracker.store.heads import UNAVAILABLE
from tracker.store.month_state import MonthInputs, best_facts, version_candidates
from tracker.store.schema import head_files, head_verdicts, month_activity, pr_facts, pr_versions
from tracker.store.schema import heads as head_table

FORMAT = 1  # of `encode`; part of the cache key
_KINDS = {kind.value: kind for kind in FactKind}


@dataclass(frozen=True)
class MonthDigest:
    ends: tuple[int, ...]  # the window end of each cutoff day, ascending
    facts: tuple[tuple[int, int, str], ...]  # (number, instant, kind): each fact at its best instant
    # Per PR, (index of the first end it is chosen for, version), in the order of the ends.
    versions: dict[int, tuple[tuple[int, AttributeVersion], ...]]
    # (number, head sha) -> (category, whitespace only, evidence as JSON text: parsed only when a cutoff
    # reads it, as most heads of a month are not the head any PR has at a given cutoff)
    verdicts: dict[tuple[int, str], tuple[str, bool, str]]
    paths: dict[tuple[int, str], tuple[str, ...]]
    unavailable: frozenset[tuple[int, str]]

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
        for number, chosen in self.versions.items():
            held = [version for first, version in chosen if first <= index]
            if held:
                versions[number] = held[-1]
        heads = [(number, version.head_sha) for number, version in versions.items()]
        return MonthInputs(
            timelines=dict(timelines),
            versions=versions,
            verdicts={head: _verdict(head[1], *self.verdicts[head]) for head in heads if head in self.verdicts},
            unavailable=frozenset(head for head in heads if head in self.unavailable),
            paths={head[0]: list(self.paths[head]) for head in heads if head in self.paths},
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
            return MonthDigest(ends, (), {}, {}, {}, frozenset())
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
            known[row.number].append(_version(row))
        for number, rows in version_candidates(conn, repo, numbers, ends[-1]).items():
            known[number].extend(version for version in rows if version.at >= ends[-1])
        versions: dict[int, tuple[tuple[int, AttributeVersion], ...]] = {}
        for number, rows in known.items():
            chosen: list[tuple[int, AttributeVersion]] = []
            for index, end in enumerate(ends):
                version = version_at(rows, end)
                if version is not None and (not chosen or chosen[-1][1] != version):
                    chosen.append((index, version))
            versions[number] = tuple(chosen)
        heads = sorted({(number, version.head_sha) for number, chosen in versions.items() for _, version in chosen})
        verdict_rows: Sequence[Any] = []
        path_rows: Sequence[Any] = []
        gone: Sequence[Any] = []
        if heads:
            verdict_rows = conn.execute(
                select(head_verdicts).where(
                    head_verdicts.c.repo == repo, tuple_(head_verdicts.c.number, head_verdicts.c.head_sha).in_(heads)
                )
            ).all()
            path_rows = conn.execute(
                select(head_files.c.number, head_files.c.head_sha, head_files.c.path)
                .where(head_files.c.repo == repo, tuple_(head_files.c.number, head_files.c.head_sha).in_(heads))
                .order_by(head_files.c.number, head_files.c.head_sha, head_files.c.position)
            ).all()
            gone = conn.execute(
                select(head_table.c.number, head_table.c.head_sha).where(
                    head_table.c.repo == repo,
                    head_table.c.source == UNAVAILABLE,
                    tuple_(head_table.c.number, head_table.c.head_sha).in_(heads),
                )
            ).all()
    paths: dict[tuple[int, str], list[str]] = defaultdict(list)
    for number, sha, path in path_rows:
        paths[(number, sha)].append(path)
    return MonthDigest(
        ends=ends,
        facts=tuple(best_facts(fact_rows).values()),
        versions=versions,
        verdicts={
            (row.number, row.head_sha): (row.category, bool(row.whitespace_only), row.evidence) for row in verdict_rows
        },
        paths={head: tuple(listed) for head, listed in paths.items()},
        unavailable=frozenset((number, sha) for number, sha in gone),
    )


def _version(row: Any) -> AttributeVersion:
    return AttributeVersion(
        at=row.at,
        delivery_id=row.delivery_id,
        title=row.title,
        body=row.body,
        base_ref=row.base_ref,
        head_ref=row.head_ref,
        head_sha=row.head_sha,
        labels=tuple(orjson.loads(row.labels)),
        draft=bool(row.draft),
        author=row.author,
        observed=bool(row.observed),
    )


def encode(digest: MonthDigest) -> bytes:
    """JSON bytes; each path is written once (a month's heads share most of theirs)."""
    table = sorted({path for listed in digest.paths.values() for path in listed})
    index = {path: position for position, path in enumerate(table)}
    return orjson.dumps(
        {
            "format": FORMAT,
            "ends": digest.ends,
            "facts": digest.facts,
            "versions": [
                [number, [[first, asdict(version)] for first, version in chosen]]
                for number, chosen in digest.versions.items()
            ],
            "verdicts": [[number, sha, *verdict] for (number, sha), verdict in digest.verdicts.items()],
            "path_table": table,
            "paths": [
                [number, sha, [index[path] for path in listed]] for (number, sha), listed in digest.paths.items()
            ],
            "unavailable": sorted(digest.unavailable),
        }
    )


def decode(data: bytes) -> MonthDigest | None:
    """The digest `encode` made, or None for another format."""
    document = orjson.loads(data)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return None
    table = document["path_table"]
    return MonthDigest(
        ends=tuple(document["ends"]),
        facts=tuple((number, at, kind) for number, at, kind in document["facts"]),
        versions={
            number: tuple((first, _attributes(fields)) for first, fields in chosen)
            for number, chosen in document["versions"]
        },
        verdicts={
            (number, sha): (category, whitespace_only, evidence)
            for number, sha, category, whitespace_only, evidence in document["verdicts"]
        },
        paths={(number, sha): tuple(table[i] for i in listed) for number, sha, listed in document["paths"]},
        unavailable=frozenset((number, sha) for number, sha in document["unavailable"]),
    )


def _attributes(fields: dict[str, Any]) -> AttributeVersion:
    return AttributeVersion(**(fields | {"labels": tuple(fields["labels"])}))


def _verdict(head_sha: str, category: str, whitespace_only: bool, evidence: str) -> HeadVerdict:
    return HeadVerdict(head_sha, Category(category), whitespace_only, orjson.loads(evidence))
