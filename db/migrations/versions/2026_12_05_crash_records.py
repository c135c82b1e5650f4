"""crash records: the process that owns a running run and a live server row, so a dead one is noticed

Revision ID: 2026_12_05_crash_records
Revises: 2026_12_05_host_policy
Create Date: 2026-12-05 10:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_crash_records"
down_revision = "2026_12_05_host_policy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("owner", sa.JSON(), nullable=True))
    with op.batch_alter_table("server_instances") as batch:
        batch.add_column(sa.Column("owner", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("server_instances") as batch:
        batch.drop_column("owner")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("owner")
