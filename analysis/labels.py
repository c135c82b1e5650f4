"""How points, series, GPUs and workloads read in tables, charts and reports: one label per concept."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def none_if_nan(v: Any) -> Any:
    """NaN (what pandas makes of SQL NULL in numeric columns) -> None."""
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def short_model(model: str | None) -> str:
    return (model or "?").rstrip("/").split("/")[-1]


def short_gpu(name: str | None, count: Any = None) -> str:
    n = (name or "none").replace("NVIDIA ", "")
    n = n.split(" ")[0] if n.startswith(("H100", "H200", "B200", "A100")) else n
    c = none_if_nan(count)
    return f"{n}×{int(c)}" if c else n


def short_workload(key: str | None) -> str:
    """`random:random:in1024:out512:seed1:t0.0` -> `in1024/out512` (with the dataset when it is not random)."""
    if not key:
        return "?"
    parts = key.split(":")
    io = [p for p in parts if p.startswith(("in", "out")) and p[2:].lstrip("t").isdigit()]
    head = "" if parts[0] == "random" else f"{parts[0]} "
    return head + "/".join(io) if io else key


def config_label(row: Mapping[str, Any], *, with_batch: bool = True) -> str:
    """`EAGLE s3 v2 · bs16` or `baseline · bs16`: how a point's server config reads in tables."""
    steps = none_if_nan(row.get("steps"))
    if none_if_nan(row.get("algorithm")) is None or steps is None:
        head = "baseline"
    else:
        topk = none_if_nan(row.get("topk"))
        k = f" k{int(topk)}" if topk and int(topk) != 1 else ""
        head = f"{row['algorithm']} s{int(steps)}{k} {none_if_nan(row.get('spec_mode')) or ''}".rstrip()
    return f"{head} · bs{int(row['batch_size'])}" if with_batch else head


def series_label(row: Mapping[str, Any]) -> str:
    return " · ".join(
        [
            short_model(row.get("model")),
            short_gpu(row.get("gpu_name"), row.get("gpu_count")),
            config_label(row),
            short_workload(row.get("workload_key")),
        ]
    )


def spec_mode_key(value: Any) -> str:
    """Filter value for a spec mode: `v1`, `v2` or `baseline` (no speculative decoding)."""
    return str(value) if none_if_nan(value) else "baseline"


def key_part(v: Any) -> str:
    """One value of a config key as text: NULL -> "", 3.0 -> "3" (pandas turns an int column with a NULL
    into floats, so 3 and 3.0 must read the same)."""
    v = none_if_nan(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return "" if v is None else str(v)


# What kind of numbers a run holds, as every page, export and comment names it. Real measurements carry no
# tag. A run on the stand-in server (`synthetic.server`, no GPU) is "simulated (stand-in)": its numbers come from a
# performance model. Runs written by `specbench seed` are "synthetic" history for load tests. Both are
# `simulated` in the store; the trigger tells them apart.
STAND_IN_TAG = "simulated (stand-in)"
SYNTHETIC_TAG = "synthetic"


def run_tag(simulated: Any, trigger: Any) -> str | None:
    """The tag shown next to a run, or None for a real measurement."""
    if trigger == SYNTHETIC_TAG:
        return SYNTHETIC_TAG
    simulated = none_if_nan(simulated)
    return STAND_IN_TAG if simulated is not None and bool(simulated) else None
