"""run_parts: each invocation of a run (host, GPU, SGLang and patch, start and end, the drift check against the
part before); samples.link, link_repeat, link_mode: the comparison a window was measured for, its repeat there
and how the two sides took turns (ABBA or blocks)

Revision ID: 2026_12_06_run_parts
Revises: 2026_12_05_known_bug_launch
Create Date: 2026-12-06 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import db.types

revision = "2026_12_06_run_parts"
down_revision = "2026_12_05_known_bug_launch"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_parts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("invocation", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("gpu_name", sa.String(length=100), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("sglang_version", sa.String(length=64), nullable=True),
        sa.Column("sglang_patch", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "started_at",
            db.types.UTCDateTime(),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("finished_at", db.types.UTCDateTime(), nullable=True),
        sa.Column("check", sa.JSON(), nullable=True),
        sa.Column("drift", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "part", name="uq_run_parts_run_part"),
    )
    op.create_index("ix_run_parts_run_id", "run_parts", ["run_id"], unique=False)
    with op.batch_alter_table("samples") as t:
        # NULL on every window of a run before links: those pair by `repeat`, as they were measured.
        t.add_column(sa.Column("link", sa.String(length=40), nullable=True))
        t.add_column(sa.Column("link_repeat", sa.Integer(), nullable=True))
        t.add_column(sa.Column("link_mode", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("samples") as t:
        t.drop_column("link_mode")
        t.drop_column("link_repeat")
        t.drop_column("link")
    op.drop_index("ix_run_parts_run_id", table_name="run_parts")
    op.drop_table("run_parts")
