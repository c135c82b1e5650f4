"""Database outages: `specbench run`, workers and the scheduler wait them out, with a real PostgreSQL stopped
and started under them (and a real SQLite writer holding the lock); nothing measured is lost or doubled."""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text

from db.engine import SQLITE_IMMEDIATE, make_engine
from db.migrate import open_database
from db.models import Job, Point, Run, Sample
from runners import queue
from runners.exit_codes import ExitCode
from runners.recovery import OutagePolicy, RecoveryPolicy
from runners.worker import QueueWorker, WorkerOptions
from tests.fixtures.cli import run_cli
from tests.fixtures.db import pg_schema_url
from tests.pg_control import PgControl, private_cluster
from tests.queue_support import sim_sweep, spawn_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def private() -> Iterator[tuple[str, PgControl]]:
    with private_cluster() as cluster:
        yield cluster


@pytest.fixture
def pg(private: tuple[str, PgControl]) -> Iterator[PgControl]:
    yield private[1]
    private[1].start()  # whatever happened, leave it running for the next test


@pytest.fixture
def pg_url(private: tuple[str, PgControl]) -> Iterator[str]:
    """A fresh schema on this module's own cluster (not the shared one: these tests stop theirs)."""
    with pg_schema_url(private[0]) as url:
        yield url


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the database may be away
            if check():
                return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def samples(engine: Engine) -> list[tuple[int, str, int]]:
    with engine.connect() as conn:
        return [
            (int(r), str(k), int(n))
            for r, k, n in conn.execute(
                select(Point.run_id, Point.point_key, Sample.repeat).join(Sample, Sample.point_id == Point.id)
            )
        ]


def outage(pg: PgControl, seconds: float) -> None:
    pg.stop()
    time.sleep(seconds)
    pg.start()


def start_run(
    pg_url: str, tmp_path: Path, name: str, batch_sizes: tuple[int, ...], *, outage_limit_s: float
) -> tuple[Engine, Path, Path, subprocess.Popen[bytes]]:
    """`specbench run` of a 3-repeat stand-in sweep as a process, once it has stored its first repeat (the
    engine disposed, so an outage that follows finds no pooled connection): engine, sweep, log, process."""
    engine = open_database(pg_url)
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        sim_sweep(name, batch_sizes=batch_sizes, repeats=3, num_prompts=4, output_len=24, time_scale=1.0)
    )
    log = tmp_path / "run.log"
    proc = spawn_cli(
        "run", str(sweep), "--db", pg_url, "--no-progress", "--log-dir", str(tmp_path / "l"),
        "--db-outage-limit-s", f"{outage_limit_s:g}", log=log,
    )  # fmt: skip
    try:
        wait_for(lambda: len(samples(engine)) >= 1, 60, "the first stored repeat")
    except BaseException:
        proc.kill()
        raise
    engine.dispose()
    return engine, sweep, log, proc


def test_run_rides_out_a_postgres_outage(pg: PgControl, pg_url: str, tmp_path: Path) -> None:
    engine, _sweep, log, proc = start_run(pg_url, tmp_path, "outage", (1, 2, 3), outage_limit_s=60)
    try:
        outage(pg, 4.0)  # the run keeps measuring; what it measured meanwhile waits to be written
        code = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = log.read_text(errors="replace")
    assert code == 0, output[-3000:]
    assert "Traceback" not in output
    assert "database unavailable" in output and "database back after" in output
    rows = samples(engine)
    assert len(rows) == 9 and len(set(rows)) == 9  # every repeat once
    with engine.connect() as conn:
        assert conn.execute(select(Run.status)).scalar_one() in ("done", "unstable")
    engine.dispose()


def test_workers_and_scheduler_ride_out_a_postgres_outage(
    pg: PgControl, pg_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    engine = open_database(pg_url)
    sweep = sim_sweep("q-outage", batch_sizes=(1, 2), repeats=2, num_prompts=4, output_len=24, time_scale=1.0)
    jobs = [queue.submit(engine, sweep) for _ in range(3)]
    logs = [tmp_path / "w1.log", tmp_path / "w2.log", tmp_path / "sched.log"]
    fast = [
        "--poll-interval",
        "0.1",
        "--lease-s",
        "3",
        "--requeue-backoff-s",
        "0",
        "--db-outage-limit-s",
        "60",
    ]
    procs.append(spawn_cli("worker", "--db", pg_url, *fast, "--log-dir", str(tmp_path), log=logs[0]))
    procs.append(spawn_cli("worker", "--db", pg_url, *fast, "--log-dir", str(tmp_path), log=logs[1]))
    procs.append(spawn_cli("scheduler", "--db", pg_url, "--interval-s", "0.2", "--db-outage-limit-s", "60",
                           log=logs[2]))  # fmt: skip
    wait_for(lambda: len(samples(engine)) >= 2, 60, "two stored repeats")
    engine.dispose()
    outage(pg, 5.0)  # longer than the lease: jobs whose renewal comes late are taken over, never doubled
    assert all(p.poll() is None for p in procs), [p.poll() for p in procs]

    def all_done() -> bool:
        with engine.connect() as conn:
            return set(conn.execute(select(Job.status).where(Job.id.in_(jobs))).scalars()) == {"done"}

    wait_for(all_done, 90, "every job done")
    assert all(p.poll() is None for p in procs), "a process died in the outage"
    with engine.connect() as conn:
        runs = conn.execute(select(Run.id, Run.status).where(Run.job_id.in_(jobs))).all()
        expiries = conn.execute(select(func.sum(Job.lease_expiries), func.max(Job.attempts))).one()
    assert len(runs) == 3 and {s for _, s in runs} <= {"done", "unstable"}
    rows = samples(engine)
    assert len(rows) == 3 * 2 * 2 and len(set(rows)) == len(rows)
    assert expiries[1] == 1  # an outage is nobody's failed attempt
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p, log in zip(procs, logs, strict=True):
        assert p.wait(timeout=30) == 0, log.read_text(errors="replace")[-2000:]
        assert "Traceback" not in log.read_text(errors="replace")
    engine.dispose()


def test_a_worker_and_scheduler_started_during_an_outage_wait_for_the_database(
    pg: PgControl, pg_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    # A supervisor restarting them while PostgreSQL restarts, as the chaos bench's replacement worker did:
    # they wait for the database as running ones do, instead of exiting "cannot open database".
    engine = open_database(pg_url)
    job = queue.submit(engine, sim_sweep("q-late", batch_sizes=(1,), repeats=1, num_prompts=2, output_len=8))
    engine.dispose()
    logs = [tmp_path / "w.log", tmp_path / "sched.log"]
    pg.stop()
    try:
        procs.append(spawn_cli("worker", "--db", pg_url, "--once", "--poll-interval", "0.1",
                               "--db-outage-limit-s", "120", "--log-dir", str(tmp_path), log=logs[0]))  # fmt: skip
        procs.append(spawn_cli("scheduler", "--db", pg_url, "--interval-s", "0.2", "--db-outage-limit-s", "120",
                               log=logs[1]))  # fmt: skip
        wait_for(lambda: all("database unavailable" in log.read_text() for log in logs), 60, "both to wait")
        assert all(p.poll() is None for p in procs), [log.read_text()[-1500:] for log in logs]
    finally:
        pg.start()
    assert procs[0].wait(timeout=120) == 0, logs[0].read_text(errors="replace")[-2000:]
    with open_database(pg_url).connect() as conn:
        assert conn.execute(select(Job.status).where(Job.id == job)).scalar_one() == "done"
    procs[1].send_signal(signal.SIGTERM)
    assert procs[1].wait(timeout=30) == 0, logs[1].read_text(errors="replace")[-2000:]
    for log in logs:
        text = log.read_text(errors="replace")
        assert "database back after" in text and "Traceback" not in text, text[-2000:]


def test_an_outage_past_the_limit_ends_the_run_cleanly(pg: PgControl, pg_url: str, tmp_path: Path) -> None:
    engine, sweep, log, proc = start_run(pg_url, tmp_path, "too-long", (1, 2), outage_limit_s=1)
    try:
        pg.stop()
        code = proc.wait(timeout=60)
    finally:
        pg.start()
        if proc.poll() is None:
            proc.kill()
    output = log.read_text(errors="replace")
    assert code == ExitCode.ERROR and "Traceback" not in output, output[-3000:]
    assert "database unavailable" in output and "--resume" in output
    done = run_cli(
        "run", str(sweep), "--db", pg_url, "--no-progress", "--resume", "--log-dir", str(tmp_path / "l")
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = samples(engine)
    assert len(rows) == 6 and len(set(rows)) == 6
    with engine.connect() as conn:
        assert conn.execute(select(Run.status)).scalar_one() in ("done", "unstable")
    engine.dispose()


def test_a_sqlite_writer_holding_the_lock_costs_no_attempt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lock.db'}"
    open_database(url).dispose()
    engine = make_engine(url, busy_timeout_s=0.2)  # lock waits surface at once instead of after 30 s
    job_id = queue.submit(
        engine, sim_sweep("locked", batch_sizes=(1, 2), repeats=2, num_prompts=2, time_scale=0.5)
    )
    holder = make_engine(url)
    released, met = threading.Event(), threading.Event()

    class LockMet(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "database unavailable" in record.getMessage() and "locked" in record.getMessage():
                met.set()

    watcher = LockMet()
    logging.getLogger("specbench.db").addHandler(watcher)

    def hold_the_lock_mid_run() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not samples(engine):
            time.sleep(0.02)
        with holder.connect().execution_options(**{SQLITE_IMMEDIATE: True}) as conn:
            conn.execute(text("UPDATE workers SET labels = labels"))
            # Held until a write of the run met "database is locked" (proof the two collided), then a while
            # longer: several busy timeouts, each ridden out without a new attempt.
            if met.wait(timeout=60):
                time.sleep(1.0)
            conn.rollback()
        released.set()

    try:
        t = threading.Thread(target=hold_the_lock_mid_run, daemon=True)
        t.start()
        options = WorkerOptions(
            lease_s=30, poll_s=0.05, once=True, backoff=queue.Backoff(base_s=0.0), log_dir=tmp_path,
            recovery=RecoveryPolicy(outage=OutagePolicy(limit_s=60)),
        )  # fmt: skip
        assert QueueWorker(engine, options).run() == 0
        t.join(timeout=10)
    finally:
        logging.getLogger("specbench.db").removeHandler(watcher)
    assert released.is_set() and met.is_set()  # the lock was held while the run wrote
    with engine.connect() as conn:
        j = conn.execute(select(Job.status, Job.attempts, Job.last_error).where(Job.id == job_id)).one()
        run_status = conn.execute(select(Run.status)).scalar_one()
    assert (j.status, j.attempts, j.last_error) == ("done", 1, None) and run_status in ("done", "unstable")
    assert len(samples(engine)) == 4
    engine.dispose()
    holder.dispose()
