"""`http_cache.used_at`: when an entry was stored or last answered a 304, so old entries can be dropped.

Entries already there count as used at the upgrade: each lives its full retention from then.

Revision ID: 0002_http_cache_used_at
Revises: 0001_initial
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0002_http_cache_used_at"
down_revision: str | None = "0001_initial"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("http_cache") as batch:
        batch.add_column(sa.Column("used_at", sa.BigInteger(), nullable=True))
    op.execute(sa.text("UPDATE http_cache SET used_at = :now").bindparams(now=int(time.time() * 1000)))
    # SQLite cannot make a column NOT NULL in place: the batch copies the table once.
    with op.batch_alter_table("http_cache") as batch:
        batch.alter_column("used_at", existing_type=sa.BigInteger(), nullable=False)
    op.create_index("ix_http_cache_used_at", "http_cache", ["used_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_http_cache_used_at", table_name="http_cache")
    with op.batch_alter_table("http_cache") as batch:
        batch.drop_column("used_at")
