"""schedules.broken: why a schedule cannot fire (an impossible cron, a sweep that no longer validates), so the
scheduler skips it with one logged error instead of dying, and `schedule list` shows it

Revision ID: 2026_12_05_schedule_broken
Revises: 2026_12_04_invocation
Create Date: 2026-12-05 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "2026_12_05_schedule_broken"
down_revision = "2026_12_05_crash_records"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("schedules") as t:
        # NULL: the schedule fires. Set by the scheduler when a tick cannot compute or enqueue its fire time,
        # cleared when it can again (runners/schedules.py).
        t.add_column(sa.Column("broken", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedules") as t:
        t.drop_column("broken")
