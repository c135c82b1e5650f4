"""Chart builders as pure functions: what the Vega-Lite specs say about axes, dashes, gaps and labels."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from dashboard import charts


def _grid() -> pd.DataFrame:
    rows = []
    for mode, steps in (("baseline", None), ("v1", 1), ("v1", 3), ("v2", 1), ("v2", 3)):
        for bs in (1, 4, 16, 32):
            if (mode, steps, bs) == ("v2", 3, 16):
                continue  # this point failed: its line must break, not bridge 4 -> 32
            rows.append(
                {
                    "spec_mode": mode,
                    "steps": steps,
                    "batch_size": bs,
                    "output_throughput": 100.0 * bs * (1 + (steps or 0) / 10) * (1.1 if mode == "v2" else 1),
                    "accept_length": None if steps is None else 1.5 + steps / 4,
                    "correctness": None,
                }
            )
    return pd.DataFrame(rows)


def _layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec.get("layer", [spec]))


def test_throughput_frame_leaves_gaps_at_missing_points() -> None:
    f = charts.throughput_frame(_grid())
    assert len(f) == 5 * 4  # every line at every measured batch size
    hole = f[(f["mode"] == "v2") & (f["series"] == "steps 3") & (f["batch_size"] == 16)]
    assert len(hole) == 1 and np.isnan(hole["output_throughput"].iloc[0])
    assert f["output_throughput"].notna().sum() == len(_grid())


def test_throughput_lines_axis_dash_and_gaps() -> None:
    spec = charts.throughput_lines(_grid()).to_dict()
    line, dots = _layers(spec)
    # Ordinal x over the measured batch sizes only: no 2 or 8 ticks between 1, 4, 16, 32.
    assert line["encoding"]["x"]["type"] == "ordinal"
    assert line["encoding"]["x"]["sort"] == [1, 4, 16, 32]
    # A null breaks the path (never "filter", which would bridge the gap).
    mark = line["mark"]
    assert mark["type"] == "line" and mark["invalid"] == "break-paths-show-domains"
    # v1 dashed, v2 solid, in the chart and in the legend (drawn as strokes, not circles).
    dash = line["encoding"]["strokeDash"]
    pattern = dict(zip(dash["scale"]["domain"], dash["scale"]["range"], strict=True))
    assert pattern["v1 (non-overlap)"] != pattern["v2 (overlap)"] and pattern["v2 (overlap)"] == [1, 0]
    assert dash["legend"]["symbolType"] == "stroke"
    # Legends stacked on the right (inside the fitted width) with unlimited label width: never cut off.
    for channel in ("color", "strokeDash"):
        legend = line["encoding"][channel]["legend"]
        assert legend["orient"] == "right" and legend["labelLimit"] == 0 and "direction" not in legend
    data = next(iter(spec["datasets"].values()))
    assert any(r["output_throughput"] is None for r in data)  # the gap travels to the browser as a null
    assert dots["mark"]["type"] == "point"


def _series(n: int = 30) -> pd.DataFrame:
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    return pd.DataFrame(
        {
            "point_id": range(n),
            "run_id": range(n),
            "output_throughput": [1000.0] * (n - 5) + [900.0] * 5,
            "output_throughput_ci_low": [990.0] * n,
            "output_throughput_ci_high": [1010.0] * n,
            "sglang_version": ["0.5.13"] * (n - 5) + ["0.5.14"] * 5,
            "sglang_commit": ["abcdef0"] * n,
            "started_at": [t0 + timedelta(hours=i) for i in range(n)],
        }
    )


def _changes(series: pd.DataFrame, at: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "started_at": series["started_at"].iloc[i],
                "sglang_version": "0.5.13",
                "sglang_commit": "abcdef0",
                "rel_change": -0.053,
                "direction": "regression",
                "state": "acknowledged",
                "why": "acceptance",
                "pvalue": 1e-4,
            }
            for i in at
        ]
    )


def test_change_labels_near_the_right_edge_run_leftwards() -> None:
    series = _series()
    frame = charts.trend_frame(series, "output_throughput", "time")
    rules = charts.change_rule_frame(frame, _changes(series, [3, 27]), "time")
    assert list(rules["align"]) == ["left", "right"]
    assert rules["label"].iloc[1] == "-5.3% (acknowledged)"
    spec = charts.trend_chart(frame, "output_throughput", "time", _changes(series, [3, 27])).to_dict()
    texts = [layer for layer in spec["layer"] if layer["mark"]["type"] == "text"]
    assert {t["mark"]["align"] for t in texts} == {"left", "right"}
    for t in texts:
        side = t["mark"]["align"]
        assert t["transform"] == [{"filter": f"datum.align == '{side}'"}]
        assert (t["mark"]["dx"] > 0) == (side == "left")
    # Ordinal x modes place rules by position too: the second of two versions is right of centre.
    frame_v = charts.trend_frame(series, "output_throughput", "version")
    at_14 = _changes(series, [27]).assign(sglang_version="0.5.14")
    assert list(charts.change_rule_frame(frame_v, at_14, "version")["align"]) == ["right"]


def test_heatmap_legend_can_sit_below() -> None:
    grid = _grid().dropna(subset=["steps"]).assign(speedup=1.05)
    spec = charts.heatmap(grid, "speedup", "×", diverging=True, legend="bottom").to_dict()
    rect = spec["spec"]["layer"][0]
    assert rect["encoding"]["color"]["legend"]["orient"] == "bottom"


def _colour_scale(spec: dict[str, Any]) -> dict[str, Any]:
    scale: dict[str, Any] = spec["spec"]["layer"][0]["encoding"]["color"]["scale"]
    return scale


def test_heatmap_colours_keep_noise_small() -> None:
    # Acceptance 2.50-2.53 across the grid: noise, not a finding. The scale must span far more than that,
    # so the cells sit next to each other in colour instead of at viridis' two ends.
    grid = _grid().dropna(subset=["steps"]).reset_index(drop=True)
    grid["accept_length"] = 2.50 + 0.03 * (grid.index % 2)
    lo, hi = _colour_scale(charts.heatmap(grid, "accept_length", "tokens").to_dict())["domain"]
    assert hi - lo >= 0.1 * 2.515 - 1e-9 and lo < 2.50 and hi > 2.53
    share = 0.03 / (hi - lo)
    assert share < 0.15  # the two values are less than a sixth of the scale apart
    # Real spread keeps its own range: 2.0 to 4.0 spans the scale.
    grid["accept_length"] = 2.0 + 2.0 * (grid.index % 2)
    assert _colour_scale(charts.heatmap(grid, "accept_length", "tokens").to_dict())["domain"] == [2.0, 4.0]
    # Ratios within ±1% of 1 do not paint deep red or blue either.
    grid["speedup"] = 1.0 + 0.01 * ((grid.index % 2) * 2 - 1)
    lo, hi = _colour_scale(charts.heatmap(grid, "speedup", "×", diverging=True).to_dict())["domain"]
    assert (lo, hi) == (0.9, 1.1)


def test_throughput_lines_give_every_mode_its_own_stroke() -> None:
    line, _ = _layers(charts.throughput_lines(_grid()).to_dict())
    dash = line["encoding"]["strokeDash"]["scale"]
    patterns = [tuple(p) for p in dash["range"]]
    assert dash["domain"] == ["no spec", "v1 (non-overlap)", "v2 (overlap)"]
    assert len(set(patterns)) == 3  # "no spec" and "v2" no longer share the solid line


def test_time_axis_reads_dates_for_a_history_and_times_within_a_day() -> None:
    series = _series(30)
    nightly = series.assign(
        started_at=[series["started_at"].iloc[0] + timedelta(hours=12 * i) for i in range(30)]
    )
    spec = charts.trend_chart(
        charts.trend_frame(nightly, "output_throughput", "time"), "output_throughput", "time"
    )
    assert spec.to_dict()["layer"][0]["encoding"]["x"]["axis"]["format"] == "%b %d"
    # One point (a first run): a padded domain and clock times, never a lone tick such as ":34".
    one = charts.trend_frame(series.head(1), "output_throughput", "time")
    x = charts.trend_chart(one, "output_throughput", "time").to_dict()["layer"][0]["encoding"]["x"]
    assert x["axis"]["format"] == "%H:%M" and x["scale"]["domain"][0] < x["scale"]["domain"][1]
