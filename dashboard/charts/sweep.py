"""One run's sweep: heatmaps over batch size and spec steps, v2/v1 ratios, throughput against batch size."""

from typing import Literal

import altair as alt
import numpy as np
import pandas as pd

from analysis.correctness import WRONG, is_wrong, strike
from bench.catalog import label as metric_label
from dashboard.charts.style import AnyChart, value_if

GREY_CELL = "#d9d9d9"  # a v2/v1 cell whose interval spans 1
# The narrowest a sequential colour scale spans, as a fraction of its middle value: cells within noise of each
# other (acceptance 2.50 vs 2.53) keep neighbouring colours instead of the scale's two ends.
MIN_RELATIVE_SPAN = 0.10
# The narrowest a ratio scale reaches either side of 1: ±2% paints no cell deep red or blue.
MIN_RATIO_HALF_SPAN = 0.10


def sequential_domain(values: pd.Series, min_relative_span: float = MIN_RELATIVE_SPAN) -> tuple[float, float]:
    """[low, high] of a colour scale over `values`, widened around their middle to at least
    `min_relative_span` x |middle| so that small differences read as small."""
    v = values.dropna().astype(float)
    if v.empty:
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    mid = (lo + hi) / 2
    span = max(hi - lo, min_relative_span * abs(mid), 1e-9)
    return mid - span / 2, mid + span / 2


def ratio_half_span(values: pd.Series, minimum: float = MIN_RATIO_HALF_SPAN) -> float:
    """How far a ratio scale centred on 1 reaches: the largest distance from 1, at least `minimum`."""
    v = values.dropna().astype(float)
    return max(float(np.max(np.abs(v.to_numpy() - 1.0))) if len(v) else 0.0, minimum)


WRONG_STROKE = "#d62728"  # the outline of a cell the correctness gate failed


def _labels(values: pd.Series, wrong: pd.Series, fmt: str, strike_wrong: bool) -> list[str]:
    """Cell labels: the value, struck through and followed by `wrong` where the gate failed the point."""
    out = []
    for v, w in zip(values, wrong, strict=True):
        text = format(float(v), fmt)
        out.append((f"{strike(text)} {WRONG}" if strike_wrong else f"{text} {WRONG}") if w else text)
    return out


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
    strike_wrong: bool = False,
) -> AnyChart:
    """Batch size (x) by spec steps (y), coloured by `value`, each cell labelled; one panel per spec mode.
    Diverging scales centre on 1.0 (blue = faster). A cell the correctness gate failed is outlined red and
    labelled `wrong`, its value struck through with `strike_wrong` (speeds)."""
    f = frame.dropna(subset=[value]).copy()
    f["steps_label"] = f["steps"].map(lambda s: f"{int(s)}")
    f["wrong"] = [is_wrong(c) for c in f["correctness"]]
    f["label"] = _labels(f[value], f["wrong"], fmt, strike_wrong)
    if diverging:
        m = ratio_half_span(f[value])
        scale = alt.Scale(scheme="redblue", domain=[1 - m, 1 + m], domainMid=1.0)
    else:
        lo, hi = sequential_domain(f[value])
        scale = alt.Scale(scheme="viridis", domain=[lo, hi], clamp=True)
        mid = (lo + hi) / 2  # viridis is dark below its middle: white labels there
    base = alt.Chart().encode(
        x=alt.X("batch_size:O", title="Batch size", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("steps_label:O", title="Spec steps", sort="descending"),
    )
    rect = base.mark_rect(strokeWidth=1).encode(
        # In a narrow column a legend on the right is cut off; `bottom` keeps it inside the chart's width.
        color=alt.Color(f"{value}:Q", scale=scale, title=title, legend=alt.Legend(orient=legend, format=fmt)),
        stroke=value_if(alt.StrokeValue, "datum.wrong", WRONG_STROKE, "white"),
        strokeWidth=value_if(alt.StrokeWidthValue, "datum.wrong", 3, 1),
        tooltip=[
            alt.Tooltip("batch_size:O", title="batch"),
            alt.Tooltip("steps_label:O", title="steps"),
            alt.Tooltip(f"{value}:Q", title=title, format=fmt),
            alt.Tooltip("label:N", title="shown"),
        ],
    )
    dark = f"datum['{value}'] < {mid}" if not diverging else f"abs(datum['{value}'] - 1) > {0.6 * m}"
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("label:N"), color=value_if(alt.ColorValue, dark, "white", "black")
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
    One panel per pinned accept length when the run has several."""
    f = frame.dropna(subset=["ratio"]).copy()
    f["steps_label"] = f["steps"].map(lambda s: "-" if pd.isna(s) else f"{int(s)}")
    has_ci = f["ci_low"].notna() & f["ci_high"].notna()
    # A side the correctness gate failed makes the cell's speed a wrong path's: grey, struck, `wrong`.
    f["wrong"] = [
        any(is_wrong(r.get(c)) for c in ("v1_correctness", "v2_correctness")) for r in f.to_dict("records")
    ]
    f["clear"] = has_ci & ((f["ci_low"] > 1.0) | (f["ci_high"] < 1.0)) & ~f["wrong"]
    f["ratio_label"] = _labels(f["ratio"], f["wrong"], ".2f", True)
    f["interval"] = [
        f"[{lo:.2f}, {hi:.2f}]" if ok else "no interval"
        for lo, hi, ok in zip(f["ci_low"].fillna(0), f["ci_high"].fillna(0), has_ci, strict=True)
    ]
    f["accept"] = ["not pinned" if pd.isna(a) else f"accept {a:g}" for a in f["accept_length"]]
    f["pairs_5pct"] = ["–" if pd.isna(p) else f"about {int(p)}" for p in f["pairs_for_5pct"]]
    m = ratio_half_span(f["ratio"])
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
        alt.Tooltip("pairs_5pct:N", title="pairs for ±5%"),  # at the spread the pairs show
    ]
    rect = base.mark_rect().encode(
        stroke=value_if(alt.StrokeValue, "datum.wrong", WRONG_STROKE, "white"),
        strokeWidth=value_if(alt.StrokeWidthValue, "datum.wrong", 3, 1),
        color=value_if(
            alt.ColorValue,
            "datum.clear",
            alt.Color("ratio:Q", scale=scale, title="v2/v1", legend=alt.Legend(orient="right")),
            GREY_CELL,
        ),
        tooltip=tooltip,
    )
    ratio_text = base.mark_text(fontSize=12, dy=-7).encode(
        text=alt.Text("ratio_label:N"),
        color=value_if(alt.ColorValue, f"datum.clear && abs(datum.ratio - 1) > {0.6 * m}", "white", "black"),
    )
    ci_text = base.mark_text(fontSize=9, dy=8).encode(
        text=alt.Text("interval:N"),
        color=value_if(alt.ColorValue, f"datum.clear && abs(datum.ratio - 1) > {0.6 * m}", "white", "#333"),
    )
    layered = alt.layer(rect, ratio_text, ci_text, data=f).properties(
        width=width, height=44 * max(1, f["steps_label"].nunique())
    )
    # Faceted even with one panel: Streamlit squashes a bare layered chart's height in a column.
    return layered.facet(column=alt.Column("accept:N", title=None, header=alt.Header(labelFontSize=13)))


# One stroke per mode: no spec dotted, v1 dashed, v2 solid (colour already tells the steps apart).
MODE_DASH: dict[str, list[int]] = {"baseline": [2, 3], "v1": [7, 4], "v2": [1, 0]}
MODE_TITLES: dict[str, str] = {"baseline": "no spec", "v1": "v1 (non-overlap)", "v2": "v2 (overlap)"}
STEPS_PALETTE = ["#222222", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def batch_axis(f: pd.DataFrame) -> alt.X:
    """Batch size as an ordinal x-axis over the sizes measured (no 2 or 8 when only 1, 4, 16, 32 ran)."""
    sort = sorted(int(b) for b in f["batch_size"].unique())
    return alt.X("batch_size:O", title="Batch size (concurrency)", sort=sort, axis=alt.Axis(labelAngle=0))


def throughput_frame(frame: pd.DataFrame, metric: str = "output_throughput") -> pd.DataFrame:
    """One row per (line, measured batch size): `series` (steps), `mode`, `batch_size` and the metric; NaN
    where the line has no ok point, so the chart breaks the line there instead of bridging it."""
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
    lines = f[["series", "mode"]].drop_duplicates()
    sizes = pd.DataFrame({"batch_size": sorted(f["batch_size"].unique())})
    full = lines.merge(sizes, how="cross")
    out = full.merge(f[cols], on=["series", "mode", "batch_size"], how="left")
    return out.sort_values(["mode", "series", "batch_size"], ignore_index=True)[cols]


def throughput_lines(frame: pd.DataFrame, metric: str = "output_throughput") -> AnyChart:
    """Throughput against batch size: colour = spec steps (baseline black), dash = spec mode (no spec
    dotted, v1 dashed, v2 solid); a missing point leaves a gap. Legends stack on the right, inside the width
    the chart is fitted to (side by side below the plot they ran past a narrow column's edge)."""
    f = throughput_frame(frame, metric)
    names = sorted(set(f["series"]) - {"baseline"}, key=lambda s: int(s.split()[1]))
    domain = ["baseline", *names] if "baseline" in set(f["series"]) else names
    palette = STEPS_PALETTE if "baseline" in set(f["series"]) else STEPS_PALETTE[1:]
    modes = [m for m in MODE_DASH if m in set(f["mode"])]
    f = f.assign(mode_title=f["mode"].map(MODE_TITLES))
    x = batch_axis(f)
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
        strokeDash=dash, detail=alt.Detail("mode:N")
    )
    dots = base.mark_point(filled=True, size=40).encode(shape=alt.ShapeValue("circle"), tooltip=tooltip)
    return alt.layer(lines, dots).properties(height=340)
