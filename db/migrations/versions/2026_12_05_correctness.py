"""the correctness gate: a verdict per point (pass / fail / not checked, why, first diverging position,
acceptance v2/v1) and each launch's raw answers to the check's greedy prompts

Revision ID: 2026_12_05_correctness
Revises: 2026_12_05_crash_records
Create Date: 2026-12-05 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import db.types

revision = "2026_12_05_correctness"
down_revision = "2026_12_05_schedule_broken"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("points") as t:
        # NULL on every point of a run made before the check: "not recorded", never "passed".
        t.add_column(sa.Column("correctness", sa.String(length=16), nullable=True))
        t.add_column(sa.Column("correctness_reason", sa.Text(), nullable=True))
        t.add_column(sa.Column("correctness_diverge_request", sa.Integer(), nullable=True))
        t.add_column(sa.Column("correctness_diverge_token", sa.Integer(), nullable=True))
        t.add_column(sa.Column("acceptance_v2_v1", sa.Float(), nullable=True))
    op.create_table(
        "correctness_outputs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("server_instance_id", sa.Integer(), nullable=True),
        sa.Column("config_key", sa.String(length=32), nullable=False),
        sa.Column("spec_mode", sa.String(length=8), nullable=True),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column(
            "created_at",
            db.types.UTCDateTime(),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["server_instance_id"], ["server_instances.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_correctness_outputs_run_id", "correctness_outputs", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_correctness_outputs_run_id", table_name="correctness_outputs")
    op.drop_table("correctness_outputs")
    with op.batch_alter_table("points") as t:
        t.drop_column("acceptance_v2_v1")
        t.drop_column("correctness_diverge_token")
        t.drop_column("correctness_diverge_request")
        t.drop_column("correctness_reason")
        t.drop_column("correctness")
