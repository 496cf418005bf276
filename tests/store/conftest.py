"""Fixtures of the store's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tracker.store.database import connect


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    """A SQLite ledger (schema created) in the test's directory, whatever database the test runs on."""
    engine = connect(f"sqlite:///{tmp_path / 'ledger.sqlite3'}")
    try:
        yield engine
    finally:
        engine.dispose()
