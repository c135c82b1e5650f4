"""Altair chart builders: pure functions from DataFrames to charts, testable without a browser.

Frames come from `db.queries` (via the services) and `analysis`; nothing here reads a database or
touches Streamlit. Colours carry meaning consistently: red = regression, green = improvement, orange =
acknowledged, grey = dismissed or no change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import altair as alt
import numpy as np
import pandas as pd

from bench.catalog import label as metric_label

XMode = Literal["time", "commit", "version"]
AnyChart = alt.Chart | alt.LayerChart | alt.FacetChart
X_MODES: dict[str, str] = {"time": "Run time", "commit": "SGLang commit", "version": "SGLang version"}

VERDICT_COLORS = {
    "regression": "#d62728",
    "improvement": "#2ca02c",
    "no change": "#9e9e9e",
    "insufficient data": "#c7a600",
}
STATE_COLORS = {"acknowledged": "#ff7f0e", "dismissed": "#9e9e9e"}
LINE_COLOR = "#1f77b4"


def _commit_label(version: object, commit: object) -> str:
    c = str(commit)[:7] if isinstance(commit, str) and commit else "?"
    return f"{version or '?'}@{c}"


def trend_frame(
    series: pd.DataFrame, metric: str, x_mode: XMode, band: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One row per x position: `x`, `value`, `low`, `high` (the repeat band) and tooltip fields.

    `band` (point_id, low, high) overrides the stored throughput interval, e.g. with the min/max of the
    repeats for metrics that have no stored interval. Version mode aggregates the runs of each version:
    the median, and the range of the runs as the band.
    """
    cols = ["x", "value", "low", "high", "runs", "run_id", "version", "commit", "started_at"]
    if series.empty:
        return pd.DataFrame(columns=cols)
    f = series.dropna(subset=[metric]).copy()
    f["value"] = f[metric].astype(float)
    if band is not None and not band.empty:
        f = f.merge(band[["point_id", "low", "high"]], on="point_id", how="left")
    elif metric == "output_throughput":
        f["low"], f["high"] = f["output_throughput_ci_low"], f["output_throughput_ci_high"]
    else:
        f["low"], f["high"] = np.nan, np.nan
    f["version"] = f["sglang_version"].fillna("?")
    f["commit"] = [_commit_label(v, c) for v, c in zip(f["sglang_version"], f["sglang_commit"], strict=True)]
    f["runs"] = 1
    if x_mode == "time":
        f["x"] = f["started_at"]
    elif x_mode == "commit":
        f["x"] = f["commit"]
    else:
        order = list(dict.fromkeys(f["version"]))
        g = f.groupby("version", sort=False)
        f = pd.DataFrame(
            {
                "x": order,
                "value": g["value"].median().reindex(order).to_numpy(),
                "low": g["value"].min().reindex(order).to_numpy(),
                "high": g["value"].max().reindex(order).to_numpy(),
                "runs": g.size().reindex(order).to_numpy(),
                "run_id": g["run_id"].last().reindex(order).to_numpy(),
                "version": order,
                "commit": g["commit"].last().reindex(order).to_numpy(),
                "started_at": g["started_at"].last().reindex(order).to_numpy(),
            }
        )
    return f[cols].reset_index(drop=True)


def _x(x_mode: XMode, frame: pd.DataFrame, title: str | None = None) -> alt.X:
    if x_mode == "time":
        return alt.X("x:T", title=title or X_MODES["time"])
    order = list(dict.fromkeys(frame["x"]))
    return alt.X(
        "x:O", title=title or X_MODES[x_mode], sort=order, axis=alt.Axis(labelAngle=-45, labelLimit=120)
    )


def trend_chart(
    frame: pd.DataFrame,
    metric: str,
    x_mode: XMode,
    changes: pd.DataFrame | None = None,
    *,
    height: int = 360,
) -> AnyChart:
    """The metric over time/commit/version: repeat band, median line, change points as labelled rules."""
    y_title = metric_label(metric)
    x = _x(x_mode, frame)
    lo = np.nanmin(frame[["value", "low"]].to_numpy(dtype=float)) if len(frame) else 0.0
    hi = np.nanmax(frame[["value", "high"]].to_numpy(dtype=float)) if len(frame) else 1.0
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    y_scale = alt.Scale(domain=[float(lo - pad), float(hi + pad)], zero=False, nice=False)
    base = alt.Chart(frame).encode(x=x)
    tooltip = [
        alt.Tooltip("version:N", title="SGLang"),
        alt.Tooltip("commit:N", title="commit"),
        alt.Tooltip("run_id:Q", title="run"),
        alt.Tooltip("started_at:T", title="started", format="%Y-%m-%d %H:%M"),
        alt.Tooltip("value:Q", title=y_title, format=",.4~g"),
        alt.Tooltip("low:Q", title="band low", format=",.4~g"),
        alt.Tooltip("high:Q", title="band high", format=",.4~g"),
        alt.Tooltip("runs:Q", title="runs"),
    ]
    band = base.mark_area(opacity=0.22, color=LINE_COLOR).encode(
        y=alt.Y("low:Q", scale=y_scale, title=y_title), y2="high:Q"
    )
    line = base.mark_line(color=LINE_COLOR, strokeWidth=1.6).encode(y=alt.Y("value:Q", scale=y_scale))
    dots = base.mark_circle(color=LINE_COLOR, size=28, opacity=0.9).encode(
        y=alt.Y("value:Q", scale=y_scale), tooltip=tooltip
    )
    layers: list[alt.Chart] = [band, line, dots]
    rules = change_rules(frame, changes, x_mode)
    if rules is not None:
        layers.extend(rules)
    return alt.layer(*layers).properties(height=height).interactive(bind_y=False)


def change_rule_frame(frame: pd.DataFrame, changes: pd.DataFrame | None, x_mode: XMode) -> pd.DataFrame:
    """Where each change point's rule goes on the current x-axis, with its colour and label."""
    cols = [
        "x",
        "label",
        "color",
        "dash",
        "state",
        "direction",
        "rel_change",
        "why",
        "pvalue",
        "version",
        "commit",
        "align",
    ]
    if changes is None or changes.empty or frame.empty:
        return pd.DataFrame(columns=cols)
    where = _x_fraction(frame, x_mode)
    rows = []
    for c in changes.to_dict("records"):
        commit = _commit_label(c.get("sglang_version"), c.get("sglang_commit"))
        if x_mode == "time":
            xv = c["started_at"]
        elif x_mode == "commit":
            xv = commit
        else:
            xv = c.get("sglang_version") or "?"
        state = c.get("state") or "open"
        color = STATE_COLORS.get(state, VERDICT_COLORS.get(str(c.get("direction")), "#d62728"))
        rows.append(
            {
                "x": xv,
                "label": f"{c['rel_change'] * 100:+.1f}%" + ("" if state == "open" else f" ({state})"),
                "color": color,
                "dash": state == "dismissed",
                "state": state,
                "direction": c.get("direction"),
                "rel_change": c["rel_change"] * 100,
                "why": c.get("why") or "",
                "pvalue": c.get("pvalue"),
                "version": c.get("sglang_version"),
                "commit": commit,
                # Labels of rules in the right part of the plot run leftwards, so none is cut at the edge.
                "align": "right" if where(xv) > 0.6 else "left",
            }
        )
    return pd.DataFrame(rows, columns=cols)


def _x_fraction(frame: pd.DataFrame, x_mode: XMode) -> Callable[[object], float]:
    """Where an x value sits across the plot, 0 (left edge) to 1 (right edge)."""
    if x_mode == "time":
        xs = pd.to_datetime(frame["x"], utc=True)
        lo, hi = xs.min(), xs.max()
        span = (hi - lo).total_seconds() or 1.0
        return lambda v: (pd.to_datetime(v, utc=True) - lo).total_seconds() / span
    order = list(dict.fromkeys(frame["x"]))
    return lambda v: (order.index(v) + 0.5) / len(order) if v in order else 1.0


def change_rules(frame: pd.DataFrame, changes: pd.DataFrame | None, x_mode: XMode) -> list[alt.Chart] | None:
    rf = change_rule_frame(frame, changes, x_mode)
    if rf.empty:
        return None
    x = alt.X("x:T") if x_mode == "time" else alt.X("x:O", sort=list(dict.fromkeys(frame["x"])))
    tooltip = [
        alt.Tooltip("direction:N", title="change"),
        alt.Tooltip("rel_change:Q", title="Δ %", format="+.1f"),
        alt.Tooltip("why:N", title="why"),
        alt.Tooltip("state:N", title="triage"),
        alt.Tooltip("pvalue:Q", title="p-value", format=".2e"),
        alt.Tooltip("commit:N", title="first run after"),
    ]
    base = alt.Chart(rf).encode(x=x, color=alt.Color("color:N", scale=None))
    rule = base.mark_rule(strokeWidth=2).encode(
        strokeDash=alt.condition("datum.dash", alt.value([5, 4]), alt.value([1, 0])), tooltip=tooltip
    )
    texts = [
        base.transform_filter(f"datum.align == '{side}'")
        .mark_text(align=side, dx=4 if side == "left" else -4, dy=-6, fontWeight="bold", fontSize=12)
        .encode(y=alt.value(12), text="label:N", tooltip=tooltip)
        for side in ("left", "right")
    ]
    return [rule, *texts]


# ---------------------------------------------------------------------------------------------- sweep

GREY_CELL = "#d9d9d9"  # a v2/v1 cell whose interval spans 1


def heatmap(
    frame: pd.DataFrame,
    value: str,
    title: str,
    *,
    fmt: str = ",.0f",
    diverging: bool = False,
    facet: str | None = "spec_mode",
    width: int = 260,
    legend: Literal["right", "bottom"] = "right",
) -> AnyChart:
    """Batch size (x) by spec steps (y), coloured by `value`, each cell labelled; one panel per spec mode.

    Diverging scales are centred on 1.0, for ratios (blue = faster, red = slower).
    """
    f = frame.dropna(subset=[value]).copy()
    f["steps_label"] = f["steps"].map(lambda s: f"{int(s)}")
    if diverging:
        m = float(np.nanmax(np.abs(f[value].to_numpy(dtype=float) - 1.0))) if len(f) else 0.1
        m = max(m, 0.02)
        scale = alt.Scale(scheme="redblue", domain=[1 - m, 1 + m], domainMid=1.0)
    else:
        scale = alt.Scale(scheme="viridis")
    mid = float(f[value].median()) if len(f) else 0.0
    base = alt.Chart().encode(
        x=alt.X("batch_size:O", title="Batch size", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("steps_label:O", title="Spec steps", sort="descending"),
    )
    rect = base.mark_rect(stroke="white", strokeWidth=1).encode(
        # In a narrow column a legend on the right is cut off; `bottom` keeps it inside the chart's width.
        color=alt.Color(f"{value}:Q", scale=scale, title=title, legend=alt.Legend(orient=legend)),
        tooltip=[
            alt.Tooltip("batch_size:O", title="batch"),
            alt.Tooltip("steps_label:O", title="steps"),
            alt.Tooltip(f"{value}:Q", title=title, format=fmt),
        ],
    )
    dark = f"datum['{value}'] < {mid}" if not diverging else f"abs(datum['{value}'] - 1) > {0.6 * m}"
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text(f"{value}:Q", format=fmt),
        color=alt.condition(dark, alt.value("white"), alt.value("black")),
    )
    layered = alt.layer(rect, text, data=f).properties(
        width=width, height=34 * max(1, f["steps_label"].nunique())
    )
    if facet and facet in f and f[facet].nunique() > 0:
        return layered.facet(column=alt.Column(f"{facet}:N", title=None, header=alt.Header(labelFontSize=13)))
    return layered


def ratio_heatmap(frame: pd.DataFrame, *, width: int = 330) -> AnyChart:
    """v2/v1 per batch size (x) and spec steps (y) from `analysis.v2_vs_v1`, each cell labelled with the ratio
    and its 95 % interval. Cells whose interval spans 1 (or has none) are grey: no clear difference there.
    One panel per pinned accept length when the run has several.
    """
    f = frame.dropna(subset=["ratio"]).copy()
    f["steps_label"] = f["steps"].map(lambda s: "-" if pd.isna(s) else f"{int(s)}")
    has_ci = f["ci_low"].notna() & f["ci_high"].notna()
    f["clear"] = has_ci & ((f["ci_low"] > 1.0) | (f["ci_high"] < 1.0))
    f["interval"] = [
        f"[{lo:.2f}, {hi:.2f}]" if ok else "no interval"
        for lo, hi, ok in zip(f["ci_low"].fillna(0), f["ci_high"].fillna(0), has_ci, strict=True)
    ]
    f["accept"] = ["not pinned" if pd.isna(a) else f"accept {a:g}" for a in f["accept_length"]]
    m = float(np.nanmax(np.abs(f["ratio"].to_numpy(dtype=float) - 1.0))) if len(f) else 0.1
    m = max(m, 0.02)
    scale = alt.Scale(scheme="redblue", domain=[1 - m, 1 + m], domainMid=1.0)
    base = alt.Chart().encode(
        x=alt.X("batch_size:O", title="Batch size", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("steps_label:O", title="Spec steps", sort="descending"),
    )
    tooltip = [
        alt.Tooltip("batch_size:O", title="batch"),
        alt.Tooltip("steps_label:O", title="steps"),
        alt.Tooltip("accept:N", title="acceptance"),
        alt.Tooltip("ratio:Q", title="v2/v1", format=".3f"),
        alt.Tooltip("interval:N", title="95% CI"),
        alt.Tooltip("verdict:N", title="verdict"),
        alt.Tooltip("n:Q", title="repeats"),
        alt.Tooltip("method:N", title="interval"),
    ]
    rect = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.condition(
            "datum.clear",
            alt.Color("ratio:Q", scale=scale, title="v2/v1", legend=alt.Legend(orient="right")),
            alt.value(GREY_CELL),
        ),
        tooltip=tooltip,
    )
    ratio_text = base.mark_text(fontSize=12, dy=-7).encode(
        text=alt.Text("ratio:Q", format=".2f"),
        color=alt.condition(
            f"datum.clear && abs(datum.ratio - 1) > {0.6 * m}", alt.value("white"), alt.value("black")
        ),
    )
    ci_text = base.mark_text(fontSize=9, dy=8).encode(
        text="interval:N",
        color=alt.condition(
            f"datum.clear && abs(datum.ratio - 1) > {0.6 * m}", alt.value("white"), alt.value("#333")
        ),
    )
    layered = alt.layer(rect, ratio_text, ci_text, data=f).properties(
        width=width, height=44 * max(1, f["steps_label"].nunique())
    )
    # Faceted even with one panel: Streamlit squashes a bare layered chart's height in a column.
    return layered.facet(column=alt.Column("accept:N", title=None, header=alt.Header(labelFontSize=13)))


MODE_DASH: dict[str, list[int]] = {"baseline": [1, 0], "v1": [6, 4], "v2": [1, 0]}
MODE_TITLES: dict[str, str] = {"baseline": "no spec", "v1": "v1 (non-overlap)", "v2": "v2 (overlap)"}
STEPS_PALETTE = ["#222222", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def throughput_frame(frame: pd.DataFrame, metric: str = "output_throughput") -> pd.DataFrame:
    """One row per (line, measured batch size): `series` (steps), `mode`, `batch_size` and the metric.

    Every line gets a row at every batch size the run measured, NaN where that line has no ok point, so the
    chart breaks the line there instead of drawing straight across a missing point.
    """
    cols = ["series", "mode", "batch_size", metric, "accept_length"]
    f = frame.dropna(subset=[metric])
    if f.empty:
        return pd.DataFrame(columns=cols)
    f = f.assign(
        series=[
            "baseline" if m == "baseline" else f"steps {int(s)}"
            for m, s in zip(f["spec_mode"], f["steps"].fillna(0), strict=True)
        ],
        mode=f["spec_mode"],
        batch_size=f["batch_size"].astype(int),
    )
    if "accept_length" not in f:
        f = f.assign(accept_length=np.nan)
    lines = f[["series", "mode"]].drop_duplicates()
    sizes = pd.DataFrame({"batch_size": sorted(f["batch_size"].unique())})
    full = lines.merge(sizes, how="cross")
    out = full.merge(f[cols], on=["series", "mode", "batch_size"], how="left")
    return out.sort_values(["mode", "series", "batch_size"], ignore_index=True)[cols]


def throughput_lines(frame: pd.DataFrame, metric: str = "output_throughput") -> AnyChart:
    """Throughput against batch size: colour = spec steps (baseline black), dash = spec mode (v1 dashed).

    The x-axis is ordinal over the batch sizes measured (no 2 or 8 when only 1, 4, 16, 32 ran); a missing
    point leaves a gap in its line. Legends stack on the right, inside the width the chart is fitted to
    (side-by-side legends below the plot ran past a narrow column's edge).
    """
    f = throughput_frame(frame, metric)
    names = sorted(set(f["series"]) - {"baseline"}, key=lambda s: int(s.split()[1]))
    domain = ["baseline", *names] if "baseline" in set(f["series"]) else names
    palette = STEPS_PALETTE if "baseline" in set(f["series"]) else STEPS_PALETTE[1:]
    modes = [m for m in MODE_DASH if m in set(f["mode"])]
    f = f.assign(mode_title=f["mode"].map(MODE_TITLES))
    x = alt.X(
        "batch_size:O",
        title="Batch size (concurrency)",
        sort=sorted(int(b) for b in f["batch_size"].unique()),
        axis=alt.Axis(labelAngle=0),
    )
    y = alt.Y(f"{metric}:Q", title=metric_label(metric))
    color = alt.Color(
        "series:N",
        title="Spec",
        scale=alt.Scale(domain=domain, range=palette[: len(domain)]),
        legend=alt.Legend(orient="right", labelLimit=0),
    )
    dash = alt.StrokeDash(
        "mode_title:N",
        title="Mode",
        scale=alt.Scale(domain=[MODE_TITLES[m] for m in modes], range=[MODE_DASH[m] for m in modes]),
        legend=alt.Legend(
            orient="right",
            symbolType="stroke",
            symbolSize=900,  # a long stroke, so the v1 dash pattern shows in the legend
            symbolStrokeWidth=2.5,
            labelLimit=0,
        ),
    )
    tooltip = [
        alt.Tooltip("series:N", title="spec"),
        alt.Tooltip("mode_title:N", title="mode"),
        alt.Tooltip("batch_size:O", title="batch"),
        alt.Tooltip(f"{metric}:Q", title=metric_label(metric), format=",.1f"),
        alt.Tooltip("accept_length:Q", title="acceptance", format=".2f"),
    ]
    base = alt.Chart(f).encode(x=x, y=y, color=color)
    lines = base.mark_line(strokeWidth=2, invalid="break-paths-show-domains").encode(
        strokeDash=dash, detail="mode:N"
    )
    dots = base.mark_point(filled=True, size=40).encode(shape=alt.value("circle"), tooltip=tooltip)
    return alt.layer(lines, dots).properties(height=340)


# ---------------------------------------------------------------------------------------------- compare


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
        x2="ci_high_pct:Q",
        color=color,
        tooltip=tooltip,
    )
    dots = base.mark_point(filled=True, size=60).encode(x="delta_pct:Q", color=color, tooltip=tooltip)
    guides = pd.DataFrame({"x": [-threshold * 100, 0.0, threshold * 100], "kind": ["floor", "zero", "floor"]})
    rules = (
        alt.Chart(guides)
        .mark_rule()
        .encode(
            x="x:Q",
            strokeDash=alt.condition("datum.kind == 'zero'", alt.value([1, 0]), alt.value([4, 4])),
            color=alt.value("#777777"),
        )
    )
    return alt.layer(rules, bars, dots).properties(height=alt.Step(20))


def compare_grid(table: pd.DataFrame, higher_is_better: bool = True) -> AnyChart:
    """Δ per point as a grid: batch size across, spec config (mode · steps) down, one panel per workload.

    Colour is goodness, not sign: red always means worse for this metric. Flagged cells carry ▼ / ▲, points
    without enough repeats carry a ?, so the grid reads at a glance; the forest chart has the intervals.
    """
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
        text="text:N",
        color=alt.condition(f"abs(datum.goodness) > {0.6 * m}", alt.value("white"), alt.value("black")),
        tooltip=tooltip,
    )
    layered = alt.layer(rect, text, data=f).properties(width=alt.Step(64), height=alt.Step(24))
    pad = alt.AutoSizeParams(type="pad", contains="padding")
    if f["workload"].nunique() > 1 or f["model"].nunique() > 1:
        f_col = "workload" if f["model"].nunique() == 1 else "model"
        return layered.facet(column=alt.Column(f"{f_col}:N", title=None)).properties(autosize=pad)
    return layered.properties(autosize=pad)
