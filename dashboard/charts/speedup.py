"""Speculation over the no-spec baseline across batch sizes, and each point against its physical floor, from
`analysis.sweep.sweep_grid` and `analysis.floors.floor_rows` frames. A rule marks 1 on both: speculation that
pays (above) or not (below), and the floor (a point above 1 is impossible)."""

import altair as alt
import pandas as pd

from dashboard.charts.style import AnyChart
from dashboard.charts.sweep import MODE_DASH, MODE_TITLES, STEPS_PALETTE, batch_axis

IMPOSSIBLE_COLOR = "#d62728"


def speedup_frame(grid: pd.DataFrame) -> pd.DataFrame:
    """Speculative rows of a sweep grid with a speedup: `series` (steps), `mode`, batch size, speedup."""
    f = grid[(grid["spec_mode"] != "baseline") & grid["speedup_over_baseline"].notna()]
    if f.empty:
        return pd.DataFrame(columns=["series", "mode", "mode_title", "batch_size", "speedup_over_baseline"])
    return pd.DataFrame(
        {
            "series": [f"steps {int(s)}" for s in f["steps"]],
            "mode": f["spec_mode"].to_numpy(),
            "mode_title": f["spec_mode"].map(MODE_TITLES).to_numpy(),
            "batch_size": f["batch_size"].astype(int).to_numpy(),
            "speedup_over_baseline": f["speedup_over_baseline"].astype(float).to_numpy(),
        }
    ).sort_values(["mode", "series", "batch_size"], ignore_index=True)


def speedup_lines(grid: pd.DataFrame) -> AnyChart:
    """Speculative throughput over the baseline's at the same batch size (y) against batch size (x): colour =
    draft steps, dash = spec mode, a rule at 1 (above it speculation pays)."""
    f = speedup_frame(grid)
    names = sorted(set(f["series"]), key=lambda s: int(s.split()[1]))
    modes = [m for m in MODE_DASH if m in set(f["mode"])]
    x = batch_axis(f)
    y = alt.Y(
        "speedup_over_baseline:Q", title="spec / no-spec output throughput", scale=alt.Scale(zero=False)
    )
    color = alt.Color(
        "series:N", title="Spec", scale=alt.Scale(domain=names, range=STEPS_PALETTE[1 : len(names) + 1])
    )
    dash = alt.StrokeDash(
        "mode_title:N",
        title="Mode",
        scale=alt.Scale(domain=[MODE_TITLES[m] for m in modes], range=[MODE_DASH[m] for m in modes]),
    )
    tooltip = [
        alt.Tooltip("series:N", title="spec"),
        alt.Tooltip("mode_title:N", title="mode"),
        alt.Tooltip("batch_size:O", title="batch"),
        alt.Tooltip("speedup_over_baseline:Q", title="over baseline", format=".3f"),
    ]
    base = alt.Chart(f).encode(x=x, y=y, color=color)
    lines = base.mark_line(strokeWidth=2).encode(strokeDash=dash, detail=alt.Detail("mode:N"))
    dots = base.mark_point(filled=True, size=40).encode(tooltip=tooltip)
    one = (
        alt.Chart(pd.DataFrame({"y": [1.0]}))
        .mark_rule(color="#555", strokeDash=[2, 2])
        .encode(y=alt.Y("y:Q"))
    )
    return alt.layer(lines, dots, one).properties(height=300)


def floor_lines(rows: pd.DataFrame) -> AnyChart:
    """Floor fraction (floor / measured step) per configuration against batch size; red points lie above 1,
    faster than the memory bus allows."""
    f = rows.dropna(subset=["floor_fraction"])
    x = batch_axis(f)
    y = alt.Y("floor_fraction:Q", title="floor / measured step")
    tooltip = [
        alt.Tooltip("series:N", title="config"),
        alt.Tooltip("batch_size:O", title="batch"),
        alt.Tooltip("status:N", title="status"),
        alt.Tooltip("step_floor_ms:Q", title="floor ms", format=".3f"),
        alt.Tooltip("measured_step_ms:Q", title="measured step ms", format=".3f"),
        alt.Tooltip("floor_fraction:Q", title="floor fraction", format=".2f"),
    ]
    base = alt.Chart(f).encode(x=x, y=y)
    lines = base.mark_line(strokeWidth=1.5).encode(color=alt.Color("series:N", title="Config"))
    dots = base.mark_point(filled=True, size=50).encode(
        color=alt.Color("series:N", condition={"test": "datum.impossible", "value": IMPOSSIBLE_COLOR}),
        tooltip=tooltip,
    )
    one = alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(color=IMPOSSIBLE_COLOR).encode(y=alt.Y("y:Q"))
    return alt.layer(lines, dots, one).properties(height=280)
