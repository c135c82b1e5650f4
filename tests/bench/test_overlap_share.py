"""The overlap answer in one number: the share of v1's GPU idle time per cycle that v2 removes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis.profiles import share_cell
from bench.profile.overlap import overlap_figures, overlap_share, share_text, verdict
from tests.paths import REPO_ROOT

SUMMARIES = REPO_ROOT / "examples" / "h200-v3slice-profiles" / "summaries.json"


def _idle(ms: float, cycle: float = 10.0) -> dict:
    return {"gpu_idle_ms_per_cycle": {"median": ms}, "cycle_ms": {"median": cycle}}


def test_hand_built_cell() -> None:
    # v1 idles 6 ms of a 10 ms cycle, v2 1 ms: v2 removes 5 of the 6 ms overlap could remove at most.
    f = overlap_figures(_idle(6.0), _idle(1.0, cycle=5.0))
    assert f["overlap_share"] == pytest.approx(5 / 6)
    assert share_text(f["overlap_share"]) == "v2 hides 83% of what overlap could hide"
    assert verdict(_idle(6.0), _idle(1.0, cycle=5.0)).endswith("v2 hides 83% of what overlap could hide")
    assert overlap_share(6.0, 0.0) == 1.0  # the limit: a GPU busy through the whole cycle
    assert overlap_share(0.0, 1.0) is None  # nothing to hide
    assert share_cell(5 / 6) == "83% of 100%"
    assert share_cell(None) == "–" and share_cell(float("nan")) == "–"


def test_shipped_h200_slice_profiles() -> None:
    # The H200 slice's GPU-only profiles (docs/results/2026-12-04-h200-v3-slice.md): v2 idles longer than v1
    # at every profiled batch, so it hides none of what overlap could hide there.
    s = json.loads(SUMMARIES.read_text())
    shares = {bs: overlap_figures(s[f"v1-bs{bs}"], s[f"v2-bs{bs}"])["overlap_share"] for bs in (1, 8, 32)}
    idle = {k: v["gpu_idle_ms_per_cycle"]["median"] for k, v in s.items()}
    for bs, share in shares.items():
        assert share == pytest.approx((idle[f"v1-bs{bs}"] - idle[f"v2-bs{bs}"]) / idle[f"v1-bs{bs}"])
    assert shares[8] == pytest.approx(-0.0155, abs=0.001)  # 5.11 -> 5.19 ms
    assert shares[1] == pytest.approx(-0.795, abs=0.001)  # 4.99 -> 8.96 ms (v2's profile distorted x1.32)
    assert shares[32] == pytest.approx(-0.379, abs=0.001)  # 6.91 -> 9.52 ms
    assert share_text(shares[8]) == (
        "v2 hides none of what overlap could hide (its GPU idles 2% longer per cycle than v1's)"
    )
    assert share_cell(shares[32]) == "none (-38%)"
    assert pd.isna(overlap_figures({}, s["v2-bs8"])["overlap_share"] or float("nan"))
