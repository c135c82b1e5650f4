"""Profile evidence for the v2-vs-v1 comparison: overlap columns per point configuration.

`overlap_table` reads a run's stored profiles (rank 0, status ok), pairs v1 with v2 of the same configuration
and returns one row per pair; `join_overlap` adds those columns to any v2-vs-v1 table that has the join
keys; `overlap_cells` formats a row's columns for a Markdown table. The figures themselves come from
`bench.profile.overlap` (cpu_hidden_ms = GPU idle per cycle of v1 minus that of v2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from bench.profile.overlap import overlap_figures
from db import profile_queries as pq

JOIN_KEYS: tuple[str, ...] = ("batch_size", "steps", "topk", "draft_tokens", "workload_key")
OVERLAP_COLUMNS: tuple[str, ...] = (
    "gpu_idle_ms_v1",
    "gpu_idle_ms_v2",
    "cpu_hidden_ms",
    "cycle_ms_v1",
    "cycle_ms_v2",
    "profile_activities",
    "distortion_v1",
    "distortion_v2",
    "accept_length_v1",
    "accept_length_v2",
)
DISTORTION_MARK = 1.2
# With both a GPU-only and a CPU+GPU profile of a point, the GPU-only one speaks (it distorts less).
_ACTIVITY_PREFERENCE = {"GPU": 0, "CPU+GPU": 1}


def _ratio(summary: dict[str, Any]) -> float | None:
    r = (summary.get("distortion") or {}).get("ratio")
    return float(r) if r is not None else None


def overlap_table(engine: Engine, run_ids: Sequence[int]) -> pd.DataFrame:
    """One row per v1/v2 profile pair of the runs: JOIN_KEYS + OVERLAP_COLUMNS."""
    rows = []
    for run_id in run_ids:
        for pair in pq.profile_pairs(pq.run_profiles(engine, run_id)):
            v1, v2 = pair["v1"], pair["v2"]
            f = overlap_figures(v1["summary"], v2["summary"])
            rows.append(
                {
                    **{k: pair[k] for k in JOIN_KEYS},
                    **{k: f[k] for k in ("gpu_idle_ms_v1", "gpu_idle_ms_v2", "cpu_hidden_ms")},
                    "cycle_ms_v1": f["cycle_ms_v1"],
                    "cycle_ms_v2": f["cycle_ms_v2"],
                    "profile_activities": pair["activities_key"],
                    "distortion_v1": _ratio(v1["summary"]),
                    "distortion_v2": _ratio(v2["summary"]),
                    "accept_length_v1": v1["accept_length"],
                    "accept_length_v2": v2["accept_length"],
                }
            )
    if not rows:
        return pd.DataFrame(columns=[*JOIN_KEYS, *OVERLAP_COLUMNS])
    f = pd.DataFrame(rows)
    f["_pref"] = f["profile_activities"].map(_ACTIVITY_PREFERENCE).fillna(9)
    f = f.sort_values("_pref").drop_duplicates(list(JOIN_KEYS), keep="first").drop(columns="_pref")
    return f.reset_index(drop=True)


def join_overlap(table: pd.DataFrame, overlap: pd.DataFrame) -> pd.DataFrame:
    """`table` (a v2-vs-v1 view) with the overlap columns, matched on the JOIN_KEYS both frames have.

    batch_size and steps are required; topk, draft_tokens and workload_key join when present. Rows without a
    profile keep NaN in the new columns.
    """
    keys = [k for k in JOIN_KEYS if k in table.columns and k in overlap.columns]
    if not {"batch_size", "steps"} <= set(keys):
        raise ValueError("join_overlap needs batch_size and steps in both tables")
    extra = overlap[[*keys, *OVERLAP_COLUMNS]]
    return table.merge(extra, on=keys, how="left")


def overlap_cells(row: pd.Series | dict[str, Any]) -> dict[str, str]:
    """Markdown cells: "GPU idle/cycle v1→v2" and "CPU hidden/cycle"; † when the profiler slowed either side
    by more than DISTORTION_MARK (then compare the difference, not the absolute times)."""

    def real(v: Any) -> bool:
        return v is not None and not pd.isna(v)

    idle1, idle2, hidden = row.get("gpu_idle_ms_v1"), row.get("gpu_idle_ms_v2"), row.get("cpu_hidden_ms")
    if not (real(idle1) and real(idle2) and real(hidden)):
        return {"GPU idle/cycle v1→v2": "–", "CPU hidden/cycle": "–"}
    ratios = (row.get("distortion_v1"), row.get("distortion_v2"))
    distorted = any(isinstance(d, int | float) and d > DISTORTION_MARK for d in ratios)
    mark = " †" if distorted else ""
    return {
        "GPU idle/cycle v1→v2": f"{idle1:.2f} → {idle2:.2f} ms{mark}",
        "CPU hidden/cycle": f"{hidden:.2f} ms{mark}",
    }
