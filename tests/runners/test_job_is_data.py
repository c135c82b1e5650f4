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

import http.server
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select

from db.migrate import open_database
from db.models import Job, Point, Run, Sample, ServerInstance
from runners import queue
from runners.gpus import Gpu
from tests.fixtures.sim import DEFAULT_MODEL
from tests.queue_support import REPO, SMALL_CHECK, cli_argv, cli_env, run_cli

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


@pytest.fixture
def marker_script(tmp_path: Path) -> tuple[Path, Path]:
    """An executable named python3 in a "checkpoint" folder: it writes its arguments and environment to a
    marker file (read them back with `runs_of`) and says it is SGLang 0.5.13.post1."""
    marker = tmp_path / "ran.env"
    script = tmp_path / "checkpoints" / "v3" / "python3"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!/bin/sh\n{{ echo \"ARGV: $*\"; env; }} >> '{marker}'\necho 0.5.13.post1\nexit 0\n")
    script.chmod(0o755)
    return script, marker


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


class _Counting(http.server.ThreadingHTTPServer):
    connections = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        type(self).connections += 1
        super().process_request(request, client_address)


@pytest.fixture
def hostile() -> Iterator[tuple[str, type[_Counting]]]:
    """A loopback service that is not SGLang: every GET gets a 403 with a secret in its body."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(403)
            self.send_header("Content-Length", str(len(SECRET_BODY)))
            self.end_headers()
            self.wfile.write(SECRET_BODY)

        def log_message(self, *args: Any) -> None:
            pass

    server_cls = type("Counting", (_Counting,), {"connections": 0})
    server = server_cls(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", server_cls
    server.shutdown()
    server.server_close()


def test_an_external_server_off_the_list_gets_no_request(
    db_url: str, tmp_path: Path, hostile: tuple[str, type[_Counting]]
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
    db_url: str, tmp_path: Path, hostile: tuple[str, type[_Counting]]
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


# ---- part 2: the seven holes of issue 35, each as the audit wrote the attack -------------------------------


def runs_of(marker: Path) -> list[tuple[str, dict[str, str]]]:
    """What the marker interpreter recorded: (its arguments, its environment) per run, in order."""
    out: list[tuple[str, dict[str, str]]] = []
    for line in marker.read_text().splitlines() if marker.exists() else []:
        if line.startswith("ARGV: "):
            out.append((line.removeprefix("ARGV: "), {}))
        elif out and "=" in line:
            name, _, value = line.partition("=")
            out[-1][1][name] = value
    return out


def launches(marker: Path) -> list[tuple[str, dict[str, str]]]:
    """The marker interpreter's runs as a server (not as the version probe)."""
    return [(argv, env) for argv, env in runs_of(marker) if "sglang.launch_server" in argv]


def hub_sweep(
    name: str, *, python: str | None = None, model: str = "attacker/evil-model", **server: str
) -> str:
    fields = [
        "backend: sglang",
        *([f"python: {python}"] if python else []),
        *(f"{k}: {v}" for k, v in server.items()),
    ]
    return (
        f"name: {name}\nmodel: {model}\nserver: {{{', '.join(fields)}}}\n"
        "grid: {batch_sizes: [1], spec_modes: [], baseline: true}\nrepeats: 1\n"
    )


def test_hole1_remote_code_through_a_hub_model_is_the_hosts_decision(
    db_url: str, tmp_path: Path, marker_script: tuple[Path, Path]
) -> None:
    """`trust-remote-code` and `HF_HUB_OFFLINE: "0"` in a job: refused at submit and at claim. Code loading
    and hub downloads are the worker's options, off by default, whatever the worker's environment says."""
    script, marker = marker_script
    engine = open_database(db_url)
    evil = {"args": "{trust-remote-code: true}", "env": '{HF_HUB_OFFLINE: "0"}'}
    sweep = tmp_path / "evil.yaml"
    sweep.write_text(hub_sweep("evil", **evil))
    done = run_cli("submit", str(sweep), "--db", db_url)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "trust-remote-code" in out and "HF_HUB_OFFLINE" in out and "Traceback" not in out

    # Stored past `submit`: the worker refuses it before anything runs.
    refused = store_job(engine, hub_sweep("evil", python="sg", **evil), {"python": "sg"})
    worker_once(db_url, tmp_path, "--python", f"sg={script}", env={"HF_HUB_OFFLINE": "1"})
    row = job(engine, refused)
    assert row["status"] == "failed" and "trust-remote-code" in row["last_error"]
    assert launches(marker) == []

    # A clean job on a worker whose environment says "online": still offline, no remote code.
    store_job(engine, hub_sweep("clean", python="sg"), {"python": "sg"})
    online = {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0"}
    worker_once(db_url, tmp_path, "--python", f"sg={script}", env=online)
    [(argv, env)] = launches(marker)
    assert "--model-path attacker/evil-model" in argv and "--trust-remote-code" not in argv
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"

    # The operator opts in: then, and only then, the flag is passed and the host's own setting stands.
    store_job(engine, hub_sweep("trusted", python="sg"), {"python": "sg"})
    worker_once(
        db_url,
        tmp_path,
        "--python",
        f"sg={script}",
        "--trust-remote-code",
        "--allow-hub-downloads",
        env=online,
    )
    argv, env = launches(marker)[-1]
    assert "--trust-remote-code" in argv and env["HF_HUB_OFFLINE"] == "0"
    engine.dispose()


@pytest.mark.parametrize("value", ["['{outside}']", "7", "{{path: '{outside}'}}"])
def test_hole2_a_path_flag_is_checked_whatever_its_yaml_type(
    db_url: str, tmp_path: Path, marker_script: tuple[Path, Path], value: str
) -> None:
    script, marker = marker_script
    (tmp_path / "models").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    args = f"{{tokenizer-path: {value.format(outside=outside)}}}"
    sweep = tmp_path / "tok.yaml"
    sweep.write_text(hub_sweep("tok", model="org/model", args=args))
    done = run_cli("submit", str(sweep), "--db", db_url)
    assert done.returncode == 2 and "tokenizer-path" in done.stderr, done.stdout + done.stderr
    engine = open_database(db_url)
    job_id = store_job(engine, hub_sweep("tok", python="sg", model="org/model", args=args), {"python": "sg"})
    worker_once(db_url, tmp_path, "--python", f"sg={script}", "--models-dir", str(tmp_path / "models"))
    row = job(engine, job_id)
    assert row["status"] == "failed" and "tokenizer-path" in row["last_error"], row["last_error"]
    assert launches(marker) == []  # no server started with the outside path
    engine.dispose()


def test_hole3_the_stand_ins_gpu_ledger_path_never_comes_from_the_job(db_url: str, tmp_path: Path) -> None:
    notes = tmp_path / "srv" / "data" / "notes"
    notes.parent.mkdir(parents=True)
    notes.with_suffix(".json").write_text("precious")
    # Enough `..` to reach / from any log directory, then the target: the audit's value, made absolute.
    devices = "../" * 40 + str(notes).lstrip("/")
    sweep = (
        "name: ledger\nmodel: sim-tiny\n"
        "server: {backend: sim, sim: {instant: true, startup_s: 0, shared_gpu: true}, "
        f"env: {{CUDA_VISIBLE_DEVICES: '{devices}'}}}}\n"
        "grid: {batch_sizes: [1], spec_modes: [], baseline: true}\n"
        "workload: {dataset: random, input_len: 8, output_len: 4, num_prompts: 2}\nrepeats: 1\n"
        f"measure: {{correctness: {SMALL_CHECK}}}\n"
    )
    engine = open_database(db_url)
    job_id = store_job(engine, sweep)
    log = worker_once(db_url, tmp_path)  # no --gpus
    assert job(engine, job_id)["status"] == "done", log
    assert notes.with_suffix(".json").read_text() == "precious"
    assert not notes.with_suffix(".lock").exists()
    assert list((tmp_path / "logs").rglob("sim-gpu-*.json")), "the run's servers shared no ledger"
    engine.dispose()


class _Redirecting(http.server.ThreadingHTTPServer):
    """An allowed external address that forwards SGLang's endpoints to `upstream` and answers `redirected`
    paths with 307 to `target`."""

    upstream = ""
    target = ""
    redirected: tuple[str, ...] = ()


@pytest.fixture
def redirecting() -> Iterator[Any]:
    class Handler(http.server.BaseHTTPRequestHandler):
        server: _Redirecting

        def _answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            if any(path == p or p == "*" for p in self.server.redirected):
                self.send_response(307)
                self.send_header("Location", self.server.target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            request = urllib.request.Request(
                self.server.upstream + self.path, data=body or None, method=self.command
            )
            request.add_header("Content-Type", self.headers.get("Content-Type") or "application/json")
            try:
                with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                    request, timeout=30
                ) as r:
                    status, reply = r.status, r.read()
            except urllib.error.HTTPError as e:
                status, reply = e.code, e.read()
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    servers: list[_Redirecting] = []

    def start(upstream: str, target: str, redirected: tuple[str, ...]) -> str:
        server = type(
            "R", (_Redirecting,), {"upstream": upstream, "target": target, "redirected": redirected}
        )(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("redirected", [("*",), ("/generate",)], ids=["everything", "generate"])
def test_hole4_no_redirect_is_followed_for_a_jobs_server(
    db_url: str,
    tmp_path: Path,
    sim_server: Any,
    redirecting: Any,
    hostile: tuple[str, type[_Counting]],
    redirected: tuple[str, ...],
) -> None:
    """An allowed external server answers 307 to another port: neither the version probe (urllib) nor the
    client (aiohttp) follows it, so the other port gets no request (no prompt ids) and nothing it says is
    stored."""
    other, counter = hostile
    sim = sim_server.start(env={"SPECBENCH_SIM_INSTANT": "1"})
    allowed = redirecting(sim.base_url, other, redirected)
    engine = open_database(db_url)
    sweep = external_sweep("redirect", f"http://{allowed}").replace(
        "model: sim-tiny", f"model: {DEFAULT_MODEL}"
    )
    job_id = store_job(
        engine, sweep.replace("drift_check: false", f"drift_check: false, correctness: {SMALL_CHECK}")
    )
    log = worker_once(db_url, tmp_path, "--allow-external", allowed)
    assert counter.connections == 0, "a redirect was followed"
    row = job(engine, job_id)
    assert row["status"] == "failed", log
    with engine.connect() as conn:
        stored = repr(conn.execute(select(ServerInstance.error, ServerInstance.resolved)).all())
        stored += repr(conn.execute(select(Run.error)).all())
        stored += repr(conn.execute(select(Point.reason)).all()) + repr(
            conn.execute(select(Sample.reason)).all()
        )
    assert "307" in stored + (row["last_error"] or "")
    assert "db_backup_key" not in stored + log
    engine.dispose()


def test_hole5_the_db_env_variable_never_reaches_a_server(
    db_url: str, tmp_path: Path, marker_script: tuple[Path, Path]
) -> None:
    """`worker --db env:SGLANG_DB_URL` (a name in a family servers inherit): neither the version probe nor the
    launched server gets that variable, or the URL under any other secret-looking name."""
    script, marker = marker_script
    engine = open_database(db_url)
    store_job(engine, sglang_sweep("db", "sg"), {"python": "sg"})
    secret_url = "postgresql://bench:pw-s3cret@db.invalid/bench"
    worker_once(
        None,
        tmp_path,
        "--db",
        "env:SGLANG_DB_URL",
        "--python",
        f"sg={script}",
        env={"SGLANG_DB_URL": db_url, "SGLANG_RESULTS_DB": secret_url, "NCCL_TOKEN": "tok-s3cret"},
    )
    seen = runs_of(marker)
    assert len(seen) >= 2, "the probe and the launch should both have run"  # version probe, then the server
    for _, env in seen:
        assert "SGLANG_DB_URL" not in env and db_url not in env.values()
        assert "pw-s3cret" not in repr(env) and "tok-s3cret" not in repr(env)
    engine.dispose()


def test_hole7_a_dry_run_runs_no_interpreter(tmp_path: Path, marker_script: tuple[Path, Path]) -> None:
    script, marker = marker_script
    sweep = tmp_path / "dry.yaml"
    sweep.write_text(sglang_sweep("dry", str(script)))
    done = run_cli("run", str(sweep), "--dry-run", "--db", f"sqlite:///{tmp_path}/dry.db")
    # Its model and a GPU are not here: it says so and exits 2 (as the run would), having run nothing.
    assert done.returncode == 2 and "would this run here? no" in done.stdout, done.stdout + done.stderr
    assert "argv:" in done.stdout and str(script) in done.stdout
    assert not marker.exists(), "the dry run ran the sweep's interpreter"


def test_a_workers_job_with_a_hostile_workload_line_fails_before_any_server_starts(
    db_url: str, tmp_path: Path
) -> None:
    """`output_len: 10**12` in a workload line reset the stand-in's connection and, on PostgreSQL, ended the run in
    a traceback carrying the failed insert; the worker now refuses the job before a server starts."""
    data = tmp_path / "data"
    data.mkdir()
    prompts = data / "prompts.jsonl"
    prompts.write_text('{"input_ids": [5, 6], "output_len": 1000000000000}\n')
    engine = open_database(db_url)
    job_id = store_job(engine, jsonl_sweep("huge", str(prompts)))
    log = worker_once(db_url, tmp_path, "--data-dir", str(data))
    row = job(engine, job_id)
    assert row["status"] == "failed" and '"output_len" must be a whole number' in row["last_error"], log
    assert "nothing was run" in row["last_error"] and "Traceback" not in log
    assert not list((tmp_path / "logs").rglob("server-*.log"))
    with engine.connect() as conn:
        assert conn.execute(select(Run.id)).first() is None
    engine.dispose()


def test_a_password_in_an_external_base_url_is_refused_and_stored_nowhere(
    db_url: str, tmp_path: Path
) -> None:
    """Issue 35 "Also": `http://admin:pw@host` was accepted, echoed and stored with the job, its errors and point
    reasons. `submit` refuses it without echoing; a job stored past `submit` fails at claim, and its error does
    not hold the password either."""
    sweep = tmp_path / "ext.yaml"
    sweep.write_text(external_sweep("ext", "http://admin:pw-s3cret@127.0.0.1:9"))
    done = run_cli("submit", str(sweep), "--db", db_url)
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "user name or password" in out and "pw-s3cret" not in out, out
    engine = open_database(db_url)
    with engine.connect() as conn:
        assert conn.execute(select(Job.id)).first() is None
    job_id = store_job(engine, sweep.read_text())
    log = worker_once(db_url, tmp_path, "--allow-external", "127.0.0.1:9")
    row = job(engine, job_id)
    assert row["status"] == "failed" and "user name or password" in row["last_error"], log
    assert "pw-s3cret" not in row["last_error"] + log
    with engine.connect() as conn:
        assert conn.execute(select(Run.id)).first() is None
    engine.dispose()
