"""v2/v1 ratios with intervals: the statistics by hand, the pairing rule, and the export of a paired sim run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from analysis.v2_vs_v1 import load, to_markdown, v2_vs_v1
from bench.pairing import abba_order
from bench.stats.ratio import half_width, paired_ratio, pairs_for, unpaired_ratio, verdict
from bench.stats.tdist import t_quantile
from bench.sweep import parse_sweep
from dashboard.charts import GREY_CELL, ratio_heatmap
from db.engine import session_scope
from db.models import Point, Run, Sample
from runners.cli import app
from runners.sweep_runner import execute_sweep
from synthetic.server.config import PerfParams
from synthetic.server.perf import PerfModel
from tests.fixtures.dashboard import open_page, show

T_975 = {2: 4.302652729911275, 4: 2.776445105197793, 5: 2.570581835636314, 10: 2.228138851986274}


def test_t_quantiles_match_the_tables() -> None:
    for df, t in T_975.items():
        assert t_quantile(0.95, df) == pytest.approx(t, abs=1e-8)
    assert T_975[5] < t_quantile(0.95, 4.5) < T_975[4]  # fractional df (Welch) lies between


def test_paired_interval_by_hand() -> None:
    v1, v2 = [100.0, 110.0, 105.0], [120.0, 121.0, 126.0]
    # log ratios per repeat: ln 1.2, ln 1.1, ln 1.2
    d = [math.log(1.2), math.log(1.1), math.log(1.2)]
    mean = (2 * math.log(1.2) + math.log(1.1)) / 3
    dev = [x - mean for x in d]
    s = math.sqrt(sum(x * x for x in dev) / (3 - 1))
    half = T_975[2] * s / math.sqrt(3)
    got = paired_ratio(v1, v2)
    assert got.method == "paired" and got.n == 3
    assert got.ratio == pytest.approx(math.exp(mean), rel=1e-12)
    assert got.low == pytest.approx(math.exp(mean - half), rel=1e-9)
    assert got.high == pytest.approx(math.exp(mean + half), rel=1e-9)
    assert (round(got.ratio, 4), round(got.low or 0, 4), round(got.high or 0, 4)) == (1.1657, 1.0289, 1.3206)


def test_pairs_for_a_target_width() -> None:
    v1, v2 = [100.0, 110.0, 105.0], [120.0, 121.0, 126.0]
    d = [math.log(1.2), math.log(1.1), math.log(1.2)]
    s = math.sqrt(sum((x - sum(d) / 3) ** 2 for x in d) / 2)
    n = pairs_for(v1, v2, 0.05)
    assert n == 7  # the smallest n whose interval at this spread is within +-5%:
    assert t_quantile(0.95, n - 1) * s / math.sqrt(n) <= math.log(1.05)
    assert t_quantile(0.95, n - 2) * s / math.sqrt(n - 1) > math.log(1.05)
    assert pairs_for(v1, v2, 0.20) == 3 and pairs_for([100.0, 100.0], [110.0, 110.0], 0.05) == 2
    assert pairs_for(v1[:1], v2[:1], 0.05) is None  # one pair has no spread to project from
    assert pairs_for([1.0, 1.0], [1.0, 3.0], 0.05, cap=50) is None  # past the cap
    iv = paired_ratio(v1, v2)
    assert half_width(iv.low, iv.ratio, iv.high) == pytest.approx(
        max(1.3206 / 1.1657 - 1, 1 - 1.0289 / 1.1657), abs=1e-3
    )


def test_unpaired_interval_by_hand() -> None:
    a, b = [100.0, 110.0, 105.0, 98.0], [120.0, 121.0, 126.0]
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    ma, mb = sum(la) / 4, sum(lb) / 3
    va = sum((x - ma) ** 2 for x in la) / 3
    vb = sum((x - mb) ** 2 for x in lb) / 2
    se = math.sqrt(va / 4 + vb / 3)
    df = (va / 4 + vb / 3) ** 2 / ((va / 4) ** 2 / 3 + (vb / 3) ** 2 / 2)
    half = t_quantile(0.95, df) * se
    got = unpaired_ratio(a, b)
    assert got.method == "unpaired"
    assert got.ratio == pytest.approx(math.exp(mb - ma), rel=1e-12)
    assert got.low == pytest.approx(math.exp(mb - ma - half), rel=1e-9)
    assert got.high == pytest.approx(math.exp(mb - ma + half), rel=1e-9)
    # the same data swapped gives the reciprocal interval (log scale: symmetric in the two sides)
    back = unpaired_ratio(b, a)
    assert back.low == pytest.approx(1 / (got.high or 0)) and back.high == pytest.approx(1 / (got.low or 0))


def test_verdicts() -> None:
    assert verdict(1.01, 1.2) == "faster"
    assert verdict(0.8, 0.99) == "slower"
    assert verdict(0.95, 1.05) == "no clear difference"
    assert verdict(None, None) == "insufficient data"
    assert verdict(0.8, 0.9, higher_is_better=False) == "faster"  # TPOT: lower is better


def _frames(order: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    common = {"workload_key": "w", "algorithm": "EAGLE", "topk": 1, "draft_tokens": 3, "steps": 2}
    common |= {"floor_fraction": None, "correctness": None, "acceptance_v2_v1": None}  # not measured here
    points = pd.DataFrame(
        [
            {"point_id": 1, "spec_mode": "v1", "batch_size": 8, "accept_length_pinned": 2.5, **common},
            {"point_id": 2, "spec_mode": "v2", "batch_size": 8, "accept_length_pinned": 2.5, **common},
            {"point_id": 3, "spec_mode": None, "batch_size": 8, "accept_length_pinned": None, **common},
        ]
    )
    rows = []
    v1, v2 = [100.0, 110.0, 105.0], [120.0, 121.0, 126.0]
    for r in range(3):
        for pid, tput in ((1, v1[r]), (2, v2[r])):
            rows.append(
                {
                    "point_id": pid,
                    "repeat": r,
                    "status": "ok",
                    "order_index": (2 * r + pid) if order else None,
                    "invocation": 0 if order else None,
                    "output_throughput": tput,
                    "tpot_mean_ms": 1000.0 / tput,
                }
            )
    rows.append(
        {
            "point_id": 2,
            "repeat": 3,
            "status": "invalid",
            "order_index": 9,
            "invocation": 0,
            "output_throughput": 1.0,
            "tpot_mean_ms": 1.0,
        }
    )
    return points, pd.DataFrame(rows)


def test_frame_pairs_by_repeat_only_when_interleaved() -> None:
    paired = v2_vs_v1(*_frames(order=True))
    assert len(paired) == 1
    row = paired.iloc[0]
    assert row["method"] == "paired" and row["n"] == 3 and row["accept_length"] == 2.5
    assert row["ratio"] == pytest.approx(paired_ratio([100, 110, 105], [120, 121, 126]).ratio)
    assert row["v1_output_throughput"] == 105.0 and row["v2_output_throughput"] == 121.0  # medians, ok only
    assert row["verdict"] == "faster" and row["tpot_verdict"] == "faster"
    assert row["tpot_ratio"] == pytest.approx(1 / row["ratio"])
    unpaired = v2_vs_v1(*_frames(order=False)).iloc[0]
    assert unpaired["method"] == "unpaired"
    assert row["pairs_for_5pct"] == pairs_for([100, 110, 105], [120, 121, 126], 0.05) == 7
    md = to_markdown(paired, "t")
    assert "| 8 | 2 | 2.5 | 105 | 121 | 1.166 | [1.029, 1.321] | faster |" in md
    # +-13%: the table says how many pairs +-5% would take at this spread
    assert "batch 8 steps 2 accept len 2.5 needs about 7 pairs" in md
    assert pd.isna(unpaired["pairs_for_5pct"]) and "needs about" not in to_markdown(
        v2_vs_v1(*_frames(order=False))
    )


# One cell of an interleaved run per batch size: repeat -> (v1 tok/s, v1 status, v2 tok/s, v2 status).
Cell = dict[int, tuple[float, str, float, str]]


def _store_interleaved_run(engine: Engine, cells: dict[int, Cell], resumed: tuple[int, str, int]) -> int:
    """An ABBA-interleaved run as the runner stores it, in one invocation (order index 0) but for `resumed`:
    (batch size, mode, repeat) whose window a resumed invocation measured after the rest, as when the host was
    lost between the two windows of that repeat."""
    with session_scope(engine) as s:
        run = Run(sweep_name="abba", sweep_yaml="name: abba", sweep_hash="0" * 64, backend="sim", model="m")
        s.add(run)
        s.flush()
        order = 0
        late: list[Sample] = []
        for bs, cell in cells.items():
            points = {}
            for mode in ("v1", "v2"):
                points[mode] = Point(
                    run_id=run.id, point_key=f"{bs}-{mode}", fingerprint=f"{bs}-{mode}", status="ok",
                    model="m", attention_backend="flashmla", algorithm="EAGLE", steps=2, topk=1,
                    draft_tokens=3, spec_mode=mode, batch_size=bs, dataset="random", input_len=32,
                    output_len=16, num_prompts=8, workload_key="w", accept_length_pinned=2.5,
                    repeats=len(cell), repeats_planned=len(cell),
                )  # fmt: skip
                s.add(points[mode])
            s.flush()
            for repeat, side in abba_order(len(cell)):
                mode = "v1" if side == "A" else "v2"
                tput, status = cell[repeat][:2] if mode == "v1" else cell[repeat][2:]
                sample = Sample(
                    point_id=points[mode].id, repeat=repeat, status=status, output_throughput=tput,
                    tpot_mean_ms=1000.0 / tput, invocation=0,
                )  # fmt: skip
                if (bs, mode, repeat) == resumed:
                    late.append(sample)
                    continue
                sample.order_index = order
                order += 1
                s.add(sample)
        for sample in late:  # the resumed invocation begins where the first one stopped
            sample.order_index = sample.invocation = order
            s.add(sample)
        return run.id


def test_an_interleaved_runs_unpaired_fallback_leaves_out_a_repeat_split_across_invocations(
    engine: Engine,
) -> None:
    """Batch 4 keeps a single repeat `ok` on both sides within one invocation (the others lost a side to
    `unstable`), too few for the paired interval. Repeat 1's two windows are both `ok` but ran in different
    invocations (a resumed run finished its v1 side, elsewhere): the unpaired fallback must leave it out, as
    the paired interval does, and count only windows whose partner one invocation measured."""
    cells: dict[int, Cell] = {
        4: {
            0: (100.0, "ok", 120.0, "ok"),
            1: (50.0, "ok", 118.0, "ok"),  # v1 measured by the resumed invocation, on another host
            2: (104.0, "ok", 90.0, "unstable"),
            3: (80.0, "unstable", 124.0, "ok"),
        },
        1: {r: (100.0 + r, "ok", 110.0 + 2 * r, "ok") for r in range(4)},
    }
    run_id = _store_interleaved_run(engine, cells, resumed=(4, "v1", 1))
    table = load(engine, run_id, profiles=False).set_index("batch_size")

    bs4 = table.loc[4]
    want = unpaired_ratio([100.0, 104.0], [120.0, 124.0])  # repeats 0 and 2 of v1, 0 and 3 of v2
    assert bs4["method"] == "unpaired" and bs4["n"] == want.n == 2
    assert bs4["ratio"] == pytest.approx(want.ratio)
    assert (bs4["ci_low"], bs4["ci_high"]) == pytest.approx((want.low, want.high))
    # With repeat 1 mixed in, the fallback would have read another comparison.
    mixed = unpaired_ratio([100.0, 50.0, 104.0], [120.0, 118.0, 124.0])
    assert mixed.n == 3 and mixed.ratio != pytest.approx(want.ratio)
    tpot = unpaired_ratio([1000 / 100.0, 1000 / 104.0], [1000 / 120.0, 1000 / 124.0])
    assert bs4["tpot_ratio"] == pytest.approx(tpot.ratio)
    # Each side's median stays the point's own: every `ok` window it measured.
    assert bs4["v1_output_throughput"] == 100.0 and bs4["v2_output_throughput"] == 120.0

    bs1 = table.loc[1]  # all four repeats paired within the one invocation
    assert bs1["method"] == "paired" and bs1["n"] == 4
    assert bs1["ratio"] == pytest.approx(
        paired_ratio([100.0 + r for r in range(4)], [110.0 + 2 * r for r in range(4)]).ratio
    )


PAIRED_SIM = """
name: ratio-sim
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  # Steps three times the model's length: a loaded host's CPU waits are then a smaller share of each step, so
  # the modelled 16% v2 advantage still shows (windows are time-bound, so the test takes no longer).
  sim: {time_scale: 3.0, seed: 11, startup_s: 0.0}
grid: {batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [2], accept_lengths: [2.5], baseline: false}
workload: {input_len: 32, output_len: 32, num_prompts: 8}
measure: {min_window_s: 0.25, drift_check: false}
repeats: 4
"""


def test_export_of_a_paired_sim_run_has_an_interval_for_every_cell(engine: Engine, tmp_path: Path) -> None:
    spec = parse_sweep(PAIRED_SIM)
    out = execute_sweep(spec, PAIRED_SIM, engine, log_dir=tmp_path / "logs", show_progress=False)
    assert out.status in ("done", "unstable")
    url = engine.url.render_as_string(hide_password=False)
    r = CliRunner().invoke(app, ["export", "--db", url, "--view", "v2-vs-v1", "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    rows = doc["rows"]
    assert doc["run_id"] == out.run_id and {x["batch_size"] for x in rows} == {1, 4}
    # The stand-in's perf model: non-overlap (v1) steps cost gpu + cpu, overlap (v2) max(gpu, cpu) + sync.
    for row in rows:
        model = {
            overlap: PerfModel(PerfParams(), overlap, 1, 2, 3, 64, True, 1.0).decode_ms(row["batch_size"])
            for overlap in (False, True)
        }
        assert model[True] < model[False]  # so v2 is faster in every cell
        assert row["method"] == "paired" and row["n"] == 4
        assert row["ci_low"] is not None and row["ci_high"] is not None
        assert row["ci_low"] <= row["ratio"] <= row["ci_high"]
        assert row["ratio"] > 1.0, row
        assert row["tpot_ratio"] < 1.0, row
    csv = CliRunner().invoke(app, ["export", "--db", url, "--view", "v2-vs-v1", "--format", "csv"])
    header = csv.stdout.splitlines()[0].split(",")
    for col in (
        "batch_size",
        "steps",
        "accept_length",
        "v1_output_throughput",
        "v2_output_throughput",
        "ratio",
    ):
        assert col in header
    assert {"ci_low", "ci_high", "verdict", "tpot_ratio", "tpot_ci_low", "tpot_ci_high"} <= set(header)
    md = CliRunner().invoke(app, ["export", "--db", url, "--view", "v2-vs-v1", "--format", "md"])
    assert md.exit_code == 0 and "| batch | steps | accept len |" in md.output
    two = CliRunner().invoke(app, ["export", "--db", url, "--view", "v2-vs-v1", "--run", "1", "--run", "2"])
    assert two.exit_code == 2

    # The Sweep page draws the same cells with their intervals (real Streamlit app under AppTest).
    at = show(
        open_page(url, "pages/sweep.py", pytest.MonkeyPatch(), run=str(out.run_id)), "sw_tab", "v2 over v1"
    )
    ratio_charts = [c for c in at.get("vega_lite_chart") if '"v2/v1"' in c.proto.spec]
    assert len(ratio_charts) == 1
    (ds,) = ratio_charts[0].proto.datasets  # Streamlit ships the chart's rows as Arrow next to the spec
    values = pa.ipc.open_stream(ds.data.data).read_pandas()
    assert set(values["batch_size"]) == {1, 4}
    assert all(v.startswith("[") for v in values["interval"])
    assert all(p.startswith("about ") for p in values["pairs_5pct"])  # every cell is paired: a projection
    assert not any("sharing the GPU" in w.value for w in at.warning)  # a colocated pair is by design
    assert any("interleaved" in c.value for c in at.caption)


def test_ratio_heatmap_greys_out_cells_whose_interval_spans_one() -> None:
    frame = pd.DataFrame(
        [
            {
                "batch_size": 1,
                "steps": 2,
                "accept_length": 2.5,
                "ratio": 1.12,
                "ci_low": 1.05,
                "ci_high": 1.2,
                "verdict": "faster",
                "n": 5,
                "method": "paired",
                "pairs_for_5pct": 4,
            },
            {
                "batch_size": 8,
                "steps": 2,
                "accept_length": 2.5,
                "ratio": 1.02,
                "ci_low": 0.97,
                "ci_high": 1.07,
                "verdict": "no clear difference",
                "n": 5,
                "method": "paired",
                "pairs_for_5pct": 4,
            },
            {
                "batch_size": 32,
                "steps": 2,
                "accept_length": 2.5,
                "ratio": 0.9,
                "ci_low": None,
                "ci_high": None,
                "verdict": "insufficient data",
                "n": 1,
                "method": "paired",
                "pairs_for_5pct": None,
            },
        ]
    )
    spec = ratio_heatmap(frame).to_dict()
    values = {v["batch_size"]: v for v in next(iter(spec["datasets"].values()))}
    assert values[1]["clear"] is True and values[8]["clear"] is False and values[32]["clear"] is False
    assert values[1]["interval"] == "[1.05, 1.20]" and values[32]["interval"] == "no interval"
    rect = spec["spec"]["layer"][0]["encoding"]["color"]
    assert rect["condition"]["test"] == "datum.clear" and rect["value"] == GREY_CELL
