"""Capture end to end on the stand-in: a sweep with `profile:` stores traces whose summaries show the overlap."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from bench.client import LoadClient
from bench.profile.capture import capture_profile, start_profile_body
from bench.profile.summary import summarize
from bench.profile.trace import load_trace
from bench.sweep import SweepError, parse_sweep
from bench.workload import Prompt
from db.engine import session_scope
from db.models import Point, Profile
from runners.sweep_runner import execute_sweep

pytestmark = pytest.mark.slow  # whole sweeps on live stand-in servers: scheduled first (tests/conftest.py)

# Batch 8, steps 3, draft 4 with the stand-in's default cost model (synthetic/server/perf.py), in ms:
# GPU = target 2.0 + 0.010*8*4 = 2.32, draft + extend 3*(0.35 + 0.004*8) = 1.146; CPU = 0.6 + 0.015*8 = 0.72.
# 0.5.13 has no FlashMLA draft-extend CUDA graph: + 0.3. Non-overlap: the GPU waits for all the CPU work,
# idle 0.72 per cycle. Overlap: only the 0.1 sync.
GPU_MS, CPU_MS, SYNC_MS = 2.32 + 1.146 + 0.3, 0.72, 0.1

SWEEP = """
name: prof
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {time_scale: 1.0, seed: 5}
grid: {batch_sizes: [2, 8], spec_modes: [v1, v2], steps: [3], topk: [1], baseline: true}
workload: {input_len: 32, output_len: 512, num_prompts: 8}
repeats: 1
profile: {steps: 12, activities: [GPU], at: [8], settle_s: 0.25, timeout_s: 30}
"""


def test_sweep_profiles_the_chosen_points(engine: Engine, tmp_path: Path, monkeypatch: Any) -> None:
    _sweep_profiles_the_chosen_points(SWEEP, engine, tmp_path, monkeypatch)


# The paired runner's other schedule (one server at a time, ABBA restarts) and the unpaired runner.
@pytest.mark.parametrize(
    "change",
    [
        ("attention_backend: flashmla", "attention_backend: flashmla\n  pair_colocate: false"),
        ("repeats: 1", "repeats: 1\nmeasure: {paired: false}"),
    ],
    ids=["alternating", "unpaired"],
)
def test_every_schedule_profiles_after_the_windows(
    change: tuple[str, str], sqlite_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    from db.migrate import open_database

    eng = open_database(sqlite_url)
    try:
        _sweep_profiles_the_chosen_points(SWEEP.replace(*change), eng, tmp_path, monkeypatch)
    finally:
        eng.dispose()


def _sweep_profiles_the_chosen_points(text: str, engine: Engine, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("SPECBENCH_ARTIFACTS_DIR", str(tmp_path / "artifacts"))
    spec = parse_sweep(text)
    out = execute_sweep(spec, text, engine, log_dir=tmp_path / "logs", show_progress=False)
    assert out.status == "done"
    with session_scope(engine) as s:
        rows = s.scalars(select(Profile).order_by(Profile.spec_mode)).all()
        # bs 8 of v1 and v2 only: not bs 2 (not in `at`), not the baseline (no speculative cycles)
        assert [(r.spec_mode, r.batch_size, r.status) for r in rows] == [("v1", 8, "ok"), ("v2", 8, "ok")]
        by_mode = {}
        for r in rows:
            point = s.get(Point, r.point_id)
            assert point is not None and point.batch_size == 8 and point.spec_mode == r.spec_mode
            path = Path(r.path or "")
            assert path.is_relative_to(tmp_path / "artifacts" / f"run-{out.run_id}")
            assert path.name.endswith("-TP-0.trace.json.gz")
            data = path.read_bytes()
            assert r.sha256 == hashlib.sha256(data).hexdigest() and r.size_bytes == len(data)
            assert r.activities == ["GPU"] and r.num_steps == 12 and r.host
            summ = r.summary
            # SGLang stops at the top of the 12th step: 11 whole steps, all decode here (one wave of 8).
            # GPU-only: no step annotations, the verify graph replays cut the cycles.
            assert (summ["cycles"], summ["track"]) == (11, "graph"), summ["steps_by_mode"]
            assert summ["capture"]["body"] == start_profile_body(path.parent, 12, ["GPU"])
            d = summ["distortion"]
            assert d["unprofiled_cycle_ms"] == pytest.approx(point.tpot_mean_ms * point.accept_length)
            # The stand-in's trace is drawn from the model its measured speed follows.
            assert 0.5 < d["ratio"] < 1.5, d
            by_mode[r.spec_mode] = summ
    v1, v2 = by_mode["v1"], by_mode["v2"]
    assert v1["gpu_idle_ms_per_cycle"]["median"] == pytest.approx(CPU_MS)
    assert v2["gpu_idle_ms_per_cycle"]["median"] == pytest.approx(SYNC_MS)
    assert v1["cycle_ms"]["median"] == pytest.approx(GPU_MS + CPU_MS)
    assert v2["cycle_ms"]["median"] == pytest.approx(GPU_MS + SYNC_MS)
    assert v1["phases"]["target_verify"]["gpu_ms"]["median"] == pytest.approx(2.32)


def _prompts(n: int, out_len: int) -> list[Prompt]:
    return [Prompt(prompt_len=32, output_len=out_len, input_ids=list(range(1, 33))) for _ in range(n)]


@pytest.mark.parametrize("overlap", [False, True])
def test_stand_in_trace_with_cpu_activity(sim_server: Any, tmp_path: Path, overlap: bool) -> None:
    argv = ["--attention-backend", "flashmla", "--speculative-algorithm", "EAGLE", "--tp-size", "2"]
    argv += [
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    ]
    if not overlap:
        argv.append("--disable-overlap-schedule")
    sim = sim_server.start(*argv)
    body = start_profile_body(tmp_path / "traces", 6, ["CPU", "GPU"])

    async def go() -> Any:
        async with LoadClient(sim.base_url) as client:
            return await capture_profile(
                client, _prompts(8, 512), 8, body, expected_files=2, settle_s=0.25, timeout_s=30
            )

    res = asyncio.run(go())
    assert res.error is None and not res.stopped_by_us
    assert [p.name.split("-TP-")[1] for p in res.files] == ["0.trace.json.gz", "1.trace.json.gz"]
    raw = json.loads(gzip.decompress(res.files[0].read_bytes()))
    cats = {e["cat"] for e in raw["traceEvents"]}
    assert {"kernel", "user_annotation", "gpu_user_annotation", "cpu_op"} <= cats
    names = {e["name"] for e in raw["traceEvents"] if e["cat"] == "gpu_user_annotation"}
    assert names == {"step[TARGET_VERIFY bs=8]", "step[DRAFT_EXTEND_V2 bs=8]"}
    s = summarize(load_trace(res.files[0]))
    assert s["cycles"] == 5 and s["cpu_recorded"]
    # tp 2: the target term gains tp_comm 0.15 and per-token work halves; CPU profiling slows CPU work 1.5x.
    cpu = CPU_MS * 1.5
    gpu = 2.0 + 0.010 * 8 * 4 / 2 + 0.15 + 3 * (0.35 + 0.004 * 8 / 2) + 0.3
    idle = SYNC_MS if overlap else cpu
    assert s["gpu_idle_ms_per_cycle"]["median"] == pytest.approx(idle)
    assert s["cycle_ms"]["median"] == pytest.approx(gpu + idle)
    cpu_total = sum(p["cpu_ms"]["median"] for p in s["phases"].values() if p["cpu_ms"])
    assert cpu_total == pytest.approx(gpu + idle)  # the CPU cycle (verify to verify) has the same period


def test_profile_endpoints_answer_like_sglang(sim_server: Any, tmp_path: Path) -> None:
    import urllib.request

    sim = sim_server.start("--speculative-algorithm", "EAGLE", env={"SPECBENCH_SIM_INSTANT": "1"})

    def post(path: str, body: dict[str, Any]) -> tuple[int, str]:
        req = urllib.request.Request(sim.url(path), data=json.dumps(body).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    assert post("/stop_profile", {})[0] == 500
    assert post("/start_profile", {"output_dir": str(tmp_path)}) == (200, "Start profiling.\n")
    code, text = post("/start_profile", {"output_dir": str(tmp_path)})
    assert code == 500 and "already in progress" in text
    assert post("/stop_profile", {}) == (200, "Stop profiling. This will take some time.\n")
    (trace,) = tmp_path.glob("*-TP-0.trace.json.gz")
    assert summarize(load_trace(trace))["cycles"] == 0  # nothing ran: an empty but valid trace


def test_profile_at_must_be_in_the_grid() -> None:
    with pytest.raises(SweepError, match=r"profile.at: batch size 3 is not in grid.batch_sizes"):
        parse_sweep(SWEEP.replace("at: [8]", "at: [3]"))


def test_capture_flushes_when_the_load_ends_first_and_reports_a_short_load(
    sim_server: Any, tmp_path: Path
) -> None:
    sim = sim_server.start(
        "--attention-backend",
        "flashmla",
        "--speculative-algorithm",
        "EAGLE",
        env={"SPECBENCH_SIM_TIME_SCALE": "1"},
    )

    async def go(body: dict[str, Any], settle_s: float, n: int) -> Any:
        async with LoadClient(sim.base_url) as client:
            return await capture_profile(client, _prompts(n, 64), 2, body, settle_s=settle_s, timeout_s=30)

    # 1000 steps never run under 4 short requests: the load ends, /stop_profile writes what was recorded.
    res = asyncio.run(go(start_profile_body(tmp_path / "a", 1000, ["GPU"]), 0.05, 4))
    assert res.error is None and res.stopped_by_us and len(res.files) == 1
    assert 0 < summarize(load_trace(res.files[0]))["cycles"] < 1000
    # A settle longer than the whole load: nothing is profiled, and the reason says so.
    res = asyncio.run(go(start_profile_body(tmp_path / "b", 12, ["GPU"]), 5.0, 1))
    assert res.files == [] and "load ended before profiling" in (res.error or "")
