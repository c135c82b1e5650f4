"""host policy: what a worker offers jobs (interpreter names, external servers)

Revision ID: 2026_12_05_host_policy
Revises: 2026_12_04_invocation
Create Date: 2026-12-05 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_host_policy"
down_revision = "2026_12_05_floor"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("offers", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("offers")
