"""A job is data, never code (issue 30 §1-2), shown with the real CLI and real worker processes on SQLite and
PostgreSQL:

  * `server.python` naming an executable script is refused by `specbench submit` and again by the worker that
    claims a job stored without that check; the script never runs (it would write a marker file);
  * an interpreter the operator names does run, with the server's scrubbed environment (no DATABASE_URL);
  * `backend: external` to an address not on the worker's --allow-external list: no connection is made (a
    loopback listener counts them); a hostile non-SGLang reply is stored nowhere verbatim;
  * a workload or model path outside the worker's directories is refused before anything runs, with the same
    message whether the file exists or not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from db.migrate import open_database
from db.models import Job, Run, ServerInstance
from runners import queue
from runners.gpus import Gpu
from tests.fixtures.cli import run_cli  # `submit` in this process: the worker is the process
from tests.job_is_data_support import (
    Counting,
    external_sweep,
    job,
    jsonl_sweep,
    sglang_sweep,
    store_job,
    worker_once,
)

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first

# ---- 1. interpreters come from the host ------------------------------------------------------------------


def test_a_script_as_server_python_is_refused_at_submit_and_at_claim(
    db_url: str, tmp_path: Path, marker_script: tuple[Path, Path]
) -> None:
    script, marker = marker_script
    sweep = tmp_path / "evil.yaml"
    sweep.write_text(sglang_sweep("evil", str(script)))
    engine = open_database(db_url)

    done = run_cli("submit", str(sweep), "--db", db_url)
    assert done.returncode == 2, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "server.python" in out and "is a path" in out and "Traceback" not in out
    with engine.connect() as conn:
        assert conn.execute(select(Job.id)).first() is None

    # The same sweep stored past `submit` (an older version, or a hand-made row): the worker refuses it.
    job_id = store_job(engine, sweep.read_text())
    log = worker_once(db_url, tmp_path)
    row = job(engine, job_id)
    assert row["status"] == "failed", log
    assert "is a path" in row["last_error"] and "nothing ran" in row["last_error"]
    assert not marker.exists(), "the script ran"
    with engine.connect() as conn:
        assert conn.execute(select(Run.id)).first() is None  # not even a run row
    engine.dispose()


def test_an_interpreter_name_must_be_one_a_worker_offers(db_url: str, tmp_path: Path) -> None:
    engine = open_database(db_url)
    sweep = tmp_path / "named.yaml"
    sweep.write_text(sglang_sweep("named", "sglang-0512"))
    done = run_cli("submit", str(sweep), "--db", db_url)
    assert done.returncode == 2 and "not an interpreter any worker of this database offers" in done.stderr
    # Once a worker offers the name, the job is accepted, and only such a worker claims it.
    queue.register_worker(
        engine, "w-gpu", pid=1, gpus=[Gpu(0, "H100")], labels=[], offers={"python": ["sglang-0512"]}
    )
    done = run_cli("submit", str(sweep), "--db", db_url)
    assert done.returncode == 0, done.stderr
    submitted = int(done.stdout.split()[1])
    assert job(engine, submitted)["requires"]["python"] == "sglang-0512"
    # A stored job with no such requirement is claimed by a worker that lacks the name, and refused.
    old = store_job(engine, sweep.read_text())
    worker_once(db_url, tmp_path)
    assert job(engine, submitted)["status"] == "queued"  # not this worker's: it offers no interpreter
    row = job(engine, old)
    assert row["status"] == "failed" and "not an interpreter this worker offers" in row["last_error"]
    engine.dispose()


def test_an_operators_interpreter_runs_with_the_servers_environment(
    db_url: str, tmp_path: Path, marker_script: tuple[Path, Path]
) -> None:
    """The operator names the interpreter, so it may run; its version probe and its launch see the server's
    scrubbed environment, never the worker's DATABASE_URL or PG* password."""
    script, marker = marker_script
    engine = open_database(db_url)
    job_id = store_job(engine, sglang_sweep("ops", "sg"), {"python": "sg"})
    worker_once(db_url, tmp_path, "--python", f"sg={script}", env={"PGPASSWORD": "pg-s3cret"})
    assert marker.exists(), "the operator's interpreter did not run"
    seen = marker.read_text()
    assert "DATABASE_URL" not in seen and "pg-s3cret" not in seen and "PGPASSWORD" not in seen
    assert job(engine, job_id)["status"] == "failed"  # it is not SGLang: the launch fails, cleanly
    engine.dispose()


# ---- 2. external servers are opt-in ----------------------------------------------------------------------


def test_an_external_server_off_the_list_gets_no_request(
    db_url: str, tmp_path: Path, hostile: tuple[str, type[Counting]]
) -> None:
    base_url, counter = hostile
    engine = open_database(db_url)
    submitted = queue.submit(engine, external_sweep("ext", base_url))
    assert job(engine, submitted)["requires"]["external"] == base_url.removeprefix("http://")
    old = store_job(engine, external_sweep("ext-old", base_url))  # no requirement: any worker claims it
    log = worker_once(db_url, tmp_path)  # no --allow-external at all
    log += worker_once(db_url, tmp_path, "--allow-external", "127.0.0.1:1")  # another address
    assert counter.connections == 0, "a request left the worker"
    assert job(engine, submitted)["status"] == "queued"  # no worker allowed to measure it claimed it
    row = job(engine, old)
    assert row["status"] == "failed" and "--allow-external" in row["last_error"]
    assert "nothing was sent" in row["last_error"]
    engine.dispose()


def test_a_hostile_reply_is_never_stored_verbatim(
    db_url: str, tmp_path: Path, hostile: tuple[str, type[Counting]]
) -> None:
    base_url, counter = hostile
    engine = open_database(db_url)
    job_id = queue.submit(engine, external_sweep("ext", base_url), max_attempts=1)
    log = worker_once(db_url, tmp_path, "--allow-external", base_url.removeprefix("http://"))
    assert counter.connections >= 1  # allowed: it was asked
    assert job(engine, job_id)["status"] == "failed"
    with engine.connect() as conn:
        errors = conn.execute(select(ServerInstance.error, ServerInstance.log_tail)).all()
        runs = conn.execute(select(Run.error, Run.provenance)).all()
    assert errors and all("HTTP 403" in (e or "") for e, _ in errors)
    everything = repr([dict(job(engine, job_id)), errors, runs]) + log
    for logfile in (tmp_path / "logs").rglob("*"):
        if logfile.is_file():
            everything += logfile.read_text(errors="replace")
    assert "db_backup_key" not in everything and "INTERNAL-ONLY" not in everything
    engine.dispose()


# ---- 1. files under the worker's directories -------------------------------------------------------------


def test_a_workload_outside_the_data_dirs_is_refused_the_same_whether_it_exists_or_not(
    db_url: str, tmp_path: Path
) -> None:
    data, outside = tmp_path / "data", tmp_path / "private"
    data.mkdir()
    outside.mkdir()
    secret = outside / "prompts.jsonl"
    secret.write_text('{"prompt": "the backup key is 1234"}\n' * 7)
    secret.chmod(0o600)
    engine = open_database(db_url)
    sweep = jsonl_sweep("private", str(secret))
    first = store_job(engine, sweep)
    worker_once(db_url, tmp_path, "--data-dir", str(data))
    secret.unlink()
    second = store_job(engine, sweep)
    worker_once(db_url, tmp_path, "--data-dir", str(data))
    a, b = job(engine, first)["last_error"], job(engine, second)["last_error"]
    # Only the worker id (host:pid:random) differs between the two refusals.
    assert a.split(", nothing ran: ", 1)[1] == b.split(", nothing ran: ", 1)[1]
    assert "--data-dir" in a and "7" not in a.split(", nothing ran: ", 1)[1].replace(str(tmp_path), "")
    with engine.connect() as conn:
        assert conn.execute(select(Run.id)).first() is None
    # Inside the directory the same sweep runs.
    inside = data / "prompts.jsonl"
    inside.write_text('{"input_ids": [5, 6, 7]}\n')
    ok = store_job(engine, jsonl_sweep("inside", str(inside)))
    worker_once(db_url, tmp_path, "--data-dir", str(data))
    assert job(engine, ok)["status"] == "done"
    engine.dispose()


@pytest.mark.parametrize("model", ["/etc", "{tmp}/models/../elsewhere", "../../secret-model"])
def test_a_model_outside_the_models_dirs_is_refused(db_url: str, tmp_path: Path, model: str) -> None:
    (tmp_path / "models").mkdir()
    engine = open_database(db_url)
    sweep = jsonl_sweep("m", "/dev/null").replace("model: sim-tiny", f"model: '{model.format(tmp=tmp_path)}'")
    sweep = sweep.replace("workload: {dataset: jsonl, path: '/dev/null', ", "workload: {")
    job_id = store_job(engine, sweep)
    worker_once(db_url, tmp_path, "--models-dir", str(tmp_path / "models"))
    row = job(engine, job_id)
    assert row["status"] == "failed" and "--models-dir" in row["last_error"]
    engine.dispose()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--python", "sg"], "expected NAME=PATH"),
        (["--python", "sg=python3"], "not an executable file"),
        (["--python", "../sg=/usr/bin/python3"], "the name is a word"),
        (["--models-dir", "/no/such/dir"], "not a directory"),
        (["--allow-external", "gpu-box"], "expected HOST:PORT"),
    ],
)
def test_a_workers_own_bad_settings_fail_in_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    from typer.testing import CliRunner

    from runners.cli import app

    result = CliRunner().invoke(app, ["worker", "--once", "--db", f"sqlite:///{tmp_path}/w.db", *args])
    assert result.exit_code == 2 and needle in result.output and "Traceback" not in result.output
    assert not (tmp_path / "w.db").exists()  # refused before the database is opened
