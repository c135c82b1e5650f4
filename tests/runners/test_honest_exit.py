"""A run says what happened: no ok point is `failed`, some is `partial` (both exit 2: no full answer,
runners/exit_codes.py), `--fail-on` picks what fails CI; a job follows its run; a server that died mid-run leaves its exit code and log tail in SQL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from db.engine import session_scope
from db.migrate import open_database
from db.models import Job, Run, ServerInstance
from runners import queue
from runners.sweep_runner import final_status
from runners.worker import QueueWorker, WorkerOptions
from tests.fixtures.cli import run_cli

ALL_FAIL = """
name: allfail
model: sim-tiny
server: {backend: sim, attention_backend: no-such-backend, sim: {instant: true, startup_s: 0}}
grid: {batch_sizes: [1], spec_modes: [], baseline: true}
workload: {input_len: 8, output_len: 4, num_prompts: 2}
repeats: 1
"""
# The server crashes on its 4th request: the first point (warmup + 2 requests) is measured, the second not.
PARTIAL = """
name: half
model: sim-tiny
server: {backend: sim, sim: {time_scale: 0.05, startup_s: 0, fault: "crash_after=3"}}
grid: {batch_sizes: [1, 2], spec_modes: [], baseline: true}
workload: {input_len: 8, output_len: 4, num_prompts: 2}
repeats: 1
warmup: {waves: 1}
"""
CRASH = """
name: crash
model: sim-tiny
server: {backend: sim, sim: {time_scale: 0.05, fault: "crash_after=3"}}
grid: {batch_sizes: [2], spec_modes: [], baseline: true}
workload: {input_len: 16, output_len: 16, num_prompts: 4}
repeats: 2
"""


def test_final_status_rules() -> None:
    assert final_status(["ok", "ok"], 2) == ("done", None)
    assert final_status(["ok", "unstable"], 2) == ("unstable", "1/2 points ok (1 unstable)")
    assert final_status(["ok", "failed"], 2) == ("partial", "1/2 points measured (1 failed)")
    assert final_status(["ok"], 2) == ("partial", "1/2 points measured (1 not measured)")
    assert final_status(["unstable", "mode_mismatch"], 2)[0] == "partial"
    assert final_status(["failed", "invalid"], 2) == ("failed", "no point measured (1 failed, 1 invalid)")
    assert final_status([], 3) == ("failed", "no point measured (3 not measured)")


def test_a_run_with_no_ok_point_fails_and_exits_non_zero(tmp_path: Path) -> None:
    sweep = tmp_path / "allfail.yaml"
    sweep.write_text(ALL_FAIL)
    url = f"sqlite:///{tmp_path / 'x.db'}"
    out = run_cli("run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp_path / "l"))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    engine = open_database(url)
    with session_scope(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.status == "failed" and "no point measured" in (run.error or "")
        si = s.scalars(select(ServerInstance)).one()
        # Why it never came up is in the database, not only in a log file on the worker host.
        assert si.status == "failed" and "no-such-backend" in (si.error or "")
    engine.dispose()
    # --fail-on lets CI decide: here nothing fails it.
    again = run_cli(
        "run", str(sweep), "--db", url, "--no-progress", "--fail-on", "", "--log-dir", str(tmp_path)
    )
    assert again.returncode == 0, again.stdout + again.stderr
    bad = run_cli("run", str(sweep), "--db", url, "--fail-on", "failed,green")
    assert bad.returncode == 2 and "green" in bad.stderr and "Traceback" not in bad.stderr


def test_a_partial_run_is_partial_and_fail_on_decides(tmp_path: Path) -> None:
    sweep = tmp_path / "half.yaml"
    sweep.write_text(PARTIAL)
    url = f"sqlite:///{tmp_path / 'p.db'}"
    out = run_cli("run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp_path / "l"))
    assert out.returncode == 2, out.stdout + out.stderr
    engine = open_database(url)
    with session_scope(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.status == "partial" and run.error == "1/2 points measured (1 failed)"
        si = s.scalars(select(ServerInstance)).one()
        assert (
            si.status == "crashed"
            and si.exit_code not in (None, 0)
            and "simulated crash" in (si.log_tail or "")
        )
    engine.dispose()
    url2 = f"sqlite:///{tmp_path / 'p2.db'}"
    lenient = run_cli(
        "run", str(sweep), "--db", url2, "--no-progress", "--fail-on", "failed", "--log-dir", str(tmp_path)
    )
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr


def test_a_crash_mid_run_is_stored_and_the_job_retries(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    engine = open_database(url)
    text = CRASH.replace("spec_modes: []", "spec_modes: [v1], steps: [1]")
    job_id = queue.submit(engine, text, max_attempts=2)
    options = WorkerOptions(
        lease_s=30, poll_s=0.02, once=True, backoff=queue.Backoff(base_s=0.0), log_dir=tmp_path
    )
    assert QueueWorker(engine, options).run() == 0
    with session_scope(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None
        # Every attempt crashed its servers: the run failed, the job was retried, then failed for good.
        assert (job.status, job.attempts) == ("failed", 2)
        assert "no point measured" in (job.last_error or "")
        run = s.scalars(select(Run)).one()  # the retry resumed the same run
        assert run.status == "failed"
        crashed = list(s.scalars(select(ServerInstance).where(ServerInstance.status == "crashed")))
        assert crashed, [(si.status, si.error) for si in s.scalars(select(ServerInstance))]
        for si in crashed:
            assert si.exit_code is not None and si.exit_code != 0
            assert si.log_tail and "simulated crash" in si.log_tail
