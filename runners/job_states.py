"""A job's states and guarded transitions, the one way any module moves a job.

Each is one UPDATE guarded on status (and owner) that must change exactly one row; time is the database
server's on PostgreSQL, so leases ignore host clocks.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, func, select, update

from db.models import Job
from db.types import utcnow

QUEUED, CLAIMED, RUNNING = "queued", "claimed", "running"
DONE, FAILED, CANCELED = "done", "failed", "canceled"
ACTIVE = (CLAIMED, RUNNING)


def db_now(conn: Connection) -> datetime:
    if conn.dialect.name == "postgresql":
        value = conn.execute(select(func.clock_timestamp())).scalar_one()
        assert isinstance(value, datetime)
        return value
    return utcnow()


def transition_in(
    conn: Connection,
    job_id: int,
    expected: Sequence[str],
    new: str,
    *,
    owner: str | None = None,
    **values: Any,
) -> bool:
    """`transition` inside the caller's transaction."""
    cond = (Job.id == job_id) & Job.status.in_(list(expected))
    if owner is not None:
        cond &= Job.worker_id == owner
    return conn.execute(update(Job).where(cond).values(status=new, **values)).rowcount == 1


def transition(
    engine: Engine, job_id: int, expected: Sequence[str], new: str, *, owner: str | None = None, **values: Any
) -> bool:
    """Move a job from one of `expected` to `new` (if `owner` holds it); False when nothing changed."""
    with engine.begin() as conn:
        return transition_in(conn, job_id, expected, new, owner=owner, **values)


def requeue_in(
    conn: Connection, job_id: int, owner: str, *, error: str, not_before: datetime | None, **values: Any
) -> bool:
    """An active job `owner` holds goes back to queued, held by no one, with why and when it may run again."""
    return transition_in(
        conn,
        job_id,
        ACTIVE,
        QUEUED,
        owner=owner,
        worker_id=None,
        lease_expires_at=None,
        last_error=error,
        not_before=not_before,
        **values,
    )
