"""points.step_floor_ms and points.floor_fraction: the physical floor of a point and how close it came

step_floor_ms: the bytes one decode step (or speculative cycle) must read, from the model's config, over the
GPU's memory bandwidth (bench/floor.py). floor_fraction: floor / measured step time (TPOT, times the tokens per
verify step for a speculative point); above 1 is impossible and flags the point. NULL: no floor (no local
config.json, a GPU not in the bandwidth table, a point stored before these columns).

Revision ID: 2026_12_05_floor
Revises: 2026_12_05_routing
Create Date: 2026-12-05 10:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_floor"
down_revision = "2026_12_05_routing"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("points") as t:
        t.add_column(sa.Column("step_floor_ms", sa.Float(), nullable=True))
        t.add_column(sa.Column("floor_fraction", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("points") as t:
        t.drop_column("floor_fraction")
        t.drop_column("step_floor_ms")
