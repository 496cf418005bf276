"""The version comes from git tags (setuptools-scm) and `tracker --version` shows the installed one.

The installed distribution is asked from a process started outside the clone (`python -I`), as the
`tracker` command is: inside the clone, a `monthly_activity_tracker.egg-info` left at its root by a
build would be found first on `sys.path`. Those tests start processes: the `system` tier.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DIST = PYPROJECT["project"]["name"]
FALLBACK = PYPROJECT["tool"]["setuptools_scm"]["fallback_version"]

_ASK = """
import importlib.metadata as m, json
d = m.distribution({dist!r})
print(json.dumps({{
    "version": d.version,
    "license": d.metadata["License-Expression"],
    "license_files": d.metadata.get_all("License-File") or [],
    "direct_url": json.loads(d.read_text("direct_url.json") or "null"),
}}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """What the environment running the tests has installed, asked from outside the clone."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", _ASK.format(dist=DIST)],
        cwd=tmp_path_factory.mktemp("elsewhere"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


@pytest.mark.system  # asks a process started outside the clone
def test_tracker_version_prints_the_installed_distributions_version(
    installed: dict[str, object], tmp_path: Path
) -> None:
    tracker = Path(sys.executable).with_name("tracker")
    done = subprocess.run(
        [str(tracker), "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == f"tracker, version {installed['version']}\n"
    Version(str(installed["version"]))  # PEP 440, or this raises


@pytest.mark.system  # asks a process started outside the clone
def test_a_git_checkout_is_not_versioned_by_the_fallback(installed: dict[str, object]) -> None:
    """Installed from this clone, which has git metadata: the version is the tag's or a dev release after
    it (0.1.devN+g<hash> before the first tag), never the fallback meant for trees without git."""
    direct_url = installed["direct_url"]
    if not isinstance(direct_url, dict) or direct_url.get("url") != ROOT.as_uri():
        pytest.skip(f"{DIST} is not installed from {ROOT}")
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} has no git metadata")
    assert installed["version"] != FALLBACK, (
        "setuptools-scm could not read the version from git (is git installed? does `git describe` work here?); "
        "reinstall: .venv/bin/pip install -q -c constraints.txt -e '.[dev]'"
    )


def test_the_source_tree_falls_back_like_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tracker/__init__.py` run without an installed distribution says the build's own fallback."""

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    spec = importlib.util.spec_from_file_location("tracker_without_metadata", ROOT / "tracker" / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.__version__ == FALLBACK


@pytest.mark.system  # asks a process started outside the clone
def test_the_license_ships_with_the_distribution(installed: dict[str, object]) -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert installed["license"] == "Apache-2.0"
    assert installed["license_files"] == ["LICENSE"]


def test_the_image_passes_its_version_to_setuptools_scm() -> None:
    """The build context has no .git: the Dockerfile hands its VERSION argument to setuptools-scm under
    the variable setuptools-scm reads for this distribution's name. (No Docker daemon here to build it.)"""
    variable = "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_" + re.sub(r"[^A-Za-z0-9]+", "_", DIST).upper()
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG VERSION=", dockerfile, re.MULTILINE)
    assert f'{variable}="$VERSION"' in dockerfile
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignored = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    assert ".git" in ignored
    assert "LICENSE" not in ignored  # pyproject.toml's license-files: the build needs it
