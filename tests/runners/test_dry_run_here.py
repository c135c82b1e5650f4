"""`run --dry-run` answers "would this run here?" (issue 37): GPUs against the sweep's tp (nvidia-smi or the
driver's /proc files), SGLang read from the servers' interpreter's files, the model's config.json, the disk
where logs and the database go; it exits 2, every reason listed, where the real run exits 2; and its estimate
uses what this host measured before, saying which runs it read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.host.gpus import PROC_GPUS, Gpu, proc_gpus
from bench.sweep import load_sweep
from db.migrate import open_database_readonly
from runners import host_history
from runners.exit_codes import ExitCode
from tests.fixtures.cli import run_cli
from tests.paths import REPO_ROOT

SGLANG = """name: here
model: {model}
server: {{backend: sglang, attention_backend: flashmla, tp: {tp}, python: {python}}}
grid: {{batch_sizes: [1, 8], spec_modes: [v1, v2], steps: [3]}}
"""
SIM = """name: {name}
model: sim-tiny
server: {{backend: sim, attention_backend: flashmla, sim: {{acceptance_rate: 0.7, seed: 1, time_scale: {scale}}}}}
grid: {{batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [2], topk: [1], baseline: true}}
workload: {{input_len: 16, output_len: 24}}
repeats: 2
"""


def _said(out: str) -> str:
    return " ".join(out.split())  # the console wraps long lines


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    """A host as the dry run reads it: an interpreter whose tree holds SGLang 0.5.13.post1 (package metadata;
    the script fails if run, and is never run), a model folder with its config.json, and an `nvidia-smi` on
    PATH that lists two H100s, as the driver's tool prints them."""
    root = tmp_path / "env"
    dist = root / "lib" / "python3.11" / "site-packages" / "sglang-0.5.13.post1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.13.post1\n")
    python = root / "bin" / "python3"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\nexit 97\n")
    python.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "deepseek_v3", "vocab_size": 129280}))
    tools = tmp_path / "bin"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\nprintf '0, NVIDIA H100 80GB HBM3, 550.54.15\\n1, NVIDIA H100 80GB HBM3, 550.54.15\\n'\n"
    )
    smi.chmod(0o755)
    return {"python": python, "model": model, "tools": tools, "tmp": tmp_path}


def _dry(host: dict[str, Path], *args: str, tp: int = 2, model: Path | None = None) -> tuple[int, str]:
    sweep = host["tmp"] / "here.yaml"
    sweep.write_text(SGLANG.format(model=model or host["model"], tp=tp, python=host["python"]))
    db = f"sqlite:///{host['tmp'] / 'none.db'}"
    path = f"{host['tools']}:/usr/bin:/bin"
    out = run_cli("run", str(sweep), "--dry-run", "--db", db, *args, env={"PATH": path})
    return out.returncode, _said(out.stdout + out.stderr)


def test_a_host_that_has_everything_would_run_it(host: dict[str, Path]) -> None:
    code, said = _dry(host)
    assert code == ExitCode.OK, said
    assert "would this run here? yes" in said
    assert "ok SGLang: 0.5.13.post1, installed for the servers' interpreter (read from its files)" in said
    assert f"ok model: {host['model']}: config.json read" in said
    assert "ok GPUs: 2 x NVIDIA H100 80GB HBM3 (nvidia-smi) for tp 2" in said
    assert re.search(r"ok disk: [\d.,]+ GiB free for server logs \(logs\) and the database", said), said


def test_too_few_gpus_for_the_tp_is_no_answer(host: dict[str, Path]) -> None:
    code, said = _dry(host, tp=8)
    assert code == ExitCode.ERROR and "would this run here? no" in said
    assert "NO GPUs: 2 x NVIDIA H100 80GB HBM3 (nvidia-smi); the sweep's tp 8 needs 8" in said
    code, said = _dry(host, "--gpus", "1")
    assert code == ExitCode.ERROR
    assert (
        "1 x NVIDIA H100 80GB HBM3 of the 2 found, as --gpus picks them (nvidia-smi); the sweep's tp 2"
        in said
    )


def test_a_model_folder_without_config_json_is_no_answer(host: dict[str, Path]) -> None:
    empty = host["tmp"] / "empty-model"
    empty.mkdir()
    code, said = _dry(host, model=empty)
    assert code == ExitCode.ERROR
    assert f"NO model: {empty} holds no readable config.json: SGLang cannot load it" in said


def test_a_disk_too_small_for_the_run_is_no_answer(host: dict[str, Path]) -> None:
    """A sweep that would write more than any disk here holds (a million prompts of a million tokens)."""
    sweep = host["tmp"] / "huge.yaml"
    huge = "workload: {input_len: 16, output_len: 1000000, num_prompts: 1000000}"
    sweep.write_text(
        SIM.format(name="huge", scale=1.0).replace("workload: {input_len: 16, output_len: 24}", huge)
    )
    out = run_cli("run", str(sweep), "--dry-run", "--db", f"sqlite:///{host['tmp'] / 'x.db'}")
    said = _said(out.stdout + out.stderr)
    assert out.returncode == ExitCode.ERROR, said
    assert re.search(r"NO disk: [\d.,]+ GiB free for server logs .* the run writes about [\d.,]+ GiB", said)


def test_the_issue_sweep_exits_2_with_every_reason_as_its_real_run_does(tmp_path: Path) -> None:
    """sweeps/flashmla-spec.yaml on this host: no GPU, no SGLang for this interpreter, no /models/DeepSeek-V3.
    Its dry run said yes and exited 0; now it lists all three and exits 2, the real run's code."""
    db = f"sqlite:///{tmp_path / 'x.db'}"
    sweep = str(REPO_ROOT / "sweeps" / "flashmla-spec.yaml")
    dry = run_cli("run", sweep, "--dry-run", "--db", db, env={"PATH": "/usr/bin:/bin"})
    said = _said(dry.stdout + dry.stderr)
    assert dry.returncode == ExitCode.ERROR, said
    assert "would this run here? no" in said
    assert "NO launch: SGLang is not installed for" in said
    assert "NO launch: model '/models/DeepSeek-V3' does not exist on this host" in said
    assert (
        "NO GPUs: none found (nvidia-smi and /proc/driver/nvidia/gpus list none); the sweep's servers need 8"
        in said
    )
    real = run_cli(
        "run", sweep, "--db", db, "--log-dir", str(tmp_path / "logs"), env={"PATH": "/usr/bin:/bin"}
    )
    assert real.returncode == dry.returncode, real.stdout + real.stderr


def test_gpus_from_the_drivers_proc_files(tmp_path: Path) -> None:
    """No nvidia-smi: the driver's own files name the GPUs, in PCI order, without a process or CUDA."""
    for bus, model in (("0000:c8:00.0", "NVIDIA H200"), ("0000:18:00.0", "NVIDIA H100 80GB HBM3")):
        folder = tmp_path / bus
        folder.mkdir()
        (folder / "information").write_text(f"Model: \t\t {model}\nIRQ:   \t\t 42\nBus Location: \t {bus}\n")
    assert proc_gpus(str(tmp_path)) == [Gpu(0, "NVIDIA H100 80GB HBM3"), Gpu(1, "NVIDIA H200")]
    assert proc_gpus(str(tmp_path / "none")) == [] and PROC_GPUS == "/proc/driver/nvidia/gpus"


@pytest.mark.slow  # two stand-in sweeps on live servers
def test_the_estimate_reads_what_this_host_measured(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    first = tmp_path / "first.yaml"
    first.write_text(SIM.format(name="first", scale=0.05))
    done = run_cli("run", str(first), "--db", db, "--no-progress", "--log-dir", str(tmp_path / "logs"))
    assert done.returncode == 0, done.stdout + done.stderr
    again = _said(run_cli("run", str(first), "--dry-run", "--db", db).stdout)
    assert (
        "in this sweep's earlier run(s) #1" in again
        and "nothing measured on this host or another" not in again
    )
    assert "windows of 6/6 points: median duration measured on this host" in again
    # Another sweep of the same model at the same time scale: run #1 tells; at another scale it does not.
    other = tmp_path / "other.yaml"
    other.write_text(SIM.format(name="other", scale=0.05))
    said = _said(run_cli("run", str(other), "--dry-run", "--db", db).stdout)
    assert "in run(s) of the same model #1" in said
    other.write_text(SIM.format(name="other", scale=1.0))
    said = _said(run_cli("run", str(other), "--dry-run", "--db", db).stdout)
    assert (
        "nothing measured on this host or another tells more" in said
        and "run(s) of the same model" not in said
    )


def test_the_estimate_reads_this_hosts_runs_before_another_hosts(tmp_path: Path) -> None:
    """The shipped H100 shard run (host `vm`): on that host and GPU it is this host's; on another, or on the
    same host's other GPU, it is read only as another's and said so; for another model it tells nothing."""
    db = f"sqlite:///{tmp_path / 'plan.db'}"
    shard = REPO_ROOT / "examples" / "h100-v3shard-40l-steps3" / "shard.db"
    assert run_cli("import", str(shard), "--db", db).returncode == 0
    engine, _ = open_database_readonly(db)
    spec = load_sweep(str(REPO_ROOT / "sweeps" / "hopper-v3shard-40l-verdict.yaml"))
    h100 = "NVIDIA H100 80GB HBM3"
    here = host_history.measured(engine, spec, h100, host="vm")
    assert here is not None and here.source.startswith(
        f"on this host (vm, {h100}) in run(s) of the same model"
    )
    for gpu, host in ((h100, "gpu-b"), ("none", "vm")):
        other = host_history.measured(engine, spec, gpu, host=host)
        assert other is not None and other.source.startswith(f"on another host or GPU (vm, {h100};")
        assert (other.startup_s, other.window_s) == (here.startup_s, here.window_s)
    assert here.startup_s is not None and here.window_s  # the run's measured starts and windows
    other_model = spec.model_copy(update={"model": "/models/another"})
    assert host_history.measured(engine, other_model, h100, host="vm") is None
