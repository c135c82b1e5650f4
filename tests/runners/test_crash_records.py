"""The records after a crash tell the truth (issue 30 §8), with real `specbench run` processes, real signals
and real SQLite and PostgreSQL:

  * a run killed with SIGKILL stays `running` and its server rows `ok` only until the next specbench command
    on the host: that marks the run `partial` (interrupted) and closes the rows as `reaped`, with stopped_at;
  * when the server's watchdog died too, that same command stops the orphaned server first;
  * SIGTERM is recorded as a termination, not as Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from bench.host.processes import group_alive
from bench.host.reaper import RECORDS_ENV
from db.migrate import open_database
from db.models import Run, Sample, ServerInstance
from runners.exit_codes import ExitCode
from tests.queue_support import REPO, cli_argv, cli_env, sim_sweep
from tests.worker_process_support import wait_for

pytestmark = pytest.mark.slow
SLOW = sim_sweep("crash", batch_sizes=(1, 2, 3), repeats=3, num_prompts=4, output_len=32, time_scale=2.0)


def start_run(url: str, tmp_path: Path, records: Path) -> subprocess.Popen[bytes]:
    sweep = tmp_path / "crash.yaml"
    sweep.write_text(SLOW)
    log = open(tmp_path / "run.log", "ab")  # noqa: SIM115 - the child writes to it until it ends
    return subprocess.Popen(
        cli_argv("run", str(sweep), "--db", url, "--log-dir", str(tmp_path / "logs"), "--no-progress"),
        cwd=REPO,
        env=cli_env(**{RECORDS_ENV: str(records)}),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def samples(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(Sample)).scalar_one())


def live_server_record(records: Path) -> dict[str, int]:
    for path in records.glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            rec = json.loads(path.read_text())
            if group_alive(int(rec["server_pgid"])):
                return {k: v for k, v in rec.items() if isinstance(v, int)}
    return {}


def rows(engine: Engine) -> tuple[tuple[str, str | None], list[tuple[str, object, str | None]]]:
    with engine.connect() as conn:
        run = conn.execute(select(Run.status, Run.error)).one()
        servers = conn.execute(
            select(ServerInstance.status, ServerInstance.stopped_at, ServerInstance.error)
        ).all()
    return (run[0], run[1]), [(s, t, e) for s, t, e in servers]


def next_command(url: str, records: Path) -> str:
    """Any specbench command that opens the database for writing: here `jobs`."""
    done = subprocess.run(
        cli_argv("jobs", "--db", url),
        cwd=REPO,
        env=cli_env(**{RECORDS_ENV: str(records)}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stderr


@pytest.mark.parametrize("watchdog_dies_too", [False, True], ids=["watchdog", "no-watchdog"])
def test_a_killed_run_and_its_servers_are_closed_by_the_next_command(
    db_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]], watchdog_dies_too: bool
) -> None:
    engine = open_database(db_url)
    records = tmp_path / "records"
    run = start_run(db_url, tmp_path, records)
    procs.append(run)
    wait_for(lambda: samples(engine) >= 1 and live_server_record(records), 120, "a stored repeat", poll=0.1)
    rec = live_server_record(records)
    if watchdog_dies_too:
        os.kill(rec["watchdog_pid"], signal.SIGKILL)
    run.kill()  # no handler, no finally, no atexit
    run.wait(timeout=30)
    if watchdog_dies_too:
        time.sleep(1.0)
        assert group_alive(rec["server_pgid"]), "expected an orphaned server"
    else:
        wait_for(lambda: not group_alive(rec["server_pgid"]), 60, "the watchdog to stop the server", poll=0.1)

    (status, _), servers = rows(engine)
    assert status == "running" and any(s == "ok" and t is None for s, t, _ in servers)  # the drift

    notes = next_command(db_url, records)
    assert not group_alive(rec["server_pgid"]), "the next command left the orphan running"
    if watchdog_dies_too:
        assert "left by a dead launcher" in notes
    (status, error), servers = rows(engine)
    assert status == "partial" and error is not None and "interrupted" in error and "--resume-run" in error
    assert servers and all(t is not None for _, t, _ in servers), servers  # every row closed
    assert any(s == "reaped" and "its launcher" in (e or "") for s, _, e in servers), servers
    assert "marked partial" in notes and "closed as reaped" in notes
    # A second command finds nothing left to do.
    assert "marked partial" not in next_command(db_url, records)
    engine.dispose()


def test_sigterm_is_recorded_as_a_termination(
    db_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    engine = open_database(db_url)
    records = tmp_path / "records"
    run = start_run(db_url, tmp_path, records)
    procs.append(run)
    wait_for(lambda: samples(engine) >= 1, 120, "a stored repeat", poll=0.1)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=120) == ExitCode.ERROR, (tmp_path / "run.log").read_text(errors="replace")[-3000:]
    (status, error), servers = rows(engine)
    assert status == "partial" and error is not None
    assert error.startswith("terminated (SIGTERM)") and "Ctrl-C" not in error
    assert servers and all(s == "stopped" and t is not None for s, t, _ in servers)  # stopped cleanly
    engine.dispose()
