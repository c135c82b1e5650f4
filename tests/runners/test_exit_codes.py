"""Exit codes as pytest's (runners/exit_codes.py): `ci` and `run` exit 0 when clean, 1 on a finding (a
regression), 2 when a run or the tool failed; a launch every server would repeat (SGLang missing, no
interpreter, no model) stops before any server starts, with one error and no run stored. The verbs run in this
process (tests/fixtures/cli): the status is the one `specbench` exits with, without an interpreter per call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.exit_codes import ExitCode
from tests.fixtures.cli import run_cli

SIM = """
name: ci-exit
model: sim-tiny
server: {{backend: sim, attention_backend: {backend}, sim: {{acceptance_rate: {rate}, seed: 2, time_scale: 0.1}}}}
grid: {{batch_sizes: [1], spec_modes: [v2], steps: [3], topk: [1], baseline: false}}
workload: {{input_len: 16, output_len: 32}}
repeats: 3
"""
NEEDS_SGLANG = """
name: needs-sglang
model: {model}
server: {{backend: sglang, attention_backend: flashmla{python}}}
grid: {{batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [1, 2, 3], topk: [1], baseline: true}}
workload: {{input_len: 16, output_len: 16}}
repeats: 1
"""


def _runs(url: str) -> list[dict[str, object]]:
    out = run_cli("runs", "--db", url, "--format", "json")
    if out.returncode != 0:  # no database yet: nothing was stored
        assert "no database file" in out.stderr, out.stderr
        return []
    rows: list[dict[str, object]] = json.loads(out.stdout)
    return rows


def test_exit_code_values() -> None:
    assert (ExitCode.OK, ExitCode.FINDING, ExitCode.ERROR) == (0, 1, 2)


def test_ci_exits_1_on_a_regression_and_2_on_a_failed_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ci.db'}"
    good, bad, broken = tmp_path / "good.yaml", tmp_path / "bad.yaml", tmp_path / "broken.yaml"
    good.write_text(SIM.format(backend="flashmla", rate=0.9))
    bad.write_text(SIM.format(backend="flashmla", rate=0.2))
    broken.write_text(SIM.format(backend="no-such-backend", rate=0.9))  # every server fails to start
    common = ["--db", url, "--log-dir", str(tmp_path / "logs"), "--metric", "accept_length"]
    base = run_cli("ci", str(good), "--base", "base", "--base-only", *common)
    assert base.returncode == ExitCode.OK, base.stdout + base.stderr
    regressed = run_cli(
        "ci", str(bad), "--base", "base", "--head", "head", *common, "-o", str(tmp_path / "c.md")
    )
    assert regressed.returncode == ExitCode.FINDING, regressed.stdout + regressed.stderr
    failed = run_cli(
        "ci", str(broken), "--base", "base", "--head", "head2", *common, "-o", str(tmp_path / "d.md")
    )
    assert failed.returncode == ExitCode.ERROR, failed.stdout + failed.stderr
    assert "Traceback" not in failed.stderr and "failed" in failed.stdout + failed.stderr
    assert not (tmp_path / "d.md").exists()  # no comment from a run that measured nothing


def test_ci_and_run_without_sglang_give_one_error_and_store_nothing(tmp_path: Path) -> None:
    sweep = tmp_path / "s.yaml"
    # An interpreter that exists but has no SGLang: this test's own (the dev venv never installs it).
    sweep.write_text(NEEDS_SGLANG.format(model="deepseek-ai/DeepSeek-V3", python=""))
    url = f"sqlite:///{tmp_path / 'x.db'}"
    for argv in (
        ["run", str(sweep), "--db", url, "--log-dir", str(tmp_path / "l")],
        ["ci", str(sweep), "--db", url, "--base", "b", "--head", "h", "--log-dir", str(tmp_path / "l")],
    ):
        out = run_cli(*argv)
        said = out.stdout + out.stderr
        assert out.returncode == ExitCode.ERROR, said
        # One error for the 7 launches (14 points) the sweep has, not one per launch or point.
        assert said.count("SGLang is not installed") == 1 and said.count("error:") == 1, said
        assert "no run stored" in said and "Traceback" not in said
        assert not list((tmp_path / "l").glob("**/*.log"))  # no server was started
    assert _runs(url) == []


def test_a_missing_interpreter_or_model_path_stops_before_any_launch(tmp_path: Path) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(NEEDS_SGLANG.format(model="/no/such/model", python=", python: /no/such/python3"))
    url = f"sqlite:///{tmp_path / 'x.db'}"
    out = run_cli("run", str(sweep), "--db", url)
    said = out.stdout + out.stderr
    assert out.returncode == ExitCode.ERROR, said
    assert "'/no/such/python3': not an executable file" in said and "'/no/such/model' does not exist" in said
    assert said.count("error:") == 1
    assert _runs(url) == []


def test_dry_run_previews_the_installed_or_pinned_release_and_says_which(tmp_path: Path) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        NEEDS_SGLANG.format(model="/no/such/model", python="")
        + "profile: {steps: 12, activities: [CPU, GPU], at: [4]}\n"
    )
    out = run_cli("run", str(sweep), "--dry-run")
    said = out.stdout + out.stderr
    # Neither SGLang, the model nor a GPU here: the run would exit 2, and its dry run says why and exits 2 too.
    assert out.returncode == ExitCode.ERROR and "would this run here? no" in said, said
    # Not installed here: the release pyproject's [gpu] extra pins, and the argv follows it (0.5.13.post1
    # takes --cuda-graph-max-bs; the newest known release would get --cuda-graph-max-bs-decode).
    assert "SGLang 0.5.13.post1: not installed here, so the release specbench pins" in said
    assert "--cuda-graph-max-bs-decode" not in said and "SGLANG_ENABLE_SPEC_V2=True" in said
    assert "NO   launch: model '/no/such/model' does not exist on this host" in said
    lines = said.splitlines()
    for topic in ("pairing:", "ABBA:", "profiling:"):
        assert sum(line.startswith(topic) for line in lines) == 1, (topic, said)
    assert "colocated" in said and "CPU+GPU trace of 12 steps at batch 4" in said
    sim = tmp_path / "sim.yaml"
    sim.write_text(SIM.format(backend="flashmla", rate=0.7))
    out = run_cli("run", str(sim), "--dry-run")
    assert (
        out.returncode == 0 and "emulated by the stand-in" in out.stdout and "profiling: none" in out.stdout
    )


@pytest.mark.parametrize("fail_on", ["failed,partial", "failed"])
def test_run_statuses_map_to_exit_codes(tmp_path: Path, fail_on: str) -> None:
    sweep = tmp_path / "half.yaml"
    sweep.write_text(
        "name: half\nmodel: sim-tiny\n"
        'server: {backend: sim, sim: {time_scale: 0.05, startup_s: 0, fault: "crash_after=3"}}\n'
        "grid: {batch_sizes: [1, 2], spec_modes: [], baseline: true}\n"
        "workload: {input_len: 8, output_len: 4, num_prompts: 2}\nrepeats: 1\nwarmup: {waves: 1}\n"
    )
    out = run_cli("run", str(sweep), "--db", f"sqlite:///{tmp_path / 'p.db'}", "--fail-on", fail_on)
    expected = ExitCode.ERROR if "partial" in fail_on else ExitCode.OK
    assert out.returncode == expected, out.stdout + out.stderr


def test_a_job_that_no_launch_could_start_fails_once_with_the_reason(db_url: str) -> None:
    """Workers run sweeps through the same executor: a job needing SGLang on a host without it fails its
    attempt with one error, before a run or a server row exists."""
    from sqlalchemy import func, select

    from bench.host.gpus import Gpu
    from db.engine import session_scope
    from db.migrate import open_database
    from db.models import Job, Run, ServerInstance
    from runners import queue
    from runners.worker import QueueWorker, WorkerOptions

    engine = open_database(db_url)
    text = NEEDS_SGLANG.format(model="deepseek-ai/DeepSeek-V3", python="")
    job_id = queue.submit(engine, text, max_attempts=1)
    options = WorkerOptions(
        gpus=[Gpu(0, "NVIDIA H100 80GB HBM3")],  # enough GPUs to claim it; no SGLang to run it
        lease_s=30,
        poll_s=0.02,
        once=True,
        backoff=queue.Backoff(base_s=0.0),
    )
    assert QueueWorker(engine, options).run() == 0
    with session_scope(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None and job.status == "failed"
        assert "SGLang is not installed" in (job.last_error or "") and "no run stored" in (
            job.last_error or ""
        )
        assert s.scalar(select(func.count(Run.id))) == 0
        assert s.scalar(select(func.count(ServerInstance.id))) == 0
    engine.dispose()
