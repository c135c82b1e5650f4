"""samples.invocation and samples.server_instance_id: which invocation of a run, and which server, measured a
window (a resumed run's windows carry another invocation, and their own servers)

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
        # The server that measured the window. A point's own server_instance_id is its latest server: a resumed
        # run moves it to the new one, so per-server figures (run cost) read the window's.
        t.add_column(sa.Column("server_instance_id", sa.Integer(), nullable=True))
        t.create_foreign_key(
            "fk_samples_server_instance_id",
            "server_instances",
            ["server_instance_id"],
            ["id"],
            ondelete="SET NULL",
        )
        t.create_index("ix_samples_server_instance_id", ["server_instance_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("samples") as t:
        t.drop_index("ix_samples_server_instance_id")
        t.drop_constraint("fk_samples_server_instance_id", type_="foreignkey")
        t.drop_column("server_instance_id")
        t.drop_column("invocation")
