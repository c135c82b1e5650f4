"""Profiles: v1 and v2 of one point side by side, from SGLang profiler traces captured after the point."""

from typing import Any

import pandas as pd
import streamlit as st

from analysis import md
from analysis.labels import STAND_IN_TAG, run_tag
from analysis.profiles import opening_pair, opening_run
from analysis.render import Column
from analysis.trace_files import FoundTrace, find_trace
from bench.profile.overlap import verdict
from bench.profile.summary import spans_for_cycles
from bench.profile.trace import TraceError, load_trace
from dashboard import profile_charts
from dashboard.components import layout, state, tables
from dashboard.components.filters import run_label
from dashboard.services import data
from db import profile_queries as pq

PARAMS = (state.Param("run", "pr_run", None, int), state.Param("pair", "pr_pair", None, int))
SHOWN_CYCLES = 3
FIGURE_COLUMNS = (Column("figure", text=True), Column("value", text=True))


@st.cache_data(ttl=300, show_spinner=False)
def _trace(url: str, path: str | None, sha256: str | None, size: int | None) -> FoundTrace | None:
    """The trace file on this host: as stored, next to the database or shipped in examples/ (by sha256)."""
    return find_trace(path, sha256, size, database=url)


def _found(url: str, prof: dict[str, Any]) -> FoundTrace | None:
    return _trace(url, prof["path"], prof["sha256"], prof["size_bytes"])


@st.cache_data(max_entries=16, show_spinner="Reading the trace…")
def _timeline_rows(path: str, sha256: str | None) -> list[dict[str, Any]] | None:
    """Bars for a few cycles (skipping the first, which may hold the profiler's start-up), or None."""
    try:
        trace = load_trace(path)
    except TraceError:
        return None
    rows = spans_for_cycles(trace, first=1, count=SHOWN_CYCLES)
    return rows or spans_for_cycles(trace, first=0, count=SHOWN_CYCLES)


def _pair_label(p: dict[str, Any]) -> str:
    acts = p["activities_key"].replace("+", " + ")
    acc = "" if p.get("accept_length_pinned") is None else f" acc={p['accept_length_pinned']:g}"
    return f"bs {p['batch_size']} · {p['algorithm']} steps {p['steps']} topk {p['topk']}{acc} · {acts}"


def _side(
    col: Any,
    title: str,
    prof: dict[str, Any],
    x_max: float | None,
    rows: list[dict[str, Any]] | None,
    found: FoundTrace | None,
    simulated: bool,
) -> None:
    col.markdown(f"##### {title}")
    summary = prof["summary"] or {}
    warning = (summary.get("distortion") or {}).get("warning")
    if warning:
        col.warning(md.text(warning), icon=":material/warning:")
    if rows:
        what = "stand-in's simulated trace" if simulated else "trace"
        col.altair_chart(
            profile_charts.timeline(rows, f"{SHOWN_CYCLES} cycles, {title} ({what})", x_max),
            width="stretch",
            height=260,
        )
        if found is not None and found.how != "as stored":
            col.caption(f"Trace {md.text(found.how)} (sha256 checked; captured on {md.code(prof['host'])}).")
    else:
        col.caption(
            f"Trace not on this host: captured on {md.code(prof['host'])} at {md.code(prof['path'])}. Looked for a "
            "file with its sha256 there, in `artifacts/` next to the database and in the traces shipped under "
            "`examples/`; copy the capture's `artifacts/` folder next to the database to see it here."
        )
    # Every row shown (the distortion row is the last, and the one that says how far to trust the rest).
    with col:
        tables.table(profile_charts.figures_table(summary), FIGURE_COLUMNS, key=f"pr_figures_{prof['id']}")
    if rows and found is not None:
        col.download_button(
            f"Download {title} trace (open in Perfetto)",
            found.path.read_bytes(),
            file_name=found.path.name,
            mime="application/gzip",
            on_click="ignore",
            key=f"pr_dl_{prof['id']}",
        )


url = layout.page_start(
    "Profiles",
    caption="v1 and v2 of one point side by side, from SGLang profiler traces captured after its windows.",
)
state.restore(PARAMS, "profiles")
runs = data.runs_with_profiles(url)
if not runs:
    st.info(
        "No profiles yet. Add a `profile:` block to a sweep, e.g. "
        "`profile: {steps: 12, activities: [GPU], at: [1, 8, 32]}` (see docs/reference/profiles.md).",
        icon=":material/inbox:",
    )
    st.stop()
by_id = {int(r["id"]): r for r in runs}


def _pairs(run_id: int) -> list[dict[str, Any]]:
    return pq.profile_pairs(data.run_profiles(url, run_id))


def _readable(prof: dict[str, Any]) -> bool:
    return _found(url, prof) is not None


if st.session_state.get("pr_run") not in by_id:
    # No link says which run: open on one whose v1/v2 pair this host can draw.
    st.session_state["pr_run"] = opening_run(runs, _pairs, _readable)
run_id = int(st.selectbox("Run", list(by_id), key="pr_run", format_func=lambda i: run_label(by_id[i])))
kind = run_tag(by_id[run_id]["simulated"], by_id[run_id]["trigger"])
if kind:
    st.info(
        f"Run #{run_id} is **{kind}**: "
        + (
            "these traces come from the stand-in server, which writes a trace shaped like SGLang's from its "
            "performance model. No GPU ran them; read the layout, not the times."
            if kind == STAND_IN_TAG
            else "generated by `specbench seed`, not a measurement."
        ),
        icon=":material/smart_toy:",
    )
profiles = data.run_profiles(url, run_id)
pairs = _pairs(run_id)
if not pairs:
    st.info("This run has no v1/v2 pair of profiles of the same point; its profiles are listed below.")
else:
    if st.session_state.get("pr_pair") not in range(len(pairs)):
        st.session_state["pr_pair"] = opening_pair(pairs, _readable)
    i = int(
        st.selectbox(
            "Point (v1 and v2)",
            list(range(len(pairs))),
            key="pr_pair",
            format_func=lambda k: _pair_label(pairs[k]),
        )
    )
    pair = pairs[i]
    v1, v2 = pair["v1"], pair["v2"]
    st.success(verdict(v1["summary"], v2["summary"]), icon=":material/compare_arrows:")
    found1, found2 = _found(url, v1), _found(url, v2)
    rows1 = _timeline_rows(str(found1.path), v1["sha256"]) if found1 else None
    rows2 = _timeline_rows(str(found2.path), v2["sha256"]) if found2 else None
    ends = [r["end_ms"] for rows in (rows1, rows2) if rows for r in rows]
    x_max = max(ends) if ends else None  # one time axis for both, so bar lengths compare
    left, right = st.columns(2)
    simulated = kind == STAND_IN_TAG
    _side(left, "v1 (non-overlap)", v1, x_max, rows1, found1, simulated)
    _side(right, "v2 (overlap)", v2, x_max, rows2, found2, simulated)
    st.caption(
        "A cycle runs from one target-verify step to the next (draft, verify, draft extend, scheduling). "
        "GPU idle = cycle time minus the union of kernel time. Distortion: the profiled cycle against the "
        "same point's cycle without the profiler (TPOT × accept length), e.g. ×1.32 (13.71 vs 10.37 ms); above "
        "×1.2, compare the two sides' differences rather than their absolute times."
    )

state.publish(PARAMS)
box = tables.lazy_expander(f"All {len(profiles)} profiles of run #{run_id}", "pr_all_open")
if box is not None:
    table = pd.DataFrame(
        [
            {
                "point": p["point_id"],
                "mode": p["spec_mode"],
                "bs": p["batch_size"],
                "steps": p["steps"],
                "activities": p["activities_key"],
                "rank": p["tp_rank"],
                "status": p["status"],
                "cycles": (p["summary"] or {}).get("cycles"),
                "error": p["error"],
                "host": p["host"],
                "path": p["path"],
                "MB": None if p["size_bytes"] is None else round(p["size_bytes"] / 1e6, 3),
                "sha256": p["sha256"],
            }
            for p in profiles
        ]
    )
    box.dataframe(table, hide_index=True)
