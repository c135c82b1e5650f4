"""The job queue on the SQL database: submit, claim, start, finish, fail_attempt (with retries), cancel.

States move only by `runners.job_states`' guarded transitions; leases and workers are re-exported, so callers
drive the whole queue through here. Claims are atomic (`FOR UPDATE SKIP LOCKED`; SQLite: `BEGIN IMMEDIATE`).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, TypedDict, Unpack

from sqlalchemy import Connection, Engine, func, insert, or_, select, update

from bench.host.policy import external_address, interpreter_name_problem
from bench.sweep import SweepError, SweepSpec, parse_sweep
from db.engine import SQLITE_IMMEDIATE
from db.models import Job, Run, Worker
from runners.gpus import Gpu, matches, requirements_for, unmet
from runners.job_states import (
    ACTIVE,
    CANCELED,
    CLAIMED,
    DONE,
    FAILED,
    QUEUED,
    RUNNING,
    db_now,
    requeue_in,
    transition_in,
)

# `x as x`: re-exported, so callers drive the whole queue through this module.
from runners.job_states import transition as transition
from runners.leases import release as release
from runners.leases import renew_lease as renew_lease
from runners.leases import requeue_expired as requeue_expired
from runners.recovery import Backoff, RecoveryPolicy
from runners.worker_registry import deregister_worker as deregister_worker
from runners.worker_registry import register_worker as register_worker
from runners.worker_registry import worker_heartbeat as worker_heartbeat

# Rows one claim scans per page; requirements are matched in Python (JSON operators differ by dialect).
SCAN_PAGE = 200


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    sweep_name: str
    sweep_yaml: str
    label: str | None
    trigger: str
    requires: dict[str, Any]
    attempts: int
    max_attempts: int
    run_id: int | None
    lease_expiries: int
    lease_expires_at: datetime


class JobOptions(TypedDict, total=False):
    """What a submitter may say about a job besides its sweep (the defaults are `enqueue`'s)."""

    source: str
    label: str | None
    requires: Mapping[str, Any] | None
    priority: int
    max_attempts: int
    trigger: str


def submit(engine: Engine, sweep_yaml: str, **options: Unpack[JobOptions]) -> int:
    """Queue a sweep. It is validated here, so a worker never spends GPU time discovering a bad file."""
    with engine.begin() as conn:
        return enqueue(conn, sweep_yaml, **options)


def enqueue(
    conn: Connection,
    sweep_yaml: str,
    *,
    source: str = "<sweep>",
    label: str | None = None,
    requires: Mapping[str, Any] | None = None,
    priority: int = 0,
    max_attempts: int = 3,
    trigger: str = "manual",
    schedule_id: int | None = None,
    fire_time: datetime | None = None,
) -> int:
    """One queued job, inside the caller's transaction (the scheduler relies on its unique constraint)."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be >= 1")
    spec = parse_sweep(sweep_yaml, source)  # raises SweepError with every problem listed
    problems = job_problems(spec)
    if problems:
        raise SweepError(source, problems)
    need = requirements_for(
        spec.server.backend,
        spec.server.tp,
        requires or {},
        python=spec.server.python,
        external=external_address(spec.server.base_url) if spec.server.base_url else None,
    )
    result = conn.execute(
        insert(Job)
        .values(
            sweep_name=spec.name,
            sweep_yaml=sweep_yaml,
            label=label,
            trigger=trigger,
            requires=need,
            priority=priority,
            status=QUEUED,
            attempts=0,
            max_attempts=max_attempts,
            schedule_id=schedule_id,
            fire_time=fire_time,
        )
        .returning(Job.id)
    )
    return int(result.scalar_one())


def job_problems(spec: SweepSpec) -> list[str]:
    """What `specbench run` allows but a job may not: an interpreter by path (bench/host/policy.py)."""
    if spec.server.python is not None and spec.server.backend != "external":
        problem = interpreter_name_problem(spec.server.python)
        if problem:
            return [problem]
    return []


def claim(
    engine: Engine,
    worker_id: str,
    gpus: Sequence[Gpu],
    *,
    labels: Sequence[str] = (),
    offers: Mapping[str, Sequence[str]] | None = None,
    lease_s: float = 60.0,
) -> ClaimedJob | None:
    """Take the best queued job this worker can run (highest priority, then oldest), or None."""
    # SQLite: the write lock before reading, so no claim slips between our read and update.
    with engine.connect().execution_options(**{SQLITE_IMMEDIATE: True}) as conn:
        now = db_now(conn)
        ready = (Job.status == QUEUED) & or_(Job.not_before.is_(None), Job.not_before <= now)
        order = (Job.priority.desc(), Job.id)
        offset = 0
        while True:
            page = conn.execute(
                select(Job.id, Job.requires).where(ready).order_by(*order).limit(SCAN_PAGE).offset(offset)
            ).all()
            fitting = [job_id for job_id, req in page if matches(req or {}, gpus, labels, offers)]
            if fitting:
                # Locked rows are skipped; `ready` is re-checked on the locked row.
                chosen = conn.execute(
                    select(Job.id)
                    .where(Job.id.in_(fitting), ready)
                    .order_by(*order)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                ).scalar_one_or_none()
                if chosen is not None:
                    break
            if len(page) < SCAN_PAGE:
                conn.rollback()
                return None
            offset += SCAN_PAGE
        lease = now + timedelta(seconds=lease_s)
        changed = conn.execute(
            update(Job)
            .where(Job.id == chosen, Job.status == QUEUED)
            .values(
                status=CLAIMED,
                worker_id=worker_id,
                attempts=Job.attempts + 1,
                claimed_at=now,
                lease_expires_at=lease,
                not_before=None,
                finished_at=None,
            )
        ).rowcount
        if changed != 1:  # cannot happen under the lock; never hand out a job we do not own
            conn.rollback()
            return None
        row = conn.execute(select(Job).where(Job.id == chosen)).mappings().one()
        conn.commit()
    same = [f.name for f in fields(ClaimedJob) if f.name not in ("requires", "lease_expires_at")]
    return ClaimedJob(
        **{name: row[name] for name in same}, requires=dict(row["requires"] or {}), lease_expires_at=lease
    )


def start(engine: Engine, job_id: int, worker_id: str, *, lease_s: float) -> bool:
    """claimed -> running, renewing the lease for the run ahead."""
    with engine.begin() as conn:
        now = db_now(conn)
        return transition_in(
            conn,
            job_id,
            [CLAIMED],
            RUNNING,
            owner=worker_id,
            started_at=now,
            lease_expires_at=now + timedelta(seconds=lease_s),
        )


def run_for_job(engine: Engine, job_id: int) -> int | None:
    """The run an earlier attempt of this job created (to resume), or None on a first attempt."""
    with engine.connect() as conn:
        recorded = conn.execute(select(Job.run_id).where(Job.id == job_id)).scalar_one_or_none()
        if recorded is not None:
            return int(recorded)
        found = conn.execute(select(func.max(Run.id)).where(Run.job_id == job_id)).scalar_one_or_none()
        return int(found) if found is not None else None


def set_run(engine: Engine, job_id: int, run_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(run_id=run_id))


def finish(engine: Engine, job_id: int, worker_id: str, *, run_id: int | None = None) -> bool:
    with engine.begin() as conn:
        values: dict[str, Any] = {"finished_at": db_now(conn), "lease_expires_at": None}
        if run_id is not None:
            values["run_id"] = run_id
        return transition_in(conn, job_id, [RUNNING], DONE, owner=worker_id, **values)


def fail_attempt(
    engine: Engine,
    job_id: int,
    worker_id: str,
    error: str,
    *,
    retry: bool = True,
    backoff: Backoff | None = None,
) -> str | None:
    """Requeue after a backoff while attempts remain, else fail; the new status, or None if not ours."""
    with engine.begin() as conn:
        now = db_now(conn)
        row = conn.execute(
            select(Job.attempts, Job.max_attempts).where(
                Job.id == job_id, Job.worker_id == worker_id, Job.status.in_(ACTIVE)
            )
        ).one_or_none()
        if row is None:
            return None
        attempts, max_attempts = row
        if retry and attempts < max_attempts:
            ok = requeue_in(
                conn,
                job_id,
                worker_id,
                error=error,
                not_before=now + (backoff or RecoveryPolicy().retry).delay(attempts),
            )
            return QUEUED if ok else None
        ok = transition_in(
            conn,
            job_id,
            ACTIVE,
            FAILED,
            owner=worker_id,
            last_error=error,
            finished_at=now,
            lease_expires_at=None,
        )
        return FAILED if ok else None


def cancel(engine: Engine, job_id: int) -> bool:
    """queued | claimed | running -> canceled; a running job's worker stops at its next heartbeat."""
    with engine.begin() as conn:
        return transition_in(
            conn, job_id, [QUEUED, *ACTIVE], CANCELED, finished_at=db_now(conn), lease_expires_at=None
        )


def unclaimable(
    engine: Engine,
    gpus: Sequence[Gpu],
    labels: Sequence[str] = (),
    offers: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[int, str, str]]:
    """Queued jobs this worker can never run, as (job id, sweep name, why)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(Job.id, Job.sweep_name, Job.requires).where(Job.status == QUEUED).order_by(Job.id)
        ).all()
    whys = [(int(job_id), str(name), unmet(req or {}, gpus, labels, offers)) for job_id, name, req in rows]
    return [(job_id, name, why) for job_id, name, why in whys if why is not None]


def has_claimable(
    engine: Engine,
    gpus: Sequence[Gpu],
    labels: Sequence[str] = (),
    offers: Mapping[str, Sequence[str]] | None = None,
) -> datetime | None:
    """When the first queued job this worker could run becomes claimable, or None."""
    with engine.connect() as conn:
        rows = conn.execute(select(Job.requires, Job.not_before).where(Job.status == QUEUED)).all()
        now = db_now(conn)
    times = [nb or now for req, nb in rows if matches(req or {}, gpus, labels, offers)]
    return min(times) if times else None


def offered_interpreters(engine: Engine) -> set[str]:
    """Every interpreter name any worker has offered: what a job's `server.python` may name."""
    with engine.connect() as conn:
        rows = conn.execute(select(Worker.offers)).scalars().all()
    return {str(n) for offers in rows if isinstance(offers, dict) for n in offers.get("python") or ()}
