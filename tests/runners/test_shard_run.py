"""The TP-8 shard's evidence on the stand-in, end to end: balanced routing set, stored and labelled; every
point with its physical floor in the export; a point faster than its floor flagged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from analysis.export import collect, document, read_csv_rows, to_markdown
from analysis.labels import numbers_caption
from bench.sweep import parse_sweep
from db import queries as q
from db.engine import session_scope
from db.models import Point, Run, ServerInstance
from runners.cli import app
from runners.sweep_runner import execute_sweep
from synthetic.model.presets import build_preset
from tests.fixtures.floor import BASELINE_SWEEP, HUGE, HUGE_LAYER

SHARD_SWEEP = """
name: shard-sim
model: {model}
server:
  backend: sim
  load_format: dummy
  sim: {{seed: 5}}
grid: {{batch_sizes: [1, 2], spec_modes: [v2], algorithm: NEXTN, steps: [1], accept_lengths: [1.8], baseline: true}}
workload: {{input_len: 16, output_len: 16}}
repeats: 1
"""


def _run(text: str, engine: Engine, tmp_path: Path) -> Any:
    return execute_sweep(parse_sweep(text), text, engine, log_dir=tmp_path / "logs", show_progress=False)


def test_shard_on_the_stand_in_routes_balanced_and_every_point_has_its_floor(
    engine: Engine, tmp_path: Path
) -> None:
    shard = build_preset(tmp_path / "shard", "deepseek-v3-tp8-shard", 2)
    out = _run(SHARD_SWEEP.format(model=shard), engine, tmp_path)
    assert out.status in ("done", "unstable"), out.error
    with session_scope(engine) as s:
        servers = list(s.scalars(select(ServerInstance)))
        assert len(servers) == 2
        for si in servers:
            # What specbench set, stored with the launch; the stand-in honours it as 0.5.13.post1 does.
            assert si.env["SGLANG_SIMULATE_UNIFORM_EXPERTS"] == "1"
            assert (
                si.resolved["specbench_sim"]["expert_routing"] == "uniform (SGLANG_SIMULATE_UNIFORM_EXPERTS)"
            )
            assert si.resolved["specbench_sim"]["gpu_name"] == "NVIDIA H200"
        run = s.scalars(select(Run)).one()
        assert run.provenance["expert_routing"] == "balanced"
        assert run.provenance["model_synth"] == "preset deepseek-v3-tp8-shard layers=2/61 tp=8"
        points = list(s.scalars(select(Point)))
        assert {p.expert_routing for p in points} == {"balanced"}
        for p in points:
            assert p.step_floor_ms is not None and p.step_floor_ms > 0
            step = p.tpot_mean_ms * (p.accept_length_weighted if p.algorithm else 1.0)
            assert p.floor_fraction == pytest.approx(p.step_floor_ms / step)
            assert 0 < p.floor_fraction < 1 and p.status in ("ok", "unstable")
    with session_scope(engine) as s:
        export = collect(s, [out.run_id], all_status=True)
    rows = read_csv_rows(document(export).text("csv"))
    assert all(float(r["step_floor_ms"]) > 0 and 0 < float(r["floor_fraction"]) < 1 for r in rows)
    assert {r["expert_routing"] for r in rows} == {"balanced"}
    assert export.runs[0]["numbers"] == "dummy weights, acceptance pinned at 1.8, balanced routing"
    text = to_markdown(export)
    assert "Numbers: dummy weights, acceptance pinned at 1.8, balanced routing." in text
    assert "floor frac" in text
    facts = q.caption_facts(engine, out.run_id)
    assert numbers_caption(facts) == "dummy weights, acceptance pinned at 1.8, balanced routing"


def test_dry_run_shows_the_switch_and_warns_when_it_is_off(tmp_path: Path) -> None:
    shard = build_preset(tmp_path / "shard", "deepseek-v3-tp8-shard", 2)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(SHARD_SWEEP.format(model=shard))
    runner = CliRunner()
    r = runner.invoke(app, ["run", str(sweep), "--dry-run", "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert r.exit_code == 0, r.output
    assert r.output.count("env:  SGLANG_SIMULATE_UNIFORM_EXPERTS=1") == 2 and "WARNING" not in r.output
    sweep.write_text(
        SHARD_SWEEP.format(model=shard).replace(
            "load_format: dummy", "load_format: dummy\n  balanced_routing: off"
        )
    )
    r = runner.invoke(app, ["run", str(sweep), "--dry-run", "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert r.exit_code == 0, r.output
    assert "SGLANG_SIMULATE_UNIFORM_EXPERTS=0" in r.output
    assert "WARNING: server.balanced_routing: off" in r.output
    assert "expert routing stays collapsed on 2 launch(es)" in r.output


def test_a_point_faster_than_its_floor_is_flagged(engine: Engine, tmp_path: Path) -> None:
    assert HUGE_LAYER == 6_633_291_776
    # One decode step at batch 1: 32 layers, the LM head, one embedding row, the KV of 16 + 15/2 = 23.5
    # tokens in each of the 32 layers at (512 + 64) x 2 bytes.
    want_bytes = 32 * HUGE_LAYER + 32000 * 16384 * 2 + 16384 * 2 + 23.5 * 32 * 576 * 2
    want_ms = want_bytes / 4.8e12 * 1e3  # the stand-in emulates an H200
    assert want_ms == pytest.approx(44.44, abs=0.01)
    huge = tmp_path / "huge"
    huge.mkdir()
    (huge / "config.json").write_text(json.dumps(HUGE))
    out = _run(BASELINE_SWEEP.format(model=huge), engine, tmp_path)
    with session_scope(engine) as s:
        p = s.scalars(select(Point)).one()
        assert p.step_floor_ms == pytest.approx(want_ms, rel=1e-9)
        assert p.tpot_mean_ms is not None and p.tpot_mean_ms < want_ms
        assert p.floor_fraction == pytest.approx(want_ms / p.tpot_mean_ms) and p.floor_fraction > 1
        assert p.status == "invalid" and "faster than its physical floor" in (p.reason or "")
    assert out.status == "failed"  # its only point did not measure what the config says
    # The same stand-in with a one-layer, 1024-wide config: a floor far below the step, nothing flagged.
    small = tmp_path / "small"
    small.mkdir()
    (small / "config.json").write_text(
        json.dumps({**HUGE, "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 1})
    )
    again = _run(BASELINE_SWEEP.format(model=small).replace("floor-sim", "floor-sim-small"), engine, tmp_path)
    with session_scope(engine) as s:
        p = s.scalars(select(Point).where(Point.run_id == again.run_id)).one()
        assert p.floor_fraction is not None and p.floor_fraction < 0.5 and p.status in ("ok", "unstable")
