"""Sweep: one run as batch size x spec steps heatmaps, and throughput against batch size."""

from __future__ import annotations

import streamlit as st

from analysis.labels import short_gpu, short_workload
from analysis.sweep import sweep_grid
from dashboard import charts
from dashboard.components import layout, state
from dashboard.components.filters import run_picker
from dashboard.services import data

PARAMS = (
    state.Param("run", "sw_run", None, int),
    state.Param("workload", "sw_workload", None),
    state.Param("topk", "sw_topk", None, int),
)

url = data.db_url()
st.title("Sweep")
if not layout.database_ready(url):
    st.stop()
layout.synthetic_banner(url)
state.restore(PARAMS, "sweep")

runs = data.run_choices(url)
run_id = run_picker(runs, "sw_run", "Run")
if run_id is None:
    st.stop()
info = data.run_info(url, run_id)
points = data.run_points(url, run_id)

workloads = sorted(points["workload_key"].dropna().unique().tolist())
topks = sorted(int(k) for k in points["topk"].dropna().unique())
c1, c2 = st.columns(2)
if len(workloads) > 1:
    state.ensure_choice("sw_workload", workloads)
    c1.selectbox("Workload", workloads, key="sw_workload", format_func=short_workload)
else:
    st.session_state["sw_workload"] = workloads[0] if workloads else None
if len(topks) > 1:
    state.ensure_choice("sw_topk", topks)
    c2.selectbox("Eagle topk", topks, key="sw_topk")
else:
    st.session_state["sw_topk"] = topks[0] if topks else None
state.publish(PARAMS)

# Versions such as 0.5.13.post1 are the widest value here; equal columns cut them off.
m = st.columns([1.6, 1.1, 0.8, 0.9, 1.1])
m[0].metric("SGLang", f"{info['sglang_version'] or '?'}")
m[1].metric("GPU", short_gpu(info["gpu_name"], info["gpu_count"]))
m[2].metric("Status", info["status"])
m[3].metric("Points ok", f"{int((points['status'] == 'ok').sum())} / {len(points)}")
m[4].metric(
    "Started", f"{info['started_at']:%m-%d %H:%M}", help=f"{info['started_at']:%Y-%m-%d %H:%M:%S} UTC"
)
servers = data.run_servers(url, run_id)
shared = servers[(servers["idle_neighbours"] > 0) & ~servers["pair_colocated"]]
if servers["pair_colocated"].any():
    st.caption(
        "v1/v2 pairs were measured interleaved (A B B A ...) with both servers of a pair up; each idled while "
        "its partner was measured (docs/paired-measurement.md)."
    )
if len(shared):
    st.warning(
        f"{len(shared)} of {len(servers)} servers were measured with idle servers of this run sharing the GPU "
        f"(parallel starts; up to {int(shared['idle_neighbours'].max())} at once). Idle SGLang servers keep CPU "
        "cores busy, so comparisons between servers with different neighbour counts, especially at high batch "
        "size, can be biased. Rerun with `max_parallel_starts: 1` for a clean comparison.",
        icon=":material/warning:",
    )
commit = f" @ `{str(info['sglang_commit'])[:10]}`" if info["sglang_commit"] else ""
st.caption(
    f"{info['sweep_name']} · {info['model']}{commit} · sgl-kernel {info['sgl_kernel_version'] or '?'} · "
    f"trigger {info['trigger']} · run uid `{info['uid']}`"
)

sel = points[points["workload_key"] == st.session_state["sw_workload"]]
if st.session_state.get("sw_topk") is not None:
    sel = sel[sel["topk"].isna() | (sel["topk"] == st.session_state["sw_topk"])]
grid = sweep_grid(sel)
if grid.empty:
    st.info("This run has no ok points for this selection.")
    st.stop()
spec = grid[grid["spec_mode"] != "baseline"]
# Counted in the selection the charts show, not the whole run.
not_ok = sel[sel["status"] != "ok"]["status"].value_counts()
if len(not_ok):
    # A missing cell is a point that did not measure cleanly, not a hole in the sweep: say which.
    kinds = ", ".join(f"{n} {status}" for status, n in not_ok.items())
    st.caption(f"Charts show ok points only. Left out: {kinds} (all points are listed at the bottom).")

st.markdown("##### Output throughput (tok/s)")
st.altair_chart(charts.heatmap(spec, "output_throughput", "tok/s", width=330), width="content")
st.markdown("##### Acceptance length (tokens per verify step)")
st.altair_chart(charts.heatmap(spec, "accept_length", "tokens", fmt=".2f", width=330), width="content")
st.markdown("##### Speculative over no-spec baseline (throughput ratio)")
if spec["speedup_over_baseline"].notna().any():
    chart = charts.heatmap(spec, "speedup_over_baseline", "×", fmt=".2f", diverging=True, width=330)
    st.altair_chart(chart, width="content")
else:
    st.caption("Needs a baseline point at the same batch size.")
left, right = st.columns([2, 3])
with left:
    st.markdown("##### v2 (overlap) over v1 (non-overlap)")
    ratios = data.run_v2_vs_v1(url, run_id)
    ratios = ratios[ratios["workload_key"] == st.session_state["sw_workload"]]
    if st.session_state.get("sw_topk") is not None:
        ratios = ratios[ratios["topk"].isna() | (ratios["topk"] == st.session_state["sw_topk"])]
    if ratios["ratio"].notna().any():
        st.altair_chart(charts.ratio_heatmap(ratios), width="content")
        st.caption(
            "Output throughput ratio with its 95 % interval (paired by repeat when the run interleaved v1 and "
            "v2). Grey: the interval spans 1, no clear difference. `specbench export --view v2-vs-v1` gives "
            "the table."
        )
    else:
        st.caption("Needs both v1 and v2 points.")
with right:
    st.markdown("##### Throughput against batch size")
    st.altair_chart(charts.throughput_lines(grid), width="stretch")

with st.expander(f"All {len(points)} points of run #{run_id} (every status)"):
    st.dataframe(points, hide_index=True)
    st.download_button(
        "Download run CSV",
        points.to_csv(index=False),
        file_name=f"run-{run_id}-points.csv",
        mime="text/csv",
        on_click="ignore",
        key="sw_csv",
    )
