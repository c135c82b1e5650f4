"""v2 over v1 for every (batch size, steps, accept length) of a run, with 95 % intervals and a verdict.

Does overlap scheduling (v2) beat non-overlap (v1), by how much, how surely: throughput and TPOT ratios paired
as analysis.pairs pairs them. `faster` or `slower` when the whole throughput interval lies on one side of 1,
else `no clear difference`; `tpot_verdict` reads TPOT the other way round. `load` adds the profile evidence
(analysis.profiles.OVERLAP_COLUMNS) to each cell with a v1 and a v2 profile.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from analysis import correctness, pairs
from analysis.pairs import TARGET
from analysis.plain import missing
from analysis.profiles import (
    DISTORTION_MARK,
    OVERLAP_CELLS,
    OVERLAP_COLUMNS,
    SHARE_CELL,
    distorted,
    join_overlap,
    overlap_cells,
    overlap_table,
)
from analysis.render import Column, Document, columns, interval, md_table, md_title, number
from bench.pairing import PartRecord

# Everything a v1 point and its v2 partner share besides the mode.
PAIR_KEYS: tuple[str, ...] = (
    *("workload_key", "algorithm", "topk", "draft_tokens", "accept_length_pinned", "steps", "batch_size"),
)
COLUMNS: tuple[str, ...] = (
    *("batch_size", "steps", "accept_length", "v1_output_throughput", "v2_output_throughput", "ratio"),
    *("ci_low", "ci_high", "verdict", "v1_tpot_ms", "v2_tpot_ms", "tpot_ratio", "tpot_ci_low"),
    *("tpot_ci_high", "tpot_verdict", "n", "method", "topk", "workload_key"),
    # Pairs the throughput interval needs for +-5% at the spread it shows (bench.stats.ratio.pairs_for).
    "pairs_for_5pct",
    # Each side's correctness verdict and acceptance v2/v1: a `fail` side's speed is a wrong path's.
    *("v1_correctness", "v2_correctness", "acceptance_v2_v1"),
    # Each side's physical floor / measured cycle (bench/floor.py): how close to the memory bus it ran.
    *("v1_floor_fraction", "v2_floor_fraction"),
    # How the two sides took turns (interleaved: both servers up, ABBA; blocks: one at a time) and the run's
    # parts the interval comes from (analysis.pairs: parts combine only on one host or after a drift check).
    *("pairing", "parts"),
)
VIEW = columns(
    (*COLUMNS, *OVERLAP_COLUMNS),
    ints=("batch_size", "steps", "n", "topk", "pairs_for_5pct"),
    text=(
        *("verdict", "tpot_verdict", "method", "workload_key", "v1_correctness", "v2_correctness"),
        *("pairing", "parts"),
        *("profile_activities", "profile_verdict"),
    ),
)
FLOOR_CELL = "floor v1 / v2"


def _first(values: pd.Series) -> float | None:
    """The point's value (every sample row of a point carries it), or None."""
    known = [float(v) for v in values if not missing(v)]
    return known[0] if known else None


def _checks(points: pd.DataFrame, v1: pd.DataFrame, v2: pd.DataFrame) -> dict[str, Any]:
    """Each side's correctness verdict and the check's acceptance v2/v1 (None where it was not checked)."""
    by_id = points.set_index("point_id")

    def side(rows: pd.DataFrame, column: str) -> Any:
        value = by_id.at[int(rows["point_id"].iloc[0]), column]
        return None if missing(value) else value

    ratio = side(v2, "acceptance_v2_v1")
    return {
        "v1_correctness": side(v1, "correctness"),
        "v2_correctness": side(v2, "correctness"),
        "acceptance_v2_v1": None if ratio is None else float(ratio),
    }


def v2_vs_v1(
    points: pd.DataFrame,
    samples: pd.DataFrame,
    confidence: float = 0.95,
    parts: Sequence[PartRecord] = (),
) -> pd.DataFrame:
    """One row per v1/v2 pair of `points`, from `samples` and the run's `parts` (pairs.run_inputs)."""
    spec = points[points["spec_mode"].isin(["v1", "v2"])]
    if spec.empty or samples.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    joined = samples.merge(spec[["point_id", "spec_mode", "floor_fraction", *PAIR_KEYS]], on="point_id")
    out: list[dict[str, Any]] = []
    for key, group in joined.groupby(list(PAIR_KEYS), dropna=False, sort=False):
        k = dict(zip(PAIR_KEYS, key, strict=True))
        v1, v2 = group[group["spec_mode"] == "v1"], group[group["spec_mode"] == "v2"]
        if v1.empty or v2.empty:
            continue
        row: dict[str, Any] = {
            **pairs.cell_of(k),
            "v1_floor_fraction": _first(v1["floor_fraction"]),
            "v2_floor_fraction": _first(v2["floor_fraction"]),
            **pairs.medians(v1, "v1", by_repeat=True),
            **pairs.medians(v2, "v2", by_repeat=True),
        }
        row |= pairs.ratio_cells(v1, v2, parts, by_repeat=True, target=TARGET, confidence=confidence)
        row.update(_checks(points, v1, v2))
        out.append(row)
    frame = pd.DataFrame(out, columns=list(COLUMNS))
    return frame.sort_values(
        ["workload_key", "topk", "accept_length", "steps", "batch_size"], na_position="first"
    ).reset_index(drop=True)


# ------------------------------------------------------------------------------------------- formats


def document(frame: pd.DataFrame, meta: dict[str, Any] | None = None, title: str | None = None) -> Document:
    return Document(frame, VIEW, lambda: to_markdown(frame, title), head={"view": "v2-vs-v1", **(meta or {})})


def _wrong_side(r: Mapping[str, Any]) -> str:
    """'v1', 'v2' or 'v1 and v2': which side of a cell the correctness gate failed ('' when none)."""
    sides = [m for m in ("v1", "v2") if correctness.is_wrong(r.get(f"{m}_correctness"))]
    return " and ".join(sides)


def _speed(side: str) -> Column:
    return Column(
        f"{side}_output_throughput",
        f"{side} tok/s",
        show=lambda r: correctness.speed_md(r[f"{side}_output_throughput"], r.get(f"{side}_correctness")),
    )


def _verdict(r: Mapping[str, Any]) -> str:
    wrong = _wrong_side(r)
    return f"**{correctness.WRONG}** ({wrong} failed the check)" if wrong else str(r["verdict"])


def _overlap(name: str) -> Column:
    return Column(name, show=lambda r: overlap_cells(r)[name])


_FLOOR = Column(
    FLOOR_CELL,
    show=lambda r: (
        f"{number(r.get('v1_floor_fraction'), '.2f')} / {number(r.get('v2_floor_fraction'), '.2f')}"
    ),
)
_HEAD = (
    Column("batch_size", "batch", "d"),
    Column("steps", "steps", "d"),
    Column("accept_length", "accept len", "g"),
    _speed("v1"),
    _speed("v2"),
    Column("ratio", "v2/v1", ".3f"),
    Column("ci", "95% CI", text=True, show=lambda r: interval(r["ci_low"], r["ci_high"])),
    Column("verdict", "verdict", text=True, show=_verdict),
)
_TPOT = (
    Column("tpot_ratio", "TPOT v2/v1", ".3f"),
    Column("tpot_ci", "TPOT 95% CI", text=True, show=lambda r: interval(r["tpot_ci_low"], r["tpot_ci_high"])),
    Column("n", show=lambda r: f"{r['n']} ({r['method'] or '–'})"),
)


def to_markdown(frame: pd.DataFrame, title: str | None = None) -> str:
    """The PR comment's table: a row per cell, ratio, interval, verdict, and any v1/v2 profile evidence."""
    lines = md_title(title) if title else []
    profiled = frame[frame["cpu_hidden_ms"].notna()] if "cpu_hidden_ms" in frame.columns else frame.iloc[0:0]
    records = frame.to_dict(orient="records")
    floors = any(not missing(r.get(f"{m}_floor_fraction")) for r in records for m in ("v1", "v2"))
    # The overlap share sits next to the ratio it explains; the other profile cells follow at the end.
    share = [_overlap(SHARE_CELL)] if not profiled.empty else []
    extra = [_overlap(c) for c in OVERLAP_CELLS if c != SHARE_CELL] if not profiled.empty else []
    lines += md_table(records, [*_HEAD, *share, *_TPOT, *([_FLOOR] if floors else []), *extra])
    wrong = [r for r in records if _wrong_side(r)]
    if wrong:
        at = 2 if title else 0  # under the title
        lines[at:at] = [
            f"> 🛑 **Correctness gate: {len(wrong)} cell(s) compare a speed measured on a wrong path** (struck "
            f"through, verdict `{correctness.WRONG}`): "
            + "; ".join(f"{pairs.cell_name(r)}: {_wrong_side(r)} failed" for r in wrong),
            "",
        ]
    if frame.empty:
        lines.append("| – | – | – | – | – | – | – | no v1/v2 pairs in this run | – | – | – |")
    lines += [
        "",
        "v2/v1 > 1: v2 (overlap) has the higher output throughput. Intervals: 95 %, on log ratios, paired by "
        "repeat when the run interleaved v1 and v2 (ABBA); a TPOT ratio < 1 means v2 is faster per token.",
    ]
    if wide := [r for r in frame.to_dict(orient="records") if pairs.wider_than(r, TARGET)]:
        lines += [
            "",
            "Wider than ±5 %: at the spread its pairs show, "
            + "; ".join(f"{pairs.cell_name(r)} needs {pairs.pairs_needed(r)}" for r in wide)
            + " pairs (measure.ratio_target and measure.max_repeats add them).",
        ]
    if floors:
        lines += [
            "",
            "floor v1 / v2: each side's physical floor over its measured cycle (TPOT × tokens per verify): the "
            "bytes a cycle must read over the GPU's memory bandwidth (bench/floor.py); above 1 is impossible.",
        ]
    if extra:
        lines += [
            "",
            "Profiles (SGLang profiler, after the measured windows; medians per speculative cycle, verify to "
            "verify): GPU idle = cycle − kernel time; CPU hidden = GPU idle of v1 − that of v2; overlap hidden "
            "= CPU hidden / GPU idle of v1, the share of what overlap could hide (its limit: 100 %). "
            "Cells without a v1/v2 profile pair show –.",
        ]
        for r in profiled.to_dict(orient="records"):
            acc = "" if missing(r["accept_length"]) else f", accept len {r['accept_length']:g}"
            lines.append(
                f"- batch {r['batch_size']}, steps {number(r['steps'], 'd')}{acc} "
                f"({r['profile_activities']}): {r['profile_verdict']}"
                + (
                    f" (distortion v1 ×{number(r['v1_distortion'], '.2f')}, v2 ×{number(r['v2_distortion'], '.2f')})"
                    if not (missing(r["v1_distortion"]) and missing(r["v2_distortion"]))
                    else ""
                )
            )
        if any(distorted(r) for r in profiled.to_dict(orient="records")):
            lines.append(
                f"† the profiler slowed a side's cycle by more than ×{DISTORTION_MARK:g} against TPOT × accept "
                "length of the same point unprofiled: compare the differences, not the absolute times."
            )
    return "\n".join(lines) + "\n"


def with_profiles(frame: pd.DataFrame, overlap: pd.DataFrame) -> pd.DataFrame:
    """`frame` (a `v2_vs_v1` table) with OVERLAP_COLUMNS from `overlap` (analysis.profiles.overlap_table)."""
    if frame.empty:
        return frame.reindex(columns=[*frame.columns, *OVERLAP_COLUMNS])
    return join_overlap(frame, overlap)


def load(engine: Engine, run_id: int, confidence: float = 0.95, profiles: bool = True) -> pd.DataFrame:
    """`v2_vs_v1` of a stored run, with the overlap columns of its profiles (`profiles=False`: without)."""
    points, samples, parts = pairs.run_inputs(engine, run_id)
    frame = v2_vs_v1(points, samples, confidence, parts)
    return with_profiles(frame, overlap_table(engine, [run_id])) if profiles else frame
