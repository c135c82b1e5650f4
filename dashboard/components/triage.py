"""Acknowledge or dismiss a flagged change with a note; the charts colour it by that state."""

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from analysis.changes import changes_of_run, main_cause
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


BULK_STATES = {"acknowledged": "Acknowledge", "dismissed": "Dismiss (not a real change)", "open": "Reopen"}


def bulk_triage_form(
    url: str, changes: pd.DataFrame, metric: str, key: str, listed: Sequence[int] = ()
) -> None:
    """One verdict for every change of a run that shares a cause (one cause often flags dozens of series).
    The runs `listed` on the page come first, the others follow, most changes first."""
    if changes.empty:
        return
    by_run = changes.groupby("run_id").size().sort_values(ascending=False)
    first = [int(r) for r in dict.fromkeys(listed) if int(r) in by_run.index]
    runs = [*first, *(int(r) for r in by_run.index if int(r) not in first)]
    with st.container(border=True):
        st.markdown("**Triage a whole run** — one verdict for every change that starts at a run")
        c1, c2 = st.columns(2)
        run_id = int(
            c1.selectbox(
                "Run", runs, format_func=lambda r: f"#{r} · {int(by_run[r])} change(s)", key=f"{key}_run"
            )
        )
        of_run = changes_of_run(changes, run_id)
        causes = main_cause(of_run["why"])
        counts = causes[causes != ""].value_counts()
        options = ["", *counts.index.tolist()]
        cause = str(
            c2.selectbox(
                "Cause",
                options,
                format_func=lambda c: (
                    f"every cause ({len(of_run)})" if c == "" else f"{c} ({int(counts[c])})"
                ),
                key=f"{key}_cause_{run_id}",
            )
        )
        chosen = changes_of_run(changes, run_id, cause or None)
        with st.form(key=f"{key}_form_{run_id}", border=False):
            c3, c4 = st.columns([1, 2])
            state = str(
                c3.radio(
                    "Verdict", list(BULK_STATES), format_func=BULK_STATES.get, key=f"{key}_state_{run_id}"
                )
            )
            note = c4.text_area(
                "Note",
                placeholder="e.g. expected: the new draft model trades acceptance for speed (PR #24640)",
                key=f"{key}_note_{run_id}",
                height=80,
            )
            if st.form_submit_button(f"Apply to {len(chosen)} change(s)", type="primary"):
                data.save_triage_many(
                    url,
                    [
                        {"fingerprint": fp, "run_id": int(r), "magnitude": float(m)}
                        for fp, r, m in zip(
                            chosen["fingerprint"], chosen["run_id"], chosen["rel_change"], strict=True
                        )
                    ],
                    metric=metric,
                    state=state,
                    note=note,
                )
                st.toast(f"{len(chosen)} change(s) of run #{run_id}: {state}", icon=":material/check:")
                st.rerun()
