"""The Sweep page says what a run's numbers stand on: the numbers caption, speculation over the baseline
across batch sizes with its model-class caption, the floor with impossible points named, the overlap share."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.sweep import parse_sweep
from db import queries as q
from db.migrate import open_database
from runners.sweep_runner import execute_sweep
from synthetic.model.presets import build_preset
from tests.fixtures.dashboard import chart_rows, charts, open_page, show
from tests.fixtures.floor import BASELINE_SWEEP, HUGE
from tests.paths import REPO_ROOT

SHARD = """
name: shard-page
model: {model}
server: {{backend: sim, load_format: dummy, sim: {{seed: 2}}}}
grid: {{batch_sizes: [1, 4], spec_modes: [v1, v2], algorithm: NEXTN, steps: [1], accept_lengths: [1.8], baseline: true}}
workload: {{input_len: 16, output_len: 16}}
repeats: 1
measure: {{paired: false}}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, int]:
    tmp = tmp_path_factory.mktemp("evidence")
    url = f"sqlite:///{tmp / 'evidence.db'}"
    engine = open_database(url)
    shard = build_preset(tmp / "shard", "deepseek-v3-tp8-shard", 2)  # a floor far below the stand-in's step
    text = SHARD.format(model=shard)
    a = execute_sweep(parse_sweep(text), text, engine, log_dir=tmp / "logs", show_progress=False).run_id
    (tmp / "huge").mkdir()
    (tmp / "huge" / "config.json").write_text(json.dumps(HUGE))
    text = BASELINE_SWEEP.format(model=tmp / "huge")
    b = execute_sweep(parse_sweep(text), text, engine, log_dir=tmp / "logs", show_progress=False).run_id
    engine.dispose()
    return url, a, b


def test_shard_run_page(runs: tuple[str, int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    url, shard, _ = runs
    at = open_page(url, "pages/sweep.py", monkeypatch, run=str(shard))
    captions = [c.value for c in at.caption]
    assert "Numbers: dummy weights, acceptance pinned at 1.8, balanced routing." in captions
    assert not any("routing collapsed" in w.value.lower() for w in at.warning)
    # The spec-over-baseline lines: every speculative point of the grid, over its batch size's baseline, and
    # what they mean for the model class.
    specs = charts(show(at, "sw_tab", "Against batch size"))
    captions = [c.value for c in at.caption]
    assert any("On a GPU, one GPU of a TP-8 DeepSeek-V3 deployment: 2 of 61 layers" in c for c in captions)
    i = next(k for k, s in enumerate(specs) if "spec / no-spec" in json.dumps(s))
    lines = chart_rows(at, i)
    assert sorted(lines["batch_size"].unique()) == [1, 4] and set(lines["mode"]) == {"v1", "v2"}
    # Every point has a floor on the stand-in's H200, none impossible: the floor chart, no error.
    (floor,) = charts(show(at, "sw_tab", "Physical floor"))
    assert "floor / measured step" in json.dumps(floor)
    floors = chart_rows(at, 0)
    assert len(floors) == 6 and (floors["floor_fraction"] < 1).all() and not floors["impossible"].any()
    assert not at.error


def test_impossible_point_is_named(runs: tuple[str, int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    url, _, huge = runs
    at = open_page(url, "pages/sweep.py", monkeypatch, run=str(huge))
    assert len(at.error) == 1 and "1 point(s) measured faster than physics allows" in at.error[0].value
    assert "baseline bs1" in at.error[0].value


def test_slice_page_says_routing_collapsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The committed H200 slice run: dummy weights before specbench set SGLang's switch.
    db = tmp_path / "slice.db"
    shutil.copy(REPO_ROOT / "examples" / "h200-v3slice-paired.db", db)
    url = f"sqlite:///{db}"
    eng = open_database(url)
    runs = q.run_choices(eng)
    run = int(runs.loc[runs["sweep_name"] == "h200-v3slice-paired", "id"].iloc[0])
    facts = q.caption_facts(eng, run)
    eng.dispose()
    assert facts["dummy_weights"] is True and facts["routings"] == []
    at = open_page(url, "pages/sweep.py", monkeypatch, run=str(run))
    captions = [c.value for c in at.caption]
    assert any(
        c.startswith("Numbers: dummy weights, acceptance pinned at 2.5, routing collapsed") for c in captions
    )
    assert any("Expert routing collapsed" in w.value for w in at.warning)


def test_v2_vs_v1_export_carries_each_sides_floor(runs: tuple[str, int, int]) -> None:
    from analysis import v2_vs_v1

    url, shard, _ = runs
    eng = open_database(url)
    frame = v2_vs_v1.load(eng, shard)
    points = q.run_points(eng, shard)
    eng.dispose()
    assert len(frame) == 2  # batch 1 and 4, steps 1 at 1.8
    for row in frame.to_dict("records"):
        for mode in ("v1", "v2"):
            want = points[(points["spec_mode"] == mode) & (points["batch_size"] == row["batch_size"])]
            assert row[f"{mode}_floor_fraction"] == pytest.approx(float(want["floor_fraction"].iloc[0]))
    text = v2_vs_v1.to_markdown(frame)
    assert "floor v1 / v2" in text and "above 1 is impossible" in text
