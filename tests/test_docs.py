"""The README and the documentation site (docs/, mkdocs.yml): the site builds with `mkdocs build
--strict` (any warning fails: a broken link or anchor, or a reference table that disagrees with the
code), the README stays short and keeps the commands CI runs, and nothing points outside the
repository. The commands of their shell blocks are run by tests/test_readme.py."""

from __future__ import annotations

import copy
import functools
import importlib.util
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


@functools.cache  # one module for the file's tests: it keeps the documents it generated (`json_documents`)
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


def test_key_paths_name_nested_keys_and_collapse_list_items() -> None:
    hook = _hook()
    document = {"a": [{"b": 1}, {"c": {"d": [2, 3]}}], "e": [], "f": {"g": None}}
    assert hook.key_paths(document) == {"a", "a[].b", "a[].c", "a[].c.d", "e", "f", "f.g"}


def test_the_json_tables_name_exactly_the_fields_of_the_generated_documents(caplog: pytest.LogCaptureFixture) -> None:
    hook = _hook()
    page = (DOCS / "reference" / "json.md").read_text(encoding="utf-8")
    documents = hook.json_documents()
    with caplog.at_level(logging.WARNING):
        hook.check_json_tables(page, "reference/json.md", documents)
    assert not caplog.records, [record.getMessage() for record in caplog.records]
    # A field the code adds, or one it drops, is a warning (strict: a failure) until the table says so.
    full = copy.deepcopy(documents["full"][0])
    full["pull_requests"][0]["added_field"] = 1
    del full["report"]["daily"]
    drill = [{**answer, "stat_name": answer.get("stat")} for answer in documents["drill-down"]]
    with caplog.at_level(logging.WARNING):
        hook.check_json_tables(page, "reference/json.md", {**documents, "full": [full], "drill-down": drill})
    warnings = [record.getMessage() for record in caplog.records]
    assert any("`pull_requests[].added_field`" in w and "no row names" in w for w in warnings), warnings
    assert any("`report.daily[].day`" in w and "does not have" in w for w in warnings), warnings
    assert any("`stat_name`" in w for w in warnings), warnings
    assert len(warnings) == 7  # the two added fields, and the five paths of `report.daily` the table names


def test_the_generated_documents_have_every_field_the_service_answers(tmp_path: Path, redis_url: str) -> None:
    """The hook makes its documents as the service does (tracker/web/api.py, tracker/web/drilldown.py), from
    the same functions; here the service answers the demo's month through its routes, and every field it
    answers is one the generated documents, and so the tables, have."""
    from tests.support.app import running_app
    from tracker.demo import read_bundle
    from tracker.demo.load import load
    from tracker.settings import load_settings
    from tracker.web.context import services

    hook = _hook()
    bundle = read_bundle()
    settings = load_settings(
        github_api_url="http://127.0.0.1:9",  # the demo stores every head's files: no request to GitHub
        webhook_secret="test-webhook-secret",
        data_dir=tmp_path / "var",
        database_url=f"sqlite:///{tmp_path / 'ledger.sqlite3'}",
        redis_url=redis_url,
        timezone="Asia/Shanghai",
    )
    month = f"/api/v1/repos/{bundle.repository}/months/{bundle.month}"
    with running_app(settings) as app:
        with app.app_context():
            load(services(), bundle)
        client = app.test_client()

        def answer(url: str, **query: str) -> Any:
            got = client.get(url, query_string=query)
            assert got.status_code == 200, got.get_data(as_text=True)
            return got.get_json()

        full = answer(month)
        theme = full["report"]["sections"][0]["themes"][0]["id"]
        answered = {
            "full": [full],
            "summary": [answer(month, detail="summary")],
            "since": [{"since": answer(month, since=f"{bundle.month}-15")["since"]}],
            "drill-down": [
                answer(f"{month}/prs", stat="merged"),
                answer(f"{month}/prs", stat="test_only"),
                answer(f"{month}/prs", theme=theme, section="delivered"),
            ],
        }
    generated = hook.json_documents()
    for name, documents in answered.items():
        have = set().union(*(hook.key_paths(document) for document in generated[name]))
        for document in documents:
            assert hook.key_paths(document) <= have, (name, sorted(hook.key_paths(document) - have))
