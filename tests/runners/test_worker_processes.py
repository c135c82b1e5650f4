"""Real `specbench worker` processes on the stand-in server, real signals, real PostgreSQL and SQLite.

Every claim a worker makes is logged ("job N claimed by W (attempt A/M)"); the tests parse those logs to
prove that no job was claimed twice, and count samples per (run, point, repeat) to prove that nothing was
measured twice or lost.
"""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from db.migrate import open_database
from db.models import Job, Point, Run
from runners import queue
from runners.cli import app
from tests.queue_support import (
    children_of,
    external_sweep,
    run_cli,
    sim_sweep,
    spawn_cli,
    standin_server,
)
from tests.worker_process_support import (
    FAST,
    claims,
    job_row,
    runs_of,
    sample_count,
    samples_per_repeat,
    wait_all,
    wait_for,
)

pytestmark = pytest.mark.slow
JOBS = 100


def test_eight_workers_a_hundred_jobs(
    pg_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """Jobs measure one shared stand-in server (backend: external), so the queue, not server start-up, is
    what this exercises: each job is a few tens of milliseconds of real measuring and storing, and each of the
    hundred claims a race between eight pollers."""
    engine = open_database(pg_url)
    logs = [tmp_path / f"w{i}.log" for i in range(8)]
    with standin_server(tmp_path / "sim.log") as base_url:
        ids = [queue.submit(engine, external_sweep(f"j{i:03d}", base_url)) for i in range(JOBS)]
        allow = ["--allow-external", base_url.removeprefix("http://")]  # external servers are opt-in
        for log in logs:
            procs.append(
                spawn_cli(
                    "worker", "--db", pg_url, "--once", *FAST, *allow, "--log-dir", str(tmp_path), log=log
                )
            )
        wait_all(procs, 170, logs)

    seen = claims(logs)
    per_job = Counter(job_id for job_id, _, _ in seen)
    assert sorted(per_job) == ids
    assert max(per_job.values()) == 1, "a job was claimed twice"
    assert len({w for _, w, _ in seen}) > 1, "one worker did everything; the race was not exercised"
    with engine.connect() as conn:
        rows = conn.execute(select(Job.id, Job.status, Job.attempts, Job.run_id)).all()
        run_rows = conn.execute(select(Run.id, Run.job_id, Run.status)).all()
    assert {(s, a) for _, s, a, _ in rows} == {("done", 1)}
    runs_per_job = Counter(job_id for _, job_id, _ in run_rows)
    assert set(runs_per_job.values()) == {1} and len(runs_per_job) == JOBS
    assert {s for _, _, s in run_rows} <= {"done", "unstable"}  # unstable: a busy machine's TTFT outlier
    assert {r for _, _, _, r in rows} == {i for i, _, _ in run_rows}
    assert sample_count(engine) == JOBS  # one point, one repeat each
    engine.dispose()


def test_sigterm_finishes_the_point_stops_the_server_and_releases(
    pg_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    engine = open_database(pg_url)
    # Each point is one repeat of ~0.5 s, so SIGTERM lands mid-point.
    sweep = sim_sweep("term", batch_sizes=(1, 2, 3, 4, 5, 6), num_prompts=4, output_len=32, time_scale=4.0)
    job_id = queue.submit(engine, sweep)
    log = tmp_path / "w.log"
    worker = spawn_cli("worker", "--db", pg_url, *FAST, "--log-dir", str(tmp_path), log=log)
    procs.append(worker)
    wait_for(lambda: sample_count(engine) >= 1, 60, "the first point")
    server = children_of(worker.pid)
    assert server, "no stand-in server under the worker"
    at_signal = sample_count(engine)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, log.read_text()
    text = log.read_text()
    assert "SIGTERM received" in text and f"job {job_id} released" in text
    assert all(not Path(f"/proc/{pid}").exists() for pid in server), "the server outlived the worker"
    job = job_row(engine, job_id)
    assert (job["status"], job["attempts"], job["worker_id"]) == ("queued", 0, None)
    ((run_id, run_status),) = runs_of(engine, job_id)
    assert run_status == "partial"
    kept = sample_count(engine, run_id)
    assert at_signal <= kept < 6  # the point in flight was stored, not dropped
    with engine.connect() as conn:
        assert (
            conn.execute(select(func.count()).select_from(Point).where(Point.repeats == 0)).scalar_one() == 0
        )

    # Another worker picks it up at once (no attempt used, no backoff) and completes the same run.
    log2 = tmp_path / "w2.log"
    procs.append(spawn_cli("worker", "--db", pg_url, "--once", *FAST, "--log-dir", str(tmp_path), log=log2))
    wait_all(procs[-1:], 60, [log2])
    assert f"resuming run {run_id}" in log2.read_text()
    job = job_row(engine, job_id)
    assert (job["status"], job["attempts"]) == ("done", 1)
    per_repeat = samples_per_repeat(engine, run_id)
    assert len(per_repeat) == 6 and set(per_repeat.values()) == {1}
    engine.dispose()


def test_sqlite_two_workers_on_one_host(
    sqlite_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    engine = open_database(sqlite_url)
    # Launching servers: two workers start stand-ins side by side on one host.
    ids = [queue.submit(engine, sim_sweep(f"s{i}")) for i in range(6)]
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    for log in logs:
        procs.append(
            spawn_cli("worker", "--db", sqlite_url, "--once", *FAST, "--log-dir", str(tmp_path), log=log)
        )
    wait_all(procs, 120, logs)
    per_job = Counter(job_id for job_id, _, _ in claims(logs))
    assert sorted(per_job) == ids and set(per_job.values()) == {1}
    with engine.connect() as conn:
        assert {tuple(r) for r in conn.execute(select(Job.status, Job.attempts))} == {("done", 1)}
    assert sample_count(engine) == 6
    engine.dispose()


def test_a_worker_without_the_gpu_leaves_the_job(sqlite_url: str, tmp_path: Path) -> None:
    engine = open_database(sqlite_url)
    sweep = tmp_path / "s.yaml"
    sweep.write_text(sim_sweep("needs-h100"))
    cli = CliRunner()
    submitted = cli.invoke(app, ["submit", str(sweep), "--db", sqlite_url, "--requires", "gpu=H100,count=8"])
    assert submitted.exit_code == 0, submitted.output
    sim_job = queue.submit(engine, sim_sweep("anywhere"))
    # This host has no GPU (and --gpus 0 names one that detection cannot identify as an H100).
    ran = run_cli("worker", "--db", sqlite_url, "--once", "--gpus", "0", *FAST, "--log-dir", str(tmp_path))
    assert ran.returncode == 0, ran.stderr
    with engine.connect() as conn:
        rows = dict(conn.execute(select(Job.sweep_name, Job.status)).all())
        h100 = conn.execute(
            select(Job.attempts, Job.worker_id, Job.requires).where(Job.sweep_name == "needs-h100")
        ).one()
    assert rows == {"needs-h100": "queued", "anywhere": "done"}
    assert h100 == (0, None, {"gpu": "H100", "count": 8})
    assert f"job {sim_job} claimed" in ran.stderr and "job 1 claimed" not in ran.stderr
    # The worker says why it leaves the job, and that it is left for other workers.
    assert "job 1 (needs-h100) waits for another worker: needs 8 x H100, has 0" in ran.stderr, ran.stderr
    assert "1 job(s) left for other workers" in ran.stderr
    listed = cli.invoke(app, ["jobs", "--db", sqlite_url, "--format", "json"])
    assert listed.exit_code == 0 and '"needs-h100"' in listed.stdout
    engine.dispose()
