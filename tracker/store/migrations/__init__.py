"""The ledger's schema revisions (Alembic), shipped inside the package and run in code: no alembic.ini.

`upgrade(conn)` brings the database behind an open connection to the newest revision, in the caller's
transaction (the caller holds the lock: `tracker.store.database.migrate`). `baseline_differences`
tells whether a ledger made by the release before migrations (tables, no `alembic_version`) has
exactly the tables of the first revision, so that it can be stamped with it instead of recreated.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# Alembic logs at INFO, from its import on, what it sets up (its plugins, its dialect): lines in every
# process's log at every start. Kept to its warnings unless configured otherwise; each upgrade is logged
# in one line by tracker.store.database. Set before the import below, which logs.
if logging.getLogger("alembic").level == logging.NOTSET:
    logging.getLogger("alembic").setLevel(logging.WARNING)

import sqlalchemy as sa  # noqa: E402
from alembic import command  # noqa: E402
from alembic.config import Config  # noqa: E402
from alembic.script import ScriptDirectory  # noqa: E402
from sqlalchemy import Connection, Inspector, create_engine, inspect  # noqa: E402

from tracker.core.payloads import github_id  # noqa: E402

# The revision a ledger made by `metadata.create_all` (the release before migrations) matches.
BASELINE = "0001_initial"
VERSION_TABLE = "alembic_version"


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for the revisions here, to run on `connection` (for `alembic.command`)."""
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent))
    if connection is not None:
        config.attributes["connection"] = connection  # env.py runs the revisions on it
    return config


@cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head() -> str:
    """The newest revision this release knows."""
    found = _scripts().get_current_head()
    assert found is not None, "tracker/store/migrations/versions holds no revision"
    return found


def known(revision: str) -> bool:
    return revision in {script.revision for script in _scripts().walk_revisions()}


def current(conn: Connection) -> str | None:
    """The database's revision; None when it has none (empty, or made before migrations). Read
    directly: Alembic's own reader logs two lines at INFO on every start of every process."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    revisions: list[str] = list(
        conn.execute(sa.select(sa.column("version_num")).select_from(sa.table(VERSION_TABLE))).scalars()
    )
    if len(revisions) > 1:
        raise RuntimeError(f"{VERSION_TABLE} holds several revisions ({', '.join(revisions)}): the history branched")
    return revisions[0] if revisions else None


def upgrade(conn: Connection) -> None:
    """Run every revision the database lacks, on `conn` and inside its transaction."""
    command.upgrade(alembic_config(conn), "head")


def stamp(conn: Connection, revision: str) -> None:
    """Record `revision` as the database's, running nothing."""
    command.stamp(alembic_config(conn), revision)


def forget(conn: Connection) -> None:
    """Record no revision (the database holds none of the tables any revision made)."""
    conn.execute(sa.delete(sa.table(VERSION_TABLE)))


def baseline_differences(conn: Connection) -> list[str]:
    """How the tables behind `conn` differ from those the first revision makes (names, columns, types,
    nullability, primary keys, indexes); empty when they match. Tables of its own are ignored."""
    expected = _baseline_shape()
    inspector = inspect(conn)
    present = set(inspector.get_table_names())
    differences: list[str] = []
    for table, shape in expected.items():
        if table not in present:
            differences.append(f"table {table} is missing")
            continue
        found = _table_shape(inspector, table)
        for column in sorted(shape.columns.keys() - found.columns.keys()):
            differences.append(f"column {table}.{column} is missing")
        for column in sorted(found.columns.keys() - shape.columns.keys()):
            differences.append(f"column {table}.{column} is not the first revision's")
        for column in sorted(shape.columns.keys() & found.columns.keys()):
            want, have = shape.columns[column], found.columns[column]
            if want != have:
                differences.append(f"column {table}.{column} is {_shown(have)}, not {_shown(want)}")
        if shape.primary_key != found.primary_key:
            differences.append(f"table {table}'s primary key is {found.primary_key}, not {shape.primary_key}")
        for index in sorted(shape.indexes.keys() - found.indexes.keys()):
            differences.append(f"index {index} on {table} is missing")
        for index in sorted(shape.indexes.keys() & found.indexes.keys()):
            if shape.indexes[index] != found.indexes[index]:
                differences.append(f"index {index} on {table} is not on {', '.join(shape.indexes[index][0])}")
    return differences


Column = tuple[str, int | None, bool]  # generic type, length, nullable


@dataclass(frozen=True)
class TableShape:
    columns: dict[str, Column]
    primary_key: list[str]
    indexes: dict[str, tuple[tuple[str, ...], bool]]  # name: columns, unique


def _shown(column: Column) -> str:
    kind, length, nullable = column
    return f"{kind}{f'({length})' if length else ''}{'' if nullable else ' NOT NULL'}"


def _table_shape(inspector: Inspector, table: str) -> TableShape:
    # Compared by generic type: PostgreSQL's BYTEA and SQLite's BLOB are both the LargeBinary it was made as.
    columns: dict[str, Column] = {}
    for column in inspector.get_columns(table):
        try:
            generic = column["type"].as_generic()
        except NotImplementedError:
            generic = column["type"]
        columns[column["name"]] = (type(generic).__name__, getattr(generic, "length", None), bool(column["nullable"]))
    indexes = {
        str(index["name"]): (tuple(str(name) for name in index["column_names"]), bool(index["unique"]))
        for index in inspector.get_indexes(table)
    }
    return TableShape(columns, list(inspector.get_pk_constraint(table)["constrained_columns"]), indexes)


@cache
def _baseline_shape() -> dict[str, TableShape]:
    """The tables the first revision makes, as it makes them on an empty database in memory."""
    engine = create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), BASELINE)
            inspector = inspect(conn)
            return {
                table: _table_shape(inspector, table) for table in inspector.get_table_names() if table != VERSION_TABLE
            }
    finally:
        engine.dispose()


# A rule on rows, not tables: revision 0004 applies it to a ledger it upgrades, and the carry-over of an
# older release's ledger (carry_over.py, which copies rows into tables already at the newest revision) to
# the rows it copies.
def forget_forged_hooks(conn: Connection) -> int:
    """Remove the hooks whose id GitHub could not have sent; how many there were."""
    hooks = sa.table("hooks", sa.column("hook_id"))
    forged = [hook_id for hook_id in conn.execute(sa.select(hooks.c.hook_id)).scalars() if github_id(hook_id) is None]
    for start in range(0, len(forged), 500):
        conn.execute(hooks.delete().where(hooks.c.hook_id.in_(forged[start : start + 500])))
    return len(forged)
