"""Profile evidence for the v2-vs-v1 view: overlap columns (`bench.profile.overlap`) per configuration."""

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from analysis.plain import missing
from bench.profile.overlap import overlap_figures, verdict
from db import profile_queries as pq

# "accept_length" is the pinned acceptance (SGLANG_SIMULATE_ACC_LEN), as the v2-vs-v1 view names it.
JOIN_KEYS: tuple[str, ...] = ("batch_size", "steps", "accept_length", "topk", "draft_tokens", "workload_key")
OVERLAP_COLUMNS: tuple[str, ...] = (
    *("v1_cycle_ms", "v2_cycle_ms", "v1_gpu_idle_ms", "v2_gpu_idle_ms", "cpu_hidden_ms", "overlap_share"),
    *("v1_gpu_busy_fraction", "v2_gpu_busy_fraction", "v1_distortion", "v2_distortion", "profile_activities"),
    *("profile_verdict",),
)
DISTORTION_MARK = 1.2
# With both a GPU-only and a CPU+GPU profile of a point, the GPU-only one speaks (it distorts less).
ACTIVITY_PREFERENCE = {"GPU": 0, "CPU+GPU": 1}


def _ratio(summary: dict[str, Any]) -> float | None:
    r = (summary.get("distortion") or {}).get("ratio")
    return float(r) if r is not None else None


def overlap_table(engine: Engine, run_ids: Sequence[int]) -> pd.DataFrame:
    """One row per v1/v2 profile pair of the runs: JOIN_KEYS + OVERLAP_COLUMNS."""
    pairs = [pair for run_id in run_ids for pair in pq.profile_pairs(pq.run_profiles(engine, run_id))]
    return overlap_rows(pairs)


def overlap_rows(pairs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """JOIN_KEYS + OVERLAP_COLUMNS of `db.profile_queries.profile_pairs`, one row per configuration."""
    rows = []
    for pair in pairs:
        v1, v2 = pair["v1"]["summary"] or {}, pair["v2"]["summary"] or {}
        f = overlap_figures(v1, v2)
        rows.append(
            {
                **{k: pair.get(k) for k in JOIN_KEYS if k != "accept_length"},
                "accept_length": pair.get("accept_length_pinned"),
                "v1_cycle_ms": f["cycle_ms_v1"],
                "v2_cycle_ms": f["cycle_ms_v2"],
                "v1_gpu_idle_ms": f["gpu_idle_ms_v1"],
                "v2_gpu_idle_ms": f["gpu_idle_ms_v2"],
                "cpu_hidden_ms": f["cpu_hidden_ms"],
                "overlap_share": f["overlap_share"],
                "v1_gpu_busy_fraction": f["gpu_busy_v1"],
                "v2_gpu_busy_fraction": f["gpu_busy_v2"],
                "v1_distortion": _ratio(v1),
                "v2_distortion": _ratio(v2),
                "profile_activities": pair["activities_key"],
                "profile_verdict": verdict(v1, v2),
            }
        )
    if not rows:
        return pd.DataFrame(columns=[*JOIN_KEYS, *OVERLAP_COLUMNS])
    f = pd.DataFrame(rows)
    f["_pref"] = f["profile_activities"].map(ACTIVITY_PREFERENCE).fillna(9)
    f = (
        f.sort_values("_pref", kind="stable")
        .drop_duplicates(list(JOIN_KEYS), keep="first")
        .drop(columns="_pref")
    )
    return f.reset_index(drop=True)


def join_overlap(table: pd.DataFrame, overlap: pd.DataFrame) -> pd.DataFrame:
    """`table` (v2-vs-v1) with the overlap columns, joined on the JOIN_KEYS both have (batch_size and steps
    required); missing matches missing, a row without a profile keeps NaN."""
    keys = [k for k in JOIN_KEYS if k in table.columns and k in overlap.columns]
    if not {"batch_size", "steps"} <= set(keys):
        raise ValueError("join_overlap needs batch_size and steps in both tables")
    tmp = [f"_key_{k}" for k in keys]

    def keyed(frame: pd.DataFrame) -> pd.DataFrame:
        # One dtype per key on both sides (ints, floats and None alike), so 3 meets 3.0 and None meets NaN.
        out = frame.copy()
        for k, t in zip(keys, tmp, strict=True):
            col = out[k]
            out[t] = (
                col.astype(str) if k == "workload_key" else pd.to_numeric(col, errors="coerce").astype(float)
            )
        return out

    left = keyed(table)
    right = keyed(overlap)[[*tmp, *OVERLAP_COLUMNS]]
    joined = left.merge(right, on=tmp, how="left").drop(columns=tmp)
    joined["profile_verdict"] = (
        joined["profile_verdict"].astype(object).where(joined["profile_verdict"].notna(), None)
    )
    return joined


SHARE_CELL = "overlap hidden"
OVERLAP_CELLS: tuple[str, ...] = ("cycle v1→v2", "GPU idle/cycle v1→v2", "CPU hidden/cycle", SHARE_CELL)


def overlap_cells(row: pd.Series | dict[str, Any]) -> dict[str, str]:
    """Markdown cells (OVERLAP_CELLS), "–" without a profile pair; † marks a `distorted` row."""

    idle1, idle2, hidden = row.get("v1_gpu_idle_ms"), row.get("v2_gpu_idle_ms"), row.get("cpu_hidden_ms")
    cyc1, cyc2 = row.get("v1_cycle_ms"), row.get("v2_cycle_ms")
    if missing(idle1) or missing(idle2) or missing(hidden):
        return dict.fromkeys(OVERLAP_CELLS, "–")
    mark = " †" if distorted(row) else ""
    return {
        "cycle v1→v2": "–" if missing(cyc1) or missing(cyc2) else f"{cyc1:.2f} → {cyc2:.2f} ms{mark}",
        "GPU idle/cycle v1→v2": f"{idle1:.2f} → {idle2:.2f} ms{mark}",
        "CPU hidden/cycle": f"{hidden:.2f} ms{mark}",
        SHARE_CELL: share_cell(row.get("overlap_share")),
    }


def share_cell(share: Any) -> str:
    """The overlap share as a table cell: "83 % of 100 %", "none (−38 %)", or "–"."""
    if share is None or pd.isna(share):
        return "–"
    return f"{share:.0%} of 100%" if share >= 0 else f"none ({share:.0%})"


def distorted(row: pd.Series | dict[str, Any]) -> bool:
    """Whether the profiler slowed either side's cycle by more than DISTORTION_MARK."""
    ratios = (row.get("v1_distortion"), row.get("v2_distortion"))
    return any(isinstance(d, int | float) and d > DISTORTION_MARK for d in ratios)


def opening_run(
    runs: Sequence[dict[str, Any]],
    pairs_of: Callable[[int], list[dict[str, Any]]],
    readable: Callable[[dict[str, Any]], bool],
) -> int | None:
    """The Profiles page's first run: the newest with a v1/v2 pair this host reads, with a pair, or at all."""
    with_pair = [int(r["id"]) for r in runs if pairs_of(int(r["id"]))]
    for run_id in with_pair:
        if any(readable(p["v1"]) and readable(p["v2"]) for p in pairs_of(run_id)):
            return run_id
    if with_pair:
        return with_pair[0]
    return int(runs[0]["id"]) if runs else None


def opening_pair(pairs: Sequence[dict[str, Any]], readable: Callable[[dict[str, Any]], bool]) -> int:
    """Index of the first pair whose two traces this host can read (0 when none can)."""
    return next((i for i, p in enumerate(pairs) if readable(p["v1"]) and readable(p["v2"])), 0)
