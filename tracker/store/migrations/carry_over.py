"""Adopting a ledger of any release before migrations: its rows carried over into this release's tables.

A ledger made by `metadata.create_all` before migrations whose tables are exactly the first revision's
is stamped (`tracker.store.database.migrate`). An older one (an earlier release had fewer tables, or other
columns) is carried over instead: its tables are set aside, this release's are made, the rows of every
table that is not derived are copied into them (the columns both have; a new column gets its default),
and the tables set aside are dropped; all in the caller's transaction. The derived tables are left empty
and unmarked (`ledger_meta` is derived too): the ledger's derived schema reads as outdated, so they are
rebuilt from the deliveries and observations next (`tracker.store.rebuild`), as after any older release.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Table, inspect

from tracker.store.migrations import forget_forged_hooks
from tracker.store.schema import DERIVED_TABLES, deliveries, http_cache, ledger_meta, metadata, observations

# Every table that cannot be derived from the deliveries again: the deliveries and hooks, the observations
# and runs of backfills, coverage, installations, fetched files, records, publications, the narrator's prose.
KEPT = tuple(table for table in metadata.sorted_tables if table not in DERIVED_TABLES and table is not ledger_meta)

# Where PostgreSQL keeps the old tables while they are copied (each moves with its indexes, constraints
# and sequences, whose names the new tables reuse); SQLite renames them with this suffix instead.
_ASIDE = "tracker_before_upgrade"


@dataclass(frozen=True)
class CarriedOver:
    deliveries: int
    observations: int
    last_received_at: int | None  # epoch milliseconds: the newest delivery's


def is_ledger(conn: Connection) -> bool:
    """Whether the database holds the tracker's source of truth (every release had `deliveries`)."""
    return inspect(conn).has_table(deliveries.name)


def carry_over(conn: Connection, build: Callable[[Connection], None]) -> CarriedOver:
    """Set this release's tables in place of the old ones behind `conn`, keeping every row that is not
    derived; `build` makes this release's (empty) tables. In the caller's transaction."""
    inspector = inspect(conn)
    ours = set(inspector.get_table_names()) & set(metadata.tables)  # any other table is left alone
    old_columns = {name: {column["name"] for column in inspector.get_columns(name)} for name in ours}
    aside = {name: _set_aside(conn, name) for name in old_columns}
    build(conn)
    for table in KEPT:
        if table.name in aside:
            _copy(conn, aside[table.name], old_columns[table.name], table)
    forget_forged_hooks(conn)  # as revision 0004 does in a ledger it upgrades
    for old in aside.values():
        conn.execute(sa.text(f"DROP TABLE {_quoted(old)}"))
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f'DROP SCHEMA "{_ASIDE}"'))
    count = sa.select(sa.func.count())
    return CarriedOver(
        deliveries=conn.execute(count.select_from(deliveries)).scalar_one(),
        observations=conn.execute(count.select_from(observations)).scalar_one(),
        last_received_at=conn.execute(sa.select(sa.func.max(deliveries.c.received_at))).scalar_one(),
    )


def _set_aside(conn: Connection, name: str) -> sa.TableClause:
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{_ASIDE}"'))
        conn.execute(sa.text(f'ALTER TABLE "{name}" SET SCHEMA "{_ASIDE}"'))
        return sa.table(name, schema=_ASIDE)
    # SQLite names indexes database-wide: the old ones go first, so that the new tables can have theirs.
    for index in inspect(conn).get_indexes(name):
        conn.execute(sa.text(f'DROP INDEX "{index["name"]}"'))
    renamed = f"{name}__{_ASIDE}"
    conn.execute(sa.text(f'ALTER TABLE "{name}" RENAME TO "{renamed}"'))
    return sa.table(renamed)


def _quoted(table: sa.TableClause) -> str:
    return f'"{table.schema}"."{table.name}"' if table.schema else f'"{table.name}"'


def _copy(conn: Connection, old: sa.TableClause, old_columns: set[str], table: Table) -> None:
    common = [column.name for column in table.columns if column.name in old_columns]
    filled = {
        column.name: _default(table, column)
        for column in table.columns
        if column.name not in old_columns and not column.nullable
    }
    source = sa.table(old.name, *(sa.column(name) for name in common), schema=old.schema)
    rows = sa.select(
        *(source.c[name] for name in common),
        *(sa.literal(value, table.c[name].type).label(name) for name, value in filled.items()),
    )
    conn.execute(table.insert().from_select([*common, *filled], rows))
    serial = table.autoincrement_column
    if conn.dialect.name == "postgresql" and serial is not None:
        # The rows kept their ids; the new table's sequence starts after the highest (or at 1).
        conn.execute(
            sa.text(
                f"SELECT setval(pg_get_serial_sequence('{table.name}', '{serial.name}'), "
                f'coalesce(max("{serial.name}"), 0) + 1, false) FROM "{table.name}"'
            )
        )


def _default(table: Table, column: sa.Column[Any]) -> Any:
    """The value of a NOT NULL column the old table lacked, for each of its rows."""
    if table is http_cache and column.name == "used_at":
        return int(time.time() * 1000)  # as revision 0002: old answers live their full retention from now
    default = column.default
    if isinstance(default, sa.ColumnDefault) and default.is_scalar:
        return default.arg
    raise RuntimeError(
        f"{table.name}.{column.name} is new and has no default: tracker/store/migrations/carry_over.py must say "
        "what the rows of an older ledger get"
    )
