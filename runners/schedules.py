"""Scheduled sweeps: cron expressions (UTC) that enqueue a job per fire time, exactly once.

With any number of schedulers: `last_fire_time` only moves forward and (schedule_id, fire_time) is unique,
so a loser gets nothing or an IntegrityError. Missed fire times enqueue only the latest. A schedule that
cannot fire is marked `broken`, logged once, retried each tick; it never stops the scheduler (issue 30 §5).
"""

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import CroniterError, croniter
from sqlalchemy import Engine, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from analysis.jobs import next_fire
from bench.sweep import SweepError, parse_sweep
from db.models import Schedule
from runners import dbretry, queue
from runners.gpus import requirements_for

log = logging.getLogger("specbench.scheduler")

# Counting skipped fire times walks the cron; past this many we say "at least".
_MAX_COUNTED = 10_000
# How much of the reason a broken schedule keeps (schedules.broken, `schedule list`).
_MAX_REASON = 500
# The column's width (schedules.cron); no cron expression needs more.
MAX_CRON_LENGTH = 100
# 29 February comes back within eight years (2096, then 2104), so no fire time within nine means never.
MAX_GAP_YEARS = 9


@dataclass(frozen=True)
class Fired:
    schedule_id: int
    fire_time: datetime
    job_id: int | None  # None: another scheduler enqueued this fire time first
    skipped: int  # older fire times missed while no scheduler ran


def check_cron(expr: str, now: datetime | None = None) -> str:
    """A five-field cron (or @alias), in UTC, that fires within MAX_GAP_YEARS: `0 0 31 2 *` is refused."""
    expr = " ".join(expr.split())
    fields = expr.split(" ")
    if (
        len(expr) > MAX_CRON_LENGTH
        or not (len(fields) == 5 or (len(fields) == 1 and expr.startswith("@")))
        or not croniter.is_valid(expr)
    ):
        raise ValueError(
            f"cron {expr[:MAX_CRON_LENGTH]!r}: expected five fields (minute hour day month weekday), "
            "e.g. '0 2 * * *'"
        )
    now = now or datetime.now(UTC)
    try:
        croniter(expr, now, max_years_between_matches=MAX_GAP_YEARS).get_next(datetime)
    except (CroniterError, ValueError, OverflowError):
        raise ValueError(
            f"cron {expr!r} never fires (no such date, e.g. 31 February or 31 April); check the day and month "
            "fields"
        ) from None
    return expr


def latest_fire(expr: str, now: datetime) -> datetime:
    """The latest fire time at or before `now`."""
    # get_prev is strict, so nudge past `now` to count a fire time that is exactly now.
    value = croniter(expr, now + timedelta(microseconds=1)).get_prev(datetime)
    assert isinstance(value, datetime)
    return value


def count_between(expr: str, after: datetime, until: datetime) -> int:
    """Fire times in (after, until): the ones a catch-up skips."""
    it = croniter(expr, after)
    n = 0
    while n < _MAX_COUNTED and it.get_next(datetime) < until:
        n += 1
    return n


def due_fire(expr: str, since: datetime, now: datetime) -> datetime | None:
    """The fire time to enqueue now (the latest one after `since`), or None if nothing is due."""
    fire = latest_fire(expr, now)
    return fire if fire > since else None


def add_schedule(
    engine: Engine,
    cron: str,
    sweep_yaml: str,
    *,
    sweep_path: str | None = None,
    label: str | None = None,
    requires: dict[str, Any] | None = None,
    priority: int = 0,
) -> int:
    expr = check_cron(cron)
    # A schedule of an invalid sweep, or one naming what a job may not, would fail every night.
    problems = queue.job_problems(parse_sweep(sweep_yaml, sweep_path or "<sweep>"))
    if problems:
        raise SweepError(sweep_path or "<sweep>", problems)
    with engine.begin() as conn:
        now = queue.db_now(conn)
        result = conn.execute(
            insert(Schedule)
            .values(
                cron=expr,
                sweep_path=sweep_path,
                sweep_yaml=sweep_yaml,
                label=label,
                requires=requires or {},
                priority=priority,
                enabled=True,
                # Fire times count from its creation: a new schedule never fires a past time.
                created_at=now,
            )
            .returning(Schedule.id)
        )
        return int(result.scalar_one())


def remove_schedule(engine: Engine, schedule_id: int) -> bool:
    """Delete a schedule; its jobs stay (their schedule_id becomes NULL)."""
    with engine.begin() as conn:
        return conn.execute(delete(Schedule).where(Schedule.id == schedule_id)).rowcount == 1


def list_schedules(engine: Engine, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every schedule with its next fire time; a broken or unreadable one is listed with why, never raised."""
    with engine.connect() as conn:
        now = now or queue.db_now(conn)
        ids = conn.execute(select(Schedule.id).order_by(Schedule.id)).scalars().all()
    return [_listed(engine, int(sid), now) for sid in ids]


def _listed(engine: Engine, schedule_id: int, now: datetime) -> dict[str, Any]:
    try:
        with engine.connect() as conn:
            r = conn.execute(select(Schedule).where(Schedule.id == schedule_id)).mappings().one()
    except Exception as e:
        if dbretry.is_transient(e):
            raise
        return {"id": schedule_id, "broken": f"unreadable row: {_why(e)}"}
    out: dict[str, Any] = {
        k: r[k]
        for k in ("id", "cron", "label", "requires", "priority", "enabled", "last_fire_time", "broken")
    }
    try:
        out["sweep"] = r["sweep_path"] or parse_sweep(r["sweep_yaml"]).name
    except Exception as e:  # a stored sweep that no longer validates: the schedule is broken, the list is not
        out["sweep"] = None
        out["broken"] = out["broken"] or f"sweep: {_why(e)}"
    try:
        out["next_fire_time"] = next_fire(check_cron(str(r["cron"]), now), now) if r["enabled"] else None
    except Exception as e:
        out["next_fire_time"] = None
        out["broken"] = out["broken"] or _why(e)
    return out


def enqueue_fire(engine: Engine, schedule: Any, fire_time: datetime) -> int | None:
    """Enqueue one fire time of one schedule; None if another scheduler already did (or a later one)."""
    try:
        with engine.begin() as conn:
            moved = conn.execute(
                update(Schedule)
                .where(
                    Schedule.id == schedule.id,
                    or_(Schedule.last_fire_time.is_(None), Schedule.last_fire_time < fire_time),
                )
                .values(last_fire_time=fire_time)
            ).rowcount
            if moved != 1:
                return None
            return queue.enqueue(
                conn,
                schedule.sweep_yaml,
                source=f"schedule {schedule.id}",
                label=schedule.label,
                requires=schedule.requires,
                priority=schedule.priority,
                trigger="schedule",
                schedule_id=schedule.id,
                fire_time=fire_time,
            )
    except IntegrityError:  # uq_jobs_schedule_fire: this fire time is already a job
        return None


def tick(engine: Engine, now: datetime | None = None) -> list[Fired]:
    """Enqueue each schedule's latest due fire time; a broken one is marked and skipped; an outage raises."""
    with engine.connect() as conn:
        now = now or queue.db_now(conn)
        ids = conn.scalars(select(Schedule.id).where(Schedule.enabled.is_(True)).order_by(Schedule.id)).all()
    fired: list[Fired] = []
    for sid in ids:
        try:
            one = _tick_one(engine, int(sid), now)
        except Exception as e:
            if dbretry.is_transient(e):
                raise
            _mark_broken(engine, int(sid), _why(e))
            continue
        if one is not None:
            fired.append(one)
    return fired


def _tick_one(engine: Engine, schedule_id: int, now: datetime) -> Fired | None:
    with engine.connect() as conn:
        sched = conn.execute(select(Schedule).where(Schedule.id == schedule_id)).one()
    since = sched.last_fire_time or sched.created_at
    # `schedule add`'s checks, on every tick: a cron or sweep edited since fails here.
    fire = due_fire(check_cron(sched.cron, now), since, now)
    spec = parse_sweep(sched.sweep_yaml, f"schedule {schedule_id}")
    requirements_for(spec.server.backend, spec.server.tp, sched.requires or {})
    if sched.broken is not None:  # mended
        with engine.begin() as conn:
            conn.execute(update(Schedule).where(Schedule.id == schedule_id).values(broken=None))
        log.warning("schedule %d: mended, fires again", schedule_id)
    if fire is None:
        return None
    skipped = count_between(sched.cron, since, fire)
    job_id = enqueue_fire(engine, sched, fire)
    if job_id is not None:
        extra = f"; skipped {skipped} older missed fire time(s)" if skipped else ""
        log.info("schedule %d: fire time %s enqueued as job %d%s", sched.id, fire.isoformat(), job_id, extra)
    else:
        log.info(
            "schedule %d: fire time %s already enqueued by another scheduler", sched.id, fire.isoformat()
        )
    return Fired(sched.id, fire, job_id, skipped)


def _why(e: BaseException) -> str:
    """One line saying why (a SweepError lists its problems on several lines)."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}"[:_MAX_REASON]


def _mark_broken(engine: Engine, schedule_id: int, why: str) -> None:
    """Record why the schedule cannot fire; log it once, not on every tick."""
    with engine.begin() as conn:
        changed = conn.execute(
            update(Schedule)
            .where(Schedule.id == schedule_id, or_(Schedule.broken.is_(None), Schedule.broken != why))
            .values(broken=why)
        ).rowcount
    if changed:
        log.error("schedule %d: broken, skipped until mended: %s", schedule_id, why)


def run_scheduler(
    engine: Engine,
    *,
    interval_s: float = 30.0,
    once: bool = False,
    stop: threading.Event | None = None,
    backoff: queue.Backoff | None = None,
    policy: queue.RecoveryPolicy | None = None,
) -> None:
    """Tick until stopped, also requeueing expired leases so a dead worker's job is retried."""
    stop = stop or threading.Event()
    policy = policy or queue.RecoveryPolicy()
    log.info("scheduler started (tick every %.1f s)", interval_s)
    while True:
        # An outage is waited out; a fire time missed meanwhile is enqueued on the next tick.
        dbretry.retry(lambda: tick(engine), what="scheduler tick", policy=policy.outage, stop=stop)
        requeued = dbretry.retry(
            lambda: queue.requeue_expired(engine, backoff=backoff, policy=policy),
            what="requeueing expired leases",
            policy=policy.outage,
            stop=stop,
        )
        for job_id in requeued:
            log.warning("job %d: its worker stopped heartbeating; requeued (or failed for good)", job_id)
        if once or stop.wait(interval_s):
            return
