"""One run's grid: spec mode as `baseline`/`v1`/`v2`, with v2-over-v1 and over-baseline speedups."""

import numpy as np
import pandas as pd

from analysis.labels import spec_mode_key

SWEEP_COLUMNS: tuple[str, ...] = (
    *("batch_size", "steps", "spec_mode", "output_throughput", "accept_length", "speedup_v2_over_v1"),
    "speedup_over_baseline",
    "correctness",  # the correctness gate's verdict: a `fail` cell's speed was measured on a wrong path
)


def sweep_grid(points: pd.DataFrame) -> pd.DataFrame:
    """One run's ok points (one workload, topk) with speedups over no-spec at the batch size, and v2 over the
    v1 of its batch, steps, draft tokens and pinned acceptance (none if that v1 is not unique: a guess)."""
    f = points[points["status"] == "ok"].copy()
    if f.empty:
        return pd.DataFrame(columns=list(SWEEP_COLUMNS))
    f["spec_mode"] = f["spec_mode"].map(spec_mode_key)
    base = f[f["spec_mode"] == "baseline"].set_index("batch_size")["output_throughput"]
    spec = f[f["spec_mode"] != "baseline"].copy()
    spec["speedup_over_baseline"] = spec["output_throughput"] / spec["batch_size"].map(base)
    cell = ("batch_size", "steps", "draft_tokens", "accept_length_pinned")
    keys = list(zip(*(_key(spec, c) for c in cell), strict=True))
    v1_keys = [k for k, m in zip(keys, spec["spec_mode"], strict=True) if m == "v1"]
    v1_values = spec.loc[spec["spec_mode"] == "v1", "output_throughput"].tolist()
    v1 = {k: v for k, v in zip(v1_keys, v1_values, strict=True) if v1_keys.count(k) == 1}
    spec["speedup_v2_over_v1"] = [
        (t / v1.get(k, np.nan)) if m == "v2" else np.nan
        for t, k, m in zip(spec["output_throughput"], keys, spec["spec_mode"], strict=True)
    ]
    out = pd.concat([f[f["spec_mode"] == "baseline"], spec], ignore_index=True)
    return out.reindex(columns=list(SWEEP_COLUMNS))


def _key(frame: pd.DataFrame, column: str) -> list[float | None]:
    """`column` as hashable cell-key parts: None for a missing value (NaN never equals itself)."""
    return [None if pd.isna(v) else float(v) for v in frame[column]]
