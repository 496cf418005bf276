"""`hooks`: the rows no GitHub hook could have made are removed.

Before issue 31 a ping's hook was named by its X-GitHub-Hook-ID header, which the signature does not
cover: one captured ping replayed under made-up headers added a row per header (2,000-character ids, in
a probe). A hook's id is now read from the signed body, and a row whose id is not one GitHub sends (a
decimal below 2^63) was never a hook. The rows of real hooks are kept as they are.

Revision ID: 0004_forged_hooks
Revises: 0003_month_changes
"""

from __future__ import annotations

from alembic import op

from tracker.store.migrations import forget_forged_hooks

revision = "0004_forged_hooks"
down_revision: str | None = "0003_month_changes"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    forget_forged_hooks(op.get_bind())


def downgrade() -> None:
    pass  # the rows removed were never hooks
