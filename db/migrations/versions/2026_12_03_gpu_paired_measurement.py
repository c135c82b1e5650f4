"""paired measurement: pinned acceptance per point; window order, start and telemetry per repeat; run drift

Revision ID: 2026_12_03_gpu
Revises: 2026_12_03_fleet
Create Date: 2026-12-03 18:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import db.types

revision = "2026_12_03_gpu"
down_revision = "2026_12_03_fleet"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("points") as t:
        # SGLANG_SIMULATE_ACC_LEN of the point's server (grid.accept_lengths); NULL = not pinned.
        t.add_column(sa.Column("accept_length_pinned", sa.Float(), nullable=True))
    with op.batch_alter_table("samples") as t:
        # Position in the run's measurement order (interleaved pairs: A B B A ...), and the window's start.
        t.add_column(sa.Column("order_index", sa.Integer(), nullable=True))
        t.add_column(sa.Column("window_started_at", db.types.UTCDateTime(), nullable=True))
        # GPU SM clock / power / temperature and host load sampled during the window (bench.host.telemetry).
        t.add_column(sa.Column("telemetry", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs") as t:
        # The reference point re-measured at the end of the run, against its first measurement.
        t.add_column(sa.Column("drift", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as t:
        t.drop_column("drift")
    with op.batch_alter_table("samples") as t:
        t.drop_column("telemetry")
        t.drop_column("window_started_at")
        t.drop_column("order_index")
    with op.batch_alter_table("points") as t:
        t.drop_column("accept_length_pinned")
