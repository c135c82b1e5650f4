"""Leases: a worker's heartbeat keeps its job; one whose worker stopped heartbeating is requeued.

A lost attempt is not the job's failure: expiries are counted apart (RecoveryPolicy.max_lease_expiries).
"""

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, select, update

from db.models import Job, Run
from runners.job_states import ACTIVE, FAILED, QUEUED, db_now, requeue_in
from runners.recovery import Backoff, RecoveryPolicy


def renew_lease(engine: Engine, job_id: int, worker_id: str, *, lease_s: float) -> bool:
    """Extend the lease of a job we still own (False: stop) and record its run id for a retry to find."""
    with engine.begin() as conn:
        lease = db_now(conn) + timedelta(seconds=lease_s)
        run_id = select(func.max(Run.id)).where(Run.job_id == job_id).scalar_subquery()
        changed = conn.execute(
            update(Job)
            .where((Job.id == job_id) & (Job.worker_id == worker_id) & Job.status.in_(ACTIVE))
            .values(lease_expires_at=lease, run_id=func.coalesce(Job.run_id, run_id))
        ).rowcount
        return changed == 1


def release(engine: Engine, job_id: int, worker_id: str, reason: str = "worker shut down") -> bool:
    """Hand a job back on SIGTERM: queued at once, the attempt not counted."""
    with engine.begin() as conn:
        return requeue_in(
            conn,
            job_id,
            worker_id,
            error=f"released: {reason}",
            not_before=None,
            attempts=Job.attempts - 1,  # >= 1 while claimed
        )


def requeue_expired(
    engine: Engine,
    *,
    backoff: Backoff | None = None,
    now: datetime | None = None,
    policy: RecoveryPolicy | None = None,
) -> list[int]:
    """Requeue jobs whose worker stopped heartbeating, after a backoff; fail past max_lease_expiries."""
    policy = policy or RecoveryPolicy()
    delay = backoff or policy.requeue
    moved: list[int] = []
    with engine.begin() as conn:
        now = now or db_now(conn)
        expired = conn.execute(
            select(Job.id, Job.status, Job.worker_id, Job.lease_expiries, Job.lease_expires_at).where(
                Job.status.in_(ACTIVE), Job.lease_expires_at < now
            )
        ).all()
        for job_id, status, worker, expiries, lease in expired:
            error = f"lease expired at {lease:%Y-%m-%d %H:%M:%S} UTC (worker {worker} stopped heartbeating)"
            cond = (
                (Job.id == job_id)
                & (Job.status == status)
                & (Job.worker_id == worker)
                & (Job.lease_expires_at < now)  # not renewed since we looked
            )
            expiries += 1
            values: dict[str, Any] = {"lease_expiries": expiries, "lease_expires_at": None}
            if expiries <= policy.max_lease_expiries:
                values |= {
                    "status": QUEUED,
                    "worker_id": None,
                    "attempts": Job.attempts - 1,  # >= 1 while claimed
                    "not_before": now + delay.delay(expiries),
                    "last_error": error,
                }
            else:
                values |= {
                    "status": FAILED,
                    "finished_at": now,
                    "last_error": f"{error}; gave up after {expiries} lease expiries",
                }
            if conn.execute(update(Job).where(cond).values(**values)).rowcount == 1:
                moved.append(job_id)
    return moved
