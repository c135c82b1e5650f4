"""Acknowledge or dismiss a flagged change with a note; the charts colour it by that state."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.services import data

STATE_LABELS = {"open": "Open", "acknowledged": "Acknowledged", "dismissed": "Dismissed (not a real change)"}


def change_title(row: pd.Series) -> str:
    when = pd.Timestamp(row["started_at"]).strftime("%Y-%m-%d")
    commit = str(row.get("sglang_commit") or "")[:7]
    return f"{row['rel_change'] * 100:+.1f}% at run #{row['run_id']} ({row.get('sglang_version')}@{commit}, {when})"


def triage_form(url: str, changes: pd.DataFrame, fingerprint: str, metric: str, key: str) -> None:
    """A small form under a chart: pick a detected change, set its state and a note, save."""
    if changes.empty:
        return
    options = list(range(len(changes)))
    # Keys carry the series: the widgets of another series' changes must not carry over (a kept selectbox
    # would even keep showing the old series' option labels).
    base = f"{key}_{fingerprint}_{metric}"
    with st.container(border=True):
        st.markdown("**Triage a change point**")
        idx = st.selectbox(
            "Change", options, format_func=lambda i: change_title(changes.iloc[i]), key=f"{base}_which"
        )
        row = changes.iloc[idx]
        _form(url, row, fingerprint, metric, f"{base}_{idx}")


def _form(url: str, row: pd.Series, fingerprint: str, metric: str, key: str) -> None:
    # Keyed by the chosen change, so switching changes shows that change's stored state and note.
    with st.form(key=f"{key}_form", border=False):
        c1, c2 = st.columns([1, 2])
        state = c1.radio(
            "State",
            list(STATE_LABELS),
            index=list(STATE_LABELS).index(str(row.get("state") or "open")),
            format_func=STATE_LABELS.get,
            key=f"{key}_state",
        )
        note = c2.text_area(
            "Note",
            value=str(row.get("note") or ""),
            placeholder="e.g. expected: PR #24640 trades acceptance for latency",
            key=f"{key}_note",
            height=100,
        )
        if st.form_submit_button("Save", type="primary"):
            data.save_triage(
                url,
                fingerprint=fingerprint,
                metric=metric,
                run_id=int(row["run_id"]),
                state=str(state),
                note=note,
                magnitude=float(row["rel_change"]),
            )
            st.toast(f"Saved: {STATE_LABELS[str(state)].split(' (')[0].lower()}", icon=":material/check:")
            st.rerun()
