"""`month_changes`: which PRs each version of a month changed, so that a month's digest a few versions
old is brought up to date by reading those PRs again (tracker.reports.digests).

It starts empty: a digest older than the upgrade finds no changes recorded and the month is read whole,
as before, until a worker keeps the next digest.

Revision ID: 0003_month_changes
Revises: 0002_http_cache_used_at
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_month_changes"
down_revision: str | None = "0002_http_cache_used_at"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "month_changes",
        sa.Column("repo", sa.String(length=255), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("numbers", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "month", "version"),
    )


def downgrade() -> None:
    op.drop_table("month_changes")
