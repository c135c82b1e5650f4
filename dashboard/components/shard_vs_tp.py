"""The shard-vs-TP comparison as a page section: the conclusion, both runs' step times and v2/v1 ratios,
the table (the CLI's `specbench export --view shard-vs-tp`), what was not compared, and downloads."""

from typing import Any

import pandas as pd
import streamlit as st

from analysis import md, tp_compare
from dashboard.charts.tp import ratio_points, step_lines
from dashboard.components.export import download_buttons

TABLE_COLUMNS: dict[str, Any] = {
    "batch_size": st.column_config.NumberColumn("batch", format="%d"),
    "steps": st.column_config.NumberColumn("steps", format="%d"),
    "accept_length": st.column_config.NumberColumn("accept len", format="%.2g"),
    "mode": "mode",
    "shard_step_ms": st.column_config.NumberColumn("shard step ms", format="%.3f"),
    "tp_step_ms": st.column_config.NumberColumn("TP step ms", format="%.3f"),
    "shard_floor_fraction": st.column_config.NumberColumn("floor frac shard", format="%.2f"),
    "tp_floor_fraction": st.column_config.NumberColumn("floor frac TP", format="%.2f"),
    "tp_all_reduce_share_pct": st.column_config.NumberColumn("all-reduce share (TP)", format="%.1f%%"),
    "tp_all_reduce_ms": st.column_config.NumberColumn("all-reduce ms/cycle", format="%.3f"),
    "cycle_error_pct": st.column_config.NumberColumn("error", format="%+.1f%%"),
    "cycle_error_with_all_reduce_pct": st.column_config.NumberColumn(
        "error with all-reduce", format="%+.1f%%"
    ),
    "shard_ratio": st.column_config.NumberColumn("shard v2/v1", format="%.3f"),
    "shard_ci_low": st.column_config.NumberColumn("shard 95% low", format="%.3f"),
    "shard_ci_high": st.column_config.NumberColumn("shard 95% high", format="%.3f"),
    "shard_verdict": "shard verdict",
    "tp_ratio": st.column_config.NumberColumn("TP v2/v1", format="%.3f"),
    "tp_ci_low": st.column_config.NumberColumn("TP 95% low", format="%.3f"),
    "tp_ci_high": st.column_config.NumberColumn("TP 95% high", format="%.3f"),
    "tp_verdict": "TP verdict",
    "verdicts_agree": "agree",
}


def _table(frame: pd.DataFrame) -> pd.DataFrame:
    view = frame.assign(
        tp_all_reduce_share_pct=frame["tp_all_reduce_share"] * 100,
        cycle_error_pct=frame["cycle_error"] * 100,
        cycle_error_with_all_reduce_pct=frame["cycle_error_with_all_reduce"] * 100,
    )
    return view[list(TABLE_COLUMNS)]


def shard_vs_tp_section(c: tp_compare.Comparison, key: str = "tp_cmp") -> None:
    """Draw one comparison (analysis.tp_compare.Comparison)."""
    tp = c.tp.tp
    st.caption(f"Shard: {md.text(c.shard.describe())} · TP: {md.text(c.tp.describe())}")
    verdict = c.conclusion
    lines = tp_compare.conclusion_lines(verdict, tp)
    if verdict["predicts_every_batch"] is False:
        st.warning(lines[0], icon=":material/rule:")
    elif verdict["predicts_every_batch"]:
        st.success(lines[0], icon=":material/check_circle:")
    else:
        st.info(lines[0], icon=":material/help:")
    for line in lines[1:]:
        st.markdown(md.text(line))
    st.markdown("##### v2 / v1 of each run, with 95 % intervals")
    st.altair_chart(ratio_points(c.frame, tp), width="content")
    st.markdown("##### Step time: shard, shard + the TP profile's all-reduce time, TP")
    st.altair_chart(step_lines(c.frame, tp), width="content")
    st.caption(
        "Step: TPOT × tokens per verify (speculative) or TPOT (baseline), from the measured windows. All-reduce: "
        f"kernel time per speculative cycle in the TP-{tp} profile of the point (rank 0), added to the shard's "
        f"step: the prediction aims at within {tp_compare.TARGET_ERROR:.0%} of the TP step."
    )
    st.dataframe(_table(c.frame), hide_index=True, column_config=TABLE_COLUMNS)
    if c.missing:
        with st.expander(f"Not compared ({len(c.missing)})"):
            for g in c.missing:
                st.markdown(f"- {md.text(g)}")
    for note in c.notes:
        st.caption(f"Note: {md.text(note)}")
    doc = tp_compare.document(c)
    download_buttons(doc.text("csv"), doc.text("md"), f"shard-{c.shard.run_id}-vs-tp-{c.tp.run_id}", key=key)
