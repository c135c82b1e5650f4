"""A series over run time, SGLang commit or version: the repeat band, the median line, change points."""

from collections.abc import Callable

import altair as alt
import numpy as np
import pandas as pd

from bench.catalog import label as metric_label
from dashboard.charts.style import (
    LINE_COLOR,
    STATE_COLORS,
    VERDICT_COLORS,
    X_MODES,
    AnyChart,
    XMode,
    commit_label,
    value_if,
)


def trend_frame(
    series: pd.DataFrame, metric: str, x_mode: XMode, band: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One row per x position: `x`, `value`, `low`, `high` (the repeat band) and tooltip fields. `band`
    (point_id, low, high) stands in for the stored throughput interval; version mode takes each version's
    median, its runs' range as the band."""
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
    f["commit"] = [commit_label(v, c) for v, c in zip(f["sglang_version"], f["sglang_commit"], strict=True)]
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


def time_axis(frame: pd.DataFrame) -> tuple[alt.Axis, alt.Scale]:
    """Tick labels that fit the span shown (dates for weeks of nightly runs, times within a day), and a
    padded domain, so one point or a few minutes of runs never read as `:34`."""
    xs = (
        pd.to_datetime(frame["x"], utc=True).dropna()
        if len(frame)
        else pd.Series(dtype="datetime64[ns, UTC]")
    )
    if xs.empty:
        return alt.Axis(format="%b %d"), alt.Scale()
    lo, hi = xs.min(), xs.max()
    span = hi - lo
    if span >= pd.Timedelta(days=2):
        fmt = "%b %d"
    elif span >= pd.Timedelta(hours=2):
        fmt = "%b %d %H:%M"
    else:
        fmt = "%H:%M"
    pad = max(span * 0.04, pd.Timedelta(minutes=30))
    domain = [(lo - pad).isoformat(), (hi + pad).isoformat()]
    return alt.Axis(format=fmt, labelOverlap=True, labelAngle=0), alt.Scale(domain=domain)


def _x(x_mode: XMode, frame: pd.DataFrame, title: str | None = None) -> alt.X:
    if x_mode == "time":
        axis, scale = time_axis(frame)
        return alt.X("x:T", title=title or X_MODES["time"], axis=axis, scale=scale)
    order = list(dict.fromkeys(frame["x"]))
    return alt.X(
        "x:O", title=title or X_MODES[x_mode], sort=order, axis=alt.Axis(labelAngle=-45, labelLimit=120)
    )


def trend_chart(
    frame: pd.DataFrame, metric: str, x_mode: XMode, changes: pd.DataFrame | None = None, *, height: int = 360
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
        y=alt.Y("low:Q", scale=y_scale, title=y_title), y2=alt.Y2("high")
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
    cols = ["x", "label", "color", "dash", "state", "direction", "rel_change", "why", "pvalue", "version"]
    cols += ["commit", "align"]
    if changes is None or changes.empty or frame.empty:
        return pd.DataFrame(columns=cols)
    where = _x_fraction(frame, x_mode)
    rows = []
    for c in changes.to_dict("records"):
        commit = commit_label(c.get("sglang_version"), c.get("sglang_commit"))
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
        strokeDash=value_if(alt.StrokeDashValue, "datum.dash", [5, 4], [1, 0]), tooltip=tooltip
    )
    texts = [
        base.transform_filter(f"datum.align == '{side}'")
        .mark_text(align=side, dx=4 if side == "left" else -4, dy=-6, fontWeight="bold", fontSize=12)
        .encode(y=alt.YValue(12), text=alt.Text("label:N"), tooltip=tooltip)
        for side in ("left", "right")
    ]
    return [rule, *texts]
