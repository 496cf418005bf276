"""MkDocs hook: the reference pages' tables, generated from the code so that they cannot drift.

A page marks a generated table with an HTML comment and, for the tables with meanings, a hand-written
table of `| key | meaning |` rows that the hook merges with what the code says:

    <!-- fields: tracker.settings:Settings -->          the pydantic model's fields: key (its
    | key | meaning |                                     environment variable when it has one),
    |---|---|                                            type and constraints, default, meaning
    | `TRACKER_TIMEZONE` | ... |
    <!-- /fields -->

    <!-- metrics -->      every metric tracker/metrics.py defines: name, type, labels, help text
    <!-- log-fields -->  checks the table after it names exactly the fields tracker/logs.py writes
    <!-- json-paths: full -->  checks the tables after it (with the same name) name exactly the key paths
                              (`pull_requests[].evidence.rule`) of the JSON documents the hook makes with
                              the service's own functions from a sample month (`json_documents`)

A field of the model (or a key of a document) without a meaning row, or a row naming no field, is a warning, and
`mkdocs build --strict` (CI: tests/test_docs.py) fails on any warning.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import logging
import re
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

log = logging.getLogger("mkdocs.hooks.reference")
ROOT = Path(__file__).resolve().parents[2]

_FIELDS = re.compile(
    r"<!-- fields: (?P<target>[\w.]+:\w+)(?P<options>[^>]*?) -->\n(?P<table>.*?)<!-- /fields -->\n", re.DOTALL
)
_ROW = re.compile(r"^\|\s*`(?P<key>[^`]+)`\s*\|(?P<meaning>.*)\|\s*$")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    where = page.file.src_uri
    markdown = _FIELDS.sub(lambda m: _fields_table(m, where), markdown)
    if "<!-- metrics -->" in markdown:
        _check_metric_names(markdown, where)
        markdown = markdown.replace("<!-- metrics -->", _metrics_table(where))
    if "<!-- log-fields -->" in markdown:
        _check_log_fields(markdown, where)
    check_json_tables(markdown, where)
    return markdown


# --- pydantic models ----------------------------------------------------------------------------


def _fields_table(match: re.Match[str], where: str) -> str:
    module, name = match["target"].split(":")
    model = getattr(importlib.import_module(module), name)
    skip = set()
    options = match["options"].strip()
    if options.startswith("skip="):
        skip = set(options.removeprefix("skip=").split(","))
    meanings: dict[str, str] = {}
    for line in match["table"].splitlines():
        row = _ROW.match(line)
        if row:
            meanings[row["key"]] = row["meaning"].strip()
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    seen = set()
    for field_name, info in model.model_fields.items():
        if field_name in skip:
            continue
        key = _key(field_name, info)
        seen.add(key)
        meaning = meanings.get(key)
        if meaning is None:
            log.warning("%s: %s.%s (`%s`) has no meaning row: add one to the table", where, name, field_name, key)
            meaning = ""
        rows.append(f"| `{key}` | {_type(info)} | {_default(info)} | {meaning} |")
    for key in meanings.keys() - seen:
        log.warning("%s: the table describes `%s`, which %s does not have", where, key, name)
    return "\n".join(rows) + "\n"


def _key(field_name: str, info: FieldInfo) -> str:
    alias = info.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return str(choices[0])
    return str(alias) if isinstance(alias, str) else field_name


def _type(info: FieldInfo) -> str:
    return _annotation(info.annotation) + _constraints(info.metadata)


def _constraints(metadata: Any) -> str:
    """` (> 0)`, ` (≥ 10)`, ` (matching `…`)`: what pydantic's metadata (or a Field's) requires."""
    found = []
    for item in metadata:
        if isinstance(item, FieldInfo):
            found.append(_constraints(item.metadata).strip(" ()"))
            continue
        for attribute, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            value = getattr(item, attribute, None)
            if value is not None:
                found.append(f"{sign} {value}")
        pattern = getattr(item, "pattern", None)
        if pattern:
            found.append(f"matching `{pattern}`")
    found = [text for text in found if text]
    return f" ({', '.join(found)})" if found else ""


def _annotation(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_annotation(a) for a in arguments if a is not type(None))
    if origin is typing.Annotated:
        return _annotation(arguments[0]) + _constraints(annotation.__metadata__)
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in arguments)
    if origin is tuple:
        return f"list of {_plural(_annotation(arguments[0]))}"
    if origin is dict:
        return f"mapping of `owner/name` to {_annotation(arguments[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    if annotation is SecretStr:
        return "secret string"
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}
    return simple.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _plural(text: str) -> str:
    return text if text.startswith("[") else text + "s"


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return "(computed: see the meaning)"
    value = info.default
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, BaseModel):
        return "`{}`" if not value.model_dump(exclude_defaults=True) else f"`{value!r}`"
    if value == () or value == {}:
        return "`[]`" if value == () else "`{}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


# --- metrics ------------------------------------------------------------------------------------

_METRIC_KINDS = {
    "Counter": "counter",
    "Histogram": "histogram",
    "Gauge": "gauge",
    "GaugeMetricFamily": "gauge",
    "CounterMetricFamily": "counter",
}


def metrics() -> list[tuple[str, str, list[str], str]]:
    """(name as scraped, kind, labels, help) of every metric tracker/metrics.py defines, in its order."""
    tree = ast.parse((ROOT / "tracker" / "metrics.py").read_text(encoding="utf-8"))
    found: list[tuple[int, tuple[str, str, list[str], str]]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _METRIC_KINDS):
            continue
        kind = _METRIC_KINDS[node.func.id]
        name, help_text = (ast.literal_eval(a) for a in node.args[:2])
        labels: list[str] = []
        if len(node.args) > 2 and isinstance(node.args[2], ast.List):
            labels = ast.literal_eval(node.args[2])
        for keyword in node.keywords:
            if keyword.arg in ("labels", "labelnames"):
                labels = ast.literal_eval(keyword.value)
        found.append((node.lineno, (f"{name}_total" if kind == "counter" else name, kind, labels, help_text)))
    return [metric for _, metric in sorted(found)]


def _metrics_table(where: str) -> str:
    rows = ["| metric | type | labels | what the code says it counts |", "|---|---|---|---|"]
    for name, kind, labels, help_text in metrics():
        shown = ", ".join(f"`{label}`" for label in labels) or "—"
        escaped = help_text.replace("|", "\\|")
        rows.append(f"| `{name}` | {kind} | {shown} | {escaped} |")
    if len(rows) < 8:
        log.warning("%s: found only %d metrics in tracker/metrics.py", where, len(rows) - 2)
    return "\n".join(rows) + "\n"


def _check_metric_names(markdown: str, where: str) -> None:
    """The hand-written rows (what a bad value means) name exactly the metrics the code defines."""
    written = set()
    for name in re.findall(r"`(tracker_[a-z_]+)", markdown):
        written.add(name)
    known = {name for name, _, _, _ in metrics()}
    for name in sorted(written - known):
        log.warning("%s: names the metric %s, which tracker/metrics.py does not define", where, name)
    for name in sorted(known - written):
        log.warning("%s: says nothing of the metric %s (tracker/metrics.py): add a row", where, name)


# --- log fields ---------------------------------------------------------------------------------


def log_fields() -> set[str]:
    from tracker import logs

    return {"time", "level", "logger", "message", *logs.CONTEXT_FIELDS, *logs.REQUEST_FIELDS, "exc_info", "stack_info"}


def _check_log_fields(markdown: str, where: str) -> None:
    table = markdown.split("<!-- log-fields -->", 1)[1].split("\n\n", 1)[0]
    documented: set[str] = set()
    for line in table.splitlines()[2:]:
        first = line.split("|")[1] if line.count("|") > 2 else ""
        documented.update(re.findall(r"`([a-z_]+)`", first))
    if documented != log_fields():
        log.warning(
            "%s: the log field table names %s; tracker/logs.py writes %s",
            where,
            sorted(documented),
            sorted(log_fields()),
        )


# --- the JSON documents -------------------------------------------------------------------------

# A table of key paths follows each marker: `<!-- json-paths: full -->`, `summary`, `since`, `drill-down`.
_JSON_TABLE = re.compile(r"<!-- json-paths: (?P<name>[\w-]+) -->\n(?P<table>(?:\|.*\n?)*)")
_PATH = re.compile(r"`([A-Za-z0-9_.\[\]]+)`")


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key of a JSON value as a path: nested keys joined with `.`, the items of a list collapsed into
    `[]` (`{"a": [{"b": 1}]}` has `a` and `a[].b`)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            found.add(path)
            found |= key_paths(item, path)
    elif isinstance(value, list):
        for item in value:
            found |= key_paths(item, prefix + "[]")
    return found


def check_json_tables(markdown: str, where: str, documents: dict[str, list[Any]] | None = None) -> None:
    """The `<!-- json-paths: NAME -->` tables of a page (one or more for each NAME) name exactly the key paths
    of the documents NAME (`json_documents()`, or those given); a row names its paths in its first cell."""
    named: dict[str, set[str]] = {}
    for match in _JSON_TABLE.finditer(markdown):
        rows = match["table"].splitlines()[2:]
        cells = (line.split("|")[1] for line in rows if line.count("|") > 2)
        named.setdefault(match["name"], set()).update(path for cell in cells for path in _PATH.findall(cell))
    if not named:
        return
    documents = json_documents() if documents is None else documents
    for name, paths in named.items():
        if name not in documents:
            log.warning("%s: no generated JSON document is called %r: use one of %s", where, name, sorted(documents))
            continue
        have = set().union(*(key_paths(document) for document in documents[name]))
        for path in sorted(paths - have):
            log.warning("%s: the %s table names `%s`, which the JSON document does not have", where, name, path)
        for path in sorted(have - paths):
            log.warning("%s: the %s JSON document has `%s`, which no row names: add one", where, name, path)


# The sample month's PRs beside the demo's, one for each shape of evidence the demo lacks: number, title, heads
# (sha, day of the month pushed, changed paths; None: not known), the day merged. Below: the heads whose patches
# are whitespace-only, whose listing reached GitHub's cap, and whose files GitHub no longer has.
_EXTRA: tuple[tuple[int, str, tuple[tuple[str, int, tuple[str, ...] | None], ...], int | None], ...] = (
    (90001, "Apply formatting to the trainer", (("f1", 6, ("megatron/training/trainer.py",)),), 8),  # format-only
    (90002, "Format and fix the data loader", (("f2", 6, ("megatron/core/datasets/loader.py",)),), None),  # a note
    (90003, "Rename the tests of the model zoo", (("f3", 7, ("tests/unit_tests/models/test_gpt.py",)),), None),
    (90004, "Port the legacy tokenizer", (("f4", 7, None),), None),
    (90005, "Add the fused attention kernel", (("f5", 8, None),), None),  # pending
    (  # substantive at the earlier cutoff, test-only at the later one: re-classified
        90006,
        "Speed up the optimizer step",
        (("f6", 6, ("megatron/core/optimizer/adam.py",)), ("f7", 20, ("tests/unit_tests/test_adam.py",))),
        None,
    ),
)
_WHITESPACE_ONLY, _TRUNCATED, _UNAVAILABLE = {"f1"}, {"f3"}, {"f4"}
_SINCE_DAY = 15  # the earlier cutoff of the `since` document


@functools.cache
def json_documents() -> dict[str, list[Any]]:
    """The documents the service answers, made at build time from the bundled sample month (the demo's, with
    the PRs of `_EXTRA`) by the functions that make them, without a database or Redis: `full` (the report's
    JSON, narrated by the language model in one section and refused in the other), `summary`
    (`?detail=summary`), `since` (the `since` that `?since=` adds) and `drill-down` (the answers for every
    statistic, exclusion and theme)."""
    from tracker.core.drilldown import SELECTIONS, drill_stat, drill_theme, view_of_document, view_of_snapshot
    from tracker.core.since import since_of
    from tracker.reports.render import json_bytes, report_document, summary_document

    earlier, later, paths = _sample_reports()
    since = since_of(earlier, later)
    full = report_document(later)
    live = view_of_snapshot(later.snapshot, paths)
    drills = [drill_stat(live, stat) for stat in SELECTIONS]
    outline = view_of_document(full)
    drills += [drill_theme(outline, theme.section, theme.id) for theme in outline.themes]
    repo, window = later.snapshot.repo, later.snapshot.window
    # The drill-down's answer as tracker/web/drilldown.py makes it (tests/test_docs.py compares the two).
    answers = [{"repo": repo, "month": str(window.month), **d.as_dict(window.cutoff.isoformat())} for d in drills]
    documents = {
        "full": [full],
        "summary": [summary_document(full)],
        "since": [{"since": report_document(later, since)["since"]}],
        "drill-down": answers,
    }
    # Through the service's own encoder and back: the JSON as it is served.
    return {name: json.loads(json_bytes(document)) for name, document in documents.items()}


def _sample_reports() -> tuple[Any, Any, dict[int, list[str]]]:
    """The sample month's report at `_SINCE_DAY` and at its last day (with the language model's prose), and the
    changed paths of each PR's head at the last day."""
    from collections import defaultdict
    from datetime import date, datetime, time, timedelta
    from zoneinfo import ZoneInfo

    from tracker.core.attributes import AttributeVersion, version_at
    from tracker.core.classify import ChangedFile, Rules, classify_head
    from tracker.core.coverage import Coverage
    from tracker.core.derive import derive
    from tracker.core.report import build_report
    from tracker.core.snapshot import build_snapshot
    from tracker.core.timeline import Fact, FactKind
    from tracker.core.window import Month, month_window
    from tracker.demo import changed_files, read_bundle

    bundle, timezone, rules = read_bundle(), "Asia/Shanghai", Rules()
    month = Month.parse(bundle.month)
    facts: dict[int, set[Fact]] = defaultdict(set)
    versions: dict[int, list[AttributeVersion]] = defaultdict(list)
    files: dict[tuple[int, str], list[ChangedFile]] = {}
    for delivery in bundle.deliveries:  # as the worker derives each delivery
        derived = derive(delivery.delivery_id, "application/json", delivery.body, lambda _: timezone)
        facts[derived.number].update(derived.facts)
        versions[derived.number].append(derived.version)
    for story in bundle.stories:
        for sha, listing in story.heads.items():
            files[(story.number, sha)] = changed_files(listing)

    def instant(day: int) -> int:  # 10:00 local on that day of the month
        moment = datetime.combine(month.first_day + timedelta(days=day - 1), time(10), ZoneInfo(timezone))
        return int(moment.timestamp())

    unavailable = set()
    for number, title, heads, merged in _EXTRA:
        for index, (sha, day, paths) in enumerate(heads):
            at = instant(day)
            facts[number].add(Fact(FactKind.COMMIT, at, sha) if index else Fact(FactKind.OPENED, at))
            versions[number].append(AttributeVersion(at, sha, title, "", "main", f"pr-{number}", sha, (), False, "a"))
            if paths is not None:
                patch = "@@ -1 +1 @@\n-a = 1\n+a  =  1" if sha in _WHITESPACE_ONLY else "@@ -1 +1 @@\n-a = 1\n+a = 2"
                files[(number, sha)] = [ChangedFile(path, patch=patch) for path in paths]
            elif sha in _UNAVAILABLE:
                unavailable.add((number, sha))
        if merged is not None:
            facts[number].add(Fact(FactKind.MERGED, instant(merged)))
    verdicts = {key: classify_head(key[1], listed, rules, key[1] in _TRUNCATED) for key, listed in files.items()}
    # The webhook was registered on the 3rd: the first two days are not covered.
    coverage = Coverage(missing=((month.first_day, month.first_day + timedelta(days=1)),))

    def report_at(day: date) -> tuple[Any, dict[int, list[str]]]:
        window = month_window(month, day, timezone, ended=True)
        at_end = {number: version_at(known, window.end) for number, known in versions.items()}
        heads = {number: version.head_sha for number, version in at_end.items() if version is not None}
        snapshot = build_snapshot(
            bundle.repository,
            window,
            {number: sorted(known, key=lambda fact: fact.sort_key) for number, known in facts.items()},
            {number: version for number, version in at_end.items() if version is not None},
            verdicts,
            rules,
            frozenset(unavailable),
            coverage,
        )
        paths = {number: [f.path for f in files.get((number, sha), ())] for number, sha in heads.items()}
        return build_report(snapshot, paths), paths

    earlier, _ = report_at(month.first_day + timedelta(days=_SINCE_DAY - 1))
    later, paths = report_at(month.last_day)
    return earlier, _narrated(later), paths


def _narrated(report: Any) -> Any:
    """`report` as a repository with the language-model narrator reads it (tracker.narration.prose.with_prose): the
    delivered section with the model's prose (every change in one theme, the first in a highlight of its own,
    the rest in the theme's fold), the section in progress refused (a fallback says why)."""
    from types import SimpleNamespace

    from tracker.config import TrackerConfig
    from tracker.core.report import DELIVERED, IN_PROGRESS
    from tracker.narration.prose import with_prose
    from tracker.narration.schema import HighlightProse, SectionProse, ThemeProse, narrated_changes

    delivered = next(section for section in report.sections if section.id == DELIVERED)
    ids = [change.id for change in narrated_changes(delivered)]
    highlight = HighlightProse(change_ids=ids[:1], sentence="The trainer checkpoints faster.")
    prose = SectionProse(
        themes=[ThemeProse(title="Training", summary="Faster training.", highlights=[highlight], others=ids[1:])],
        overview="The month made training faster.",
    )
    refused = {"section": IN_PROGRESS, "stage": "english", "reason": "too_large"}
    stored = {
        DELIVERED: SimpleNamespace(english=prose, chinese=prose, fallbacks=()),
        IN_PROGRESS: SimpleNamespace(english=None, chinese=None, fallbacks=(refused,)),
    }

    class Stored:  # the narrations table's answers (tracker.narration.store.NarrationStore.get)
        def get(self, repo: str, month: str, section: str, *_: str) -> Any:
            return stored[section]

    config = TrackerConfig(defaults={"narrator": "llm"}, narrator_model="sample-model")
    return with_prose(report, Stored(), config)  # type: ignore[arg-type]
