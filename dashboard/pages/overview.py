"""Overview: what happened lately. Latest runs, the newest flagged changes, and points that went wrong."""

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from analysis import md
from analysis.changes import first_runs_after, summarize_by_run
from analysis.labels import KIND_HELP, run_kind, short_gpu
from analysis.regressions import DEFAULT_LOOKBACK, DEFAULT_SINCE, flagged
from analysis.render import Column
from analysis.run_counts import points_text
from analysis.stats.changepoint import ChangePointParams
from dashboard.components import layout, tables, triage
from dashboard.services import data

# The tables are Markdown (dashboard.components.tables): stored text is escaped cell by cell, links are ours.
CHANGE_COLUMNS = (
    *(Column(k, text=True) for k in ("Change", "Kind", "Series")),
    Column("Δ", show=lambda r: f"{r['Δ']:+.1f}%"),
    *(Column(k, text=True) for k in ("Why", "First run after", "Triage")),
    Column("Open", show=lambda r: f"[trend ↗]({r['Open']})"),
)
RUN_COLUMNS = (
    Column("Run", fmt="d"),
    Column("Started", show=lambda r: f"{r['Started']:%m-%d %H:%M}"),
    *(Column(k, text=True) for k in ("Sweep", "Kind", "GPU", "SGLang", "Status", "Points ok")),
    Column("Sweep view", show=lambda r: f"[heatmaps ↗]({r['Sweep view']})"),
)
PROBLEM_COLUMNS = (
    Column("Run", fmt="d"),
    *(Column(k, text=True) for k in ("Status", "Reason", "Config")),
    Column("Batch", fmt="d"),
    Column("GPU", text=True),
)

url = layout.page_start(
    "specbench",
    caption="Speculative decoding (EAGLE / NextN) on FlashMLA: every sweep, every point, every regression.",
)

totals = data.totals(url)
cat = data.catalog(url)
runs = data.latest_runs(url, 25)
c1, c2, c3, c4 = st.columns(4)
c1.metric("Runs", f"{totals.runs:,}")
c2.metric("Points", f"{int(cat['n_points'].sum()):,}" if not cat.empty else "0")
c3.metric("Series", f"{len(cat):,}")
last = totals.last_run_at
c4.metric(
    "Last run",
    pd.Timestamp(last).strftime("%b %d, %H:%M") if last is not None else "–",
    help=f"{last:%Y-%m-%d %H:%M:%S} UTC" if last is not None else None,
)

# ---- newest flagged changes
st.subheader("Newest flagged changes", anchor="changes")
params = ChangePointParams()
changes = data.recent_changes(url, "output_throughput", params)
left, right = st.columns([3, 1])
left.caption(
    f"Change points along the history of every series measured in the last {DEFAULT_SINCE.days} days "
    f"(output throughput, E-divisive means with {DEFAULT_LOOKBACK.days} days before as context, "
    f"p ≤ {params.max_pvalue:g}, |Δ| ≥ {params.min_magnitude:.0%}): the same list as `specbench regressions`. "
    "To compare two runs point by point, use Compare (`specbench compare`)."
)
show_all = right.toggle("Show improvements, dismissed", value=False, key="ov_all")
shown = flagged(changes, include_improvements=show_all, include_dismissed=show_all)
if shown.empty:
    st.success("No flagged regressions in the latest runs.", icon=":material/check_circle:")
else:
    # One cause usually moves many series at once: say so first, run by run.
    for line in summarize_by_run(shown)[:3]:
        st.markdown(line)
    table = pd.DataFrame(
        {
            "Change": ["▼ regression" if d == "regression" else "▲ improvement" for d in shown["direction"]],
            "Kind": shown["kind"],
            "Series": shown["series"],
            "Δ": shown["rel_change"] * 100,
            "Why": shown["why"],
            "First run after": first_runs_after(shown),
            "Triage": shown["state"],
            "Open": [
                "trends?" + urlencode({"fp": fp, "metric": "output_throughput"})
                for fp in shown["fingerprint"]
            ],
            "_when": pd.to_datetime(shown["started_at"], utc=True),
        }
    )
    tables.table(
        table.sort_values(["_when", "Δ"], ascending=[False, True]).drop(columns="_when"),
        CHANGE_COLUMNS,
        key="ov_changes_all",
        what="flagged changes",
    )

if not changes.empty:
    # Every change that starts at a run, whether shown above or not (improvements, dismissed ones too); the
    # picker opens on the run of the list's first row.
    listed = (
        shown.sort_values(["started_at", "rel_change"], ascending=[False, True])["run_id"]
        if not shown.empty
        else []
    )
    box = tables.lazy_expander(
        "Triage a whole run: one verdict for every change that starts at a run", "ov_bulk_open"
    )
    if box is not None:
        with box:
            triage.bulk_triage_form(
                url, changes, "output_throughput", key="ov_bulk", listed=[int(r) for r in listed]
            )

# ---- latest runs
st.subheader("Latest runs", anchor="runs")
runs_view = pd.DataFrame(
    {
        "Run": runs["id"],
        "Started": pd.to_datetime(runs["started_at"], utc=True),
        "Sweep": runs["sweep_name"],
        "Kind": [run_kind(m, t) for m, t in zip(runs["simulated"], runs["trigger"], strict=True)],
        "GPU": [short_gpu(n, k) for n, k in zip(runs["gpu_name"], runs["gpu_count"], strict=True)],
        "SGLang": runs["sglang_version"],
        "Status": runs["status"],
        "Points ok": [
            points_text(int(ok), int(n), y)
            for ok, n, y in zip(runs["points_ok"], runs["points"], runs["sweep_yaml"], strict=True)
        ],
        "Sweep view": ["sweep?" + urlencode({"run": int(r)}) for r in runs["id"]],
    }
)
st.caption(
    f"Kind: {KIND_HELP}. Points ok: ok points out of those the sweep planned (a run cut short reads as "
    "cut), as `specbench runs` counts them. Times in UTC."
)
tables.table(runs_view, RUN_COLUMNS, key="ov_runs_all", what="runs")

# ---- problem points
st.subheader("Failed, invalid and mode-mismatch points", anchor="problems")
problems = data.problem_points(url, tuple(int(i) for i in runs["id"]))
if problems.empty:
    st.success("Every point of the latest runs is ok.", icon=":material/check_circle:")
else:
    counts = problems["status"].value_counts()
    st.caption(" · ".join(f"**{n}** {md.text(s)}" for s, n in counts.items()) + " in the latest runs")
    tables.table(
        pd.DataFrame(
            {
                "Run": problems["run_id"],
                "Status": problems["status"],
                "Reason": problems["reason"],
                "Config": [
                    "baseline"
                    if pd.isna(s)
                    else f"{a} s{int(s)} {m}" + (f" → resolved {r}" if isinstance(r, str) and r != m else "")
                    for a, s, m, r in zip(
                        problems["algorithm"],
                        problems["steps"],
                        problems["spec_mode"],
                        problems["spec_mode_resolved"],
                        strict=True,
                    )
                ],
                "Batch": problems["batch_size"],
                "GPU": [
                    short_gpu(n, k) for n, k in zip(problems["gpu_name"], problems["gpu_count"], strict=True)
                ],
            }
        ),
        PROBLEM_COLUMNS,
        key="ov_problems_all",
        what="points",
    )
