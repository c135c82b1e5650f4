"""Compare: run B (candidate) against run A (baseline), point by point, with intervals and verdicts."""

from __future__ import annotations

import streamlit as st

from analysis import report
from analysis.compare import compare_runs, verdict_counts
from bench.catalog import higher_is_better
from dashboard import charts
from dashboard.components import layout, state
from dashboard.components.export import download_buttons
from dashboard.components.filters import metric_picker, run_picker
from dashboard.services import data

PARAMS = (
    state.Param("a", "cmp_a", None, int),
    state.Param("b", "cmp_b", None, int),
    state.Param("metric", "cmp_metric", "output_throughput"),
    state.Param("threshold", "cmp_threshold", 5.0, float),
    state.Param("confidence", "cmp_confidence", 0.95, float),
)

url = data.db_url()
st.title("Compare")
if not layout.database_ready(url):
    st.stop()
layout.synthetic_banner(url)
state.restore(PARAMS, "compare")

runs = data.run_choices(url)
if len(runs) < 2:
    st.info("Comparing needs two runs; this database has one.")
    st.stop()
c1, c2 = st.columns(2)
b = run_picker(runs, "cmp_b", "Candidate (B)", 0, c1)
# Default baseline: the previous run of the candidate's sweep, else the next-newest run.
same = runs[(runs["sweep_name"] == runs.loc[runs["id"] == b, "sweep_name"].iloc[0]) & (runs["id"] != b)]
default_a = int(runs.index[runs["id"] == same["id"].iloc[0]][0]) if not same.empty else 1
a = run_picker(runs, "cmp_a", "Baseline (A)", default_a, c2)
c3, c4, c5 = st.columns(3)
metric = metric_picker("cmp_metric", c3)
c4.number_input("Threshold (%)", min_value=0.0, max_value=50.0, step=0.5, key="cmp_threshold")
state.ensure_choice("cmp_confidence", [0.9, 0.95, 0.99], 0.95)
c5.selectbox("Confidence", [0.9, 0.95, 0.99], key="cmp_confidence", format_func=lambda c: f"{c:.0%}")
state.publish(PARAMS)
if a is None or b is None:
    st.stop()
if a == b:
    st.warning("Pick two different runs.")
    st.stop()

threshold = float(st.session_state["cmp_threshold"]) / 100.0
confidence = float(st.session_state["cmp_confidence"])
table = compare_runs(
    data.run_points(url, a),
    data.run_samples(url, a, metric),
    data.run_points(url, b),
    data.run_samples(url, b, metric),
    metric=metric,
    threshold=threshold,
    confidence=confidence,
)
if table.empty:
    st.info("These runs share no point configuration.")
    st.stop()

counts = verdict_counts(table)
cols = st.columns(4)
for col, (verdict, n) in zip(cols, counts.items(), strict=True):
    col.metric(verdict.capitalize(), n)

st.markdown("##### Δ candidate vs baseline")
st.altair_chart(charts.compare_grid(table, higher_is_better(metric)), width="content")
st.caption("▼ regression · ▲ improvement · ? insufficient data; colour: red = worse, blue = better.")
with st.expander(f"Intervals of all {len(table)} points"):
    st.altair_chart(charts.compare_forest(table, threshold), width="stretch")

view = table.assign(
    delta_pct=table["delta"] * 100, ci_low_pct=table["ci_low"] * 100, ci_high_pct=table["ci_high"] * 100
)
st.dataframe(
    view[
        [
            "verdict",
            "config",
            "workload",
            "baseline",
            "candidate",
            "delta_pct",
            "ci_low_pct",
            "ci_high_pct",
            "why",
            "note",
            "n_baseline",
            "n_candidate",
        ]
    ],
    hide_index=True,
    column_config={
        "delta_pct": st.column_config.NumberColumn("Δ", format="%+.2f%%"),
        "ci_low_pct": st.column_config.NumberColumn("interval low", format="%+.2f%%"),
        "ci_high_pct": st.column_config.NumberColumn("interval high", format="%+.2f%%"),
        "baseline": st.column_config.NumberColumn(format="%.4g"),
        "candidate": st.column_config.NumberColumn(format="%.4g"),
    },
)

run_a, run_b = data.run_info(url, a), data.run_info(url, b)
markdown = report.to_markdown(table, run_a, run_b, metric=metric, threshold=threshold, confidence=confidence)
download_buttons(report.to_csv(table), markdown, f"compare-{a}-vs-{b}-{metric}", key="cmp_dl")
with st.expander("PR comment preview"):
    st.markdown(markdown)
    st.code(markdown, language="markdown")
