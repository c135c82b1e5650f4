"""bench_serving's result JSON (`--output-file` JSONL lines) <-> specbench's metric fields, by the catalogue.

Each metric in `bench.catalog` names its key in bench_serving's result (`median_ttft_ms` for `ttft_p50_ms`,
`p95_itl_ms` for `itl_p95_ms`, ...), so a line maps onto SampleMetrics fields and back without a second table.
The argument keys (`backend`, `max_concurrency`, `random_input_len`, ...) and `server_info` describe the
point; `read_line` keeps what a line knows and leaves the rest None.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench import catalog

# bench_serving's own argument keys, written by `to_line` so that a file round-trips.
ARG_KEYS = (
    "tag",
    "backend",
    "dataset_name",
    "request_rate",
    "max_concurrency",
    "sharegpt_output_len",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
)


class BenchServingFormatError(ValueError):
    """A line that is not a bench_serving result."""


@dataclass
class ResultLine:
    """One bench_serving result, as specbench stores it."""

    metrics: dict[str, float | int]  # SampleMetrics field -> value
    args: dict[str, Any]  # ARG_KEYS present in the line
    batch_size: int | None  # max_concurrency (None: an open-loop run at a request rate)
    input_len: int
    output_len: int
    completed: int
    server: dict[str, Any] = field(default_factory=dict)  # the line's server_info, or {}


def metrics_of(line: Mapping[str, Any]) -> dict[str, float | int]:
    """SampleMetrics field -> value for every catalogue metric the result holds as a finite number."""
    metrics: dict[str, float | int] = {}
    for m in catalog.METRICS:
        key = m.bench_serving
        value = line.get(key) if key else None
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            metrics[m.name] = value
    return metrics


def read_line(raw: str | bytes) -> ResultLine:
    try:
        line = json.loads(raw)  # bench_serving writes Infinity for request_rate inf; json reads it
    except ValueError as exc:
        raise BenchServingFormatError(f"not JSON: {exc}") from None
    if not isinstance(line, dict) or "output_throughput" not in line or "completed" not in line:
        raise BenchServingFormatError("not a bench_serving result (no output_throughput / completed)")
    metrics = metrics_of(line)
    completed = int(line["completed"])
    if completed < 1:
        raise BenchServingFormatError("a result with no completed request")
    server = line.get("server_info")
    mc = line.get("max_concurrency")
    in_len = line.get("random_input_len") if str(line.get("dataset_name", "")).startswith("random") else None
    out_len = (
        line.get("random_output_len") if str(line.get("dataset_name", "")).startswith("random") else None
    )
    return ResultLine(
        metrics=metrics,
        args={k: line[k] for k in ARG_KEYS if k in line},
        batch_size=int(mc) if isinstance(mc, int) else None,
        # Without fixed lengths the file knows only totals: the mean per request stands in.
        input_len=int(in_len)
        if isinstance(in_len, int)
        else round(int(line.get("total_input_tokens", 0)) / completed),
        output_len=int(out_len)
        if isinstance(out_len, int)
        else round(int(line.get("total_output_tokens", 0)) / completed),
        completed=completed,
        server=server if isinstance(server, dict) else {},
    )


def to_line(metrics: dict[str, Any], args: dict[str, Any], extra: dict[str, Any] | None = None) -> str:
    """One bench_serving-shaped JSON line: the argument keys, then every catalogue metric under its key."""
    out: dict[str, Any] = {k: args.get(k) for k in ARG_KEYS}
    for m in catalog.METRICS:
        if m.bench_serving and m.bench_serving not in out:
            out[m.bench_serving] = metrics.get(m.name)
    if extra:
        out.update(extra)
    return json.dumps(out)
