"""Speculation over plain decoding per (batch size, steps, accept length, spec mode) of a run, with 95 %
intervals and a verdict: what a deployment asks before v2 against v1 matters at all.

Each speculative point meets the baseline of its batch size and workload as analysis.pairs pairs them: paired
where the run measured both together (`measure.baseline_pairs`), else Welch on the logs of the `ok` windows.
"""

from collections.abc import Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from analysis import correctness, md, pairs
from analysis.pairs import TARGET
from analysis.plain import cast_or_none
from analysis.render import Document, columns, interval, number
from bench.pairing import PartRecord

# What a speculative point and its baseline share: the workload and the batch size.
CELL_KEYS: tuple[str, ...] = ("workload_key", "batch_size")
COLUMNS: tuple[str, ...] = (
    *("batch_size", "steps", "accept_length", "spec_mode", "baseline_output_throughput"),
    *("spec_output_throughput", "ratio", "ci_low", "ci_high", "verdict", "baseline_tpot_ms", "spec_tpot_ms"),
    *("tpot_ratio", "tpot_ci_low", "tpot_ci_high", "tpot_verdict", "n", "method"),
    # interleaved (both servers up, ABBA) | blocks (one server at a time) | none recorded: not paired by link
    "pairing",
    # the run's parts the interval comes from, `2 (not 1)` when a part's pairs did not combine
    *("parts", "topk", "workload_key"),
    # Pairs the throughput interval needs for +-5% at the spread it shows (bench.stats.ratio.pairs_for).
    "pairs_for_5pct",
    # The correctness gate's verdict on the speculative side: a `fail` is a wrong path's speed.
    *("spec_correctness", "baseline_floor_fraction", "spec_floor_fraction"),
)
VIEW = columns(
    COLUMNS,
    ints=("batch_size", "steps", "n", "topk", "pairs_for_5pct"),
    text=(
        *("spec_mode", "verdict", "tpot_verdict", "method", "pairing", "parts", "workload_key"),
        "spec_correctness",
    ),
)


def spec_vs_baseline(
    points: pd.DataFrame,
    samples: pd.DataFrame,
    confidence: float = 0.95,
    parts: Sequence[PartRecord] = (),
) -> pd.DataFrame:
    """One row per speculative point with a baseline at its batch size and workload (pairs.run_inputs)."""
    if points.empty or samples.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    base = points[points["spec_mode"].isna() & points["algorithm"].isna()]
    spec = points[points["spec_mode"].isin(["v1", "v2"])]
    by_point = {int(pid): rows for pid, rows in samples.groupby("point_id")}
    out: list[dict[str, Any]] = []
    for _, sp in spec.iterrows():
        match = base[(base["workload_key"] == sp["workload_key"]) & (base["batch_size"] == sp["batch_size"])]
        if match.empty:
            continue
        bp = match.iloc[0]
        b_rows, s_rows = by_point.get(int(bp["point_id"])), by_point.get(int(sp["point_id"]))
        if b_rows is None or s_rows is None:
            continue
        row: dict[str, Any] = {
            **pairs.cell_of(sp),
            "spec_mode": sp["spec_mode"],
            "spec_correctness": cast_or_none(sp["correctness"], str),
            "baseline_floor_fraction": cast_or_none(bp["floor_fraction"]),
            "spec_floor_fraction": cast_or_none(sp["floor_fraction"]),
            **pairs.medians(b_rows, "baseline", by_repeat=False),
            **pairs.medians(s_rows, "spec", by_repeat=False),
        }
        row |= pairs.ratio_cells(b_rows, s_rows, parts, by_repeat=False, target=TARGET, confidence=confidence)
        out.append(row)
    frame = pd.DataFrame(out, columns=list(COLUMNS))
    return frame.sort_values(
        ["workload_key", "topk", "accept_length", "steps", "spec_mode", "batch_size"], na_position="first"
    ).reset_index(drop=True)


def load(engine: Engine, run_id: int, confidence: float = 0.95) -> pd.DataFrame:
    """`spec_vs_baseline` of a stored run."""
    points, samples, parts = pairs.run_inputs(engine, run_id)
    return spec_vs_baseline(points, samples, confidence, parts)


# ------------------------------------------------------------------------------------------- formats


def document(frame: pd.DataFrame, meta: dict[str, Any] | None = None, title: str | None = None) -> Document:
    return Document(
        frame, VIEW, lambda: to_markdown(frame, title), head={"view": "spec-vs-baseline", **(meta or {})}
    )


def _cell_name(r: dict[str, Any]) -> str:
    return f"{r['spec_mode']} {pairs.cell_name(r)}"


def to_markdown(frame: pd.DataFrame, title: str | None = None) -> str:
    """The PR comment's table: a row per speculative cell, ratio over baseline, interval, pairing, parts."""
    lines = [f"**{md.text(title)}**", ""] if title else []  # the title holds the sweep name: user text
    lines += [
        "| batch | steps | accept len | mode | baseline tok/s | spec tok/s | spec/base | 95% CI | verdict "
        "| TPOT spec/base | TPOT 95% CI | n | pairing | parts |",
        "|---:|---:|---:|---|---:|---:|---:|---|---|---:|---|---:|---|---|",
    ]
    records = frame.to_dict(orient="records")
    for r in records:
        wrong = correctness.is_wrong(r.get("spec_correctness"))
        lines.append(
            f"| {r['batch_size']} | {number(r['steps'], 'd')} | {number(r['accept_length'], 'g')} "
            f"| {md.text(r['spec_mode'])} | {correctness.speed_md(r['baseline_output_throughput'], None)} "
            f"| {correctness.speed_md(r['spec_output_throughput'], r.get('spec_correctness'))} "
            f"| {number(r['ratio'], '.3f')} | {interval(r['ci_low'], r['ci_high'])} "
            f"| {f'**{correctness.WRONG}**' if wrong else r['verdict']} "
            f"| {number(r['tpot_ratio'], '.3f')} | {interval(r['tpot_ci_low'], r['tpot_ci_high'])} "
            f"| {r['n']} ({r['method'] or '–'}) | {md.text(r['pairing'] or 'not paired')} "
            f"| {md.text(r['parts'] or '–')} |"
        )
    if frame.empty:
        lines.append(
            "| – | – | – | – | – | – | – | – | no speculative point with a baseline in this run | – | – | – | – | – |"
        )
    lines += [
        "",
        "spec/base > 1: speculation has the higher output throughput. Intervals: 95 %, on log ratios, paired by "
        "repeat where the run measured the baseline against that mode (measure.baseline_pairs), else unpaired "
        "(Welch); a TPOT ratio < 1 means speculation is faster per token.",
    ]
    if any(r.get("pairing") and "blocks" in str(r["pairing"]) for r in records):
        lines += [
            "",
            "blocks: the GPU held one server at a time, so each side was measured for every batch size in turn "
            "(A, B B, A A, ...) and block is paired with block: drift slower than a block cancels, faster drift "
            "does not (docs/reference/paired-measurement.md).",
        ]
    if split := [r for r in records if r.get("parts") and "(not" in str(r["parts"])]:
        lines += [
            "",
            "Parts that did not combine (another host or GPU, and a drift check that disagreed or never ran): "
            + "; ".join(f"{_cell_name(r)} from part(s) {md.text(r['parts'])}" for r in split)
            + ".",
        ]
    if wide := [r for r in records if pairs.wider_than(r, TARGET)]:
        lines += [
            "",
            "Wider than ±5 %: "
            + "; ".join(f"{_cell_name(r)} needs {pairs.pairs_needed(r)} pairs" for r in wide)
            + " (measure.ratio_target and measure.max_repeats add them).",
        ]
    return "\n".join(lines) + "\n"
