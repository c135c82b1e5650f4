"""profiles: SGLang profiler traces captured per point, with their summaries

Revision ID: 2026_12_03_prof
Revises: 0001
Create Date: 2026-12-03 18:05:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import db.types

revision = "2026_12_03_prof"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("point_id", sa.Integer(), nullable=False),
        sa.Column("spec_mode", sa.String(length=8), nullable=True),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("activities", sa.JSON(), nullable=False),
        sa.Column("num_steps", sa.Integer(), nullable=False),
        sa.Column("tp_rank", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("path", sa.String(length=1000), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("size_bytes", sa.Integer(), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column(
            "created_at",
            db.types.UTCDateTime(),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["point_id"], ["points.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_profiles_point_id", "profiles", ["point_id"], unique=False)
    op.create_index("ix_profiles_run_id", "profiles", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_profiles_run_id", table_name="profiles")
    op.drop_index("ix_profiles_point_id", table_name="profiles")
    op.drop_table("profiles")
