"""known-bug launches: a failed launch whose log showed a known SGLang bug keeps that bug's key

Revision ID: 2026_12_05_known_bug_launch
Revises: 2026_12_05_correctness
Create Date: 2026-12-05 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_known_bug_launch"
down_revision = "2026_12_05_correctness"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("server_instances") as batch:
        # NULL on every earlier row: a launch failure not identified, as before.
        batch.add_column(sa.Column("known_bug", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("server_instances") as batch:
        batch.drop_column("known_bug")
