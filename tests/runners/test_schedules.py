"""Schedules: due fire times, the missed-fire policy, and exactly one job per fire time with racing
schedulers."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, select, update
from typer.testing import CliRunner

from db.migrate import open_database
from db.models import Job, Schedule
from runners import queue, schedules
from runners.cli import app
from tests.fixtures.waiting import wait_until
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
    assert (
        listed[0]["last_fire_time"] is None
    )  # it never fired: no "last fire" (it was the time it was added)
    assert schedules.tick(engine, now=listed[0]["next_fire_time"])[0].schedule_id == sid  # then it fires
    assert schedules.list_schedules(engine)[0]["last_fire_time"] == listed[0]["next_fire_time"]


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


def test_racing_schedulers_in_threads(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four schedulers tick at the same simulated minutes and all four reach the enqueue of each due fire time
    before any of them writes (a barrier inside it): the race happens every time, and the database lets one
    win. Every fire time becomes exactly one job; the three others get nothing."""
    a = schedules.add_schedule(engine, "* * * * *", sim_sweep("a"))
    b = schedules.add_schedule(engine, "*/2 * * * *", sim_sweep("b"))
    set_last_fire(engine, a, T0)
    set_last_fire(engine, b, T0)
    minutes, racers = 12, 4
    real_enqueue = schedules.enqueue_fire
    at_the_write = threading.Barrier(racers)

    def racing_enqueue(engine: Engine, schedule: object, fire_time: datetime) -> int | None:
        at_the_write.wait(timeout=60)  # every scheduler has read the schedule and found this fire time due
        return real_enqueue(engine, schedule, fire_time)

    monkeypatch.setattr(schedules, "enqueue_fire", racing_enqueue)
    each_minute = threading.Barrier(racers)
    fired: list[schedules.Fired] = []
    errors: list[BaseException] = []

    def scheduler() -> None:
        try:
            for m in range(1, minutes + 1):
                each_minute.wait(timeout=60)
                fired.extend(schedules.tick(engine, now=T0 + timedelta(minutes=m, seconds=5)))
        except BaseException as e:
            errors.append(e)
            each_minute.abort()
            at_the_write.abort()

    threads = [threading.Thread(target=scheduler) for _ in range(racers)]
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
    # Every racer tried every fire time; one got the job, the others learned it was taken.
    tries = Counter((f.schedule_id, f.fire_time) for f in fired)
    assert tries == dict.fromkeys(expected, racers)
    wins = Counter((f.schedule_id, f.fire_time) for f in fired if f.job_id is not None)
    assert wins == dict.fromkeys(expected, 1)


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
    table = runner.invoke(app, ["schedule", "list", "--db", sqlite_url]).output
    assert "02:00" in table  # next fire
    assert table.splitlines()[2].split()[-3] == "never", table  # last fire: it never fired
    sid = str(rows[0]["id"])
    assert runner.invoke(app, ["schedule", "remove", sid, "--db", sqlite_url]).exit_code == 0
    assert runner.invoke(app, ["schedule", "remove", sid, "--db", sqlite_url]).exit_code == 2  # no answer


@pytest.mark.slow
def test_two_scheduler_processes(pg_url: str, tmp_path: Path) -> None:
    """Two real `specbench scheduler` processes on one PostgreSQL, ticking every 0.05 s together. The test
    opens the current fire time again and again (as a missed hour) until one of them logs that the other got
    there first: the race happened; and however many times it did, each fire time is one job."""
    engine = open_database(pg_url)
    sid = schedules.add_schedule(engine, "* * * * *", sim_sweep("sched"), label="nightly")
    logs = [tmp_path / f"sched{i}.log" for i in range(2)]
    procs = [spawn_cli("scheduler", "--db", pg_url, "--interval-s", "0.05", log=log) for log in logs]

    def text() -> str:
        return "".join(log.read_text() for log in logs)

    def reopen() -> bool:
        """Missed the last hour, and the current minute's job gone: both schedulers want it now."""
        with engine.begin() as conn:
            conn.execute(
                update(Schedule)
                .where(Schedule.id == sid)
                .values(last_fire_time=datetime.now(UTC) - timedelta(hours=1))
            )
            conn.execute(
                delete(Job).where(
                    Job.schedule_id == sid, Job.fire_time > datetime.now(UTC) - timedelta(minutes=1)
                )
            )
        assert all(p.poll() is None for p in procs), text()
        return "already enqueued by another scheduler" in text()

    wait_until(lambda: all("scheduler started" in log.read_text() for log in logs), "both schedulers started")
    wait_until(reopen, "a lost race between the two schedulers", timeout_s=120, poll_s=0.2)
    wait_until(lambda: bool(jobs_per_fire(engine)), "the fire time reopened last enqueued again")
    for p in procs:
        p.terminate()
    for p in procs:
        assert p.wait(timeout=30) == 0
    counts = jobs_per_fire(engine)
    assert counts and set(counts.values()) == {1}, counts
    assert "skipped 59 older missed fire time(s)" in text() or "skipped 60 older" in text()
    engine.dispose()


# ---- schedules that cannot fire (issue 30 §5)

IMPOSSIBLE = ("0 0 31 2 *", "30 2 30 2 *", "31 4 31 4 *", "0 0 31 4 *")


@pytest.mark.parametrize("cron", IMPOSSIBLE)
def test_an_impossible_cron_is_refused(cron: str) -> None:
    with pytest.raises(ValueError, match="never fires"):
        schedules.check_cron(cron)


def test_a_leap_day_cron_is_a_valid_schedule() -> None:
    """Issue 35: `0 0 29 2 *` was refused as "never fires in the next year". It fires in 2028 (14 months
    after T0), and even from March 2096, when the next 29 February is eight years away (2100 is no leap year)."""
    assert schedules.check_cron("0 0 29 2 *", now=T0) == "0 0 29 2 *"
    assert schedules.check_cron("0 0 29 2 *", now=datetime(2096, 3, 1, tzinfo=UTC)) == "0 0 29 2 *"
    assert schedules.next_fire("0 0 29 2 *", T0) == datetime(2028, 2, 29, tzinfo=UTC)
    assert schedules.check_cron("0 0 1 1 *", now=T0) == "0 0 1 1 *"  # yearly
    with pytest.raises(ValueError, match="five fields"):
        schedules.check_cron("0 2 * * " + "1," * 200 + "2")  # longer than the column


def test_schedule_add_refuses_an_impossible_cron_in_one_line(sqlite_url: str, tmp_path: Path) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(sim_sweep("nightly"))
    for cron in ("0 0 31 2 *", "30 2 30 2 *", "31 4 31 4 *"):
        res = CliRunner().invoke(app, ["schedule", "add", str(sweep), "--cron", cron, "--db", sqlite_url])
        assert res.exit_code == 2, res.output
        assert "never fires" in res.output and "Traceback" not in res.output
        assert len(res.output.strip().splitlines()) == 1, res.output
    assert schedules.list_schedules(open_database(sqlite_url)) == []


def test_schedule_add_takes_a_leap_day_and_refuses_an_absurd_requirement(db_url: str, tmp_path: Path) -> None:
    """Issue 35: `--requires count=10**30` was stored (no worker could ever claim it), and the valid leap-day
    cron was refused."""
    sweep = tmp_path / "s.yaml"
    sweep.write_text(sim_sweep("leap"))
    for requires in (f"count={10**30}", "count=1025", "count=0", "count=¹"):
        res = CliRunner().invoke(
            app,
            ["schedule", "add", str(sweep), "--cron", "0 2 * * *", "--requires", requires, "--db", db_url],
        )
        assert res.exit_code == 2 and "count=" in res.output and "Traceback" not in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1, res.output
    engine = open_database(db_url)
    assert schedules.list_schedules(engine) == []
    res = CliRunner().invoke(
        app, ["schedule", "add", str(sweep), "--cron", "0 0 29 2 *", "--requires", "count=8", "--db", db_url]
    )
    assert res.exit_code == 0, res.output
    [listed] = schedules.list_schedules(engine)
    fire = listed["next_fire_time"]
    assert listed["cron"] == "0 0 29 2 *" and (fire.month, fire.day) == (2, 29) and not listed["broken"]
    engine.dispose()


def _break(engine: Engine, schedule_id: int, **values: object) -> None:
    """Edit a stored schedule behind the CLI's back (as a row stored before the checks, or edited by hand)."""
    with engine.begin() as conn:
        conn.execute(update(Schedule).where(Schedule.id == schedule_id).values(**values))


def test_a_broken_schedule_is_marked_skipped_and_mended(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    good = schedules.add_schedule(engine, "0 2 * * *", sim_sweep("good"))
    feb30 = schedules.add_schedule(engine, "0 2 * * *", sim_sweep("feb30"))
    stale = schedules.add_schedule(engine, "0 2 * * *", sim_sweep("stale"))
    garbage = schedules.add_schedule(engine, "0 2 * * *", sim_sweep("garbage"))
    for sid in (good, feb30, stale, garbage):
        set_last_fire(engine, sid, T0 - timedelta(days=1))
    _break(engine, feb30, cron="0 0 31 2 *")
    _break(engine, stale, sweep_yaml="name: stale\nmodel: m\ngrid: {batch_sizes: [0]}\n")  # no longer valid
    _break(engine, garbage, cron="rm -rf /")
    with caplog.at_level("ERROR", logger="specbench.scheduler"):
        fired = schedules.tick(engine, now=T0 + timedelta(minutes=1))
        schedules.tick(engine, now=T0 + timedelta(minutes=2))  # still broken: not logged again
    assert [f.schedule_id for f in fired] == [good] and fired[0].job_id is not None
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 3, errors
    assert any(f"schedule {feb30}: broken" in e and "never fires" in e for e in errors)
    assert any(f"schedule {stale}: broken" in e and "batch_sizes" in e for e in errors)
    listed = {r["id"]: r for r in schedules.list_schedules(engine, now=T0)}
    assert listed[good]["broken"] is None and listed[good]["next_fire_time"] is not None
    assert "never fires" in listed[feb30]["broken"] and listed[feb30]["next_fire_time"] is None
    assert "SweepError" in listed[stale]["broken"] and "five fields" in listed[garbage]["broken"]
    # Mended in the database: it fires again, and the mark goes.
    _break(engine, feb30, cron="0 2 * * *")
    fired = schedules.tick(engine, now=T0 + timedelta(minutes=3))
    assert [f.schedule_id for f in fired] == [feb30]
    with engine.connect() as conn:
        marks = dict(conn.execute(select(Schedule.id, Schedule.broken)).all())
    assert marks[feb30] is None and marks[good] is None and marks[stale] and marks[garbage]


def test_schedule_list_shows_a_broken_schedule(db_url: str, tmp_path: Path) -> None:
    engine = open_database(db_url)
    sid = schedules.add_schedule(engine, "0 2 * * *", sim_sweep("x"), label="nightly")
    _break(engine, sid, cron="0 0 31 2 *", sweep_yaml="not: [a sweep")
    engine.dispose()
    for fmt in ("table", "json"):
        res = CliRunner().invoke(app, ["schedule", "list", "--db", db_url, "--format", fmt])
        assert res.exit_code == 0, res.output
        assert "Traceback" not in res.output and res.exception is None
        assert "broken" in res.output
    assert "never fires" in res.output or "SweepError" in res.output


def test_an_unreadable_row_is_broken_not_fatal(sqlite_url: str) -> None:
    """SQLite keeps whatever was written: a fire time that is not a date breaks that schedule only."""
    engine = open_database(sqlite_url)
    good = schedules.add_schedule(engine, "* * * * *", sim_sweep("good"))
    bad = schedules.add_schedule(engine, "* * * * *", sim_sweep("bad"))
    set_last_fire(engine, good, T0)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE schedules SET last_fire_time = 'yesterday-ish' WHERE id = ?", (bad,))
    fired = schedules.tick(engine, now=T0 + timedelta(minutes=1, seconds=5))
    assert [f.schedule_id for f in fired] == [good]
    listed = {r["id"]: r for r in schedules.list_schedules(engine, now=T0)}
    assert "unreadable row" in listed[bad]["broken"]
    engine.dispose()


@pytest.mark.slow
def test_the_scheduler_process_survives_broken_schedules(db_url: str, tmp_path: Path) -> None:
    """Chaos: a real `specbench scheduler` next to an impossible cron, a sweep that no longer validates and a
    garbage cron keeps firing the working schedule and still requeues a dead worker's job."""
    engine = open_database(db_url)
    good = schedules.add_schedule(engine, "* * * * *", sim_sweep("good"))
    broken = [schedules.add_schedule(engine, "0 2 * * *", sim_sweep(f"b{i}")) for i in range(3)]
    for sid in (good, *broken):
        set_last_fire(engine, sid, datetime.now(UTC) - timedelta(hours=1))
    _break(engine, broken[0], cron="0 0 31 2 *")
    _break(engine, broken[1], sweep_yaml="name: stale\nmodel: m\n")
    _break(engine, broken[2], cron="31 4 31 4 *")
    # A worker claimed a job and died: its lease ran out, and no worker is left to notice.
    with engine.begin() as conn:
        dead_job = queue.enqueue(conn, sim_sweep("orphan"), label="orphan")
    claimed = queue.claim(engine, "dead-worker", [], lease_s=0.5)
    assert claimed is not None and claimed.id == dead_job
    log = tmp_path / "scheduler.log"
    proc = spawn_cli("scheduler", "--db", db_url, "--interval-s", "0.2", log=log)
    try:
        deadline = time.monotonic() + 90
        while True:
            with engine.connect() as conn:
                requeued = conn.execute(
                    select(Job.status, Job.lease_expiries).where(Job.id == dead_job)
                ).one()
                fired = conn.execute(select(Job.id).where(Job.schedule_id == good)).all()
                marks = conn.execute(select(Schedule.broken).where(Schedule.id.in_(broken))).scalars().all()
            if tuple(requeued) == ("queued", 1) and fired and all(marks):
                break
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        time.sleep(1.0)  # a few more ticks with the broken schedules in place
        assert proc.poll() is None, log.read_text()
    finally:
        proc.terminate()
        code = proc.wait(timeout=30)
    text = log.read_text()
    assert code == 0, text
    assert "Traceback" not in text and "CroniterBadDateError" not in text
    for sid in broken:  # one error each, not one per tick
        assert text.count(f"schedule {sid}: broken") == 1, text
    assert f"job {dead_job}: its worker stopped heartbeating" in text
    listed = CliRunner().invoke(app, ["schedule", "list", "--db", db_url])
    assert listed.exit_code == 0 and listed.output.count("broken") >= 3, listed.output
    engine.dispose()
