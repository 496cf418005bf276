"""A month's snapshot at every cutoff, folded once per PR: what a worker precomputes so that a request at
any cutoff of the month neither reads the database nor folds facts (issue 14).

A report window ends at one of the month's local midnights (the day after its cutoff), so a month has at
most 31 windows. `read_digest` reads what `MonthState.month_inputs` reads for all of them at once (the
month's PRs from the activity index, the best instant of each of their facts, the version each PR has at
each window end, the verdict, changed paths and availability of every head those versions name), then
folds each PR (`snapshot.fold_pull_request`, what `build_snapshot` does for one PR) at the windows where
something about it changes: the first window holding each of its facts and each window whose end gives it
another version. In between, the PR's entry is the same, so each PR keeps one entry per change (three or
four in a busy month) instead of one per cutoff.

`MonthDigest.fold_at(window)` then picks each PR's entry and version for that window and assembles the
snapshot, exactly the one `build_snapshot` makes from `month_inputs` (a test compares them at every cutoff
of a real month on both engines), with the changed paths of each PR's head then (what the report's themes
read). `encode` turns it into the fields of a Redis hash, one slice per cutoff and the month's tables
(versions, bodies, titles, paths, evidence: each once), each compressed, and `fold_encoded` folds one
cutoff's fields (tracker.reports.digests keeps the hash under the month's version and the classification
rules, so any change makes it a miss).

A PR's body is the one value of a version whose size its author chooses (up to GitHub's 65,536 characters,
more from a backfill or a forged delivery): copied into every cutoff's slice, 100 such bodies made a 189 MB
key (issue 31). So the digest keeps each body once, in the month's body table, and a long one as its
excerpt (`body_excerpt`): the snapshot then holds the excerpt as the version's body, from which the report
and the narrator's input are exactly those of the body. With each version once too, and the fields
compressed, a month of 1,400 PRs with such bodies keeps under 1 MB instead of 12 (bench/digest_memory.py).
"""

from __future__ import annotations

import re
import zlib
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import orjson
from sqlalchemy import Connection, Engine, select

from tracker.core import bodies, memo, noise
from tracker.core.attributes import AttributeVersion, version_at
from tracker.core.classify import Category, HeadVerdict, Rules
from tracker.core.coverage import Coverage
from tracker.core.descriptions import summary_sentence
from tracker.core.groups import body_references, display_title, normalise_title
from tracker.core.repository import repository_key
from tracker.core.snapshot import MonthSnapshot, PullRequestSnapshot, assemble_snapshot, fold_pull_request
from tracker.core.stats import PullRequestStatus
from tracker.core.themes import cleaned_path, is_auxiliary
from tracker.core.timeline import Activity, Fact, FactKind, PRState, ordered
from tracker.core.titles import clean_title
from tracker.core.window import Window
from tracker.store.changes import changes_since, month_version
from tracker.store.database import listed
from tracker.store.heads import verdict_from_row
from tracker.store.month_state import MonthState, best_facts, head_details, version_candidates, version_from_row
from tracker.store.schema import month_activity, pr_facts, pr_versions

FORMAT = 9  # of `encode`; part of the cache key
_KINDS = {kind.value: kind for kind in FactKind}
_CATEGORIES = {category.value: category for category in Category}
_STATES = {state.value: state for state in PRState}
_VERSION_FIELDS = tuple(field.name for field in fields(AttributeVersion))  # a version is a list in this order


@dataclass(frozen=True)
class MonthDigest:
    """Plain data (what JSON holds), so that reading one back costs a parse and nothing more: the
    objects a cutoff needs are built by `fold_at`, for that cutoff only."""

    ends: list[int]  # the window end of each cutoff day, ascending
    # [number, [[index of the first end it is chosen for, [version fields in _VERSION_FIELDS order]], ...]],
    # in the order of the ends
    versions: list[list[Any]]
    # [number, [[index of the first end it holds for, entry (`_entry`) or None: not in the snapshot], ...]],
    # by number
    pull_requests: list[list[Any]]
    # every entry's evidence once, as JSON text: parsed only for a document that shows it (the JSON)
    evidence: list[str]
    path_table: list[str]  # every changed path once
    paths: list[list[Any]]  # [number, head sha, [positions in path_table]]
    # every body of the versions once (`body_excerpt`); a version's body field is its position here
    bodies: list[str]
    # What the report computes of each body (`_body_row`, by position in `bodies`), of each title
    # (`_title_row`) and of each cleaned path (is_auxiliary), computed here once for every report built from
    # the digest (`Folded.known`, tracker.core.memo)
    body_facts: list[list[Any]]
    titles: list[list[Any]]
    auxiliary: dict[str, bool]

    def index_of(self, window: Window) -> int | None:
        """The position of `window` among the month's cutoffs, or None when it does not end at one of
        this digest's ends."""
        index = cutoff_index(window)
        return index if 0 <= index < len(self.ends) and self.ends[index] == window.end else None

    def slice_at(self, index: int) -> CutoffSlice:
        """What the cutoff at `index` reads: each PR in its snapshot with its entry, version and changed
        paths then, and their evidence."""
        chosen: dict[int, list[Any]] = {}
        for number, held in self.versions:
            values = _held_at(held, index)
            if values is not None:
                chosen[number] = values
        heads = {number: values[_HEAD_SHA] for number, values in chosen.items()}
        local: dict[int, int] = {}  # position in the month's evidence -> in the slice's
        pull_requests = []
        for number, entries in self.pull_requests:
            entry = _held_at(entries, index)
            if entry is not None:
                shown = [*entry]
                shown[_EVIDENCE] = local.setdefault(entry[_EVIDENCE], len(local))
                pull_requests.append([number, shown])
        numbers = {number for number, _ in pull_requests}
        said = {chosen[number][_TITLE] for number in numbers if number in chosen}
        return CutoffSlice(
            end=self.ends[index],
            versions=[[number, chosen[number]] for number, _ in pull_requests if number in chosen],
            pull_requests=pull_requests,
            paths=[
                [number, positions]
                for number, sha, positions in self.paths
                if number in numbers and heads.get(number) == sha
            ],
            evidence=[self.evidence[position] for position in local],
            titles=[texts for texts in self.titles if texts[0] in said],
        )

    def fold_at(
        self, repo: str, window: Window, coverage: Coverage | None = None, *, evidence: bool = True
    ) -> Folded | None:
        """The snapshot `build_snapshot` makes of `MonthState.month_inputs` for `window`, and the changed
        paths of the head each of its PRs has at the window end; None when the window is not one of this
        digest's. `evidence=False`: each PR's evidence left empty, for a document that does not show it
        (the Markdown and the HTML), which saves parsing it."""
        index = self.index_of(window)
        if index is None:
            return None
        cut = self.slice_at(index)
        shown = [orjson.loads(text) for text in cut.evidence] if evidence else None
        snapshot, changed = _folded(
            cut.versions, cut.pull_requests, cut.paths, self.path_table, self.bodies, shown, repo, window, coverage
        )
        known = _known(
            cut.titles, self.auxiliary, zip(self.bodies, self.body_facts, strict=True), _upkeep(cut.versions)
        )
        return Folded(snapshot, changed, known)


def cutoff_index(window: Window) -> int:
    """The position of a window among its month's cutoffs (the field of its slice in `encode`'s hash): a
    month's windows are its days, in order."""
    return window.cutoff.day - 1


@dataclass(frozen=True)
class CutoffSlice:
    end: int
    versions: list[list[Any]]  # [number, version fields], the body a position in the month's body table
    pull_requests: list[list[Any]]  # [number, entry], the entry's evidence a position in `evidence`
    paths: list[list[Any]]  # [number, positions in the month's path table]
    evidence: list[str]  # JSON texts
    titles: list[list[Any]]  # `_title_row` of each title of its versions


def _title_row(title: str) -> list[Any]:
    """What a report computes of a title, as JSON holds it: the title, its `display_title`, `clean_title`,
    `normalise_title`, `noise.revert_facts` and `noise.upkeep_facts`."""
    return [
        title,
        display_title(title),
        clean_title(title),
        normalise_title(title),
        noise.revert_facts(title),
        noise.upkeep_facts(title),
    ]


def _body_row(body: str) -> list[Any]:
    """What a report computes of a body, as JSON holds it: its `summary_sentence` ("" for none) and the PR
    numbers it names (`body_references`)."""
    return [summary_sentence(body) or "", sorted(body_references(body))]


_TITLE_KINDS = ("display_title", "clean_title", "normalise_title", "revert_facts", "upkeep_facts")


def _known(
    titles: Iterable[list[Any]],
    auxiliary: dict[str, bool],
    body_facts: Iterable[tuple[str, list[Any]]],
    upkeep: dict[tuple[int, int], str | None],
) -> memo.Known:
    """What the worker computed of these titles (`_title_row`s), paths, bodies (each with its `_body_row`) and
    versions (their upkeep kind, `_upkeep`), as the results a report is given (tracker.core.memo)."""
    rows = list(titles)
    known: dict[str, Any] = {
        kind: {row[0]: row[position] for row in rows} for position, kind in enumerate(_TITLE_KINDS, 1)
    }
    summaries, references = {}, {}
    for body, (sentence, numbers) in body_facts:
        summaries[body], references[body] = sentence, numbers
    known.update(is_auxiliary=auxiliary, summary_sentence=summaries, body_references=references, version_upkeep=upkeep)
    return known


class Folded(NamedTuple):
    """A cutoff's snapshot from a digest, the changed paths of each of its PRs' head then, and what the
    worker computed of their titles, bodies and paths (`build_report`'s `known`)."""

    snapshot: MonthSnapshot
    paths: dict[int, list[str]]
    known: memo.Known


def _held_at(held: Sequence[Sequence[Any]], index: int) -> Any:
    """The value of [[first index, value], ...] (by first index) at `index`, or None."""
    found = None
    for first, value in held:
        if first > index:
            break
        found = value
    return found


def _folded(
    versions: list[list[Any]],
    entries: list[list[Any]],
    paths: list[list[Any]],
    path_table: list[str],
    bodies: list[str],
    evidence: list[dict[str, Any]] | None,
    repo: str,
    window: Window,
    coverage: Coverage | None,
) -> tuple[MonthSnapshot, dict[int, list[str]]]:
    attributes = {number: _attributes(_with_body(values, bodies)) for number, values in versions}
    pull_requests = [
        _pull_request(number, entry, attributes.get(number), evidence[entry[_EVIDENCE]] if evidence is not None else {})
        for number, entry in entries
    ]
    changed = {number: [path_table[position] for position in positions] for number, positions in paths}
    return assemble_snapshot(repo, window, pull_requests, coverage), changed


def read_digest(state: MonthState, full_name: str, month: str, windows: Sequence[Window], rules: Rules) -> MonthDigest:
    """The month's snapshot at each of `windows` (the month's, by ascending end), in one read, each PR
    classified by `rules`."""
    with state.engine.connect().execution_options(read_only=True) as conn:
        repo = repository_key(full_name)
        rows = _read(conn, repo, [window.end for window in windows], _active(conn, repo, month))
    return _digest(windows, rules, rows)


def read_changed(
    state: MonthState, full_name: str, month: str, window: Window, rules: Rules, since: int
) -> tuple[int, set[int], MonthDigest] | None:
    """The month's version, the PRs its versions after `since` changed, and the digest at `window`
    alone of those (of them, the ones active in the month), read in one go; None when those changes are
    not all recorded (tracker.store.changes), when they are more than MOST_CHANGED of the month's PRs,
    or when the month changed again while they were read. (A digest of one window folds each PR once; at
    every cutoff it would fold it three or four times.)"""
    repo = repository_key(full_name)
    with _consistent_read(state.engine) as conn:
        version, changed = changes_since(conn, repo, month, since)
        if changed is None:
            return None
        active = _active(conn, repo, month)
        numbers = [number for number in active if number in changed]
        if len(numbers) > len(active) * MOST_CHANGED:
            return None  # reading most of the month: read it whole (no digest to parse and patch)
        rows = _read(conn, repo, [window.end], numbers)
        if month_version(conn, repo, month) != version:  # not in one snapshot after all: read it whole
            return None
    return version, changed, _digest([window], rules, rows)


def _consistent_read(engine: Engine) -> Connection:
    """A read-only connection whose transaction sees one snapshot of the database, so that a month's version
    and the rows read after it agree while the workers write: SQLite's read transactions do; on PostgreSQL
    each statement of a READ COMMITTED transaction sees what was committed before it, so the transaction is
    REPEATABLE READ."""
    connection = engine.connect().execution_options(read_only=True)
    if engine.dialect.name == "postgresql":
        connection = connection.execution_options(isolation_level="REPEATABLE READ")
    return connection


def read_window(
    state: MonthState, full_name: str, month: str, window: Window, rules: Rules
) -> tuple[int, MonthDigest] | None:
    """The month's version and its digest at `window` alone (every PR active in the month), read in one go
    (`_consistent_read`); None when the month changed while it was read all the same."""
    repo = repository_key(full_name)
    with _consistent_read(state.engine) as conn:
        version = month_version(conn, repo, month)
        rows = _read(conn, repo, [window.end], _active(conn, repo, month))
        if month_version(conn, repo, month) != version:
            return None
    return version, _digest([window], rules, rows)


# A request patches a digest with the PRs changed since only while they are at most this share of the
# month's: beyond it, reading the whole month costs about as much and parses no digest.
MOST_CHANGED = 0.5

_Rows = tuple[list[Any], dict[int, list[tuple[int, AttributeVersion]]], list[Any], list[Any], list[Any]]


def _active(conn: Connection, repo: str, month: str) -> list[int]:
    """The PRs active in the month (the activity index)."""
    return list(
        conn.execute(
            select(month_activity.c.number).where(month_activity.c.repo == repo, month_activity.c.month == month)
        ).scalars()
    )


def _read(conn: Connection, repo: str, ends: list[int], numbers: list[int]) -> _Rows | None:
    """What a digest folds: the facts, versions at each end, verdicts, paths and unavailable heads of
    `numbers`; None for none."""
    if not numbers or not ends:
        return None
    fact_rows = conn.execute(
        select(pr_facts.c.number, pr_facts.c.kind, pr_facts.c.ident, pr_facts.c.at, pr_facts.c.rank).where(
            pr_facts.c.repo == repo, pr_facts.c.number.in_(listed(conn, numbers))
        )
    ).all()
    # Every version before the last end, and the earliest ones at or after it (which `version_at`
    # falls back to for a PR with no version before an end); for one end, what month_inputs reads.
    known: dict[int, list[AttributeVersion]] = defaultdict(list)
    if len(ends) > 1:
        for row in conn.execute(
            select(pr_versions).where(
                pr_versions.c.repo == repo,
                pr_versions.c.number.in_(listed(conn, numbers)),
                pr_versions.c.at < ends[-1],
            )
        ):
            known[row.number].append(version_from_row(row))
    for number, rows in version_candidates(conn, repo, numbers, ends[-1]).items():
        known[number].extend(version for version in rows if len(ends) == 1 or version.at >= ends[-1])
    chosen: dict[int, list[tuple[int, AttributeVersion]]] = {}
    for number, rows in known.items():
        held: list[tuple[int, AttributeVersion]] = []
        for index, end in enumerate(ends):
            version = version_at(rows, end)
            if version is not None and (not held or held[-1][1] != version):
                held.append((index, version))
        chosen[number] = held
    heads = sorted({(number, version.head_sha) for number, held in chosen.items() for _, version in held})
    verdict_rows, path_rows, gone = head_details(conn, repo, heads)
    return list(fact_rows), chosen, list(verdict_rows), list(path_rows), list(gone)


def _digest(windows: Sequence[Window], rules: Rules, rows: _Rows | None) -> MonthDigest:
    ends = [window.end for window in windows]
    if rows is None:
        return MonthDigest(ends, [], [], [], [], [], [], [], [], {})
    fact_rows, chosen, verdict_rows, path_rows, gone = rows
    timelines: dict[int, list[Fact]] = defaultdict(list)
    for number, at, kind in best_facts(fact_rows).values():
        timelines[number].append(Fact(_KINDS[kind], at))
    verdicts = {(row.number, row.head_sha): verdict_from_row(row) for row in verdict_rows}
    unavailable = {(number, sha) for number, sha in gone}
    pull_requests = []
    evidence: dict[bytes, int] = {}  # JSON text -> position in the digest's evidence
    for number in sorted(timelines):
        entries = _fold(
            number,
            ordered(timelines[number]),
            windows,
            ends,
            chosen.get(number, []),
            verdicts,
            unavailable,
            rules,
            evidence,
        )
        if entries:
            pull_requests.append([number, entries])
    table: dict[str, int] = {}
    paths: dict[tuple[int, str], list[int]] = defaultdict(list)
    for number, sha, path in path_rows:
        paths[(number, sha)].append(table.setdefault(path, len(table)))
    bodies: dict[str, int] = {}  # body (`body_excerpt`) -> position in the digest's body table
    path_table = list(table)

    def head_paths(number: int, version: AttributeVersion) -> list[str]:
        return [path_table[position] for position in paths.get((number, version.head_sha), ())]

    return MonthDigest(
        ends=ends,
        versions=[
            [number, [[first, _fields(version, bodies, head_paths(number, version))] for first, version in held]]
            for number, held in chosen.items()
        ],
        pull_requests=pull_requests,
        evidence=[text.decode() for text in evidence],
        path_table=path_table,
        paths=[[number, sha, positions] for (number, sha), positions in paths.items()],
        bodies=list(bodies),
        body_facts=[_body_row(body) for body in bodies],
        titles=[
            _title_row(title) for title in sorted({version.title for held in chosen.values() for _, version in held})
        ],
        auxiliary={path: is_auxiliary(path) for path in {cleaned_path(path) for path in table} if path},
    )


def _fold(
    number: int,
    timeline: Sequence[Fact],
    windows: Sequence[Window],
    ends: Sequence[int],  # of `windows`
    versions: Sequence[tuple[int, AttributeVersion]],
    verdicts: dict[tuple[int, str], HeadVerdict],
    unavailable: set[tuple[int, str]],
    rules: Rules,
    evidence: dict[bytes, int],
) -> list[list[Any]]:
    """One PR's entries: [index of the first window, entry or None] at each window where it changes. Its
    entry in a window depends on its facts before the window's end and its version then, so it can only
    change at the first window holding each fact and at each window giving it another version."""
    changes = {bisect_right(ends, fact.at) for fact in timeline} | {first for first, _ in versions}
    entries: list[list[Any]] = []
    for index in sorted(change for change in changes if change < len(windows)):
        window = windows[index]
        held = [fact for fact in timeline if fact.at < window.end]
        version: AttributeVersion | None = _held_at(versions, index)
        verdict, gone = None, False
        if version is not None:
            verdict = verdicts.get((number, version.head_sha))
            gone = (number, version.head_sha) in unavailable
        folded = fold_pull_request(number, held, window, version, verdict, rules, gone) if held else None
        value = _entry(folded, evidence) if folded is not None else None
        if (entries and entries[-1][1] != value) or (not entries and value is not None):
            entries.append([index, value])
    return entries


def _entry(pr: PullRequestSnapshot, evidence: dict[bytes, int]) -> list[Any]:
    activity = pr.status.activity
    return [
        pr.status.state.value,
        activity.opened,
        activity.committed,
        activity.closed,
        activity.reopened,
        activity.merged,
        pr.created_at,
        pr.merged_at,
        pr.closed_at,
        pr.category.value,
        evidence.setdefault(orjson.dumps(pr.evidence), len(evidence)),  # keys in their order, as shown
    ]


_EVIDENCE = 10  # an entry's position of its evidence


def _pull_request(
    number: int, entry: list[Any], version: AttributeVersion | None, evidence: dict[str, Any]
) -> PullRequestSnapshot:
    state, opened, committed, closed, reopened, merged, created_at, merged_at, closed_at, category, _ = entry
    return PullRequestSnapshot(
        status=PullRequestStatus(number, _STATES[state], Activity(opened, committed, closed, reopened, merged)),
        version=version,
        created_at=created_at,
        merged_at=merged_at,
        closed_at=closed_at,
        category=_CATEGORIES[category],
        evidence=evidence,
    )


PATHS = "paths"  # the field of the month's tables in `encode`'s mapping: paths, bodies, titles, versions
AUXILIARY = "auxiliary"  # the field of `MonthDigest.auxiliary`
EVIDENCE = "evidence"  # the field of the month's evidence, read only for a document that shows it
# zlib's level for every field: one of its fast levels (1-3 share its fast deflate; 6 saves a tenth more of
# a month that is under 1 MB already). A slice repeats keys and states PR after PR, which it folds to a fifth,
# and the month's bodies (prose, templates, code) to a third or less; inflating a cutoff's fields costs a
# request 3-4 ms for a month of 1,400 PRs with the longest bodies (bench/digest_memory.py).
LEVEL = 3


def encode(digest: MonthDigest) -> dict[str, bytes]:
    """The digest as the fields of a Redis hash, each compressed (`LEVEL`; issue 31: a month of 1,400 PRs
    with the longest bodies in a few MB): what cutoffs share, once for the month (`PATHS`: its path, body,
    title and version tables; `EVIDENCE`: each entry's evidence, read only for a document that shows it),
    and for the cutoff at each index its slice (field `<index>`: each PR's entry, version and changed paths
    then, naming the month's evidence, versions, bodies and paths by their position), so that a request
    reads one cutoff's part. `PATHS` is the JSON of the other tables, then each version's JSON on a line of
    its own: a cutoff parses the versions it names (about 1,400 of a busy month's 5,000), not every one."""
    evidence = {text: position for position, text in enumerate(digest.evidence)}
    versions: dict[bytes, int] = {}  # a version's fields as JSON -> its line in the month's version table
    encoded = {}
    for index in range(len(digest.ends)):
        cut = digest.slice_at(index)
        pull_requests = []
        for number, entry in cut.pull_requests:
            named = [*entry]
            named[_EVIDENCE] = evidence[cut.evidence[entry[_EVIDENCE]]]  # the slice's position -> the month's
            pull_requests.append([number, named])
        encoded[str(index)] = orjson.dumps(
            {
                "format": FORMAT,
                "end": cut.end,
                "versions": [
                    [number, versions.setdefault(orjson.dumps(values), len(versions))]
                    for number, values in cut.versions
                ],
                "pull_requests": pull_requests,
                "paths": cut.paths,
            }
        )
    # orjson's compact JSON holds no line break (one in a string is escaped): each line is one document
    tables = orjson.dumps(
        {"paths": digest.path_table, "bodies": digest.bodies, "body_facts": digest.body_facts, "titles": digest.titles}
    )
    encoded[PATHS] = b"\n".join([tables, *versions])
    encoded[AUXILIARY] = orjson.dumps(digest.auxiliary)
    encoded[EVIDENCE] = b"[" + b",".join(text.encode() for text in digest.evidence) + b"]"
    return {field: zlib.compress(value, LEVEL) for field, value in encoded.items()}


def _inflated(value: bytes | None) -> bytes | None:
    """A field `encode` compressed, as its JSON; None for none, or for a value it did not compress."""
    if value is None:
        return None
    try:
        return zlib.decompress(value)
    except zlib.error:
        return None


def fold_encoded(
    cut: bytes | None,
    tables: bytes | None,
    auxiliary: bytes | None,
    evidence: bytes | None,
    repo: str,
    window: Window,
    coverage: Coverage | None = None,
    *,
    with_evidence: bool = True,
) -> Folded | None:
    """`MonthDigest.fold_at` from the fields `encode` made for the window's cutoff (`evidence` only when
    `with_evidence`); None when one is missing, of another format or for another window."""
    found = _cutoff_document(cut, tables, auxiliary, evidence, window, with_evidence)
    if found is None:
        return None
    document, month, auxiliary, shown = found
    snapshot, changed = _folded(
        document["versions"],
        document["pull_requests"],
        document["paths"],
        month["paths"],
        month["bodies"],
        shown,
        repo,
        window,
        coverage,
    )
    known = _known(
        month["titles"],
        orjson.loads(auxiliary),
        zip(month["bodies"], month["body_facts"], strict=True),
        _upkeep(document["versions"]),
    )
    return Folded(snapshot, changed, known)


def _cutoff_document(
    cut: bytes | None,
    tables: bytes | None,
    auxiliary: bytes | None,
    evidence: bytes | None,
    window: Window,
    with_evidence: bool,
) -> tuple[dict[str, Any], dict[str, Any], bytes, list[Any] | None] | None:
    """The cutoff's slice `encode` made (its versions read from the month's table) and the month's tables,
    parsed, the auxiliary field inflated, and the evidence parsed when wanted; None when a field is missing,
    of another format or for another window."""
    cut = _inflated(cut)
    if cut is None:
        return None
    document = orjson.loads(cut)
    if not isinstance(document, dict) or document.get("format") != FORMAT or document.get("end") != window.end:
        return None
    tables, auxiliary = _inflated(tables), _inflated(auxiliary)
    evidence = _inflated(evidence) if with_evidence else None
    if tables is None or auxiliary is None or (with_evidence and evidence is None):
        return None
    month, *versions = tables.split(b"\n")
    document["versions"] = [[number, orjson.loads(versions[line])] for number, line in document["versions"]]
    return document, orjson.loads(month), auxiliary, orjson.loads(evidence) if evidence is not None else None


@dataclass(frozen=True)
class WindowDigest:
    """One cutoff's snapshot of the month as a digest holds it (each PR's entry, version and the changed paths
    of its head then), in a process's memory between two requests (tracker.reports.digests): patched with the
    PRs changed since (`patched`), so that under a stream each request reads again only the PRs changed since
    the request before, and folds the rest from here (`fold`)."""

    end: int  # the window's
    entries: dict[int, tuple[list[Any], dict[str, Any]]]  # number -> entry (`_entry`), its evidence ({}: not held)
    versions: dict[int, list[Any]]  # number -> version fields (`_VERSION_FIELDS`), the body as its text
    paths: dict[int, list[str]]  # number -> the changed paths of its head at the end
    titles: dict[str, list[Any]]  # title -> `_title_row`
    auxiliary: dict[str, bool]
    body_facts: dict[str, list[Any]]  # body -> its `_body_row`, of the bodies of `versions`
    evidence: bool  # whether `entries` hold each PR's evidence

    def patched(self, changed: set[int], partial: MonthDigest) -> WindowDigest:
        """This with the PRs of `changed` taken from `partial` (the digest of those PRs as they are now, at
        this window alone: `read_changed`) instead; a PR of `changed` that `partial` lacks left out."""
        if partial.ends != [self.end]:
            raise ValueError("a digest of another window")
        fresh = window_of_digest(partial, self.evidence)

        def kept(held: dict[int, Any]) -> dict[int, Any]:
            return {number: value for number, value in held.items() if number not in changed}

        versions = {**kept(self.versions), **fresh.versions}
        merged = {**self.titles, **fresh.titles}
        said = {values[_TITLE] for values in versions.values()}
        written = {values[_BODY] for values in versions.values()}
        body_facts = {**self.body_facts, **fresh.body_facts}
        return WindowDigest(
            end=self.end,
            entries={**kept(self.entries), **fresh.entries},
            versions=versions,
            paths={**kept(self.paths), **fresh.paths},
            titles={title: texts for title, texts in merged.items() if title in said},
            auxiliary={**self.auxiliary, **fresh.auxiliary},
            body_facts={body: facts for body, facts in body_facts.items() if body in written},
            evidence=self.evidence,
        )

    def fold(self, repo: str, window: Window, coverage: Coverage | None = None) -> Folded | None:
        """What `MonthDigest.fold_at` gives at this window (None for another window)."""
        if window.end != self.end:
            return None
        numbers = sorted(self.entries)
        pull_requests = []
        for number in numbers:
            entry, evidence = self.entries[number]
            values = self.versions.get(number)
            version = _attributes(values) if values is not None else None
            pull_requests.append(_pull_request(number, entry, version, evidence))
        changed = {number: list(self.paths[number]) for number in numbers if number in self.paths}
        known = _known(self.titles.values(), self.auxiliary, self.body_facts.items(), _upkeep(self.versions.items()))
        return Folded(assemble_snapshot(repo, window, pull_requests, coverage), changed, known)


def window_of_cutoff(
    cut: bytes | None,
    tables: bytes | None,
    auxiliary: bytes | None,
    evidence: bytes | None,
    window: Window,
    *,
    with_evidence: bool = True,
) -> WindowDigest | None:
    """The `WindowDigest` of the fields `encode` made for the window's cutoff (what `fold_encoded` folds);
    None when one is missing, of another format or for another window."""
    found = _cutoff_document(cut, tables, auxiliary, evidence, window, with_evidence)
    if found is None:
        return None
    document, month, auxiliary, shown = found
    return _window(
        window.end,
        document["versions"],
        document["pull_requests"],
        document["paths"],
        month["paths"],
        month["bodies"],
        month["body_facts"],
        shown,
        month["titles"],
        orjson.loads(auxiliary),
    )


def window_of_digest(digest: MonthDigest, evidence: bool) -> WindowDigest:
    """The `WindowDigest` of a digest of one window (`read_changed`'s, `read_window`'s)."""
    cut = digest.slice_at(0)
    shown = [orjson.loads(text) for text in cut.evidence] if evidence else None
    return _window(
        cut.end,
        cut.versions,
        cut.pull_requests,
        cut.paths,
        digest.path_table,
        digest.bodies,
        digest.body_facts,
        shown,
        cut.titles,
        digest.auxiliary,
    )


def _window(
    end: int,
    versions: list[list[Any]],
    entries: list[list[Any]],
    paths: list[list[Any]],
    path_table: list[str],
    bodies: list[str],
    body_facts: list[list[Any]],
    evidence: list[Any] | None,
    titles: list[list[Any]],
    auxiliary: dict[str, bool],
) -> WindowDigest:
    written = {values[_BODY] for _, values in versions}  # positions in `bodies`
    return WindowDigest(
        end=end,
        entries={
            number: (entry, evidence[entry[_EVIDENCE]] if evidence is not None else {}) for number, entry in entries
        },
        versions={number: _with_body(values, bodies) for number, values in versions},
        paths={number: [path_table[position] for position in positions] for number, positions in paths},
        titles={texts[0]: texts for texts in titles},
        auxiliary=auxiliary,
        body_facts={bodies[position]: body_facts[position] for position in written},
        evidence=evidence is not None,
    )


_LABELS = _VERSION_FIELDS.index("labels")
_HEAD_SHA = _VERSION_FIELDS.index("head_sha")
_TITLE = _VERSION_FIELDS.index("title")
_BODY = _VERSION_FIELDS.index("body")
_AT = _VERSION_FIELDS.index("at")
_UPKEEP = len(_VERSION_FIELDS)  # after the fields: the version's upkeep kind with its head's paths (`_fields`)


def _fields(version: AttributeVersion, bodies: dict[str, int], paths: Sequence[str]) -> list[Any]:
    """The version's fields, its body as its position in `bodies` (added there), then its upkeep kind with
    `paths`, its head's changed paths (`noise.maintenance_kind`, as `build_report` asks it of a change of
    one PR: the reports are given it, `_upkeep`)."""
    values: list[Any] = [getattr(version, name) for name in _VERSION_FIELDS]  # `astuple` deep-copies each value
    values[_LABELS] = list(version.labels)  # as JSON gives it back
    values[_BODY] = bodies.setdefault(body_excerpt(version.body), len(bodies))
    kind = noise.maintenance_kind(version.title, sorted(set(paths)), version.author, sorted(set(version.labels)))
    return [*values, kind]


def _upkeep(versions: Iterable[Sequence[Any]]) -> dict[tuple[int, int], str | None]:
    """The upkeep kind of each of these (number, version fields), by (number, the version's instant)."""
    return {(number, values[_AT]): values[_UPKEEP] for number, values in versions}


def _with_body(values: list[Any], bodies: list[str]) -> list[Any]:
    """Version fields whose body is a position in `bodies`, with the body's text there instead (a copy: the
    digest may be read at another cutoff)."""
    copied = [*values]
    copied[_BODY] = bodies[copied[_BODY]]
    return copied


def _attributes(values: list[Any]) -> AttributeVersion:
    copied = values[:_UPKEEP]  # a copy: the digest may be read at another cutoff
    copied[_LABELS] = tuple(copied[_LABELS])
    return AttributeVersion(*copied)


# A report reads two things of a PR's body: the PR numbers it cites with a cue (tracker.core.groups:
# `body_references`, which ties changes together and gives the themes their features), and the first
# bodies.READ characters of its cleaned text (tracker.core.bodies: what the narrator is sent and where a
# highlight's summary sentence comes from). A body up to KEPT_BODY characters (nearly every real one) is kept
# as it is; a longer one as its excerpt.
KEPT_BODY = 2_048
# Cleaned characters an excerpt keeps: a few more than the readers read, so that they still see the body
# goes on (and the narrator ends what it sends with "…" as before).
_NARRATED = bodies.READ + 100
# PR numbers an excerpt cites at most: a real body cites a few; each costs a cue in the excerpt.
MAX_CITED = 128
# An empty HTML comment: the narrator's cleaning takes it out, and no cue or `#N` reads through it.
_EMPTY_COMMENT = "<!---->"
_NUMBER_MARK = re.compile(r"(?:#|/pull/)(\d++)", re.IGNORECASE)  # where tracker.core.groups reads a number


def body_excerpt(body: str) -> str:
    """What the digest keeps of a PR's body: the body itself up to KEPT_BODY characters; else the first
    _NARRATED characters of its cleaned text (tracker.core.bodies), then its cited PR numbers as cues in an
    HTML comment (which the cleaning leaves out). The report made of the excerpt is the one made of the body,
    the narrator's input and the summary sentences included, for any body citing at most MAX_CITED PRs (of
    one citing more, the excerpt cites the MAX_CITED lowest numbers):
    - the cleaned text is cleaned again to itself, but for a `<!--` in it (which the cleaning would take for
      a comment: `<!` and `--` are split by an empty comment, which the cleaning takes out);
    - the cleaning can join a cue to a number the body did not cite with it (whitespace collapsed, comments
      and invisible characters taken out): such a number is split from its `#` by an empty comment."""
    if len(body) <= KEPT_BODY:
        return body
    cited = body_references(body)
    # The readers' cleaning, which they apply again to the excerpt: the excerpt must follow it exactly. Its
    # module is in the digest's cache key (tracker.reports.digests.CODE).
    text = bodies.body_text(body, _NARRATED)[:_NARRATED].replace("<!--", "<!" + _EMPTY_COMMENT + "--")

    def split_if_not_cited(mark: re.Match[str]) -> str:
        if int(mark[1]) in cited:
            return mark[0]
        return mark[0][: -len(mark[1])] + _EMPTY_COMMENT + mark[1]

    text = _NUMBER_MARK.sub(split_if_not_cited, text)
    if not cited:
        return text
    return text + "\n<!-- " + " ".join(f"cp #{number}" for number in sorted(cited)[:MAX_CITED]) + " -->"
