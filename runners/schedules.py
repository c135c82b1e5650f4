"""Scheduled sweeps: cron expressions (UTC) that enqueue a job per fire time, exactly once.

Exactly once, with any number of schedulers: enqueueing a fire time updates the schedule's `last_fire_time`
only if it is older (on PostgreSQL that row update also serialises two schedulers racing on one schedule), and
inserts the job with (schedule_id, fire_time), which the database keeps unique. A scheduler that loses the
race gets nothing to do or an IntegrityError, which means "already enqueued" and is not an error.

Missed fire times (the scheduler was down): only the latest one is enqueued, never a burst. A nightly sweep
after three days of downtime runs once, tagged with the most recent fire time it missed; the older ones are
counted in the log and skipped. Benchmarks of the same code three times in a row measure nothing new.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from croniter import croniter
from sqlalchemy import Engine, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from bench.sweep import SweepError, parse_sweep
from db.models import Schedule
from runners import dbretry, queue

log = logging.getLogger("specbench.scheduler")

# Counting skipped fire times walks the cron; past this many we say "at least".
_MAX_COUNTED = 10_000


@dataclass(frozen=True)
class Fired:
    schedule_id: int
    fire_time: datetime
    job_id: int | None  # None: another scheduler enqueued this fire time first
    skipped: int  # older fire times missed while no scheduler ran


def check_cron(expr: str) -> str:
    """A five-field cron expression (or @daily-style alias), evaluated in UTC."""
    expr = " ".join(expr.split())
    fields = expr.split(" ")
    if not (len(fields) == 5 or (len(fields) == 1 and expr.startswith("@"))) or not croniter.is_valid(expr):
        raise ValueError(
            f"cron {expr!r}: expected five fields (minute hour day month weekday), e.g. '0 2 * * *'"
        )
    return expr


def latest_fire(expr: str, now: datetime) -> datetime:
    """The latest fire time at or before `now`."""
    # get_prev is strict, so nudge past `now` to count a fire time that is exactly now.
    value = croniter(expr, now + timedelta(microseconds=1)).get_prev(datetime)
    assert isinstance(value, datetime)
    return value


def next_fire(expr: str, now: datetime) -> datetime:
    value = croniter(expr, now).get_next(datetime)
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
    spec = parse_sweep(
        sweep_yaml, sweep_path or "<sweep>"
    )  # a schedule of an invalid sweep would fail every night
    problems = queue.job_problems(spec)  # nor may it name what a job may not (an interpreter by path)
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
                # Counting from now: adding a schedule never fires a time that passed before it existed.
                last_fire_time=now,
            )
            .returning(Schedule.id)
        )
        return int(result.scalar_one())


def remove_schedule(engine: Engine, schedule_id: int) -> bool:
    """Delete a schedule; its jobs stay (their schedule_id becomes NULL)."""
    with engine.begin() as conn:
        return conn.execute(delete(Schedule).where(Schedule.id == schedule_id)).rowcount == 1


def list_schedules(engine: Engine, now: datetime | None = None) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        now = now or queue.db_now(conn)
        rows = conn.execute(select(Schedule).order_by(Schedule.id)).mappings().all()
    out = []
    for r in rows:
        out.append(
            {
                "id": r["id"],
                "cron": r["cron"],
                "sweep": r["sweep_path"] or parse_sweep(r["sweep_yaml"]).name,
                "label": r["label"],
                "requires": r["requires"],
                "priority": r["priority"],
                "enabled": r["enabled"],
                "last_fire_time": r["last_fire_time"],
                "next_fire_time": next_fire(r["cron"], now) if r["enabled"] else None,
            }
        )
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
    """Enqueue every schedule's due fire time (at most one per schedule: the latest)."""
    with engine.connect() as conn:
        now = now or queue.db_now(conn)
        schedules = conn.execute(
            select(Schedule).where(Schedule.enabled.is_(True)).order_by(Schedule.id)
        ).all()
    fired: list[Fired] = []
    for sched in schedules:
        since = sched.last_fire_time or sched.created_at
        fire = due_fire(sched.cron, since, now)
        if fire is None:
            continue
        skipped = count_between(sched.cron, since, fire)
        try:
            job_id = enqueue_fire(engine, sched, fire)
        except SweepError as e:  # the stored sweep no longer validates; keep serving the other schedules
            log.error("schedule %d: not enqueued: %s", sched.id, e)
            continue
        fired.append(Fired(sched.id, fire, job_id, skipped))
        if job_id is not None:
            extra = f"; skipped {skipped} older missed fire time(s)" if skipped else ""
            log.info(
                "schedule %d: fire time %s enqueued as job %d%s", sched.id, fire.isoformat(), job_id, extra
            )
    return fired


def run_scheduler(
    engine: Engine,
    *,
    interval_s: float = 30.0,
    once: bool = False,
    stop: threading.Event | None = None,
    backoff: queue.Backoff | None = None,
    policy: queue.RecoveryPolicy | None = None,
) -> None:
    """Tick until stopped. It also returns expired leases to the queue, so a job whose worker died is retried
    even while no other worker polls."""
    stop = stop or threading.Event()
    policy = policy or queue.RecoveryPolicy()
    log.info("scheduler started (tick every %.1f s)", interval_s)
    while True:
        # A database outage is waited out (up to the policy's limit): a missed fire time is enqueued on the
        # first tick after it, as after any downtime.
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
