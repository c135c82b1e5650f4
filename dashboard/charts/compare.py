"""Two runs compared: Δ per point pair as a forest plot or as a grid, coloured by verdict or goodness."""

import altair as alt
import numpy as np
import pandas as pd

from analysis.correctness import WRONG, is_wrong, strike
from dashboard.charts.style import VERDICT_COLORS, AnyChart, value_if


def compare_forest(table: pd.DataFrame, threshold: float = 0.05) -> AnyChart:
    """Δ with its interval per point pair (a forest plot), coloured by verdict, with the ±threshold band."""
    f = table.dropna(subset=["delta"]).copy()
    f["label"] = (
        f["config"] + " · " + f["workload"] + np.where(f["model"].nunique() > 1, " · " + f["model"], "")
    )
    for c in ("delta", "ci_low", "ci_high"):
        f[f"{c}_pct"] = f[c].astype(float) * 100
    order = f["label"].tolist()
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=320))
    tooltip = [
        alt.Tooltip("label:N", title="point"),
        alt.Tooltip("delta_pct:Q", title="Δ %", format="+.2f"),
        alt.Tooltip("ci_low_pct:Q", title="interval low %", format="+.2f"),
        alt.Tooltip("ci_high_pct:Q", title="interval high %", format="+.2f"),
        alt.Tooltip("verdict:N"),
        alt.Tooltip("why:N"),
    ]
    color = alt.Color(
        "verdict:N",
        scale=alt.Scale(domain=list(VERDICT_COLORS), range=list(VERDICT_COLORS.values())),
        legend=alt.Legend(orient="top", title=None),
    )
    base = alt.Chart(f).encode(y=y)
    bars = base.mark_rule(strokeWidth=2.5).encode(
        x=alt.X("ci_low_pct:Q", title="Δ candidate vs baseline (%)"),
        x2=alt.X2("ci_high_pct"),
        color=color,
        tooltip=tooltip,
    )
    dots = base.mark_point(filled=True, size=60).encode(x=alt.X("delta_pct:Q"), color=color, tooltip=tooltip)
    guides = pd.DataFrame({"x": [-threshold * 100, 0.0, threshold * 100], "kind": ["floor", "zero", "floor"]})
    rules = (
        alt.Chart(guides)
        .mark_rule()
        .encode(
            x=alt.X("x:Q"),
            strokeDash=value_if(alt.StrokeDashValue, "datum.kind == 'zero'", [1, 0], [4, 4]),
            color=alt.ColorValue("#777777"),
        )
    )
    return alt.layer(rules, bars, dots).properties(height=alt.Step(20))


def compare_grid(table: pd.DataFrame, higher_is_better: bool = True) -> AnyChart:
    """Δ per point as a grid: batch size across, spec config (mode · steps) down, one panel per workload.
    Colour is goodness, not sign (red is always worse); flagged cells carry ▼ / ▲, too few repeats a ?."""
    f = table.dropna(subset=["delta"]).copy()
    if f.empty:
        return alt.Chart(pd.DataFrame({"x": []})).mark_point()
    f["row"] = [
        "baseline" if m == "baseline" else f"{m} · s{int(s)}"
        for m, s in zip(f["spec_mode"], f["steps"].fillna(0), strict=True)
    ]
    rows = sorted(set(f["row"]), key=lambda r: (r != "baseline", r))
    f["delta_pct"] = f["delta"].astype(float) * 100
    f["goodness"] = f["delta_pct"] * (1 if higher_is_better else -1)
    mark = {"regression": " ▼", "improvement": " ▲", "insufficient data": " ?"}
    f["text"] = [f"{d:+.1f}%{mark.get(v, '')}" for d, v in zip(f["delta_pct"], f["verdict"], strict=True)]
    # A side the correctness gate failed: its speed is a wrong path's, so the Δ is struck and labelled.
    wrong = [
        any(is_wrong(r.get(f"correctness_{side}")) for side in ("baseline", "candidate"))
        for r in f.to_dict("records")
    ]
    f["text"] = [f"{strike(t)} {WRONG}" if w else t for t, w in zip(f["text"], wrong, strict=True)]
    m = max(5.0, float(np.nanmax(np.abs(f["goodness"])))) if len(f) else 5.0
    base = alt.Chart().encode(
        x=alt.X("batch_size:O", title="Batch size", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("row:N", title=None, sort=rows),
    )
    tooltip = [
        alt.Tooltip("config:N"),
        alt.Tooltip("workload:N"),
        alt.Tooltip("delta_pct:Q", title="Δ %", format="+.2f"),
        alt.Tooltip("verdict:N"),
        alt.Tooltip("why:N"),
    ]
    rect = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.Color(
            "goodness:Q",
            scale=alt.Scale(scheme="redblue", domain=[-m, m], domainMid=0),
            title="better →",
            legend=alt.Legend(orient="right", format="+.0f"),
        ),
        tooltip=tooltip,
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("text:N"),
        color=value_if(alt.ColorValue, f"abs(datum.goodness) > {0.6 * m}", "white", "black"),
        tooltip=tooltip,
    )
    layered = alt.layer(rect, text, data=f).properties(
        width=alt.Step(96 if any(wrong) else 64), height=alt.Step(24)
    )
    pad = alt.AutoSizeParams(type="pad", contains="padding")
    if f["workload"].nunique() > 1 or f["model"].nunique() > 1:
        f_col = "workload" if f["model"].nunique() == 1 else "model"
        return layered.facet(column=alt.Column(f"{f_col}:N", title=None)).properties(autosize=pad)
    return layered.properties(autosize=pad)
