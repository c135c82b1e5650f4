"""Sweep page sections that say what a run's numbers stand on: what they are made of (dummy weights, pinned
acceptance, expert routing), speculation over the baseline across batch sizes with what it means for the
model class, every point against its physical floor, and the overlap share next to v2/v1."""

from typing import Any

import pandas as pd
import streamlit as st

from analysis import md
from analysis.labels import numbers_caption, parts_line, routing_part, spec_over_baseline_caption
from analysis.profiles import share_cell
from analysis.render import Column
from dashboard.charts.style import AnyChart
from dashboard.components import tables

OVERLAP_COLUMNS = (
    Column("batch", fmt="d"),
    Column("steps", fmt="d"),
    Column("v2/v1", fmt=".3f"),
    *(Column(k, text=True) for k in ("GPU idle/cycle v1 → v2 ms", "overlap hidden")),
)
OVER_BASELINE_COLUMNS = (
    Column("batch", fmt="d"),
    Column("steps", fmt="d"),
    Column("mode", text=True),
    Column("spec/base", fmt=".3f"),
    *(Column(k, text=True) for k in ("95% CI", "verdict", "n", "pairing", "parts")),
)


def numbers_banner(facts: dict[str, Any]) -> None:
    """The one caption of what the numbers are made of; a warning when a MoE's routing collapsed."""
    caption = numbers_caption(facts)
    if caption:
        st.caption(f"Numbers: {md.text(caption)}.")
    if "collapsed" in routing_part(facts):
        st.warning(
            "Expert routing collapsed: with dummy weights nearly every token picks the same few experts, so "
            "each MoE layer read a few percent of what a deployment reads (the GPU side of a step is "
            "understated, most at large batch). Measure with `server.balanced_routing: auto` (the default on "
            "SGLang >= 0.5.13).",
            icon=":material/warning:",
        )


def speedup_section(chart: AnyChart | None, facts: dict[str, Any], *, simulated: bool) -> None:
    """Speculation over the baseline against batch size (`dashboard.charts.speedup.speedup_lines`, None when
    no point has a baseline at its batch size), with what it means for this model class."""
    st.markdown("##### Speculative over no-spec baseline across batch sizes")
    if chart is None:
        st.caption("Needs a baseline point at the same batch size.")
        return
    st.altair_chart(chart, width="stretch")
    st.caption(md.text(spec_over_baseline_caption(facts, simulated=simulated)))


def impossible_points(rows: pd.DataFrame) -> None:
    """Points measured faster than their floor (`analysis.floors.floor_rows`), named in an error."""
    bad = rows[rows["impossible"]] if not rows.empty else rows
    if len(bad):
        listed = "; ".join(
            f"{r.series} bs{r.batch_size}: {r.measured_step_ms:.3g} ms vs floor {r.step_floor_ms:.3g} ms"
            for r in bad.itertuples()
        )
        st.error(
            f"{len(bad)} point(s) measured faster than physics allows: {md.text(listed)}. The server did not "
            "read what the model's config says (collapsed expert routing, or a wrong config.json); they are "
            "stored `invalid`.",
            icon=":material/error:",
        )


def floor_section(rows: pd.DataFrame, chart: AnyChart | None, facts: dict[str, Any]) -> None:
    """Every point's floor fraction against batch size (`analysis.floors.floor_rows` and its
    `dashboard.charts.speedup.floor_lines`); the points it makes impossible are named by
    `impossible_points`."""
    st.markdown("##### Against the physical floor (floor / measured step)")
    if rows.empty or chart is None:
        note = facts.get("floor_note") or "no floor stored for this run (runs before specbench stored one)"
        st.caption(md.text(note))
        return
    st.altair_chart(chart, width="stretch")
    st.caption(
        "Floor: the bytes one step (speculative: one cycle of draft steps and the verify) must read, weights, "
        "touched experts and KV cache, over the GPU's memory bandwidth (bench/floor.py). 1 is a step at the "
        "memory bus's speed; above 1 is impossible."
    )


def overlap_share_table(ratios: pd.DataFrame) -> None:
    """The overlap share of the profiled cells, next to their v2/v1 ratio."""
    if not ratios["overlap_share"].notna().any():
        return
    f = ratios[ratios["overlap_share"].notna()]
    tables.table(
        pd.DataFrame(
            {
                "batch": f["batch_size"].astype(int),
                "steps": f["steps"],
                "v2/v1": f["ratio"],
                "GPU idle/cycle v1 → v2 ms": [
                    f"{a:.2f} → {b:.2f}"
                    for a, b in zip(f["v1_gpu_idle_ms"], f["v2_gpu_idle_ms"], strict=True)
                ],
                "overlap hidden": [share_cell(s) for s in f["overlap_share"]],
            }
        ),
        OVERLAP_COLUMNS,
        key="sw_overlap_all",
        what="cells",
    )
    st.caption(
        "Overlap hidden: the share of v1's GPU idle time per cycle that v2 removes, against its limit of 100 % "
        "(a GPU busy through the whole cycle); from the run's profiles."
    )


def over_baseline_table(cells: pd.DataFrame) -> None:
    """Speculation over the baseline per cell with its 95 % interval, how the two were paired and the parts of
    the run it comes from (`analysis.spec_vs_baseline`), next to v2/v1."""
    st.markdown("##### Speculative over baseline, with intervals")
    if cells.empty:
        st.caption("Needs a baseline point at the same batch size.")
        return
    tables.table(
        pd.DataFrame(
            {
                "batch": cells["batch_size"].astype(int),
                "steps": cells["steps"],
                "mode": cells["spec_mode"],
                "spec/base": cells["ratio"],
                "95% CI": [
                    "–" if pd.isna(lo) or pd.isna(hi) else f"[{lo:.3f}, {hi:.3f}]"
                    for lo, hi in zip(cells["ci_low"], cells["ci_high"], strict=True)
                ],
                "verdict": cells["verdict"],
                "n": [f"{n} ({m or '–'})" for n, m in zip(cells["n"], cells["method"], strict=True)],
                "pairing": cells["pairing"].fillna("not paired"),
                "parts": cells["parts"].fillna("–"),
            }
        ),
        OVER_BASELINE_COLUMNS,
        key="sw_over_baseline_all",
        what="cells",
    )
    blocks = cells["pairing"].fillna("").str.contains("blocks").any()
    st.caption(
        "Output throughput of each speculative point over the baseline at its batch size, 95 % interval on log "
        "ratios: paired by repeat where the run measured the two against each other (`measure.baseline_pairs`), "
        "else unpaired."
        + (
            " **Blocks**: one server was up at a time (the GPU held only one, or a later part re-measured one "
            "side's missing windows alone), so each side was measured in turn and block is paired with block."
            if blocks
            else ""
        )
        + " `specbench export --view spec-vs-baseline` gives the table."
    )


def parts_caption(parts: list[dict[str, Any]], pairing: pd.Series) -> None:
    """How many parts the run took and where (with each drift check against the part before), and whether its
    pairs were measured in blocks."""
    line = parts_line(parts)
    if line:
        st.caption(
            f"Measured in {md.text(line)}. Pairs of two parts combine in one interval only when the parts ran on "
            "the same host and GPU or the drift check agreed; the `parts` column says which a cell's interval "
            "comes from."
        )
    if pairing.fillna("").str.contains("blocks").any():
        st.caption(
            "Some pairs were measured in **blocks** (one server up at a time: the GPU could not hold both, or a "
            "later part re-measured one side alone), each block of one side paired with the next block of the "
            "other (docs/reference/paired-measurement.md)."
        )
