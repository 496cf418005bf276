"""The schema of the first release with migrations: every table as `metadata.create_all` made it before.

A ledger made by an earlier release (tables, no `alembic_version`) is checked against this revision
and stamped with it, never recreated (`tracker.store.database.migrate`). Written out in full, not as
`metadata.create_all`, so that later changes to tracker/store/schema.py never change what it made.

Revision ID: 0001_initial
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(100), nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=True),
        sa.Column("repo", sa.String(255), nullable=True),
        sa.Column("hook_id", sa.String(32), nullable=True),
        sa.Column("content_type", sa.String(100), nullable=False),
        sa.Column("headers", sa.Text(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("processed_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_deliveries_status_received", "deliveries", ["status", "received_at"], unique=False)
    op.create_table(
        "delivery_digests",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("delivery_id", sa.String(100), nullable=False),
        sa.PrimaryKeyConstraint("repo", "digest"),
    )
    op.create_table(
        "hooks",
        sa.Column("hook_id", sa.String(32), nullable=False),
        sa.Column("hook_type", sa.String(64), nullable=True),
        sa.Column("events", sa.Text(), nullable=False),
        sa.Column("target", sa.String(255), nullable=True),
        sa.Column("first_ping_at", sa.BigInteger(), nullable=False),
        sa.Column("last_ping_at", sa.BigInteger(), nullable=False),
        sa.Column("pings", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("hook_id"),
    )
    op.create_table(
        "repositories",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("full_name", sa.String(255), nullable=False),
        sa.Column("named_at", sa.BigInteger(), nullable=False),
        sa.Column("named_by", sa.String(100), nullable=False),
        sa.PrimaryKeyConstraint("repo"),
    )
    op.create_table(
        "pr_facts",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("ident", sa.String(64), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("repo", "number", "kind", "ident", "at"),
    )
    op.create_table(
        "pr_versions",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("delivery_id", sa.String(100), nullable=False),
        sa.Column("observed", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("base_ref", sa.String(255), nullable=False),
        sa.Column("head_ref", sa.String(255), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("draft", sa.Boolean(), nullable=False),
        sa.Column("author", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("repo", "number", "at", "delivery_id"),
    )
    op.create_table(
        "month_activity",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("month", sa.String(7), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "month", "number"),
    )
    op.create_table(
        "webhook_coverage",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("since", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("repo"),
    )
    op.create_table(
        "months",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("month", sa.String(7), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "month"),
    )
    op.create_table(
        "ledger_meta",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "observations",
        sa.Column("id", sa.String(120), nullable=False),
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("fetched_at", sa.BigInteger(), nullable=False),
        sa.Column("document", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_observations_repo_number", "observations", ["repo", "number"], unique=False)
    op.create_table(
        "history_runs",
        sa.Column("id", sa.String(320), nullable=False),
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("full_name", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("range_start", sa.BigInteger(), nullable=False),
        sa.Column("range_end", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", sa.BigInteger(), nullable=True),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("not_modified", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "history_done",
        sa.Column("run_id", sa.String(320), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "number"),
    )
    op.create_table(
        "coverage",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("start_at", sa.BigInteger(), nullable=False),
        sa.Column("end_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "source", "start_at"),
    )
    op.create_table(
        "installations",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("full_name", sa.String(255), nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=False),
        sa.Column("seen_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("repo"),
    )
    op.create_table(
        "head_files",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("previous_path", sa.Text(), nullable=True),
        sa.Column("additions", sa.Integer(), nullable=False),
        sa.Column("deletions", sa.Integer(), nullable=False),
        sa.Column("patch", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("repo", "number", "head_sha", "position"),
    )
    op.create_table(
        "heads",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("file_count", sa.Integer(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("fetched_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "number", "head_sha"),
    )
    op.create_table(
        "http_cache",
        sa.Column("url", sa.String(1000), nullable=False),
        sa.Column("etag", sa.String(255), nullable=False),
        sa.Column("next_url", sa.Text(), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("url"),
    )
    op.create_table(
        "month_records",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("month", sa.String(7), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("full_name", sa.String(255), nullable=False),
        sa.Column("cutoff", sa.String(10), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.Column("month_version", sa.BigInteger(), nullable=False),
        sa.Column("generation", sa.String(64), nullable=False),
        sa.Column("deliveries_received", sa.BigInteger(), nullable=False),
        sa.Column("deliveries_processed", sa.BigInteger(), nullable=False),
        sa.Column("config_hash", sa.String(64), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("pending", sa.Text(), nullable=False),
        sa.Column("markdown_en", sa.Text(), nullable=False),
        sa.Column("markdown_zh", sa.Text(), nullable=False),
        sa.Column("html_en", sa.Text(), nullable=False),
        sa.Column("html_zh", sa.Text(), nullable=False),
        sa.Column("json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "month", "revision"),
    )
    op.create_table(
        "publications",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("month", sa.String(7), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("edition", sa.String(16), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("result", sa.String(16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_publications_repo_month", "publications", ["repo", "month", "at"], unique=False)
    op.create_table(
        "wanted_heads",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("full_name", sa.String(255), nullable=False),
        sa.Column("base_sha", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("repo", "number", "head_sha"),
    )
    op.create_table(
        "head_verdicts",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("category", sa.String(16), nullable=False),
        sa.Column("whitespace_only", sa.Boolean(), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "number", "head_sha"),
    )
    op.create_table(
        "narrations",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("month", sa.String(7), nullable=False),
        sa.Column("section", sa.String(32), nullable=False),
        sa.Column("content", sa.String(64), nullable=False),
        sa.Column("prompt_version", sa.String(32), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("english", sa.Text(), nullable=True),
        sa.Column("chinese", sa.Text(), nullable=True),
        sa.Column("fallbacks", sa.Text(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "month", "section", "content", "prompt_version", "model"),
    )
    op.create_table(
        "narration_spend",
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("month", sa.String(7), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("repo", "month", "model"),
    )


def downgrade() -> None:
    # Dropping a table drops its indexes.
    for table in (
        "narration_spend",
        "narrations",
        "head_verdicts",
        "wanted_heads",
        "publications",
        "month_records",
        "http_cache",
        "heads",
        "head_files",
        "installations",
        "coverage",
        "history_done",
        "history_runs",
        "observations",
        "ledger_meta",
        "months",
        "webhook_coverage",
        "month_activity",
        "pr_versions",
        "pr_facts",
        "repositories",
        "hooks",
        "delivery_digests",
        "deliveries",
    ):
        op.drop_table(table)
