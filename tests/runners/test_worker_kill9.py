"""kill -9 of a worker mid-job, five times over, on real PostgreSQL: each attempt given back, nothing measured
twice or lost. Apart from test_worker_processes.py so that parallel test workers take it at once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select

from db.migrate import open_database
from db.models import Point
from runners import queue
from tests.queue_support import (
    children_of,
    kill_pids,
    sim_sweep,
    spawn_cli,
)
from tests.worker_process_support import (
    claims,
    job_row,
    runs_of,
    sample_count,
    samples_per_repeat,
    wait_all,
    wait_for,
)

pytestmark = pytest.mark.slow


def test_kill_9_mid_job_five_times(pg_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    """Each worker is SIGKILLed once it has stored a new repeat; the next resumes the same run."""
    engine = open_database(pg_url)
    sweep = sim_sweep(
        "killme", batch_sizes=(1, 2, 3, 4), repeats=3, num_prompts=4, output_len=32, time_scale=2.0
    )
    job_id = queue.submit(engine, sweep)  # the default of 3 attempts: kills do not use them up
    expected_repeats = 4 * 3
    args = ["worker", "--db", pg_url, "--poll-interval", "0.05", "--lease-s", "1", "--retry-backoff-s", "0"]
    logs: list[Path] = []
    stored = 0
    for attempt in range(1, 6):
        logs.append(tmp_path / f"w{attempt}.log")
        worker = spawn_cli(*args, "--log-dir", str(tmp_path), log=logs[-1])
        procs.append(worker)
        run_ids = runs_of(engine, job_id)

        def progressed(before: int = stored) -> bool:
            return bool(runs_of(engine, job_id)) and sample_count(engine) > before

        wait_for(progressed, 60, f"attempt {attempt} to store a repeat")
        kids = children_of(worker.pid)
        worker.kill()
        worker.wait(timeout=10)
        kill_pids(kids)  # the host "died" with it: its stand-in server goes too
        stored = sample_count(engine)
        assert stored < expected_repeats, "the job finished before it could be killed; slow the sweep down"
        assert len(runs_of(engine, job_id)) == 1, run_ids
        assert job_row(engine, job_id)["status"] == "running"  # still leased by the dead worker

    logs.append(tmp_path / "final.log")
    procs.append(spawn_cli(*args, "--once", "--log-dir", str(tmp_path), log=logs[-1]))
    wait_all(procs[-1:], 90, logs)

    job = job_row(engine, job_id)
    ((run_id, run_status),) = runs_of(engine, job_id)
    assert (job["status"], job["run_id"]) == ("done", run_id) and run_status in ("done", "unstable")
    assert (job["attempts"], job["lease_expiries"]) == (1, 5)
    assert "stopped heartbeating" in str(job["last_error"])
    per_repeat = samples_per_repeat(engine, run_id)
    assert len(per_repeat) == expected_repeats and set(per_repeat.values()) == {1}
    assert [a for _, _, a in claims(logs)] == [1] * 6  # each kill gave its attempt back
    with engine.connect() as conn:
        points = conn.execute(
            select(Point.repeats, Point.repeats_planned).where(Point.run_id == run_id)
        ).all()
    assert points == [(3, 3)] * 4
    engine.dispose()
