"""Compare: run B (candidate) against run A (baseline), point by point, with intervals and verdicts."""

import pandas as pd
import streamlit as st

from analysis import correctness, md
from analysis.comparability import refusal
from analysis.compare import center_text, comparability_key, comparable_pair, verdict_counts
from analysis.render import Column, magnitude
from analysis.report import made_up_notices
from dashboard.components import layout, state, tables
from dashboard.components.export import download_buttons
from dashboard.components.filters import metric_picker, run_picker
from dashboard.services import data, views

PARAMS = (
    state.Param("a", "cmp_a", None, int),
    state.Param("b", "cmp_b", None, int),
    state.Param("metric", "cmp_metric", "output_throughput"),
    state.Param("threshold", "cmp_threshold", 5.0, float),
    state.Param("confidence", "cmp_confidence", 0.95, float),
)

url = layout.page_start(
    "Compare",
    caption="Two runs, point by point: Δ with an interval and a verdict per configuration "
    "(`specbench compare`). Change points along a series' history are on Trends and the Overview "
    "(`specbench regressions`).",
)
state.restore(PARAMS, "compare")

runs = data.run_choices(url)
if len(runs) < 2:
    st.info("Comparing needs two runs; this database has one.")
    st.stop()
# Default: the two latest comparable runs (same model and GPU class, same kind of numbers, a shared series).
pair = comparable_pair(runs, lambda r: data.run_series(url, r))
ids = [int(i) for i in runs["id"]]
default_a, default_b = (ids.index(pair[0]), ids.index(pair[1])) if pair else (1, 0)
if pair is None:
    st.info(
        "No two runs in this database compare: none share a model, a GPU class and a configuration "
        "(stand-in and real runs never pair). Pick two runs by hand.",
        icon=":material/info:",
    )
c1, c2 = st.columns(2)
b = run_picker(runs, "cmp_b", "Candidate (B)", default_b, c1)
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
table = data.comparison(url, a, b, metric, threshold, confidence)
run_a, run_b = data.run_info(url, a), data.run_info(url, b)
refused = refusal(run_a, run_b, table, runs, lambda r: data.run_series(url, r))
if refused is not None:
    # Not a table of "insufficient data": why these runs do not compare, and what does. The reason and the
    # nearest comparison's why carry stored model and GPU names: text, never Markdown.
    st.warning(md.text(refused.reason, line_start=True), icon=":material/block:")
    near = refused.nearest
    if near is None:
        st.info("No run in this database compares with either.", icon=":material/info:")
    elif near.baseline is None:
        st.info(
            f"Nearest meaningful comparison: {md.text(near.why)}, on the [Sweep page](sweep?run={near.candidate}), "
            f"or {md.code(near.command())}.",
            icon=":material/lightbulb:",
        )
    else:
        st.info(
            f"Nearest meaningful comparison: [run #{near.candidate} vs run #{near.baseline}]"
            f"(compare?a={near.baseline}&b={near.candidate}) ({md.text(near.why)}), or {md.code(near.command())}.",
            icon=":material/lightbulb:",
        )
    st.stop()
row_a, row_b = (runs[runs["id"] == r].iloc[0] for r in (a, b))
if comparability_key(row_a) != comparability_key(row_b):
    st.warning(
        f"Run #{a} and run #{b} differ in model or GPU class "
        f"({' · '.join(map(md.text, comparability_key(row_a)))} vs "
        f"{' · '.join(map(md.text, comparability_key(row_b)))}): Δ compares "
        "different setups.",
        icon=":material/warning:",
    )
# Made-up numbers say so above the verdicts, in the PR comment's words (analysis.report).
for notice in made_up_notices(row_a.to_dict(), row_b.to_dict()):
    st.warning(notice, icon=":material/science:")
center = center_text(table)
# The correctness gate first: a point measured on a wrong path is a finding, not a speed to compare.
for side, run_id in (("candidate", b), ("baseline", a)):
    wrong_rows = table[table[f"correctness_{side}"] == "fail"]
    if len(wrong_rows):
        failed = {
            str(r["config"]).split(" · ")[0]: str(r["correctness_why"]) for r in wrong_rows.to_dict("records")
        }
        lines = [
            line.removeprefix("> ").replace("🛑 ", "")
            for line in correctness.banner_md(list(failed.items()), f"the {side} run #{run_id}")
        ]
        speeds = [
            f"- {md.text(r['config'])}: {side} {correctness.speed_md(r[side], 'fail', ',.4g')}"
            for r in wrong_rows.to_dict("records")
        ]
        st.error("\n".join([*lines, *speeds]), icon=":material/dangerous:")

counts = verdict_counts(table)
cols = st.columns(4)
for col, (verdict, n) in zip(cols, counts.items(), strict=True):
    col.metric(verdict.capitalize(), n)

st.markdown("##### Δ candidate vs baseline")
st.caption(
    f"Δ = candidate / baseline − 1 of the repeats' {center}s, the values in the baseline and candidate columns; "
    "the interval comes from the per-repeat samples."
)

view = pd.DataFrame(
    {
        "verdict": table["verdict"],
        "check": [
            f"🛑 {correctness.WRONG} ({' and '.join(s for s, v in (('baseline', va), ('candidate', vb)) if v == 'fail')})"
            if "fail" in (va, vb)
            else (vb or "–")
            for va, vb in zip(table["correctness_baseline"], table["correctness_candidate"], strict=True)
        ],
        "config": table["config"] + (" · " + table["workload"] if table["workload"].nunique() > 1 else ""),
        "Δ": table["delta"] * 100,
        "interval": [
            "–" if pd.isna(lo) else f"[{lo * 100:+.1f}%, {hi * 100:+.1f}%]"
            for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)
        ],
        "baseline": table["baseline"],
        "candidate": table["candidate"],
        "why": [str(w or n or "") for w, n in zip(table["why"], table["note"], strict=True)],
    }
)
# Every column is in the CSV.
columns = (
    Column("verdict", text=True),
    Column("check", "correctness", text=True),
    Column("config", text=True),
    Column("Δ", show=lambda r: "–" if pd.isna(r["Δ"]) else f"{r['Δ']:+.1f}%"),
    Column("interval", f"{confidence:.0%} interval", text=True),
    Column("baseline", f"baseline ({center})", show=lambda r: magnitude(r["baseline"])),
    Column("candidate", show=lambda r: magnitude(r["candidate"])),
    Column("why", "why / note", text=True),
)
tables.table(view, columns, key="cmp_table_all", what="points")
# The table's numbers as charts, drawn once opened: a page's first chart costs a browser Vega's code.
grid_chart, forest_chart = views.compare_charts(url, a, b, metric, threshold, confidence)
box = tables.lazy_expander("Δ by configuration and batch size", "cmp_grid_open")
if box is not None:
    box.altair_chart(grid_chart, width="content")
    box.caption("▼ regression · ▲ improvement · ? insufficient data; colour: red = worse, blue = better.")
box = tables.lazy_expander(f"Intervals of all {len(table)} points", "cmp_forest_open")
if box is not None:
    box.altair_chart(forest_chart, width="stretch")

csv_text, markdown = data.comparison_files(url, a, b, metric, threshold, confidence)
download_buttons(csv_text, markdown, f"compare-{a}-vs-{b}-{metric}", key="cmp_dl")
# A toggle, not an expander (drawn even closed): code blocks load a 1.5 MB syntax highlighter on every visit.
if st.toggle("PR comment preview", key="cmp_preview"):
    # Stored names went through analysis.md: text, never elements.
    st.markdown(markdown, unsafe_allow_html=False)
    st.text_area("Markdown source", markdown, height=160, key="cmp_md_source")  # to paste
