"""The Profiles timeline builder: kernels closer together than the chart can show apart become one bar."""

from __future__ import annotations

from typing import Any

from dashboard import profile_charts
from dashboard.profile_charts import NAME_CHARS, merge_kernels


def _kernel(name: str, start: float, end: float, phase: str = "draft") -> dict[str, Any]:
    return {
        "row": "GPU kernels",
        "kind": "kernel",
        "name": name,
        "phase": phase,
        "start_ms": start,
        "end_ms": end,
    }


def test_back_to_back_kernels_of_one_phase_are_one_bar() -> None:
    step = {
        "row": "GPU steps",
        "kind": "phase",
        "name": "step",
        "phase": "draft",
        "start_ms": 0.0,
        "end_ms": 5.0,
    }
    rows = [
        step,
        _kernel("a", 0.000, 0.002),
        _kernel("long_kernel", 0.0025, 0.0100),  # 0.5 us after a: within the resolution
        _kernel("b", 0.0105, 0.0110),
        _kernel("far", 1.0, 1.5),  # a visible gap before it
        _kernel("verify", 1.5001, 1.6, phase="target_verify"),  # touching, but another phase
    ]
    bars = merge_kernels(rows, resolution_ms=0.001)
    assert bars[0] == {**step, "kernels": 1, "busy_ms": 5.0}  # phases are drawn as they are
    kernels = [b for b in bars if b["kind"] == "kernel"]
    assert [(b["kernels"], b["start_ms"], b["end_ms"]) for b in kernels] == [
        (3, 0.0, 0.011),
        (1, 1.0, 1.5),
        (1, 1.5001, 1.6),
    ]
    merged = kernels[0]
    assert merged["name"] == "3 kernels, longest: long_kernel"
    assert abs(merged["busy_ms"] - (0.002 + 0.0075 + 0.0005)) < 1e-12  # kernel time, not the bar's span
    assert kernels[1]["name"] == "far" and kernels[2]["phase"] == "target_verify"


def test_kernel_names_are_cut_for_the_tooltip() -> None:
    (bar,) = merge_kernels([_kernel("x" * 5000, 0.0, 1.0)], resolution_ms=0.01)
    assert len(bar["name"]) == NAME_CHARS and bar["name"].endswith("…")


def test_timeline_draws_merged_bars_on_the_shared_axis() -> None:
    rows = [_kernel(f"k{i}", i * 0.001, i * 0.001 + 0.0008) for i in range(500)]  # 500 kernels in 0.5 ms
    rows.append(_kernel("late", 30.0, 31.0))
    spec = profile_charts.timeline(rows, "v1", x_max=40.0).to_dict()
    (values,) = spec["datasets"].values()
    assert [v["kernels"] for v in values] == [500, 1]  # 40 ms / 2000 = 20 us: the 0.2 us gaps close
    assert spec["encoding"]["x"]["scale"]["domain"] == [0, 40.0]
    assert {t["field"] for t in spec["encoding"]["tooltip"]} >= {"name", "kernels", "busy_ms"}
