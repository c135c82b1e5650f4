"""A launched server's environment is built explicitly: a job cannot run code on the worker's host or read
its database URL (issue 10 §1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.server import env as env_mod
from bench.server.env import ServerEnvError, build_server_env, sweep_name_problem
from bench.server.launcher import launch
from bench.sweep import ServerConfig, ServerSpec, SimSettings, SweepError, expand, parse_sweep

SWEEP = """
name: t
model: sim-tiny
server:
  backend: sim
  env: {ENV}
grid: {batch_sizes: [1], spec_modes: [v1], steps: [3]}
workload: {input_len: 8, output_len: 4}
repeats: 1
"""


def with_env(env: str) -> str:
    return SWEEP.replace("{ENV}", env)


@pytest.mark.parametrize(
    "env",
    [
        # The exploits of issue 10: each made the worker run a shell command as its own user.
        "{BROWSER: 'sh -c id', PYTHONWARNINGS: 'ignore::antigravity.x'}",
        "{LD_PRELOAD: /tmp/evil.so}",
        "{PYTHONPATH: /tmp/evil}",
        "{PYTHONSTARTUP: /tmp/x.py}",
        "{DATABASE_URL: 'sqlite:///x'}",
        "{SPECBENCH_SIM_FAULT: crash_after=0}",
        # Once allowed by a prefix family: names that load or run a file of the job's choosing.
        "{TRITON_PTXAS_PATH: /bin/sh}",
        "{NCCL_NET_PLUGIN: /tmp/x.so}",
        "{CUDA_HOME: /tmp}",
        "{TORCH_EXTENSIONS_DIR: /tmp}",
        # Issue 30 §3: inside the old families, names that import a package or feed the JIT compiler.
        "{SGLANG_EXTERNAL_MODEL_PACKAGE: evil, SGLANG_PLUGINS: evil}",
        "{TRITON_CACHE_MANAGER: 'evil:Cls', TRITON_REMOTE_CACHE_BACKEND: 'evil:Cls'}",
        "{FLASHINFER_EXTRA_CFLAGS: '-fplugin=/tmp/x.so', FLASHINFER_EXTRA_LDFLAGS: '-L/tmp'}",
        # Specbench's own switch: the grid says v1 or v2.
        "{SGLANG_ENABLE_SPEC_V2: 'false'}",
        # The host's toolchain passes from the host only: a job naming the compiler would run its program.
        "{CXX: /tmp/evil, CC: /tmp/evil, CUDAHOSTCXX: /tmp/evil, MAX_JOBS: 1}",
    ],
)
def test_disallowed_env_names_are_refused_with_the_reason(env: str) -> None:
    with pytest.raises(SweepError) as e:
        parse_sweep(with_env(env))
    assert all(p.startswith("server.env") for p in e.value.problems), e.value.problems
    names = [n.split(":")[0].strip("{ ") for n in env.strip("{}").split(", ")]
    for name in names:
        assert any(name in p for p in e.value.problems), (name, e.value.problems)


def test_browser_exploit_reports_every_name_at_once() -> None:
    with pytest.raises(SweepError) as e:
        parse_sweep(with_env("{BROWSER: x, PYTHONWARNINGS: y, LD_PRELOAD: z, PYTHONPATH: w}"))
    assert len(e.value.problems) == 4
    assert "load or run code the job chose" in e.value.problems[0]


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("null", "null is not a value"),
        ("~", "null is not a value"),
        ("[1, 2]", "must be a string, number or boolean"),
        ("{a: 1}", "must be a string, number or boolean"),
        ('"a\\nb"', "control character"),
        ('"a\\u0000b"', "control character"),
        ("'" + "x" * 5000 + "'", "longer than 4096"),
        (".inf", "not a finite number"),
    ],
)
def test_env_values_are_scalars_printable_and_bounded(value: str, needle: str) -> None:
    with pytest.raises(SweepError) as e:
        parse_sweep(with_env("{SGLANG_LOG_MS: " + value + "}"))
    assert any(p.startswith("server.env.SGLANG_LOG_MS") and needle in p for p in e.value.problems), (
        e.value.problems
    )


def test_allowed_env_passes_and_scalars_become_strings() -> None:
    spec = parse_sweep(
        with_env(
            "{SGLANG_SIMULATE_ACC_LEN: 2.5, NCCL_ALGO: Tree, SGLANG_RECORD_STEP_TIME: true, "
            "SGLANG_SCHEDULER_MAX_RECV_PER_POLL: 8}"
        )
    )
    assert spec.server.env == {
        "SGLANG_SIMULATE_ACC_LEN": "2.5",
        "NCCL_ALGO": "Tree",
        "SGLANG_RECORD_STEP_TIME": "1",
        "SGLANG_SCHEDULER_MAX_RECV_PER_POLL": "8",
    }


def test_name_rules() -> None:
    assert sweep_name_problem("SGLANG_ENABLE_JIT_DEEPGEMM") is None
    assert sweep_name_problem("PYTORCH_CUDA_ALLOC_CONF") is None
    assert sweep_name_problem("SGLANG_TORCH_PROFILER_DIR")  # writes wherever the job says
    assert sweep_name_problem("lower")
    # Off the list, whatever the prefix: a tuning-sounding name is not enough.
    assert sweep_name_problem("NCCL_DEBUG")
    assert sweep_name_problem("OMP_NUM_THREADS")


def test_a_near_miss_gets_a_did_you_mean_and_anything_else_the_list() -> None:
    near = sweep_name_problem("SGLANG_SIMULATE_ACC_LENGTH")
    assert near is not None and "did you mean SGLANG_SIMULATE_ACC_LEN?" in near
    far = sweep_name_problem("NCCL_DEBUG")
    assert far is not None and "did you mean" not in far
    assert "SGLANG_SIMULATE_ACC_LEN" in far and "PYTORCH_CUDA_ALLOC_CONF" in far


def test_builder_keeps_only_the_base_and_never_the_worker_settings() -> None:
    host = {
        "PATH": "/usr/bin",
        "HOME": "/home/w",
        "LANG": "C.UTF-8",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_IB_DISABLE": "1",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "DATABASE_URL": "postgresql://u:pw@db/x",
        "SPECBENCH_DB": "postgresql://u:pw@db/x",
        "PGPASSWORD": "pw",
        "AWS_SECRET_ACCESS_KEY": "k",
        "BROWSER": "sh -c id",
        "LD_PRELOAD": "/tmp/x.so",
        "HTTPS_PROXY": "http://proxy:3128",
        "SPECBENCH_SERVER_ENV_PASS": "HTTPS_PROXY, DATABASE_URL",
        "CXX": "/opt/gcc/bin/g++",
        "CUDAHOSTCXX": "/opt/gcc/bin/g++",
        "LIBRARY_PATH": "/usr/local/cuda/lib64/stubs",
    }
    env = build_server_env(host, {"SGLANG_LOG_MS": "1"}, {"SPECBENCH_SIM_SEED": "0", "PYTHONUNBUFFERED": "1"})
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/w",
        "LANG": "C.UTF-8",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_IB_DISABLE": "1",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "HTTPS_PROXY": "http://proxy:3128",  # the operator named it; DATABASE_URL is never passed
        # The host's toolchain: without it the server's JIT builds differ from a hand-started server's.
        "CXX": "/opt/gcc/bin/g++",
        "CUDAHOSTCXX": "/opt/gcc/bin/g++",
        "LIBRARY_PATH": "/usr/local/cuda/lib64/stubs",
        "SGLANG_LOG_MS": "1",
        "SPECBENCH_SIM_SEED": "0",
        "PYTHONUNBUFFERED": "1",
    }


def test_no_secret_and_no_database_variable_reaches_a_server() -> None:
    """Issue 35 §5: a GPU-stack family (SGLANG_*, NCCL_*) may hold the database URL `--db env:NAME` names, or
    another secret; the allow-list keeps neither. The operator's own SPECBENCH_SERVER_ENV_PASS still passes
    what it names (a proxy with a password), but never the withheld variable."""
    host = {
        "SGLANG_DB_URL": "sqlite:////srv/specbench.db",  # named by --db env:, no password in it
        "SGLANG_RESULTS_DB": "postgresql://bench:pw@db/x",  # a password in a URL
        "NCCL_URL": "postgresql://db/x?sslpassword=pw",  # a secret parameter
        "SGLANG_API_KEY": "k",
        "TORCH_AUTH_TOKEN": "t",
        "CUDA_SECRET": "s",
        "HF_TOKEN": "hf_x",
        "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION": "4096",  # TOKENS is not TOKEN: tuning, kept
        "NCCL_SOCKET_IFNAME": "eth0",
        "HTTPS_PROXY": "http://user:pw@proxy:3128",
        "SPECBENCH_SERVER_ENV_PASS": "HTTPS_PROXY,SGLANG_DB_URL",
    }
    env_mod.withhold("SGLANG_DB_URL")
    env = build_server_env(host, {}, {})
    assert env == {
        "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION": "4096",
        "NCCL_SOCKET_IFNAME": "eth0",
        "HTTPS_PROXY": "http://user:pw@proxy:3128",
    }
    # HF_TOKEN goes with the host's --allow-hub-downloads, and only then.
    assert build_server_env(host, {}, {}, hub_downloads=True)["HF_TOKEN"] == "hf_x"
    with pytest.raises(ServerEnvError, match="SGLANG_DB_URL"):  # fail closed, whoever adds it
        build_server_env({}, {}, {"SGLANG_DB_URL": "x"})


def test_hub_switches_are_the_hosts() -> None:
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        problem = sweep_name_problem(name)
        assert problem is not None and "--allow-hub-downloads" in problem, problem


def test_builder_refuses_a_bad_sweep_env_that_skipped_validation() -> None:
    with pytest.raises(ServerEnvError, match="LD_PRELOAD"):
        build_server_env({}, {"LD_PRELOAD": "/tmp/x.so"}, {})


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def test_launched_server_does_not_see_the_database_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://specbench:s3cret@db.example/specbench")
    monkeypatch.setenv("SPECBENCH_DB", "postgresql://specbench:s3cret@db.example/specbench")
    monkeypatch.setenv("BROWSER", "sh -c 'touch /tmp/pwned'")
    monkeypatch.setenv("PYTHONWARNINGS", "ignore")
    spec = ServerSpec(
        backend="sim",
        sim=SimSettings(startup_s=0.02, instant=True),
        startup_timeout_s=20,
        env={"SGLANG_RECORD_STEP_TIME": "1"},
    )
    config: ServerConfig = expand(
        parse_sweep(
            with_env("{SGLANG_RECORD_STEP_TIME: '1'}").replace(
                "backend: sim", "backend: sim\n  sim: {startup_s: 0.02, instant: true}"
            )
        )
    )[1].server
    with launch(spec, config, log_dir=tmp_path) as server:
        assert server.pid is not None
        env = _environ(server.pid)
    assert "s3cret" not in "".join(env.values())
    assert not {"DATABASE_URL", "SPECBENCH_DB", "BROWSER", "PYTHONWARNINGS"} & set(env)
    assert env["SGLANG_RECORD_STEP_TIME"] == "1"
    assert env["SPECBENCH_SIM_INSTANT"] == "1"
    assert env["PATH"]


def test_the_version_probe_gets_the_servers_environment_not_the_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30 §1: the probe `python -c "import importlib.metadata..."` ran with the worker's whole
    environment, DATABASE_URL and its password included."""
    from bench.server.launcher import detect_sglang_version

    seen = tmp_path / "probe.env"
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.write_text(f"#!/bin/sh\nenv > '{seen}'\necho 0.5.13.post1\n")
    python.chmod(0o755)
    monkeypatch.setenv("DATABASE_URL", "postgresql://specbench:s3cret@db.example/specbench?password=s3cret")
    monkeypatch.setenv("PGPASSWORD", "s3cret")
    monkeypatch.setenv("SPECBENCH_DB", "x")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    assert detect_sglang_version(str(python)) == "0.5.13.post1"
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert "s3cret" not in seen.read_text()
    assert not {"DATABASE_URL", "PGPASSWORD", "SPECBENCH_DB", "LD_PRELOAD"} & set(env)
    assert env.get("PATH")
