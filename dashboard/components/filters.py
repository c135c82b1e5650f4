"""Pickers shared by pages: cascading series filters, run pickers, metric and threshold controls."""

from typing import Any

import pandas as pd
import streamlit as st

from analysis.facets import FACETS, facet_options
from analysis.labels import none_if_nan, run_tag, short_gpu
from bench import catalog
from dashboard.components.layout import missing_link_target
from dashboard.components.state import Param, ensure_choice

# With no URL state, open on a speculative series in the middle of a typical grid rather than on the first
# option (the no-spec baseline at batch 1).
PREFERRED: dict[str, str] = {"mode_s": "v2", "steps_s": "3", "bs_s": "16"}

FACET_PARAMS: tuple[Param, ...] = tuple(
    Param(name=col.removesuffix("_s"), key=f"f_{col}", default=None) for col, _ in FACETS
)


def adopt_series(catalog: pd.DataFrame, fingerprint: str | None) -> None:
    """A link named a series (`?fp=`): set every facet to that series' values before the widgets draw."""
    if not fingerprint:
        return
    hit = catalog[catalog["fingerprint"] == fingerprint]
    if hit.empty:
        missing_link_target("series", fingerprint, "the default series", code=True)
        return
    row = hit.iloc[0]
    for col, _ in FACETS:
        st.session_state[f"f_{col}"] = row[col]
    st.session_state["f_series"] = row["fingerprint"]


def series_filters(catalog: pd.DataFrame, container: Any = None) -> pd.Series | None:
    """Cascading selectboxes over the annotated catalog, each offering only values left by those above it,
    then a series picker when several remain; returns the chosen series' row."""
    box = container or st.sidebar
    rows = catalog
    for col, label in FACETS:
        options = facet_options(rows[col])
        key = f"f_{col}"
        ensure_choice(key, options, PREFERRED.get(col))
        if not options:
            return None
        value = box.selectbox(label, options, key=key)
        rows = rows[rows[col] == value]
    if rows.empty:
        return None
    if len(rows) == 1:
        st.session_state["f_series"] = rows.iloc[0]["fingerprint"]
        return rows.iloc[0]
    fps = rows["fingerprint"].tolist()
    labels = dict(zip(rows["fingerprint"], rows["label"], strict=True))
    ensure_choice("f_series", fps)
    fp = box.selectbox("Series", fps, key="f_series", format_func=lambda f: labels.get(f, f))
    return rows[rows["fingerprint"] == fp].iloc[0]


def metric_picker(key: str, container: Any = None, label: str = "Metric") -> str:
    options = list(catalog.MENU)
    ensure_choice(key, options, catalog.DEFAULT_METRIC)
    box = container or st.sidebar
    return str(box.selectbox(label, options, key=key, format_func=catalog.label))


def run_label(row: pd.Series | dict[str, Any]) -> str:
    """`#12 · ⚠ simulated (stand-in) · no GPU · 2026-11-30 09:00 · sweep · 0.5.13@abcdef0`."""
    started = pd.Timestamp(row["started_at"]).strftime("%Y-%m-%d %H:%M")
    gpu = short_gpu(row.get("gpu_name"), row.get("gpu_count"))
    version = none_if_nan(row.get("sglang_version")) or "?"
    commit = str(none_if_nan(row.get("sglang_commit")) or "")[:7]  # NaN when pandas read a NULL
    kind = run_tag(row.get("simulated"), row.get("trigger"))
    # The tag right after the id: a narrow picker cuts the end of a long label off.
    tag = f" · ⚠ {kind}" if kind else ""
    gpu_text = "no GPU" if gpu == "none" else gpu
    return f"#{row['id']}{tag} · {gpu_text} · {started} · {row['sweep_name']} · {version}{'@' + commit if commit else ''}"


def run_picker(
    runs: pd.DataFrame, key: str, label: str, default_index: int = 0, container: Any = None
) -> int | None:
    """A selectbox of runs (newest first) storing the run id."""
    if runs.empty:
        return None
    ids = [int(i) for i in runs["id"]]
    labels = {int(r["id"]): run_label(r) for r in runs.to_dict("records")}
    default = ids[min(default_index, len(ids) - 1)]
    asked = st.session_state.get(key)
    if asked is not None and asked not in ids:
        # Only a link (or a run deleted since) puts an unknown id here; never swap in another run silently.
        missing_link_target("run", f"#{asked}", f"#{default}")
    ensure_choice(key, ids, default)
    box = container or st
    return int(box.selectbox(label, ids, key=key, format_func=lambda i: labels.get(i, f"#{i}")))
