"""docker-compose.yml and the Dockerfile: their structure, and the exact commands the services run.

No Docker engine runs here. When the `docker compose` client is installed, it checks the file itself
(`docker compose config` needs no engine); otherwise the structure is checked below. Either way, each
service's command runs for real against PostgreSQL, reading DATABASE_URL as the containers do.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select, update

from bench.host.processes import free_port
from db.migrate import open_database
from db.models import Job, Schedule
from runners import queue, schedules
from tests.fixtures.cli import run_cli
from tests.queue_support import REPO, cli_env, sim_sweep

COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
APP_SERVICES = ("migrate", "dashboard", "scheduler", "worker", "worker-sim")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())  # the x-specbench anchor is merged by YAML itself
    assert isinstance(data, dict)
    return data


def service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    svc = compose["services"][name]
    assert isinstance(svc, dict)
    return svc


def _has_compose_client() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _has_compose_client(), reason="the docker compose plugin is not installed")
def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    env = {**cli_env(), "POSTGRES_PASSWORD": "x"}
    for profile in ([], ["--profile", "gpu", "--profile", "worker-sim"]):
        done = subprocess.run(
            ["docker", "compose", "-f", str(COMPOSE), *profile, "config", "--quiet"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr


def test_services_and_profiles(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"postgres", *APP_SERVICES}
    assert service(compose, "worker")["profiles"] == ["gpu"]
    assert service(compose, "worker-sim")["profiles"] == ["worker-sim"]
    for name in ("postgres", "migrate", "dashboard", "scheduler"):  # `docker compose up` brings these
        assert "profiles" not in service(compose, name)
    assert service(compose, "migrate")["restart"] == "no"  # one-shot


def test_postgres_volume_healthcheck_and_secret(compose: dict[str, Any]) -> None:
    pg = service(compose, "postgres")
    assert any(v.endswith(":/var/lib/postgresql/data") for v in pg["volumes"])
    assert "pgdata" in compose["volumes"]
    check = pg["healthcheck"]["test"]
    assert check[0] == "CMD" and check[1] == "pg_isready"  # argv form: no shell
    assert pg["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert pg["ports"] == ["${SPECBENCH_DB_BIND:-127.0.0.1}:${SPECBENCH_DB_PORT:-5432}:5432"]


def test_no_secret_is_committed(compose: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        url = service(compose, name)["environment"]["DATABASE_URL"]
        assert ":${POSTGRES_PASSWORD:?" in url
    assert (REPO / ".env.example").is_file()
    assert ".env" in (REPO / ".dockerignore").read_text().split()
    tracked = subprocess.run(
        ["git", "ls-files", "--error-unmatch", ".env"], cwd=REPO, capture_output=True, check=False
    )
    assert tracked.returncode != 0, ".env must never be committed"


def test_startup_order(compose: dict[str, Any]) -> None:
    assert service(compose, "migrate")["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in ("dashboard", "scheduler", "worker", "worker-sim"):
        assert service(compose, name)["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"}
        }


def test_gpu_worker_reserves_nvidia_gpus_and_builds_the_gpu_image(compose: dict[str, Any]) -> None:
    worker = service(compose, "worker")
    (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert worker["build"]["target"] == "gpu" and worker["image"] != service(compose, "worker-sim")["image"]
    assert "deploy" not in service(compose, "worker-sim")
    assert service(compose, "worker-sim")["build"]["target"] == "app"


def test_commands_are_argv_lists(compose: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        cmd = service(compose, name)["command"]
        assert isinstance(cmd, list) and cmd[0] == "specbench", name
        assert not {"sh", "bash", "-c"} & set(cmd), name


def test_dockerfile_stages() -> None:
    text = DOCKERFILE.read_text()
    stages = dict(re.findall(r"^FROM (\S+) AS (\w+)$", text, flags=re.M))
    assert stages == {"scratch": "source", "${PYTHON_IMAGE}": "app", "${CUDA_IMAGE}": "gpu"}
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.1[12]-slim$", text, flags=re.M)
    assert re.search(r"^ARG CUDA_IMAGE=nvidia/cuda:\S+-devel-\S+$", text, flags=re.M)
    gpu_stage = text.split(" AS gpu", 1)[1]
    assert "pip install -e '.[gpu]'" in gpu_stage
    app_stage = text.split(" AS app", 1)[1].split(" AS gpu", 1)[0]
    assert re.search(r"pip install --require-hashes --no-deps .*\s+-r requirements\.lock", app_stage)
    assert "pip install --no-deps -e ." in app_stage  # the lock decides every dependency, not pip's resolver
    # Every package pyproject installs is in the images: a worker-sim without synthetic/ cannot start the stand-in.
    source_stage = text.split(" AS source", 1)[1].split("\nFROM ", 1)[0]
    copied = set(re.findall(r"^COPY (\w+) /app/\1$", source_stage, flags=re.M))
    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert {pattern.rstrip("*") for pattern in include["include"]} <= copied
    assert "requirements.lock" in source_stage
    assert "USER specbench" in gpu_stage  # nothing runs as root
    for cmd in re.findall(r"^CMD (.+)$", text, flags=re.M):
        assert cmd.startswith('["specbench"')  # exec form


def _argv(compose: dict[str, Any], name: str, *extra: str) -> list[str]:
    """A service's command as this checkout runs it: `specbench` is `python -m runners.cli`."""
    cmd = service(compose, name)["command"]
    return [*_specbench(), *cmd[1:], *extra]


def _specbench() -> list[str]:
    return [sys.executable, "-m", "runners.cli"]


def _run(argv: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.slow
def test_the_services_commands_run(compose: dict[str, Any], pg_url: str, tmp_path: Path) -> None:
    """migrate, then scheduler and worker-sim (with --once, the only change), then the dashboard."""
    env = cli_env(DATABASE_URL=pg_url)
    # migrate and `db current` start no process of their own: in-process, as `specbench` with these arguments
    migrate = service(compose, "migrate")["command"]
    assert migrate[0] == "specbench"
    assert run_cli(*migrate[1:], env={"DATABASE_URL": pg_url}).returncode == 0
    current = run_cli("db", "current", env={"DATABASE_URL": pg_url})
    assert current.returncode == 0 and "up to date" in current.stdout

    engine = open_database(pg_url)
    manual = queue.submit(engine, sim_sweep("manual"))
    sid = schedules.add_schedule(engine, "* * * * *", sim_sweep("nightly"), label="nightly")
    with engine.begin() as conn:  # the scheduler was down for an hour
        conn.execute(update(Schedule).values(last_fire_time=datetime.now(UTC) - timedelta(hours=1)))
    _run(_argv(compose, "scheduler", "--once"), env)
    log_dir = tmp_path / "logs"
    worker_argv = _argv(compose, "worker-sim", "--once", "--poll-interval", "0.05")
    worker_argv[worker_argv.index("--log-dir") + 1] = str(log_dir)  # /var/log/specbench in the container
    _run(worker_argv, env)
    with engine.connect() as conn:
        rows = conn.execute(select(Job.id, Job.schedule_id, Job.trigger, Job.status)).all()
    assert sorted(rows) == sorted([(manual, None, "manual", "done"), (rows[-1][0], sid, "schedule", "done")])
    assert any(log_dir.iterdir())

    # The dashboard: serve, answer its health check, stop. Only the port differs from the container's.
    port = free_port()
    dash = _argv(compose, "dashboard")
    dash[dash.index("--port") + 1] = str(port)
    dash[dash.index("--address") + 1] = "127.0.0.1"
    proc = subprocess.Popen(dash, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180  # a hang detector: imports and the warm-up gate on a loaded host
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    assert r.read() == b"ok"
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "dashboard did not come up"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    engine.dispose()
