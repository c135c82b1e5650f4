"""Shard vs TP-N: step times and v2/v1 ratios of the two runs side by side. Pure builders from an
`analysis.tp_compare` frame (one row per batch size, steps, accept length and mode)."""

from typing import Any

import altair as alt
import pandas as pd

from analysis.plain import missing
from dashboard.charts.style import AnyChart

SIDE_COLORS = {"shard": "#1f77b4", "shard + all-reduce": "#9467bd", "TP": "#ff7f0e"}
STEP_COLUMNS = {
    "shard": "shard_step_ms",
    "shard + all-reduce": "shard_plus_all_reduce_ms",
    "TP": "tp_step_ms",
}


def _panel(row: dict[str, Any]) -> str:
    if row["mode"] == "baseline":
        return "no spec (baseline)"
    acc = "" if missing(row["accept_length"]) else f" @ {float(row['accept_length']):g}"
    return f"steps {int(row['steps'])}{acc} {row['mode']}"


def _side_names(tp: int) -> dict[str, str]:
    return {"shard": "shard (1 GPU)", "shard + all-reduce": "shard + all-reduce", "TP": f"TP-{tp}"}


def step_frame(frame: pd.DataFrame, tp: int) -> pd.DataFrame:
    """Long form: panel, side (shard / shard + all-reduce / TP-N), batch size, step ms."""
    names = _side_names(tp)
    rows = [
        (_panel(r), names[side], int(r["batch_size"]), float(r[col]))
        for r in frame.to_dict("records")
        for side, col in STEP_COLUMNS.items()
        if not missing(r[col])
    ]
    return pd.DataFrame(rows, columns=["panel", "side", "batch_size", "step_ms"])


def step_lines(frame: pd.DataFrame, tp: int) -> AnyChart:
    """Step time (ms) against batch size, one line per side, one panel per configuration."""
    f = step_frame(frame, tp)
    names = _side_names(tp)
    domain = [names[s] for s in SIDE_COLORS]
    base = alt.Chart(f).encode(
        x=alt.X("batch_size:O", title="Batch size", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("step_ms:Q", title="Step time (ms)", scale=alt.Scale(zero=False)),
        color=alt.Color(
            "side:N", title="Run", scale=alt.Scale(domain=domain, range=list(SIDE_COLORS.values()))
        ),
        tooltip=[
            alt.Tooltip("panel:N", title="configuration"),
            alt.Tooltip("side:N", title="run"),
            alt.Tooltip("batch_size:O", title="batch"),
            alt.Tooltip("step_ms:Q", title="step ms", format=".3f"),
        ],
    )
    return (
        (base.mark_line() + base.mark_point(filled=True))
        .properties(width=220, height=200)
        .facet(column=alt.Column("panel:N", title=None))
    )


def ratio_frame(frame: pd.DataFrame, tp: int) -> pd.DataFrame:
    """One row per speculative cell and run: panel, side, batch size, ratio, interval, verdict."""
    spec = frame[frame["mode"].isin(["v1", "v2"])].drop_duplicates(
        ["batch_size", "steps", "accept_length", "workload_key"]
    )
    names = {"shard": "shard (1 GPU)", "tp": f"TP-{tp}"}
    rows = [
        {
            "panel": _panel({**r, "mode": "v2/v1"}),
            "side": names[side],
            "batch_size": int(r["batch_size"]),
            "ratio": float(r[f"{side}_ratio"]),
            "ci_low": None if missing(r[f"{side}_ci_low"]) else float(r[f"{side}_ci_low"]),
            "ci_high": None if missing(r[f"{side}_ci_high"]) else float(r[f"{side}_ci_high"]),
            "verdict": r[f"{side}_verdict"],
        }
        for r in spec.to_dict("records")
        for side in ("shard", "tp")
        if not missing(r[f"{side}_ratio"])
    ]
    return pd.DataFrame(
        rows, columns=["panel", "side", "batch_size", "ratio", "ci_low", "ci_high", "verdict"]
    )


def ratio_points(frame: pd.DataFrame, tp: int) -> AnyChart:
    """v2/v1 output throughput of each run with its interval, side by side per batch size; a rule at 1."""
    f = ratio_frame(frame, tp)
    domain = ["shard (1 GPU)", f"TP-{tp}"]
    colors = [SIDE_COLORS["shard"], SIDE_COLORS["TP"]]
    x = alt.X("batch_size:O", title="Batch size", axis=alt.Axis(labelAngle=0))
    offset = alt.XOffset("side:N", scale=alt.Scale(domain=domain))
    color = alt.Color("side:N", title="Run", scale=alt.Scale(domain=domain, range=colors))
    tooltip = [
        alt.Tooltip("side:N", title="run"),
        alt.Tooltip("batch_size:O", title="batch"),
        alt.Tooltip("ratio:Q", title="v2/v1", format=".3f"),
        alt.Tooltip("ci_low:Q", title="95% low", format=".3f"),
        alt.Tooltip("ci_high:Q", title="95% high", format=".3f"),
        alt.Tooltip("verdict:N", title="verdict"),
    ]
    base = alt.Chart(f)
    bars = base.mark_rule(strokeWidth=2).encode(
        x=x, xOffset=offset, y=alt.Y("ci_low:Q", title="v2 / v1 output throughput"), y2=alt.Y2("ci_high")
    )
    dots = base.mark_point(filled=True, size=60).encode(
        x=x, xOffset=offset, y=alt.Y("ratio:Q", scale=alt.Scale(zero=False))
    )
    one = base.mark_rule(strokeDash=[4, 3], color="#888").encode(y=alt.datum(1.0))
    return (
        alt.layer(bars.encode(color=color, tooltip=tooltip), dots.encode(color=color, tooltip=tooltip), one)
        .properties(width=220, height=200)
        .facet(column=alt.Column("panel:N", title=None))
    )
