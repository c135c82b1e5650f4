"""points/samples: bench_serving's std of TTFT/TPOT/ITL/E2E, ITL p95 and ITL max

Revision ID: 2026_12_03_interop
Revises: 2026_12_03_gpu
Create Date: 2026-12-03 18:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "2026_12_03_interop"
down_revision = "2026_12_03_gpu"
branch_labels = None
depends_on = None

COLUMNS = ("ttft_std_ms", "tpot_std_ms", "itl_std_ms", "e2e_std_ms", "itl_p95_ms", "itl_max_ms")
TABLES = ("points", "samples")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            for name in COLUMNS:
                batch.add_column(sa.Column(name, sa.Float(), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            for name in reversed(COLUMNS):
                batch.drop_column(name)
