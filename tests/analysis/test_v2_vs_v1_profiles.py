"""The v2-vs-v1 export carries the profile evidence: overlap columns for the cells a run profiled."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from analysis.profiles import OVERLAP_COLUMNS, join_overlap
from analysis.v2_vs_v1 import COLUMNS
from bench.sweep import parse_sweep
from db.engine import session_scope
from db.models import Profile
from runners.cli import app
from runners.sweep_runner import execute_sweep

# Paired stand-in run, profiled (GPU only) at batch 8 and not at batch 2.
PAIRED_PROFILED = """
name: ratio-prof
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {time_scale: 1.0, seed: 13, startup_s: 0.0}
grid: {batch_sizes: [2, 8], spec_modes: [v1, v2], steps: [3], topk: [1], accept_lengths: [2.5], baseline: false}
workload: {input_len: 32, output_len: 256, num_prompts: 8}
measure: {min_window_s: 0.2, drift_check: false}
repeats: 2
profile: {steps: 12, activities: [GPU], at: [8], settle_s: 0.1, timeout_s: 30}
"""
# The stand-in's cost model at batch 8, steps 3 (tests/test_profile_capture.py): without overlap the GPU idles
# for the CPU work of a step, 0.6 + 0.015 * 8 ms; with it only for the 0.1 ms sync.
CPU_MS, SYNC_MS = 0.72, 0.1


def _export(url: str, fmt: str) -> str:
    r = CliRunner().invoke(app, ["export", "--db", url, "--view", "v2-vs-v1", "--format", fmt])
    assert r.exit_code == 0, r.output
    return r.stdout  # without the note on stderr about which run is exported


def test_export_of_a_profiled_paired_run_has_the_overlap_columns(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECBENCH_ARTIFACTS_DIR", str(tmp_path / "artifacts"))
    out = execute_sweep(
        parse_sweep(PAIRED_PROFILED), PAIRED_PROFILED, engine, log_dir=tmp_path / "logs", show_progress=False
    )
    assert out.status in ("done", "unstable")
    url = engine.url.render_as_string(hide_password=False)

    rows = {r["batch_size"]: r for r in json.loads(_export(url, "json"))["rows"]}
    assert set(rows) == {2, 8}
    assert list(rows[8]) == ["kind", *COLUMNS, *OVERLAP_COLUMNS]  # the stand-in's: "simulated" on every row
    prof = rows[8]
    assert {r["kind"] for r in rows.values()} == {"simulated"}
    assert prof["v1_gpu_idle_ms"] == pytest.approx(CPU_MS)
    assert prof["v2_gpu_idle_ms"] == pytest.approx(SYNC_MS)
    assert prof["cpu_hidden_ms"] == pytest.approx(CPU_MS - SYNC_MS)
    assert prof["overlap_share"] == pytest.approx((CPU_MS - SYNC_MS) / CPU_MS)  # of what overlap could hide
    assert prof["v1_cycle_ms"] > prof["v2_cycle_ms"] > 0
    assert prof["profile_activities"] == "GPU" and prof["accept_length"] == 2.5
    assert 0.5 < prof["v1_distortion"] < 1.5 and 0.5 < prof["v2_distortion"] < 1.5
    assert prof["profile_verdict"].startswith(
        "v2 hides 0.62 ms of CPU per cycle; GPU idle per cycle 0.72 → 0.10"
    )
    assert all(rows[2][c] is None for c in OVERLAP_COLUMNS)  # not profiled: blank

    table = list(csv.DictReader(io.StringIO(_export(url, "csv"))))
    by_bs = {int(r["batch_size"]): r for r in table}
    assert set(OVERLAP_COLUMNS) <= set(table[0])
    assert float(by_bs[8]["v1_cycle_ms"]) == pytest.approx(prof["v1_cycle_ms"], rel=1e-5)
    assert float(by_bs[8]["v2_gpu_idle_ms"]) == pytest.approx(SYNC_MS, rel=1e-5)
    assert all(by_bs[2][c] == "" for c in OVERLAP_COLUMNS)

    md = _export(url, "md")
    head = next(line for line in md.splitlines() if line.startswith("| batch |"))
    assert head.endswith("| n | cycle v1→v2 | GPU idle/cycle v1→v2 | CPU hidden/cycle |")
    line8 = next(line for line in md.splitlines() if line.startswith("| 8 |"))
    line2 = next(line for line in md.splitlines() if line.startswith("| 2 |"))
    assert line8.endswith(" ms | 0.72 → 0.10 ms | 0.62 ms |"), line8
    assert line2.endswith("| – | – | – |"), line2
    # The overlap share stands next to the ratio it explains.
    assert "| 95% CI | verdict | overlap hidden | TPOT v2/v1 |" in head
    share = f"{(CPU_MS - SYNC_MS) / CPU_MS:.0%} of 100%"
    assert f"| {share} |" in line8 and "| – | " in line2
    assert "- batch 8, steps 3, accept len 2.5 (GPU): v2 hides 0.62 ms of CPU per cycle" in md
    assert "- batch 2," not in md and "†" not in md  # GPU-only on the stand-in: no distortion mark

    # Summaries stored by an older summariser are redone from the traces, found again after a move.
    with session_scope(engine) as s:
        rows = s.scalars(select(Profile).where(Profile.run_id == out.run_id)).all()
        before = {r.id: r.summary for r in rows}
        first = rows[0]
        first.summary = {**first.summary, "cycles": 22, "cycle_ms": {"median": 1.0}}
        moved = tmp_path / "moved"
        moved.mkdir()
        for r in rows:
            Path(r.path or "").rename(moved / Path(r.path or "").name)
    r = CliRunner().invoke(app, ["profile", "resummarize", "--db", url, "--run", str(out.run_id)])
    assert r.exit_code == 2 and r.output.count(": missing") == 2, r.output  # no answer for those (cli.md)
    r = CliRunner().invoke(
        app, ["profile", "resummarize", "--db", url, "--run", str(out.run_id), "--search", str(moved)]
    )
    assert r.exit_code == 0 and "cycles 22 -> 11: updated" in r.output, r.output
    with session_scope(engine) as s:
        for p in s.scalars(select(Profile).where(Profile.run_id == out.run_id)):
            assert p.summary["cycles"] == 11 and p.summary["capture"] == before[p.id]["capture"]
            assert p.summary["cycle_ms"] == before[p.id]["cycle_ms"]
            assert p.summary["distortion"]["ratio"] == pytest.approx(before[p.id]["distortion"]["ratio"])


def test_export_without_profiles_keeps_the_plain_markdown() -> None:
    from analysis.profiles import overlap_rows
    from analysis.v2_vs_v1 import to_markdown, with_profiles

    frame = pd.DataFrame(
        [{c: None for c in COLUMNS} | {"batch_size": 4, "steps": 2, "n": 0, "verdict": "insufficient data"}]
    )
    joined = with_profiles(frame, overlap_rows([]))
    assert list(joined.columns) == [*COLUMNS, *OVERLAP_COLUMNS]
    md = to_markdown(joined)
    assert "cycle v1→v2" not in md and "Profiles (" not in md
    empty = with_profiles(pd.DataFrame(columns=list(COLUMNS)), overlap_rows([]))
    assert list(empty.columns) == [*COLUMNS, *OVERLAP_COLUMNS]


def test_join_matches_keys_across_dtypes_and_missing_values() -> None:
    # v2-vs-v1 cells: steps as float (None in the frame makes it so), acceptance unpinned (None) or pinned.
    table = pd.DataFrame(
        {
            "batch_size": [8, 8, 16],
            "steps": [3.0, 3.0, 3.0],
            "accept_length": [None, 2.5, None],
            "topk": [1, 1, 1],
        }
    )
    overlap = pd.DataFrame(
        [
            {"batch_size": 8, "steps": 3, "accept_length": float("nan"), "topk": 1, "cpu_hidden_ms": 1.0},
            {"batch_size": 8, "steps": 3, "accept_length": 2.5, "topk": 1, "cpu_hidden_ms": 2.0},
        ]
    ).reindex(columns=["batch_size", "steps", "accept_length", "topk", *OVERLAP_COLUMNS])
    overlap["cpu_hidden_ms"] = [1.0, 2.0]
    joined = join_overlap(table, overlap)
    assert joined["cpu_hidden_ms"].tolist()[:2] == [1.0, 2.0] and pd.isna(joined["cpu_hidden_ms"].iloc[2])
    assert pd.isna(joined["accept_length"].iloc[0]) and joined["accept_length"].iloc[1] == 2.5  # table kept
    assert joined["profile_verdict"].tolist() == [None, None, None]
