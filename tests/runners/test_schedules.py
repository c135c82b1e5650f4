"""Schedules: due fire times, the missed-fire policy, and exactly one job per fire time with racing schedulers."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update
from typer.testing import CliRunner

from db.migrate import open_database
from db.models import Job, Schedule
from runners import schedules
from runners.cli import app
from tests.queue_support import sim_sweep, spawn_cli

T0 = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)


def set_last_fire(engine: Engine, schedule_id: int, when: datetime | None) -> None:
    with engine.begin() as conn:
        conn.execute(update(Schedule).where(Schedule.id == schedule_id).values(last_fire_time=when))


def jobs_per_fire(engine: Engine) -> Counter[tuple[int | None, datetime | None]]:
    with engine.connect() as conn:
        rows = conn.execute(select(Job.schedule_id, Job.fire_time, Job.trigger)).all()
    assert all(trigger == "schedule" for _, _, trigger in rows)
    return Counter((sid, fire) for sid, fire, _ in rows)


def test_cron_checks() -> None:
    assert schedules.check_cron(" 0  2 * * * ") == "0 2 * * *"
    assert schedules.check_cron("@daily") == "@daily"
    for bad in ("0 2 * *", "0 2 * * * *", "61 * * * *", "rm -rf /"):
        with pytest.raises(ValueError, match="five fields"):
            schedules.check_cron(bad)


def test_latest_and_due_fire_times() -> None:
    assert schedules.latest_fire("0 2 * * *", T0) == T0  # a fire time exactly now counts
    assert schedules.latest_fire("0 2 * * *", T0 - timedelta(seconds=1)) == T0 - timedelta(days=1)
    assert schedules.due_fire("0 2 * * *", since=T0, now=T0 + timedelta(hours=5)) is None
    assert schedules.due_fire("0 2 * * *", since=T0, now=T0 + timedelta(days=1)) == T0 + timedelta(days=1)
    assert schedules.count_between("0 2 * * *", T0, T0 + timedelta(days=3)) == 2


def test_adding_never_fires_the_past(engine: Engine) -> None:
    sid = schedules.add_schedule(engine, "0 2 * * *", sim_sweep("s"), label="nightly")
    assert schedules.tick(engine) == []  # yesterday's 02:00 was before the schedule existed
    listed = schedules.list_schedules(engine)
    assert [(r["id"], r["cron"], r["sweep"], r["label"]) for r in listed] == [
        (sid, "0 2 * * *", "s", "nightly")
    ]
    assert listed[0]["next_fire_time"] is not None


def test_missed_fire_times_enqueue_only_the_latest(engine: Engine) -> None:
    sid = schedules.add_schedule(engine, "0 2 * * *", sim_sweep("nightly"), label="nightly", priority=3)
    set_last_fire(engine, sid, T0)
    # Down for three days and a bit: three fire times missed, one job, for the latest.
    now = T0 + timedelta(days=3, hours=4)
    fired = schedules.tick(engine, now=now)
    assert len(fired) == 1
    assert (fired[0].fire_time, fired[0].skipped) == (T0 + timedelta(days=3), 2)
    assert fired[0].job_id is not None
    assert schedules.tick(engine, now=now) == []  # nothing new until the next fire time
    assert jobs_per_fire(engine) == {(sid, T0 + timedelta(days=3)): 1}
    with engine.connect() as conn:
        label, prio, trigger = conn.execute(select(Job.label, Job.priority, Job.trigger)).one()
    assert (label, prio, trigger) == ("nightly", 3, "schedule")


def test_the_database_refuses_a_second_job_for_a_fire_time(engine: Engine) -> None:
    sid = schedules.add_schedule(engine, "0 2 * * *", sim_sweep())
    set_last_fire(engine, sid, T0 - timedelta(days=1))
    with engine.connect() as conn:
        sched = conn.execute(select(Schedule).where(Schedule.id == sid)).one()
    assert schedules.enqueue_fire(engine, sched, T0) is not None
    # A scheduler that read the schedule before the first one committed: the guard on last_fire_time is
    # gone (reset here), so only the unique constraint stands between it and a duplicate.
    set_last_fire(engine, sid, T0 - timedelta(days=1))
    assert schedules.enqueue_fire(engine, sched, T0) is None
    assert jobs_per_fire(engine) == {(sid, T0): 1}


def test_racing_schedulers_in_threads(engine: Engine) -> None:
    """Four schedulers tick at the same simulated minutes; every fire time becomes exactly one job."""
    a = schedules.add_schedule(engine, "* * * * *", sim_sweep("a"))
    b = schedules.add_schedule(engine, "*/2 * * * *", sim_sweep("b"))
    set_last_fire(engine, a, T0)
    set_last_fire(engine, b, T0)
    minutes = 12
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def scheduler() -> None:
        try:
            for m in range(1, minutes + 1):
                barrier.wait()
                schedules.tick(engine, now=T0 + timedelta(minutes=m, seconds=5))
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=scheduler) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    counts = jobs_per_fire(engine)
    expected = {(a, T0 + timedelta(minutes=m)) for m in range(1, minutes + 1)}
    expected |= {(b, T0 + timedelta(minutes=m)) for m in range(2, minutes + 1, 2)}
    assert set(counts) == expected
    assert set(counts.values()) == {1}


def test_schedule_verbs(sqlite_url: str, tmp_path: Path) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(sim_sweep("verbs"))
    runner = CliRunner()
    bad = runner.invoke(app, ["schedule", "add", str(sweep), "--cron", "0 2 * *", "--db", sqlite_url])
    assert bad.exit_code == 2 and "five fields" in bad.output
    added = runner.invoke(
        app, ["schedule", "add", str(sweep), "--cron", "0 2 * * *", "--label", "nightly", "--db", sqlite_url]
    )
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["schedule", "list", "--db", sqlite_url, "--format", "json"])
    rows = json.loads(listed.stdout)
    assert [(r["cron"], r["label"], r["sweep"]) for r in rows] == [("0 2 * * *", "nightly", str(sweep))]
    assert "02:00" in runner.invoke(app, ["schedule", "list", "--db", sqlite_url]).output  # next fire
    sid = str(rows[0]["id"])
    assert runner.invoke(app, ["schedule", "remove", sid, "--db", sqlite_url]).exit_code == 0
    assert runner.invoke(app, ["schedule", "remove", sid, "--db", sqlite_url]).exit_code == 1


@pytest.mark.slow
def test_two_scheduler_processes(pg_url: str, tmp_path: Path) -> None:
    """Two real `specbench scheduler` processes on one PostgreSQL, ticking every 0.05 s together."""
    engine = open_database(pg_url)
    sid = schedules.add_schedule(engine, "* * * * *", sim_sweep("sched"), label="nightly")
    # Missed the last hour: each scheduler wants to enqueue the latest minute (and then each new minute).
    set_last_fire(engine, sid, datetime.now(UTC) - timedelta(hours=1))
    logs = [tmp_path / f"sched{i}.log" for i in range(2)]
    procs = [spawn_cli("scheduler", "--db", pg_url, "--interval-s", "0.05", log=log) for log in logs]
    deadline = time.monotonic() + 60
    while not all("scheduler started" in log.read_text() for log in logs):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.1)
    time.sleep(1.5)  # both are ticking now: dozens of racing ticks
    for p in procs:
        p.terminate()
    for p in procs:
        assert p.wait(timeout=30) == 0
    counts = jobs_per_fire(engine)
    assert counts and set(counts.values()) == {1}, counts
    text = "".join(log.read_text() for log in logs)
    assert text.count("enqueued as job") == sum(counts.values())
    assert "skipped 59 older missed fire time(s)" in text or "skipped 60 older" in text
    engine.dispose()
