"""Trends: one metric of one series over SGLang version, commit or time, with repeat bands and changes."""

from typing import cast

import pandas as pd
import streamlit as st

from analysis import md
from analysis.changes import first_runs_after
from analysis.facets import default_series
from analysis.labels import run_kind, run_tag
from analysis.regressions import flagged
from analysis.render import Column
from analysis.stats.changepoint import ChangePointParams
from bench.catalog import direction_text, label
from dashboard import charts
from dashboard.components import layout, state, tables, triage
from dashboard.components.export import frame_with_csv
from dashboard.components.filters import FACET_PARAMS, adopt_series, metric_picker, series_filters
from dashboard.services import data, views

DETECTION = (
    state.Param("window", "tr_window", 50, int),
    state.Param("p", "tr_p", 0.001, float),
    state.Param("floor", "tr_floor", 5.0, float),
)
PARAMS = (
    *FACET_PARAMS,
    state.Param("fp", "f_series", None),
    state.Param("metric", "tr_metric", "output_throughput"),
    state.Param("x", "tr_x", "time"),
    *DETECTION,
)
CHANGE_COLUMNS = (
    *(Column(k, text=True) for k in ("change", "kind")),
    Column("Δ", show=lambda r: f"{r['Δ']:+.1f}%"),
    Column("why", "why (attribution)", text=True),
    Column("first run after", text=True),
    Column("before", fmt=".4g"),
    Column("after", fmt=".4g"),
    Column("p-value", fmt=".1e"),
    *(Column(k, text=True) for k in ("triage", "note")),
)

url = layout.page_start(
    "Trends",
    caption="One series over time, commit or version, and the change points along its history (what "
    "`specbench regressions` scans). To compare two runs point by point, use Compare (`specbench compare`).",
)

cat = data.annotated_catalog(url)
first_visit = "trends" not in st.session_state.get("_url_state_restored", set())
state.restore(PARAMS, "trends")
if first_visit:
    asked = st.query_params.get("fp")
    if asked is None and not any(p.name in st.query_params for p in FACET_PARAMS):
        # No link says which series: open on the newest flagged regression, else the longest history.
        flagged_now = flagged(data.recent_changes(url, "output_throughput", ChangePointParams()))
        asked = default_series(cat, flagged_now)
    adopt_series(cat, asked)

st.sidebar.header("Series")
row = series_filters(cat)
st.sidebar.header("View")
metric = metric_picker("tr_metric")
state.ensure_choice("tr_x", list(charts.X_MODES), "time")
x_mode = cast(
    charts.XMode,
    st.sidebar.radio(
        "X axis", list(charts.X_MODES), key="tr_x", format_func=charts.X_MODES.get, horizontal=True
    ),
)
# Drawn only while open (their code is the page's heaviest after the chart's); their values outlive them.
state.keep(DETECTION)
with st.sidebar:
    detection = tables.lazy_expander("Change-point detection", "tr_detection_open")
if detection is not None:
    detection.number_input("Window (points)", min_value=6, max_value=500, step=2, key="tr_window")
    detection.select_slider(
        "Significance (p ≤)", options=[0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05], key="tr_p"
    )
    detection.number_input("Magnitude floor (%)", min_value=0.0, max_value=50.0, step=0.5, key="tr_floor")
state.publish(PARAMS)

if row is None:
    st.info("No series matches these filters.")
    st.stop()

fp = str(row["fingerprint"])
series = data.series_points(url, fp, metric)
kinds = sorted(
    {run_tag(m, t) or "measured" for m, t in zip(series["simulated"], series["trigger"], strict=True)}
)
st.subheader(md.text(row["label"]), anchor=False)  # no "#..." link made from a stored name
tag = " · ".join(f"⚠ {k}" for k in kinds if k != "measured")
st.caption(
    (f"**{tag}** (not a GPU measurement) · " if tag else "")
    + f"{label(metric)} · {direction_text(metric)} · {int(row['n_points']):,} points · series {md.code(fp)} · "
    "share this view by copying the address bar"
)

if series.empty or series[metric].isna().all():
    st.info(f"This series has no ok points with {label(metric)}.")
    st.stop()

params = ChangePointParams(
    window=int(st.session_state["tr_window"]),
    max_pvalue=float(st.session_state["tr_p"]),
    min_magnitude=float(st.session_state["tr_floor"]) / 100.0,
)
changes = data.series_changes(url, fp, metric, params)
st.altair_chart(views.trend_chart(url, fp, metric, x_mode, params), width="stretch")
band_note = "stored repeat interval" if metric == "output_throughput" else "range of the repeats"
st.caption(
    f"Line: median of each point's repeats; band: {band_note}; rules: change points "
    "(red regression, green improvement, orange acknowledged, dashed grey dismissed)."
)

st.subheader("Change points")
if changes.empty:
    st.success(
        f"No change point at p ≤ {params.max_pvalue:g} with |Δ| ≥ {params.min_magnitude:.0%} "
        f"(window {params.window}).",
        icon=":material/check_circle:",
    )
else:
    view = pd.DataFrame(
        {
            "change": changes["direction"],
            "kind": changes["kind"],
            "Δ": changes["rel_change"] * 100,
            "why": changes["why"],
            "first run after": first_runs_after(changes),
            "before": changes["mean_before"],
            "after": changes["mean_after"],
            "p-value": changes["pvalue"],
            "triage": changes["state"],
            "note": changes["note"].fillna(""),
        }
    )
    if not view["note"].str.len().any():
        view = view.drop(columns="note")
    tables.table(
        view, [c for c in CHANGE_COLUMNS if c.key in view.columns], key="tr_changes_all", what="change points"
    )
    box = tables.lazy_expander("Triage a change point", "tr_triage_open")
    if box is not None:
        with box:
            triage.triage_form(url, changes, fp, metric, key="tr_triage")

box = tables.lazy_expander("Points of this series", "tr_points_open")
if box is not None:
    with box:
        kind_of = [run_kind(m, t) for m, t in zip(series["simulated"], series["trigger"], strict=True)]
        frame_with_csv(series.assign(kind=kind_of), "series", f"series-{fp}-{metric}.csv", key="tr_csv")
