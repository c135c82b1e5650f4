"""Charts of points the correctness gate failed: the speed struck through and labelled `wrong`, the cell marked."""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.correctness import WRONG, strike
from dashboard import charts


def _rows(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_heatmap_strikes_a_wrong_points_speed() -> None:
    grid = pd.DataFrame(
        {
            "batch_size": [1, 1],
            "steps": [3, 3],
            "spec_mode": ["v1", "v2"],
            "output_throughput": [1234.0, 2345.0],
            "correctness": ["pass", "fail"],
        }
    )
    rows = {
        r["spec_mode"]: r
        for r in _rows(charts.heatmap(grid, "output_throughput", "tok/s", strike_wrong=True).to_dict())
    }
    assert rows["v1"]["label"] == "1,234" and not rows["v1"]["wrong"]
    assert rows["v2"]["label"] == f"{strike('2,345')} {WRONG}" and rows["v2"]["wrong"]
    # Not a speed: labelled, not struck.
    plain = {r["spec_mode"]: r for r in _rows(charts.heatmap(grid, "output_throughput", "tok/s").to_dict())}
    assert plain["v2"]["label"] == f"2,345 {WRONG}"
    # Points the gate did not check: labels are the plain values.
    unchecked = _rows(charts.heatmap(grid.assign(correctness=None), "output_throughput", "tok/s").to_dict())
    assert {r["label"] for r in unchecked} == {"1,234", "2,345"}


def test_ratio_cell_with_a_wrong_side_is_grey_and_wrong() -> None:
    frame = pd.DataFrame(
        {
            "batch_size": [1, 8],
            "steps": [3, 3],
            "accept_length": [None, None],
            "ratio": [1.2, 1.3],
            "ci_low": [1.1, 1.2],
            "ci_high": [1.3, 1.4],
            "verdict": ["faster", "faster"],
            "n": [5, 5],
            "method": ["paired", "paired"],
            "pairs_for_5pct": [None, None],
            "v1_correctness": ["pass", "pass"],
            "v2_correctness": ["pass", "fail"],
        }
    )
    rows = {r["batch_size"]: r for r in _rows(charts.ratio_heatmap(frame).to_dict())}
    assert rows[1]["clear"] and rows[1]["ratio_label"] == "1.20"
    assert not rows[8]["clear"] and rows[8]["ratio_label"] == f"{strike('1.30')} {WRONG}"


def test_compare_grid_marks_a_wrong_candidate() -> None:
    table = pd.DataFrame(
        {
            "config": ["EAGLE s3 v2 · bs1", "EAGLE s3 v1 · bs1"],
            "model": ["m", "m"],
            "workload": ["w", "w"],
            "spec_mode": ["v2", "v1"],
            "steps": [3, 3],
            "batch_size": [1, 1],
            "delta": [0.2, 0.01],
            "verdict": ["improvement", "no change"],
            "why": ["", ""],
            "correctness_baseline": ["pass", "pass"],
            "correctness_candidate": ["fail", "pass"],
        }
    )
    texts = {r["spec_mode"]: r["text"] for r in _rows(charts.compare_grid(table).to_dict())}
    assert texts["v2"].endswith(f" {WRONG}") and "\u0336" in texts["v2"]
    assert texts["v1"] == "+1.0%"
