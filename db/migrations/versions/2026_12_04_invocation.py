"""samples.invocation: which invocation of a run measured a window (a resumed run's windows carry another)

Revision ID: 2026_12_04_invocation
Revises: 2026_12_03_interop
Create Date: 2026-12-04 13:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "2026_12_04_invocation"
down_revision = "2026_12_03_interop"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("samples") as t:
        # The run's order_index where the invocation (a `specbench run`, a job attempt) that measured this
        # window began. A v1/v2 repeat pairs only windows of one invocation: a resumed run may finish a repeat
        # whose other side ran before, on another server or a lost host. NULL: runs before this column.
        t.add_column(sa.Column("invocation", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("samples") as t:
        t.drop_column("invocation")
