"""Read queries over the job queue for `specbench jobs` and the Jobs page, as plain dicts; heartbeat ages use
the database's clock on PostgreSQL, which wrote them."""

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, case, func, select

from db.models import Job, Point, Schedule, ServerInstance, Worker

ACTIVE = ("claimed", "running")
_JOB_COLUMNS = tuple(
    getattr(Job, c)
    for c in (
        *("id", "status", "sweep_name", "label", "trigger", "priority", "requires", "attempts"),
        *("max_attempts", "worker_id", "run_id", "schedule_id", "fire_time", "created_at", "started_at"),
        *("finished_at", "lease_expires_at", "not_before", "last_error"),
    )
)


def database_now(engine: Engine) -> datetime:
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            value = conn.execute(select(func.now())).scalar_one()
        assert isinstance(value, datetime)
        return value.astimezone(UTC)
    return datetime.now(UTC)


def status_counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(select(Job.status, func.count()).group_by(Job.status)).all()
    return {status: int(n) for status, n in rows}


def queue_jobs(
    engine: Engine, *, limit: int = 200, statuses: list[str] | None = None
) -> list[dict[str, Any]]:
    """Jobs in the order a person reads a queue: running, then waiting (in claim order), then finished."""
    rank = case((Job.status.in_(ACTIVE), 0), (Job.status == "queued", 1), else_=2)
    # Waiting jobs in claim order (priority, then age); finished ones newest first.
    waiting_priority = case((Job.status == "queued", -Job.priority), else_=0)
    newest = case((Job.status.in_(("done", "failed", "canceled")), -Job.id), else_=Job.id)
    stmt = select(*_JOB_COLUMNS).order_by(rank, waiting_priority, newest).limit(limit)
    if statuses:
        stmt = stmt.where(Job.status.in_(statuses))
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(stmt).mappings()]


def failed_jobs(engine: Engine, *, limit: int = 50) -> list[dict[str, Any]]:
    """Jobs failed for good, and jobs waiting to retry after a failed attempt, with their last error."""
    retrying = (Job.status == "queued") & (Job.attempts > 0) & Job.last_error.is_not(None)
    stmt = (
        select(*_JOB_COLUMNS)
        .where((Job.status == "failed") | retrying)
        .order_by(func.coalesce(Job.finished_at, Job.created_at).desc(), Job.id.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(stmt).mappings()]


_WORKER_COLUMNS = (
    *("id", "host", "pid", "gpu_name", "gpu_count", "labels", "status", "current_job_id", "started_at"),
    "last_heartbeat",
)


def workers(
    engine: Engine,
    *,
    now: datetime | None = None,
    stale_after_s: float = 60.0,
    stopped_within: timedelta = timedelta(hours=24),
) -> list[dict[str, Any]]:
    """Workers with their heartbeat's age (stopped ones while recent); `lost`: stopped unannounced."""
    now = now or database_now(engine)
    cutoff = now - stopped_within
    stmt = (
        select(
            *(getattr(Worker, c) for c in _WORKER_COLUMNS),
            Job.sweep_name.label("current_sweep"),
            Job.run_id.label("current_run_id"),
        )
        .outerjoin(Job, Job.id == Worker.current_job_id)
        .where((Worker.status != "stopped") | (Worker.last_heartbeat >= cutoff))
        .order_by(Worker.host, Worker.id)
    )
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(stmt).mappings()]
    for r in rows:
        beat = r["last_heartbeat"]
        age = (now - beat).total_seconds() if beat is not None else None
        r["heartbeat_age_s"] = age
        lost = r["status"] != "stopped" and (age is None or age > stale_after_s)
        r["state"] = "lost" if lost else r["status"]
    return rows


# Point statuses that measured nothing usable: what makes a run partial or failed.
UNMEASURED = ("failed", "invalid", "mode_mismatch")


def run_failures(engine: Engine, run_id: int) -> list[dict[str, Any]]:
    """The run's points that measured nothing, with their launch's reason, known bug, exit code and log tail
    (plain dicts: the worker reads this without pandas)."""
    stmt = (
        select(
            Point.status,
            Point.reason,
            ServerInstance.known_bug,
            ServerInstance.status.label("server_status"),
            ServerInstance.exit_code,
            ServerInstance.log_tail,
        )
        .outerjoin(ServerInstance, ServerInstance.id == Point.server_instance_id)
        .where(Point.run_id == run_id, Point.status.in_(UNMEASURED))
        .order_by(Point.id)
    )
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(stmt).mappings()]


def schedules(engine: Engine) -> list[dict[str, Any]]:
    """Every schedule as stored (its sweep's text too, for its name), oldest first."""
    names = ("id", "cron", "sweep_path", "sweep_yaml", "label", "requires", "priority", "enabled")
    stmt = select(*(getattr(Schedule, c) for c in (*names, "last_fire_time", "broken"))).order_by(Schedule.id)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(stmt).mappings()]
