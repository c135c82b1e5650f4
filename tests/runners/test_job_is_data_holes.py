"""A job is data, part 2 (issue 35): the seven holes an outside audit found, each as the audit wrote the attack,
with the real CLI and real worker processes on SQLite and PostgreSQL. Apart from part 1
(test_job_is_data.py) so that parallel test workers take the two halves at once."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from db.migrate import open_database
from db.models import Job, Point, Run, Sample, ServerInstance
from tests.fixtures.cli import run_cli  # `submit` and a dry run in this process: the worker is the process
from tests.fixtures.sim import DEFAULT_MODEL
from tests.job_is_data_support import (
    Counting,
    external_sweep,
    job,
    jsonl_sweep,
    sglang_sweep,
    store_job,
    worker_once,
)
from tests.queue_support import SMALL_CHECK

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first

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
    hostile: tuple[str, type[Counting]],
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


def test_hole7_a_dry_run_runs_no_interpreter(
    db_url: str, tmp_path: Path, marker_script: tuple[Path, Path]
) -> None:
    script, marker = marker_script
    sweep = tmp_path / "dry.yaml"
    sweep.write_text(sglang_sweep("dry", str(script)))
    done = run_cli("run", str(sweep), "--dry-run", "--db", db_url)
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
