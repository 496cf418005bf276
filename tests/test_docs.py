"""The README and the documentation site (docs/, mkdocs.yml): the site builds with `mkdocs build
--strict` (any warning fails: a broken link or anchor, or a reference table that disagrees with the
code), the README stays short and keeps the commands CI runs, and nothing points outside the
repository. The commands of their shell blocks are run by tests/test_readme.py."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from bench.fixtures.paths import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _texts() -> list[Path]:
    return [README, ROOT / "mkdocs.yml", *sorted(DOCS.rglob("*.md")), *sorted(DOCS.rglob("*.py"))]


def test_the_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_the_readme_holds_the_test_command_ci_runs_exactly() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip().splitlines()[-1]
    assert ci.startswith("python3 -m venv .venv && ")
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.M | re.S)
    assert blocks[1] == ci + "\n"
    assert blocks[0].startswith("python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e . && ")


def test_nothing_points_outside_the_repository() -> None:
    for path in _texts():
        text = path.read_text(encoding="utf-8")
        assert "../shared" not in text, path
        assert "MEASURED.md" not in text, path
    # The README's relative links (GitHub renders them) name files of the clone.
    for target in re.findall(r"\]\((?!https?://|#)([^)#\s]+)", README.read_text(encoding="utf-8")):
        resolved = (ROOT / target).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), target


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "_hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Page:
    class file:  # noqa: N801 - the shape MkDocs passes to a hook
        src_uri = "test.md"


def test_the_reference_tables_come_from_the_code(caplog: pytest.LogCaptureFixture) -> None:
    hook = _hook()
    written = (
        "<!-- fields: tracker.config:PublishConfig -->\n| key | meaning |\n|---|---|\n"
        "| `directory` | where |\n| `no_such_key` | nothing |\n<!-- /fields -->\n"
    )
    with caplog.at_level(logging.WARNING):
        page = hook.on_page_markdown(written, _Page)
    # Every field of the model is a row, with its type and default from the code ...
    assert "| `directory` | path | unset | where |" in page
    assert "| `weekly_partial` | boolean | `false` |  |" in page
    # ... and a field without a meaning, or a meaning without a field, is a warning (strict: a failure).
    warnings = [record.getMessage() for record in caplog.records]
    assert any("weekly_partial" in w and "no meaning row" in w for w in warnings), warnings
    assert any("no_such_key" in w for w in warnings), warnings
    assert "| `TRACKER_TIMEZONE` | string | `Asia/Shanghai` |" in hook.on_page_markdown(
        (DOCS / "reference" / "settings.md").read_text(encoding="utf-8"), _Page
    )


def test_the_metric_and_log_field_checks_see_a_missing_row(caplog: pytest.LogCaptureFixture) -> None:
    hook = _hook()
    names = [name for name, _, _, _ in hook.metrics()]
    assert "tracker_webhook_deliveries_received_total" in names and "tracker_queue_jobs" in names
    with caplog.at_level(logging.WARNING):
        hook.on_page_markdown("<!-- metrics -->\n\n| `tracker_no_such_metric` |\n", _Page)
        hook.on_page_markdown("<!-- log-fields -->\n| field | what |\n|---|---|\n| `time` | t |\n", _Page)
    warnings = " ".join(record.getMessage() for record in caplog.records)
    assert "tracker_no_such_metric" in warnings and "tracker_queue_jobs" in warnings
    assert "log field table" in warnings


@pytest.mark.system
def test_the_site_builds_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a warning (a broken link or anchor, a reference table that disagrees
    with the code) fails the build."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "WARNING" not in output, output[-4000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "tracker backfill" in cli and "--repo" in cli  # generated from click
    settings = (tmp_path / "site" / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    assert "TRACKER_LLM_PROMPT_BUDGET" in settings and "Asia/Shanghai" in settings
