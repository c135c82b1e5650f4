"""benchmarks/abba_blocks.py: the AB/BA block interval next to the per-repeat pairs' one."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis import v2_vs_v1, windows
from bench.pairing import abba_sides
from benchmarks.abba_blocks import block_table
from db.migrate import open_database_readonly
from tests.fixtures.dashboard import grid_copy


def _windows(ratio: float, drift_per_window: float, repeats: int = 8) -> pd.DataFrame:
    """v1 and v2 windows in ABBA order on a host whose speed grows linearly with every window."""
    rows = []
    order = 0
    for r in range(repeats):
        for side in abba_sides(r):
            speed = 1.0 + drift_per_window * order
            mode = "v1" if side == "A" else "v2"
            rows.append(
                {
                    "batch_size": 8,
                    "steps": 1,
                    "accept_length_pinned": 2.0,
                    "spec_mode": mode,
                    "repeat": r,
                    "status": "ok",
                    "invocation": 0,
                    "output_throughput": 1000.0 * speed * (ratio if mode == "v2" else 1.0),
                }
            )
            order += 1
    return pd.DataFrame(rows)


def test_blocks_cancel_linear_drift_that_the_pairs_only_average_out() -> None:
    (row,) = block_table(_windows(1.05, 0.01)).to_dict("records")
    assert row["pairs"] == 8 and row["blocks"] == 4
    assert row["pair_sd"] > 0.005  # AB pairs read high, BA pairs low: the drift shows as spread
    assert row["block_sd"] == pytest.approx(0.0, abs=2e-4)  # an AB and its BA cancel it
    (still,) = block_table(_windows(1.05, 0.0)).to_dict("records")  # no drift: both are exact
    assert still["pair_sd"] == pytest.approx(0.0, abs=1e-12) and still["pair_pm_pct"] == pytest.approx(0.0)


def test_the_pairs_are_the_ones_the_v2_vs_v1_view_counts(tmp_path: Path) -> None:
    engine, _ = open_database_readonly(grid_copy(tmp_path, "grid.db"))
    table = block_table(windows.load(engine, 1))
    view = v2_vs_v1.load(engine, 1)
    engine.dispose()
    assert len(table) == len(view) == 8
    merged = table.merge(
        view.rename(columns={"accept_length": "accept_length_pinned"}),
        on=["batch_size", "steps", "accept_length_pinned"],
    )
    assert (merged["pairs"] == merged["n"]).all()
    half = [(hi / lo) ** 0.5 - 1.0 for lo, hi in zip(merged["ci_low"], merged["ci_high"], strict=True)]
    assert [p / 100 for p in merged["pair_pm_pct"]] == pytest.approx(half, rel=1e-6)
    assert all(math.isfinite(x) for x in merged["block_sd"])
