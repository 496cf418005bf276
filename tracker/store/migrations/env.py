"""Alembic's environment: run the revisions on the connection `tracker.store.migrations` hands over.

The tracker configures Alembic in code (no alembic.ini): `upgrade` puts an open connection, inside
its transaction and under its lock, in `config.attributes["connection"]`. A developer's own
alembic.ini (`script_location = tracker/store/migrations`, `sqlalchemy.url = …`) works too, for
`alembic revision --autogenerate`: then this file opens the URL itself.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from tracker.store.schema import metadata


def _run(connection: Connection) -> None:
    # Batch operations: SQLite alters most of a table only by copying it (ALTER TABLE is limited there),
    # so autogenerate writes every change in a form that works on both databases.
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():  # nothing of its own inside the caller's transaction
        context.run_migrations()


def _run_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        render_as_batch=True,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


given = context.config.attributes.get("connection")
if context.is_offline_mode():
    _run_offline()
elif given is not None:
    _run(given)
else:
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database to migrate: run `tracker migrate`, or set sqlalchemy.url in alembic.ini")
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()
