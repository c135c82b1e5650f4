"""Profiles: v1 and v2 of the same point side by side, from SGLang profiler traces captured after the point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import inspect

from analysis import md
from bench.profile.overlap import verdict
from bench.profile.summary import spans_for_cycles
from bench.profile.trace import TraceError, load_trace
from dashboard import profile_charts
from dashboard.components import layout, state
from dashboard.services import data
from db import profile_queries as pq

PARAMS = (state.Param("run", "pr_run", None, int), state.Param("pair", "pr_pair", 0, int))
SHOWN_CYCLES = 3


@st.cache_data(ttl=30, show_spinner=False)
def _runs(url: str) -> list[dict[str, Any]]:
    if not inspect(data.engine(url)).has_table("profiles"):  # a database not yet migrated to profiles
        return []
    return pq.runs_with_profiles(data.engine(url))


@st.cache_data(ttl=30, show_spinner=False)
def _profiles(url: str, run_id: int) -> list[dict[str, Any]]:
    return pq.run_profiles(data.engine(url), run_id)


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
    col: Any, title: str, prof: dict[str, Any], x_max: float | None, rows: list[dict[str, Any]] | None
) -> None:
    col.markdown(f"##### {title}")
    summary = prof["summary"] or {}
    warning = (summary.get("distortion") or {}).get("warning")
    if warning:
        col.warning(md.text(warning), icon=":material/warning:")
    if rows:
        col.altair_chart(
            profile_charts.timeline(rows, f"{SHOWN_CYCLES} cycles, {title}", x_max),
            width="stretch",
            height=260,
        )
    else:
        col.caption(
            f"Trace not readable on this host (captured on {md.code(prof['host'])} at {md.code(prof['path'])})."
        )
    col.dataframe(profile_charts.figures_table(summary), hide_index=True, width="stretch")
    path = Path(prof["path"] or "")
    if rows and path.is_file():
        col.download_button(
            f"Download {title} trace (open in Perfetto)",
            path.read_bytes(),
            file_name=path.name,
            mime="application/gzip",
            on_click="ignore",
            key=f"pr_dl_{prof['id']}",
        )


url = layout.page_start("Profiles", banner=False)
state.restore(PARAMS, "profiles")
runs = _runs(url)
if not runs:
    st.info(
        "No profiles yet. Add a `profile:` block to a sweep, e.g. "
        "`profile: {steps: 12, activities: [GPU], at: [1, 8, 32]}` (see docs/reference/profiles.md).",
        icon=":material/inbox:",
    )
    st.stop()
labels = {int(r["id"]): f"#{r['id']} {r['sweep_name']} · {r['started_at']:%Y-%m-%d %H:%M}" for r in runs}
state.ensure_choice("pr_run", list(labels))
run_id = int(st.selectbox("Run", list(labels), key="pr_run", format_func=lambda i: labels[i]))
profiles = _profiles(url, run_id)
pairs = pq.profile_pairs(profiles)
if not pairs:
    st.info("This run has no v1/v2 pair of profiles of the same point; its profiles are listed below.")
else:
    state.ensure_choice("pr_pair", list(range(len(pairs))))
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
    rows1 = _timeline_rows(v1["path"], v1["sha256"]) if v1["path"] else None
    rows2 = _timeline_rows(v2["path"], v2["sha256"]) if v2["path"] else None
    ends = [r["end_ms"] for rows in (rows1, rows2) if rows for r in rows]
    x_max = max(ends) if ends else None  # one time axis for both, so bar lengths compare
    left, right = st.columns(2)
    _side(left, "v1 (non-overlap)", v1, x_max, rows1)
    _side(right, "v2 (overlap)", v2, x_max, rows2)
    st.caption(
        "A cycle runs from one target-verify step to the next (draft, verify, draft extend, scheduling). "
        "GPU idle = cycle time minus the union of kernel time. Distortion compares the profiled cycle with "
        "TPOT × accept length of the same point measured without the profiler."
    )

state.publish(PARAMS)
with st.expander(f"All {len(profiles)} profiles of run #{run_id}"):
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
    st.dataframe(table, hide_index=True)
