"""Overview: what happened lately. Latest runs, the newest flagged changes, and points that went wrong."""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from analysis.changes import summarize_by_run
from analysis.labels import run_tag, short_gpu
from analysis.regressions import DEFAULT_LOOKBACK, DEFAULT_SINCE, flagged
from analysis.run_counts import points_text
from analysis.stats.changepoint import ChangePointParams
from dashboard.components import layout, triage
from dashboard.services import data

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
    f"Output throughput of every series measured in the last {DEFAULT_SINCE.days} days, E-divisive means "
    f"with {DEFAULT_LOOKBACK.days} days of history before as context (p ≤ {params.max_pvalue:g}, "
    f"|Δ| ≥ {params.min_magnitude:.0%}); the same list as `specbench regressions`."
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
            "Series": shown["series"],
            "Δ": shown["rel_change"] * 100,
            "Why": shown["why"],
            "From → to": [
                f"{a or '?'}@{str(b or '')[:7]} → {c or '?'}@{str(d or '')[:7]}"
                for a, b, c, d in zip(
                    shown["prev_version"],
                    shown["prev_commit"],
                    shown["sglang_version"],
                    shown["sglang_commit"],
                    strict=True,
                )
            ],
            "When": pd.to_datetime(shown["started_at"], utc=True),
            "Runs after": shown["n_after"],
            "Triage": shown["state"],
            "Open": [
                "trends?" + urlencode({"fp": fp, "metric": "output_throughput"})
                for fp in shown["fingerprint"]
            ],
        }
    )
    st.dataframe(
        table.sort_values(["When", "Δ"], ascending=[False, True]),
        hide_index=True,
        column_config={
            "Δ": st.column_config.NumberColumn(format="%+.1f%%"),
            "When": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
            "Open": st.column_config.LinkColumn(display_text="trend ↗"),
        },
    )

if not changes.empty:
    # Every change that starts at a run, whether shown above or not (improvements, dismissed ones too).
    triage.bulk_triage_form(url, changes, "output_throughput", key="ov_bulk")

# ---- latest runs
st.subheader("Latest runs", anchor="runs")
runs_view = pd.DataFrame(
    {
        "Run": runs["id"],
        "Started": pd.to_datetime(runs["started_at"], utc=True),
        "Status": runs["status"],
        "Trigger": runs["trigger"],
        "Sweep": runs["sweep_name"],
        "SGLang": runs["sglang_version"],
        "Commit": runs["sglang_commit"].fillna("").str[:10],
        "GPU": [short_gpu(n, k) for n, k in zip(runs["gpu_name"], runs["gpu_count"], strict=True)],
        "Kind": [
            run_tag(m, t) or "measured" for m, t in zip(runs["simulated"], runs["trigger"], strict=True)
        ],
        "kernel / flashinfer": runs["sgl_kernel_version"].fillna("?")
        + " / "
        + runs["flashinfer_version"].fillna("?"),
        "Points ok": [
            points_text(int(ok), int(n), y)
            for ok, n, y in zip(runs["points_ok"], runs["points"], runs["sweep_yaml"], strict=True)
        ],
        "Problems": runs["points_problem"],
        "Sweep view": ["sweep?" + urlencode({"run": int(r)}) for r in runs["id"]],
    }
)
st.dataframe(
    runs_view,
    hide_index=True,
    column_config={
        "Started": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
        "Sweep view": st.column_config.LinkColumn(display_text="heatmaps ↗"),
        "Problems": st.column_config.NumberColumn(help="failed, invalid, unstable or mode_mismatch points"),
        "Points ok": st.column_config.TextColumn(
            help="ok points out of the points the sweep planned (a run cut short reads as cut), as "
            "`specbench runs` counts them"
        ),
    },
)

# ---- problem points
st.subheader("Failed, invalid and mode-mismatch points", anchor="problems")
problems = data.problem_points(url, tuple(int(i) for i in runs["id"]))
if problems.empty:
    st.success("Every point of the latest runs is ok.", icon=":material/check_circle:")
else:
    counts = problems["status"].value_counts()
    st.caption(" · ".join(f"**{n}** {s}" for s, n in counts.items()) + " in the latest runs")
    st.dataframe(
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
                "SGLang": problems["sglang_version"],
            }
        ),
        hide_index=True,
        column_config={"Reason": st.column_config.TextColumn(width="large")},
    )
