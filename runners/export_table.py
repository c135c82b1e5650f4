"""`specbench export --format table`: a view fitted to the terminal (`runners.tables`), the default on one.

A row's identity and findings (batch, throughput, ratio and interval, verdict) are never cut or left out; run
titles say what the numbers are (measured, `simulated (stand-in)`, `synthetic`)."""

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
from rich.console import Console

from analysis import correctness
from analysis.export import Export
from analysis.labels import KIND_TAG, MEASURED, config_label
from analysis.plain import missing
from runners.tables import Column, print_rows, print_table, say


def _num(value: Any, fmt: str) -> str:
    if missing(value):
        return "-"
    return format(int(value), fmt) if fmt.endswith("d") else format(float(value), fmt)


def _interval(low: Any, high: Any, fmt: str) -> str:
    return "-" if missing(low) or missing(high) else f"{format(float(low), fmt)}-{format(float(high), fmt)}"


def _run_title(run: Mapping[str, Any]) -> str:
    kind = KIND_TAG.get(run.get("kind") or MEASURED, MEASURED)
    gpu = f"{run.get('gpu_name')} x{run.get('gpu_count')}" if run.get("gpu_count") else "no GPU"
    return (
        f"run {run['id']} {run['sweep_name']} ({kind}): {run['status']}, sglang "
        f"{run.get('sglang_version') or '?'} on {gpu}"
    )


def _ci(r: Mapping[str, Any]) -> str:
    low = r["output_throughput_ci_low"]
    return _interval(None if missing(low) else max(low, 0), r["output_throughput_ci_high"], ",.0f")


POINT_COLUMNS = [
    Column("config", shrink=12, cell=lambda r: config_label(r, with_batch=False)),
    Column("bs", "right", cell=lambda r: str(r["batch_size"])),
    Column("status", drop=5, cell=lambda r: str(r["status"])),
    Column(
        "out tok/s",
        "right",
        cell=lambda r: correctness.speed_text(r["output_throughput"], r.get("correctness")),
    ),
    Column("95% CI", "right", drop=4, cell=_ci),
    Column("accept", "right", drop=2, cell=lambda r: _num(r["accept_length"], ".2f")),
    Column("TPOT ms", "right", drop=1, cell=lambda r: _num(r["tpot_p50_ms"], ".2f")),
    Column("TTFT ms", "right", drop=3, cell=lambda r: _num(r["ttft_p50_ms"], ".1f")),
    Column("ITL ms", "right", drop=6, cell=lambda r: _num(r["itl_p50_ms"], ".2f")),
    Column("floor", "right", drop=7, cell=lambda r: _num(r.get("floor_fraction"), ".2f")),
    Column("check", drop=2, cell=lambda r: str(r.get("correctness") or "-")),
]


def print_points(console: Console, export: Export) -> None:
    """One table per run: a row per point (failed ones too with --all-status)."""
    for run in export.runs:
        rows = [r for r in export.rows if r["run_id"] == run["id"]]
        print_rows(console, POINT_COLUMNS, rows, title=_run_title(run))
    say(
        console,
        "TPOT, TTFT, ITL: medians (p50); floor: the floor fraction of the step; check: the correctness gate",
    )


def _verdict(r: Mapping[str, Any]) -> str:
    wrong = correctness.is_wrong(r.get("v1_correctness")) or correctness.is_wrong(r.get("v2_correctness"))
    return correctness.WRONG if wrong else str(r["verdict"] or "-")


V2_V1_COLUMNS = [
    Column("batch", "right", cell=lambda r: _num(r["batch_size"], "d")),
    Column("steps", "right", cell=lambda r: _num(r["steps"], "d")),
    Column("accept", "right", drop=5, cell=lambda r: _num(r["accept_length"], ".2f")),
    Column("v1 tok/s", "right", drop=3, cell=lambda r: _num(r["v1_output_throughput"], ",.0f")),
    Column("v2 tok/s", "right", drop=3, cell=lambda r: _num(r["v2_output_throughput"], ",.0f")),
    Column("v2/v1", "right", cell=lambda r: _num(r["ratio"], ".3f")),
    Column("95% CI", "right", cell=lambda r: _interval(r["ci_low"], r["ci_high"], ".3f")),
    Column("verdict", cell=_verdict),
    Column("TPOT v2/v1", "right", drop=4, cell=lambda r: _num(r["tpot_ratio"], ".3f")),
    Column("n", "right", drop=2, cell=lambda r: _num(r["n"], "d")),
]


def print_v2_vs_v1(console: Console, frame: pd.DataFrame, title: str) -> None:
    """A row per (batch size, steps, accept length): v2's throughput over v1's with its interval."""
    print_rows(console, V2_V1_COLUMNS, frame.to_dict("records"), title=title)


def _cell(value: Any) -> str:
    if missing(value):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def print_frame(console: Console, frame: pd.DataFrame, title: str, first: tuple[str, ...]) -> None:
    """Any view's frame: the `first` columns it has always shown, the others left out from the last on."""
    lead = [c for c in first if c in frame.columns]
    order = [*lead, *(c for c in frame.columns if c not in lead)]
    columns = [
        Column(
            str(c),
            "right" if pd.api.types.is_numeric_dtype(frame[c]) else "left",
            drop=max(0, len(order) - i) if i >= len(lead) else 0,
        )
        for i, c in enumerate(order)
    ]
    cells = [[_cell(v) for v in row] for row in frame[order].itertuples(index=False)]
    print_table(console, columns, cells, title=title)


# The columns a reader of each view looks at first.
WINDOWS_FIRST = (
    *("order_index", "batch_size", "spec_mode", "steps"),
    *("status", "output_throughput", "tpot_mean_ms"),
)
SHARD_VS_TP_FIRST = ("batch_size", "steps", "mode", "shard_step_ms", "tp_step_ms", "cycle_error")
