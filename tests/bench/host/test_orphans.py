"""No orphans: a server dies with the worker that launched it, even on kill -9 (its watchdog), and a restarted
worker reaps what a dead predecessor left when the watchdog died too (records). Real processes, real signals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from bench.host.processes import group_alive
from bench.host.reaper import RECORDS_ENV
from db.migrate import open_database
from db.models import Job
from runners import queue
from tests.queue_support import REPO, cli_argv, cli_env, sim_sweep

pytestmark = pytest.mark.slow
SLOW = sim_sweep("orphan", batch_sizes=(1, 2, 3), repeats=3, num_prompts=4, output_len=32, time_scale=2.0)


def spawn_worker(url: str, records: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            cli_argv("worker", "--db", url, "--poll-interval", "0.05", "--log-dir", str(log.parent), *extra),
            cwd=REPO, env=cli_env(**{RECORDS_ENV: str(records)}), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def wait_for_server(records: Path, timeout: float = 60) -> dict[str, int]:
    """The record of the one live server, once its launcher has written it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in records.glob("*.json"):
            with contextlib.suppress(ValueError, OSError):
                rec = json.loads(path.read_text())
                if group_alive(int(rec["server_pgid"])):
                    return {k: v for k, v in rec.items() if isinstance(v, int)}
        time.sleep(0.1)
    pytest.fail("no server came up")


def gone_within(pgid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not group_alive(pgid):
            return True
        time.sleep(0.05)
    return False


def test_a_server_dies_with_its_worker_on_kill_9(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    url = f"sqlite:///{tmp_path / 'o.db'}"
    engine = open_database(url)
    queue.submit(engine, SLOW)
    records = tmp_path / "records"
    worker = spawn_worker(url, records, tmp_path / "w.log")
    procs.append(worker)
    rec = wait_for_server(records)
    assert group_alive(rec["server_pgid"])
    worker.kill()  # SIGKILL: no atexit, no finally, no signal handler
    worker.wait(timeout=10)
    assert gone_within(rec["server_pgid"], 20), "the server outlived its worker"
    engine.dispose()


def test_a_restarted_worker_reaps_what_a_dead_predecessor_left(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = open_database(url)
    job_id = queue.submit(engine, SLOW.replace("time_scale: 2.0", "time_scale: 0.3"))
    records = tmp_path / "records"
    log = tmp_path / "w.log"
    first = spawn_worker(url, records, log, "--lease-s", "1", "--requeue-backoff-s", "0")
    procs.append(first)
    rec = wait_for_server(records)
    os.kill(rec["watchdog_pid"], signal.SIGKILL)  # the host lost both: the safety net must catch it
    first.kill()
    first.wait(timeout=10)
    time.sleep(1.0)
    assert group_alive(rec["server_pgid"]), "expected an orphan for the restarted worker to find"
    second = spawn_worker(url, records, log, "--lease-s", "1", "--requeue-backoff-s", "0", "--once")
    procs.append(second)
    assert gone_within(rec["server_pgid"], 90), "the restarted worker did not reap the orphan"
    assert second.wait(timeout=120) == 0, log.read_text(errors="replace")[-3000:]
    assert "left by a dead launcher" in log.read_text(errors="replace")
    with engine.connect() as conn:
        assert conn.execute(select(Job.status).where(Job.id == job_id)).scalar_one() == "done"
    assert not list(records.glob("*.json"))  # every record cleaned up
    engine.dispose()
