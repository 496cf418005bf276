"""`group_records`: a group's months frozen as records, as a repository's are in `month_records`
(tracker.records.groups). It starts empty: no group was recorded before.

Revision ID: 0005_group_records
Revises: 0004_forged_hooks
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_group_records"
down_revision: str | None = "0004_forged_hooks"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "group_records",
        sa.Column("group_key", sa.String(length=64), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("cutoff", sa.String(length=10), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.Column("members", sa.Text(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("pending", sa.Text(), nullable=False),
        sa.Column("markdown_en", sa.Text(), nullable=False),
        sa.Column("markdown_zh", sa.Text(), nullable=False),
        sa.Column("html_en", sa.Text(), nullable=False),
        sa.Column("html_zh", sa.Text(), nullable=False),
        sa.Column("json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("group_key", "month", "revision"),
    )


def downgrade() -> None:
    op.drop_table("group_records")
