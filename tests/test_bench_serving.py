"""SGLang's own `bench_serving` against the stand-in, and `specbench crosscheck` around it.

Needs an interpreter that can `import sglang.bench_serving`: SPECBENCH_BENCH_SERVING_PYTHON, else this
interpreter when sglang is installed, else .venv-bench-serving (scripts/bench_serving_client.sh, as CI
builds it). Skips otherwise,
unless SPECBENCH_REQUIRE_BENCH_SERVING=1 (set by CI) turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.crosscheck import BENCH_SERVING, SPECBENCH, order, write_sharegpt
from bench.synth.tokenizer import write_tokenizer
from runners.cli import app
from tests.fixtures.sim import SimFactory, SimHandle, request

VOCAB = 4096
SIM_ENV = {"SPECBENCH_SIM_STARTUP_S": "0", "SPECBENCH_SIM_TIME_SCALE": "0.2"}


def _bench_serving_python() -> str:
    explicit = os.environ.get("SPECBENCH_BENCH_SERVING_PYTHON")
    if explicit:
        return explicit
    if importlib.util.find_spec("sglang") is not None:
        return sys.executable
    local = Path(__file__).resolve().parents[1] / ".venv-bench-serving" / "bin" / "python"
    if local.exists():
        return str(local)
    if os.environ.get("SPECBENCH_REQUIRE_BENCH_SERVING") == "1":
        pytest.fail(
            "SPECBENCH_REQUIRE_BENCH_SERVING=1 but no interpreter has sglang (scripts/bench_serving_client.sh)"
        )
    pytest.skip(
        "sglang is not installed (set SPECBENCH_BENCH_SERVING_PYTHON or run scripts/bench_serving_client.sh)"
    )


@pytest.fixture(scope="module")
def python() -> str:
    return _bench_serving_python()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("synth-tok")
    write_tokenizer(d, VOCAB)
    return d


def _prompt_tokens_total(handle: SimHandle) -> int:
    status, body, _ = request(handle, "GET", "/metrics")
    assert status == 200
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith("sglang:prompt_tokens_total"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def test_text_mode_input_tokens_equal_the_stand_ins_count(
    python: str, model_dir: Path, sim_server: SimFactory, tmp_path: Path
) -> None:
    handle = sim_server.start("--enable-metrics", env=SIM_ENV, model_path=str(model_dir))
    dataset = tmp_path / "sharegpt.json"
    write_sharegpt(dataset, str(model_dir), conversations=64, words=200, seed=3)
    out = tmp_path / "bs.jsonl"
    before = _prompt_tokens_total(handle)
    argv = [
        python, "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", handle.base_url,
        "--tokenizer", str(model_dir), "--dataset-name", "random", "--dataset-path", str(dataset),
        "--random-input-len", "300", "--random-output-len", "16", "--random-range-ratio", "1",
        "--num-prompts", "24", "--max-concurrency", "4", "--warmup-requests", "0",
        "--output-file", str(out), "--disable-tqdm",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text().splitlines()[-1])
    counted = _prompt_tokens_total(handle) - before
    assert result["completed"] == 24
    # Prompts longer than the 200-word samples are built by repeating them: still 300 tokens each.
    assert result["total_input_tokens"] == 24 * 300
    assert counted == result["total_input_tokens"]
    assert result["total_output_tokens"] == 24 * 16


def test_crosscheck_runs_both_clients_abba(
    python: str, model_dir: Path, sim_server: SimFactory, tmp_path: Path
) -> None:
    handle = sim_server.start("--enable-metrics", env=SIM_ENV, model_path=str(model_dir))
    out_dir = tmp_path / "cc"
    result = CliRunner().invoke(
        app,
        [
            "crosscheck",
            "--url",
            handle.base_url,
            "--tokenizer",
            str(model_dir),
            "--batch-sizes",
            "4",
            "--input-len",
            "64",
            "--output-len",
            "24",
            "--min-window-s",
            "0.5",
            "--python",
            python,
            "--out-dir",
            str(out_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "output tok/s" in result.output and "ratio" in result.output
    data = json.loads((out_dir / "crosscheck.json").read_text())
    (comp,) = data
    assert [w["client"] for w in comp["windows"]] == [SPECBENCH, BENCH_SERVING, BENCH_SERVING, SPECBENCH]
    for w in comp["windows"]:
        assert w["completed"] == comp["num_prompts"]
        assert w["total_input_tokens"] == 64 * comp["num_prompts"]
        # What each client reports as input is what the server prefilled (text for one, ids for the other).
        assert w["server_prompt_tokens"] == w["total_input_tokens"]
    assert comp["ratios"]["output_throughput"] is not None
    assert 0.5 < comp["ratios"]["output_throughput"] < 2.0


def test_order_is_abba() -> None:
    assert order(2) == [SPECBENCH, BENCH_SERVING, BENCH_SERVING, SPECBENCH] * 2
    with pytest.raises(ValueError):
        order(0)
