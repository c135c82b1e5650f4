"""fleet recovery: lease expiries counted apart from attempts; a server's exit code and log tail in the database

Revision ID: 2026_12_03_fleet
Revises: 2026_12_03_prof
Create Date: 2026-12-03 18:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "2026_12_03_fleet"
down_revision = "2026_12_03_prof"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("lease_expiries", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("server_instances") as batch:
        batch.add_column(sa.Column("exit_code", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("log_tail", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("server_instances") as batch:
        batch.drop_column("log_tail")
        batch.drop_column("exit_code")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("lease_expiries")
