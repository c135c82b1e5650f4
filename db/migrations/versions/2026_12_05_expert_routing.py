"""points.expert_routing: how a dummy-weight MoE server routed tokens to experts (balanced | collapsed)

With dummy weights a MoE model's router sends nearly every token to the same few experts; specbench sets
SGLang's balanced-routing switch (bench/server/routing.py) and records what each point's server ran, so every
number says whether its MoE layers read what a deployment reads. NULL: real weights, a dense model, or a
point stored before this column.

Revision ID: 2026_12_05_routing
Revises: 2026_12_04_invocation
Create Date: 2026-12-05 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_routing"
down_revision = "2026_12_04_invocation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("points") as t:
        t.add_column(sa.Column("expert_routing", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("points") as t:
        t.drop_column("expert_routing")
