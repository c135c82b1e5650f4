"""scripts/gpu_evidence.sh end to end on the stand-in: its sweep step and report run on any host, and
SNAPSHOT_TO keeps a consistent copy of the database outside the work directory while the steps run, so a
GPU host lost mid-run loses at most one snapshot period (docs/guide/gpu-hosts.md, "A host lost mid-run")."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWEEP = """
name: evidence-sim
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {time_scale: 0.05, seed: 3, startup_s: 0.0}
grid: {batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [2], accept_lengths: [2.5], baseline: false}
workload: {input_len: 32, output_len: 16, num_prompts: 8}
measure: {min_window_s: 0.5}
repeats: 3
"""
# One instant point: for what does not need a sweep of several seconds.
QUICK = """
name: evidence-sim
model: sim-tiny
server: {backend: sim, attention_backend: flashmla, sim: {instant: true, startup_s: 0.0}}
grid: {batch_sizes: [1], spec_modes: [], baseline: true}
workload: {input_len: 8, output_len: 4, num_prompts: 2}
repeats: 1
"""


def _count(db: Path, table: str) -> int:
    with contextlib.closing(sqlite3.connect(db)) as c:
        return int(c.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # table names are ours


def _evidence(
    tmp_path: Path, every_s: int, timeout_s: float, sweep_text: str = SWEEP, **extra_env: str
) -> tuple[str, Path, Path]:
    sweep = tmp_path / "evidence-sim.yaml"
    sweep.write_text(sweep_text)
    work, keep = tmp_path / "work", tmp_path / "keep" / "evidence.db"
    keep.parent.mkdir()
    env = {
        **os.environ,
        "SPECBENCH": f"{sys.executable} -m runners.cli",
        "PYTHON": sys.executable,
        "STEPS": "sweep report",
        **extra_env,
        "SWEEP": str(sweep),
        "SNAPSHOT_TO": str(keep),
        "SNAPSHOT_EVERY_S": str(every_s),
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_evidence.sh"), str(work)],
        env=env,
        capture_output=True,  # pipes, as `gpu_evidence.sh | tee log` gives it
        text=True,
        timeout=timeout_s,
        cwd=tmp_path,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    return log, work, keep


@pytest.mark.slow
def test_the_sweep_step_runs_on_the_stand_in_and_snapshots_the_database(tmp_path: Path) -> None:
    cpu = min(os.sched_getaffinity(0))  # CLIENT_CPUS reaches `specbench run --client-cpus`
    # Every 2 s: each snapshot is a `specbench` process (most of this test's CPU at every 1 s), and the sweep's
    # twelve windows of at least 0.5 s leave room for two or more.
    log, work, keep = _evidence(tmp_path, every_s=2, timeout_s=600, CLIENT_CPUS=str(cpu))
    # periodic snapshots while the sweep ran (it takes several seconds), then the final one
    assert log.count(f"snapshot: {keep}") >= 2, log
    assert "FAILED" not in log
    # the kept copy is the finished database: every window of the run, and a database SQLite opens alone
    assert _count(keep, "samples") == _count(work / "evidence.db", "samples") == 2 * 2 * 3
    assert not Path(f"{keep}-wal").exists()
    with contextlib.closing(sqlite3.connect(keep)) as c:
        (prov,) = c.execute("SELECT provenance FROM runs").fetchone()
    assert json.loads(prov)["client_cpus"] == str(cpu)
    report = work / "evidence-sim-v2-vs-v1.md"
    assert report.exists() and "| 4 |" in report.read_text()
    leftovers = [p.name for p in keep.parent.iterdir() if p.name != keep.name]
    assert leftovers == []  # no temp files of an overtaken snapshot


@pytest.mark.slow
def test_a_long_snapshot_period_does_not_hold_the_callers_pipe(tmp_path: Path) -> None:
    # The sweep ends long before the first 900 s period: only the final snapshot, and the script does not
    # wait out the period (nor leave the caller's pipes open for it) before it exits. Any sweep shows that: one
    # instant point, and no report.
    log, work, keep = _evidence(tmp_path, every_s=900, timeout_s=300, sweep_text=QUICK, STEPS="sweep")
    assert log.count(f"snapshot: {keep}") == 1
    assert _count(keep, "samples") == _count(work / "evidence.db", "samples")
