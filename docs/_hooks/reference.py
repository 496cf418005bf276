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

A field of the model without a meaning row, or a row naming no field, is a warning, and
`mkdocs build --strict` (CI: tests/test_docs.py) fails on any warning.
"""

from __future__ import annotations

import ast
import importlib
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
