"""SGLang's own `bench_serving` against the stand-in, and `specbench crosscheck` around it.

Needs an interpreter that can `import sglang.bench_serving`: SPECBENCH_BENCH_SERVING_PYTHON, else this
interpreter when sglang is installed, else .venv-bench-serving (scripts/bench_serving_client.sh, as CI
builds it). Skips otherwise,
unless SPECBENCH_REQUIRE_BENCH_SERVING=1 (set by CI) turns the skip into a failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.client import LoadClient
from bench.crosscheck import (
    BENCH_SERVING,
    SPECBENCH,
    Comparison,
    CrossCheckError,
    Side,
    WindowResult,
    last_jsonl_line,
    metrics_page,
    order,
    parse_bench_serving,
    prompt_tokens_from_metrics,
    write_sharegpt,
)
from bench.metrics import compute_metrics
from bench.results import RequestRecord
from bench.sweep import WorkloadSpec
from bench.workload import build_prompts
from runners.cli import app
from synthetic.model.tokenizer import write_tokenizer
from tests.fixtures.bench_serving_client import WAIT_TIMEOUT, wait_for_client
from tests.fixtures.sim import SimFactory, SimHandle, request
from tests.paths import REPO_ROOT

pytestmark = WAIT_TIMEOUT  # CI may still be installing the client when this module starts
VOCAB = 4096
SIM_ENV = {"SPECBENCH_SIM_STARTUP_S": "0", "SPECBENCH_SIM_TIME_SCALE": "0.2"}
# Decode steps of ~26 ms, a real server's pace: the server, not the clients' CPU, sets the rate. At 0.5 ms steps
# on a loaded host the two clients' figures differed by the CPU each got (2.9x beside two busy loops).
SERVER_PACED_ENV = {**SIM_ENV, "SPECBENCH_SIM_TIME_SCALE": "10"}


def _bench_serving_python() -> str:
    wait_for_client()
    explicit = os.environ.get("SPECBENCH_BENCH_SERVING_PYTHON")
    if explicit:
        return explicit
    if importlib.util.find_spec("sglang") is not None:
        return sys.executable
    local = REPO_ROOT / ".venv-bench-serving" / "bin" / "python"
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
    handle = sim_server.start("--enable-metrics", env=SERVER_PACED_ENV, model_path=str(model_dir))
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
    # Paced by the server, both clients see the same rate (1.006 beside two busy loops).
    assert 0.8 < comp["ratios"]["output_throughput"] < 1.25
    # Each side's CPU is measured (bench_serving's includes its start-up, so it is the larger).
    assert all(w["client_cpu_s"] > 0 for w in comp["windows"])
    # One round gives two neighbouring pairs, enough for a paired interval around the ratio.
    ci = comp["paired_intervals"]["output_throughput"]
    assert ci["n"] == 2 and ci["low"] < ci["ratio"] < ci["high"]
    assert "paired 95% CI" in result.output and "client CPU" in result.output


def test_order_is_abba() -> None:
    assert order(2) == [SPECBENCH, BENCH_SERVING, BENCH_SERVING, SPECBENCH] * 2
    with pytest.raises(ValueError):
        order(0)


def _window(client: Side, pos: int, tput: float) -> WindowResult:
    return WindowResult(
        client=client, batch_size=8, position=pos, num_prompts=8, duration_s=1.0, completed=8,
        total_input_tokens=8, total_output_tokens=8, output_throughput=tput, tpot_mean_ms=None,
        tpot_p50_ms=None, ttft_p50_ms=None, ttft_mean_ms=None, itl_mean_ms=None,
    )  # fmt: skip


def test_crosscheck_pairs_neighbours_and_computes_the_paired_interval() -> None:
    # A B B A A B B A: pairs (0,1), (2,3), (4,5), (6,7), each as (specbench, bench_serving).
    sides = order(2)
    values = [100.0, 110.0, 120.0, 96.0, 90.0, 100.0, 105.0, 105.0]
    comp = Comparison(
        batch_size=8,
        num_prompts=8,
        windows=[_window(c, i, v) for i, (c, v) in enumerate(zip(sides, values, strict=True))],
    )
    pairs = comp.pairs()
    assert [(a.position, b.position) for a, b in pairs] == [(0, 1), (3, 2), (4, 5), (7, 6)]
    # Log ratios specbench/bench_serving, by hand: ln(100/110), ln(96/120), ln(90/100), ln(105/105).
    d = [math.log(100 / 110), math.log(96 / 120), math.log(90 / 100), 0.0]
    mean = sum(d) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 3)
    half = 3.182446305284263 * sd / 2  # t(0.975, 3) * s / sqrt(4)
    ci = comp.ratio_interval("output_throughput")
    assert ci is not None and ci.n == 4
    assert ci.ratio == pytest.approx(math.exp(mean))
    assert ci.low == pytest.approx(math.exp(mean - half), rel=1e-6)
    assert ci.high == pytest.approx(math.exp(mean + half), rel=1e-6)
    # Fewer than two pairs: no interval, rather than a fake one.
    assert (
        Comparison(batch_size=8, num_prompts=8, windows=comp.windows[:2]).ratio_interval("output_throughput")
        is None
    )


def test_prompt_token_counter_is_read_by_name_across_label_sets() -> None:
    page = "\n".join(
        [
            "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE sglang:prompt_tokens_total counter",
            'sglang:prompt_tokens_total{model_name="m",engine_type="unified"} 1200.0',
            'sglang:prompt_tokens_total{model_name="m",engine_type="other"} 34.0',
            'sglang:prompt_tokens_created{model_name="m"} 1.7e9',
            "sglang:prompt_tokens_total_extra 99.0",
        ]
    )
    assert prompt_tokens_from_metrics(page) == 1234
    assert prompt_tokens_from_metrics("sglang:generation_tokens_total 5.0") is None


def test_metrics_page_is_read_when_the_server_gzips_it(model_dir: Path, sim_server: SimFactory) -> None:
    # SGLang's prometheus_client gzips /metrics for clients that accept gzip, as aiohttp does by default; the
    # load client's session leaves bodies compressed, so an unguarded read found no counter on a real server.
    handle = sim_server.start("--enable-metrics", env=SIM_ENV, model_path=str(model_dir))

    async def read() -> tuple[str | None, str | None]:
        async with LoadClient(handle.base_url) as client:
            async with client.session.get(handle.base_url + "/metrics") as resp:
                encoding = resp.headers.get("Content-Encoding")
            await client.run_closed_loop(
                build_prompts(WorkloadSpec(input_len=32, output_len=4), 4, vocab_size=VOCAB), 2, 60
            )
            return encoding, await metrics_page(client)

    encoding, page = asyncio.run(read())
    assert encoding == "gzip"  # the stand-in behaves like prometheus_client here
    assert page is not None
    assert prompt_tokens_from_metrics(page) == 4 * 32


def test_bench_serving_results_read_through_the_catalogue_as_the_gpu_run_stored_them() -> None:
    """The H200 cross-check's bench_serving files parse into the windows that run stored (its
    crosscheck.json), and a result without a figure the comparison needs is refused by name."""
    folder = REPO_ROOT / "examples" / "h200-v3slice-crosscheck"
    stored = [w for c in json.loads((folder / "crosscheck.json").read_text()) for w in c["windows"]]
    from_files = [w for w in stored if w["client"] == BENCH_SERVING]
    assert len(from_files) == 4
    for want in from_files:
        path = folder / Path(want["source"]).name
        got = parse_bench_serving(
            last_jsonl_line(path),
            batch_size=want["batch_size"],
            position=want["position"],
            source=want["source"],
        )
        assert {k: v for k, v in vars(got).items() if k in want} == want
    line = last_jsonl_line(folder / "bench_serving-bs8-2.jsonl")
    del line["duration"]
    with pytest.raises(CrossCheckError, match="duration"):
        parse_bench_serving(line, batch_size=8, position=1, source="x.jsonl")
    broken = {**last_jsonl_line(folder / "bench_serving-bs8-2.jsonl"), "output_throughput": -1.0}
    with pytest.raises(CrossCheckError, match=r"x\.jsonl: .*output_throughput: must be a finite number"):
        parse_bench_serving(broken, batch_size=8, position=1, source="x.jsonl")


def test_a_specbench_window_carries_the_measured_figures_under_their_catalogue_names() -> None:
    """The cross-check's specbench side and bench_serving side fill one WindowResult by the same names."""
    records = [
        RequestRecord(
            index=i,
            prompt_len=8,
            max_new_tokens=16,
            start=0.0,
            ttft=0.05 * (i + 1),
            e2e=0.5 + 0.05 * i,
            completion_tokens=16,
            chunk_times=[0.05 * (i + 1), 0.5 + 0.05 * i],
            chunk_tokens=[1, 15],
        )
        for i in range(4)
    ]
    m = compute_metrics(records, 2.0)
    w = WindowResult.of(SPECBENCH, 4, 0, 4, dataclasses.asdict(m), client_cpu_s=0.25)
    assert (w.completed, w.total_output_tokens, w.duration_s) == (4, 64, 2.0)
    assert w.output_throughput == m.output_throughput == 32.0
    assert (w.tpot_mean_ms, w.tpot_p50_ms, w.ttft_p50_ms, w.ttft_mean_ms, w.itl_mean_ms) == (
        m.tpot_mean_ms,
        m.tpot_p50_ms,
        m.ttft_p50_ms,
        m.ttft_mean_ms,
        m.itl_mean_ms,
    )
    assert w.ttft_mean_ms is not None and w.client_cpu_s == 0.25 and w.source is None
