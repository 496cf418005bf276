"""Issue 33: the project uses only the public, documented interfaces of its dependencies.

A dependency's private module or name (one whose dotted path has a part starting with "_", or a
module its documentation does not offer, listed in `INTERNAL`) can change or vanish in any release
without a failing import. This reads every Python file of tracker/, workers/, bench/ and tools/ (the
syntax tree, nothing is imported) and names each file:line that imports one, reaches one through an
imported module's attributes, or imports one by name with `importlib.import_module`.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("tracker", "workers", "bench", "tools")
# The project's own packages; a script of bench/ or tools/ also imports its siblings by bare name.
FIRST_PARTY = {"tracker", "workers", "bench", "tools", "tests"}
# Modules of dependencies that are internal although no part of their name starts with "_".
INTERNAL = {
    # waitress documents `waitress.serve` and `waitress.create_server` (and their arguments), not the
    # classes its server is built from.
    "waitress.wasyncore",
    "waitress.channel",
    "waitress.task",
    "waitress.server",
    "waitress.adjustments",
    "waitress.buffers",
    "waitress.parser",
    "waitress.receiver",
    "waitress.trigger",
    "waitress.utilities",
    "waitress.proxy_headers",
}


def _siblings() -> set[str]:
    """Modules and packages a script in a scanned folder imports by bare name (its folder is sys.path[0])."""
    names = set()
    for folder in SCANNED:
        for path in (ROOT / folder).iterdir():
            if path.suffix == ".py":
                names.add(path.stem)
            elif path.is_dir() and (path / "__init__.py").exists():
                names.add(path.name)
    return names


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


class Scan(ast.NodeVisitor):
    """The private imports of one file: (line, dotted name)."""

    def __init__(self, first_party: set[str]) -> None:
        self.first_party = first_party
        self.found: list[tuple[int, str]] = []
        self.aliases: dict[str, str] = {}  # a local name bound to a dependency's module or name

    def dependency(self, dotted: str) -> bool:
        top = dotted.split(".", 1)[0]
        return bool(top) and top != "__future__" and top not in sys.stdlib_module_names and top not in self.first_party

    def check(self, line: int, dotted: str) -> None:
        parts = dotted.split(".")
        if any(_private(part) for part in parts) or any(
            ".".join(parts[:n]) in INTERNAL for n in range(1, len(parts) + 1)
        ):
            self.found.append((line, dotted))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self.dependency(alias.name):
                self.check(node.lineno, alias.name)
                if alias.asname:
                    self.aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module or not self.dependency(node.module):
            return  # relative imports are the project's own
        before = len(self.found)
        self.check(node.lineno, node.module)
        module_is_private = len(self.found) > before  # one finding for the line, not one per name too
        for alias in node.names:
            if alias.name == "*":
                continue
            dotted = f"{node.module}.{alias.name}"
            if not module_is_private:
                self.check(node.lineno, dotted)
            self.aliases[alias.asname or alias.name] = dotted

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attributes: list[str] = []
        value: ast.expr = node
        while isinstance(value, ast.Attribute):
            attributes.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in self.aliases:
            self.check(node.lineno, ".".join([self.aliases[value.id], *reversed(attributes)]))
            return  # the chain's shorter prefixes are part of this one
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        if name in ("import_module", "__import__") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and self.dependency(first.value):
                self.check(node.lineno, first.value)
        self.generic_visit(node)


def scan(source: str, first_party: set[str] = FIRST_PARTY) -> list[tuple[int, str]]:
    visitor = Scan(first_party)
    visitor.visit(ast.parse(source))
    return sorted(set(visitor.found))


def files() -> Iterator[Path]:
    for folder in SCANNED:
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_no_file_imports_a_dependencys_private_module_or_name() -> None:
    first_party = FIRST_PARTY | _siblings()
    found = [
        f"{path.relative_to(ROOT)}:{line}: {dotted}"
        for path in files()
        for line, dotted in scan(path.read_text(encoding="utf-8"), first_party)
    ]
    assert not found, "private modules or names of dependencies:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "dotted"),
    [
        ("import waitress.wasyncore", "waitress.wasyncore"),
        ("from waitress import wasyncore", "waitress.wasyncore"),
        ("from waitress.channel import HTTPChannel", "waitress.channel"),
        ("from somepkg._internal import thing", "somepkg._internal"),
        ("import somepkg._internal as inside", "somepkg._internal"),
        ("from somepkg import _helper", "somepkg._helper"),
        ("import somepkg\nsomepkg.sub._private.call()", "somepkg.sub._private.call"),
        ("from somepkg import Client\nClient._pool", "somepkg.Client._pool"),
        ("import importlib\nimportlib.import_module('somepkg._internal')", "somepkg._internal"),
    ],
)
def test_the_scan_finds_each_kind_of_private_import(source: str, dotted: str) -> None:
    assert [found for _, found in scan(source)] == [dotted]


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos._exit(0)",  # the standard library is not a dependency
        "from tracker.web import _internal",  # nor is the project itself
        "from . import _sibling",
        "from somepkg import __version__",  # dunder names are public
        "import somepkg\nsomepkg.public.call()",
        "from waitress import create_server",
    ],
)
def test_the_scan_leaves_public_and_own_names_alone(source: str) -> None:
    assert scan(source) == []
