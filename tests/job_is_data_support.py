"""What the job-is-data tests share (tests/runners/test_job_is_data*.py): sweeps a job may carry, storing a job
past `submit`'s checks, and one `specbench worker --once` as a process."""

from __future__ import annotations

import http.server
import subprocess
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select

from db.models import Job
from tests.queue_support import REPO, cli_argv, cli_env

SECRET_BODY = b"INTERNAL-ONLY: db_backup_key=9f8e7d6c5b4a"


def sglang_sweep(name: str, python: str, **extra: str) -> str:
    lines = [f"name: {name}", "model: sim-tiny", f"server: {{backend: sglang, python: '{python}'}}"]
    lines += ["grid: {batch_sizes: [1], spec_modes: [], baseline: true}", "repeats: 1"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def external_sweep(name: str, base_url: str) -> str:
    return (
        f"name: {name}\nmodel: sim-tiny\nserver: {{backend: external, base_url: '{base_url}'}}\n"
        "grid: {batch_sizes: [1], spec_modes: [], baseline: true}\n"
        "workload: {dataset: random, input_len: 8, output_len: 4, num_prompts: 2}\n"
        "repeats: 1\nmeasure: {min_window_s: 0, drift_check: false}\n"
    )


def jsonl_sweep(name: str, path: str) -> str:
    return (
        f"name: {name}\nmodel: sim-tiny\nserver: {{backend: sim, sim: {{instant: true, startup_s: 0}}}}\n"
        "grid: {batch_sizes: [1], spec_modes: [], baseline: true}\n"
        f"workload: {{dataset: jsonl, path: '{path}', output_len: 4, num_prompts: 2}}\nrepeats: 1\n"
    )


def store_job(engine: Engine, sweep_yaml: str, requires: dict[str, Any] | None = None) -> int:
    """A job as an older specbench stored it, or as anyone with write access to the database can: straight
    into the table, past `submit`'s checks. The worker must hold the line on its own."""
    with engine.begin() as conn:
        return int(
            conn.execute(
                insert(Job)
                .values(sweep_name="old", sweep_yaml=sweep_yaml, requires=requires or {}, max_attempts=1)
                .returning(Job.id)
            ).scalar_one()
        )


def job(engine: Engine, job_id: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(Job).where(Job.id == job_id)).mappings().one()


def worker_once(url: str | None, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """`specbench worker --once` as a process (with DATABASE_URL=`url`, or none: then `args` name the
    database); its log."""
    done = subprocess.run(
        cli_argv("worker", "--once", "--poll-interval", "0.05", "--log-dir", str(tmp_path / "logs"), *args),
        cwd=REPO,
        env=cli_env(**({"DATABASE_URL": url} if url else {}), **(env or {})),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


class Counting(http.server.ThreadingHTTPServer):
    """A loopback server that counts the connections made to it."""

    connections = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        type(self).connections += 1
        super().process_request(request, client_address)
