"""Sweep: one run as batch size x spec steps heatmaps, and throughput against batch size."""

import pandas as pd
import streamlit as st

from analysis import correctness, md
from analysis.labels import STAND_IN_TAG, config_label, run_kind, run_tag, short_gpu, short_workload
from analysis.run_counts import points_of
from dashboard.components import evidence, layout, state, tables
from dashboard.components.export import frame_with_csv
from dashboard.components.filters import run_picker
from dashboard.services import data
from dashboard.services.views import sweep_view

PARAMS = (
    state.Param("run", "sw_run", None, int),
    state.Param("workload", "sw_workload", None),
    state.Param("topk", "sw_topk", None, int),
    state.Param("accept", "sw_accept", None, float),
)

TABS = ("Heatmaps", "Against batch size", "v2 over v1", "Physical floor")

url = layout.page_start("Sweep")
state.restore(PARAMS, "sweep")

runs = data.run_choices(url)
run_id = run_picker(runs, "sw_run", "Run")
if run_id is None:
    st.stop()
info = data.run_info(url, run_id)
points = data.run_points(url, run_id)

workloads = sorted(points["workload_key"].dropna().unique().tolist())
topks = sorted(int(k) for k in points["topk"].dropna().unique())
# A grid with grid.accept_lengths has one point per pinned acceptance at each (batch, steps): one at a time.
pinned = points["accept_length_pinned"]
accepts = sorted(float(a) for a in pinned.dropna().unique())
slots = iter(st.columns(3))  # only the choices this run has, from the left
if len(workloads) > 1:
    state.ensure_choice("sw_workload", workloads)
    next(slots).selectbox("Workload", workloads, key="sw_workload", format_func=short_workload)
else:
    st.session_state["sw_workload"] = workloads[0] if workloads else None
if len(topks) > 1:
    state.ensure_choice("sw_topk", topks)
    next(slots).selectbox("Eagle topk", topks, key="sw_topk")
else:
    st.session_state["sw_topk"] = topks[0] if topks else None
if len(accepts) > 1:
    state.ensure_choice("sw_accept", accepts)
    next(slots).selectbox("Acceptance (pinned)", accepts, key="sw_accept", format_func=lambda a: f"{a:g}")
else:
    st.session_state["sw_accept"] = accepts[0] if accepts else None
state.publish(PARAMS)

# Versions such as 0.5.13.post1 are the widest value here; equal columns cut them off.
m = st.columns([1.6, 1.1, 0.8, 0.9, 1.1])
# A metric's value is Markdown too: stored text goes through analysis.md like everywhere else.
patch = info.get("sglang_patch")
patched = patch not in (None, "none")
m[0].metric(
    "SGLang",
    md.text((info["sglang_version"] or "?") + (" patched" if patched else "")),
    help=f"carried the specbench patch {patch}" if patched else None,
)
m[1].metric("GPU", md.text(short_gpu(info["gpu_name"], info["gpu_count"])))
m[2].metric("Status", md.text(info["status"]))
n_ok, n_of = points_of(int((points["status"] == "ok").sum()), len(points), info["sweep_yaml"])
m[3].metric(
    "Points ok",
    f"{n_ok} / {n_of}",
    help=f"ok points out of the {n_of} the sweep planned ({len(points)} stored), as `specbench runs` counts them",
)
m[4].metric(
    "Started", f"{info['started_at']:%m-%d %H:%M}", help=f"{info['started_at']:%Y-%m-%d %H:%M:%S} UTC"
)
# The correctness gate first: a wrong path's speed is a finding (docs/reference/correctness-gate.md).
verdicts = correctness.counts(points["correctness"])
if verdicts["not recorded"] < len(points):
    failed = correctness.failed_launches(points, lambda r: config_label(r, with_batch=False))
    if failed:
        st.error(
            "\n".join(
                [
                    *(
                        line.removeprefix("> ").replace("🛑 ", "")
                        for line in correctness.banner_md(failed, f"Run #{run_id}")
                    ),
                    *correctness.wrong_points_md(points, lambda r: config_label(r, with_batch=False)),
                ]
            ),
            icon=":material/dangerous:",
        )
    else:
        st.caption(
            f"Correctness gate: {verdicts['pass']} point(s) pass, {verdicts['not checked']} not checked "
            "(reasons in the table at the bottom)."
        )
servers = data.run_servers(url, run_id)
shared = servers[(servers["idle_neighbours"] > 0) & ~servers["pair_colocated"]]
if servers["pair_colocated"].any():
    st.caption(
        "v1/v2 pairs were measured interleaved (A B B A ...) with both servers of a pair up; each idled while "
        "its partner was measured (docs/reference/paired-measurement.md)."
    )
if len(shared):
    most = int(shared["idle_neighbours"].max())
    st.warning(
        f"**Co-started servers:** {len(shared)} of {len(servers)} servers were measured while up to {most} other "
        "server(s) of this run sat idle beside them (`server.max_parallel_starts` > 1 starts several at once to "
        "save start-up time). An idle SGLang scheduler still spins a host core, so these numbers, most at high "
        "batch sizes, may read lower than a server measured alone; rerun with `max_parallel_starts: 1` before "
        "comparing servers with different neighbour counts.",
        icon=":material/warning:",
    )
kind = run_tag(info["simulated"], info["trigger"])
if kind:
    st.info(
        f"Run #{run_id} is **{kind}**: "
        + (
            "measured on the stand-in server, numbers from its performance model, not a GPU."
            if kind == STAND_IN_TAG
            else "generated by `specbench seed`, not a measurement."
        ),
        icon=":material/smart_toy:",
    )
commit = f" @ {md.code(str(info['sglang_commit'])[:10])}" if info["sglang_commit"] else ""
st.caption(
    f"{md.text(info['sweep_name'])} · {md.text(info['model'])}{commit} · sgl-kernel "
    f"{md.text(info['sgl_kernel_version'] or '?')} · trigger {md.text(info['trigger'])} · run uid "
    f"{md.code(info['uid'])}"
)
facts = info.get("caption_facts") or {}
evidence.numbers_banner(facts)
# A run grown across GPU hosts: its parts, and whether its pairs were measured in blocks.
evidence.parts_caption(
    data.run_parts(url, run_id),
    pd.concat([data.run_v2_vs_v1(url, run_id)["pairing"], data.run_spec_vs_baseline(url, run_id)["pairing"]]),
)
if info["sweep_edits"]:
    # A resume may change the stopping rule (how many pairs a point takes); say so next to the run.
    edits = "; ".join(
        f"{md.text(str(e['at'])[:16])}: "
        + ", ".join(f"{md.text(c['field'])} {md.text(c['old'])} → {md.text(c['new'])}" for c in e["changes"])
        for e in info["sweep_edits"]
    )
    st.caption(
        f"Resumed with an edited stopping rule ({edits}). Pairs measured before an edit stopped by the older "
        f"rule; `specbench runs --yaml {run_id}` prints the sweep as it is now."
    )

view = sweep_view(
    url,
    run_id,
    st.session_state["sw_workload"],
    st.session_state.get("sw_topk"),
    st.session_state.get("sw_accept"),
)
sel, grid, drawn = view.selection, view.grid, view.charts
evidence.impossible_points(view.floors)  # on every tab: such a point is a finding
if grid.empty:
    st.info("This run has no ok points for this selection.")
    # points faster than their floor are one reason for none
    evidence.floor_section(view.floors, drawn.get("floor"), facts)
    st.stop()
# Counted in the selection the charts show, not the whole run.
not_ok = sel[sel["status"] != "ok"]["status"].value_counts()
if len(not_ok):
    # A missing cell is a point that did not measure cleanly, not a hole in the sweep: say which.
    kinds = ", ".join(f"{n} {md.text(status)}" for status, n in not_ok.items())
    st.caption(f"Charts show ok points only. Left out: {kinds} (all points are listed at the bottom).")

# One tab's charts at a time: the server sends only the open tab's (a first visit draws three, not seven).
heat, lines, pairs, floor = st.tabs(TABS, key="sw_tab", on_change="rerun")
if heat.open:
    with heat:
        st.markdown("##### Output throughput (tok/s)")
        st.altair_chart(drawn["throughput"], width="content")
        st.markdown("##### Acceptance length (tokens per verify step)")
        st.altair_chart(drawn["acceptance"], width="content")
        st.markdown("##### Speculative over no-spec baseline (throughput ratio)")
        if "speedup" in drawn:
            st.altair_chart(drawn["speedup"], width="content")
        else:
            st.caption("Needs a baseline point at the same batch size.")
if lines.open:
    with lines:
        evidence.speedup_section(drawn.get("speedup_lines"), facts, simulated=bool(info["simulated"]))
        st.markdown("##### Throughput against batch size")
        st.altair_chart(drawn["lines"], width="stretch")
if pairs.open:
    with pairs:
        st.markdown("##### v2 (overlap) over v1 (non-overlap)")
        if "ratio" in drawn:
            st.altair_chart(drawn["ratio"], width="content")
            st.caption(
                "Output throughput ratio with its 95 % interval (paired by repeat when the run interleaved v1 "
                "and v2). Grey: the interval spans 1, no clear difference. `specbench export --view v2-vs-v1` "
                "gives the table."
            )
            evidence.overlap_share_table(view.ratios)
        else:
            st.caption("Needs both v1 and v2 points.")
        evidence.over_baseline_table(view.over_baseline)
if floor.open:
    with floor:
        evidence.floor_section(view.floors, drawn.get("floor"), facts)

box = tables.lazy_expander(f"All {len(points)} points of run #{run_id} (every status)", "sw_points_open")
if box is not None:
    with box:
        frame_with_csv(
            points.assign(kind=run_kind(info["simulated"], info["trigger"])),
            "run",
            f"run-{run_id}-points.csv",
            key="sw_csv",
        )
