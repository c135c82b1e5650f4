"""One row per measured window of one run, in measurement order, with what each window ran under.

A point's median hides why its repeats spread: beside each window's speed and acceptance stands the GPU and
host context it recorded (`samples.telemetry`), so a slow window reads as throttled, loaded or accepting less.
`spread`: per configuration, the `ok` windows' throughput CV. `drivers`: the Pearson r of throughput with each
context column, a lead, not a cause (on the H200 it followed GPU power at 0.99:
docs/results/2026-12-04-h200-v3-slice-grid-part1.md).
"""

import math
import statistics
from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from analysis import md
from analysis.plain import missing
from analysis.render import Column, Document, columns, md_table, md_title, records
from db import queries

CONFIG_KEYS: tuple[str, ...] = ("batch_size", "spec_mode", "steps", "accept_length_pinned")
# accept_length: measured (the pinned one is accept_length_pinned).
METRICS: tuple[str, ...] = (
    *("output_throughput", "tpot_mean_ms", "itl_p99_ms", "ttft_p50_ms", "duration_s", "completed"),
    "accept_length",
)
# Keys of samples.telemetry, one column each; missing keys are empty cells.
TELEMETRY: tuple[str, ...] = (
    *("sm_clock_min_mhz", "sm_clock_median_mhz", "temp_max_c", "power_mean_w", "host_load_1m_start"),
    "host_load_1m_end",
)
# Recorded by newer runs only: a column when some window of the run has the key.
TELEMETRY_OPTIONAL: tuple[str, ...] = (
    "host_cpu_busy_pct",
    "host_cpu_steal_pct",
    "cpu_pressure_pct",
    "host_cpu_max_busy_pct",  # the busiest single CPU (a server's scheduler loop shows as ~100)
    "host_cpu_steal_max_pct",  # the most any single CPU had stolen by the hypervisor
    "mem_clock_median_mhz",
    "gpu_util_mean_pct",  # a slower window with an idler GPU waited for the host (bench/host/telemetry/)
    "server_cpu_pct",  # the launched server's processes, percent of one core
    "server_busiest_cpu_pct",
    "cpu_probe_ms",  # a fixed piece of Python's wall time (bench/host/cpu_probe.py): higher = slower host
    "cpu_probe_cpu_ms",  # its CPU time, rising with it: a slower CPU, not preemption
    "cpu_probe_on_server_pct",  # cpu_probe_on = server: percent of probe samples on the busiest process's CPU
    "cpu_probe_follow_errors",  # cpu_probe_on = server: moves onto that CPU the kernel refused (0: none)
    "server_busiest_cpu_moves",  # samples where the busiest server process had moved to another CPU
    # The client's event-loop lag (bench/host/loop_lag.py): the host stalls `unstable` is measured against.
    "client_loop_lag_max_ms",
    "client_loop_lag_p99_ms",
    # The same for the server's loop, where it reports it (the stand-in does: synthetic/server/stalls.py).
    "server_loop_stall_max_ms",
)
# Text keys, likewise optional; a list (the NVML clock-event reasons) is written space-separated.
TELEMETRY_TEXT: tuple[str, ...] = (
    "server_busiest_process",
    "clock_event_reasons",
    "server_busiest_cpus",  # the CPUs it ran on, most often first: a window's level can follow its core
    "cpu_probe_cpus",
    "cpu_probe_on",  # runner: the probe ran on the runner's CPUs; server: it followed the busiest process
)
HEAD: tuple[str, ...] = ("order_index", *CONFIG_KEYS, "repeat", "status", *METRICS)
# invocation: the `specbench run` (or job attempt) that measured it; server_instance_id: its server's row.
TAIL: tuple[str, ...] = (
    *("throttled", "reason", "window_started_at", "invocation", "server_instance_id", "topk", "point_id"),
)
_INTS: tuple[str, ...] = (
    *("order_index", "batch_size", "steps", "repeat", "completed", "invocation", "server_instance_id"),
    *("topk", "point_id"),
)
VIEW = columns(
    (*HEAD, *TELEMETRY, *TELEMETRY_OPTIONAL, *TELEMETRY_TEXT, *TAIL),
    ints=_INTS,
    text=("spec_mode", "status", *TELEMETRY_TEXT, "reason", "window_started_at"),
)
SPREAD_COLUMNS: tuple[str, ...] = (*CONFIG_KEYS, "n", "mean_output_throughput", "cv_output_throughput")
# Context that may move with throughput, correlated in `drivers` when the run recorded it: (column, header).
DRIVERS: tuple[tuple[str, str], ...] = (
    ("power_mean_w", "power"),
    ("gpu_util_mean_pct", "GPU util"),
    ("sm_clock_median_mhz", "SM clock"),
    ("ttft_p50_ms", "TTFT p50"),
    ("accept_length", "accept len"),
    ("host_cpu_busy_pct", "CPU busy"),
    ("host_cpu_steal_pct", "steal"),
    ("host_cpu_steal_max_pct", "max CPU steal"),
    ("server_busiest_cpu_pct", "busiest proc CPU"),
    ("cpu_probe_ms", "host Python probe"),
    # with measure.cpu_probe: server, the scheduler core's own speed (wall time there includes time-sharing)
    ("cpu_probe_cpu_ms", "probe CPU ms"),
)
MIN_DRIVER_WINDOWS = 4  # fewer ok windows make a correlation meaningless


def load(engine: Engine, run_id: int) -> pd.DataFrame:
    return windows(queries.run_windows(engine, run_id, METRICS))


def windows(raw: pd.DataFrame) -> pd.DataFrame:
    """`raw` (db.queries.run_windows) with the telemetry dict flattened: HEAD, the telemetry columns, TAIL."""
    dicts = [t if isinstance(t, dict) else {} for t in raw["telemetry"]]
    keys = [*TELEMETRY, *(k for k in TELEMETRY_OPTIONAL if any(k in d for d in dicts))]
    texts = [k for k in TELEMETRY_TEXT if any(k in d for d in dicts)]
    out = raw.reindex(columns=[*HEAD, *keys, *texts, *TAIL]).reset_index(drop=True)
    for key in keys:  # a value that is not a number (a schema drift, a hand edit) reads as empty
        out[key] = pd.to_numeric(pd.Series([d.get(key) for d in dicts], dtype=object), errors="coerce")
    for key in texts:
        out[key] = pd.Series([_text(d.get(key)) for d in dicts], dtype=object)
    # Flagged at the end of a run (runners.run_checks.flag_throttled); unknown without telemetry.
    out["throttled"] = pd.Series([bool(d.get("throttled")) if d else None for d in dicts], dtype=object)
    for col in _INTS:
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("Int64")
    for col in (*METRICS, "accept_length_pinned"):
        if col != "completed":
            out[col] = pd.to_numeric(out[col], errors="coerce").astype(float)
    return out


def _text(v: Any) -> str | None:
    if isinstance(v, list):
        return " ".join(str(x) for x in v)
    return None if v is None else str(v)


def _ok_by_config(frame: pd.DataFrame) -> Iterator[tuple[dict[str, Any], pd.DataFrame]]:
    """Per configuration (CONFIG_KEYS): its keys and its `ok` windows with a throughput."""
    for key, group in frame.groupby(list(CONFIG_KEYS), dropna=False, sort=False):
        config = {k: None if missing(v) else v for k, v in zip(CONFIG_KEYS, key, strict=True)}
        yield config, group[(group["status"] == "ok") & (group["output_throughput"] > 0)]


def _sorted(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values(list(CONFIG_KEYS), na_position="first", kind="stable").reset_index(drop=True)


def spread(frame: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: n ok windows, their mean throughput and its CV (None under two windows)."""
    rows: list[dict[str, Any]] = []
    for config, ok in _ok_by_config(frame):
        values = [float(v) for v in ok["output_throughput"]]
        mean = statistics.fmean(values) if values else None
        cv = statistics.stdev(values) / mean if mean and len(values) >= 2 else None
        rows.append({**config, "n": len(values), "mean_output_throughput": mean, "cv_output_throughput": cv})
    return _sorted(rows, list(SPREAD_COLUMNS))


def drivers(frame: pd.DataFrame) -> pd.DataFrame:
    """Per configuration with MIN_DRIVER_WINDOWS ok windows: n and the Pearson r of throughput with each
    recorded DRIVERS column (None where it did not vary or has too few values)."""
    present = [c for c, _ in DRIVERS if c in frame.columns and frame[c].notna().any()]
    rows: list[dict[str, Any]] = []
    for config, ok in _ok_by_config(frame):
        if len(ok) < MIN_DRIVER_WINDOWS:
            continue
        row: dict[str, Any] = {**config, "n": len(ok)}
        for col in present:
            both = ok[["output_throughput", col]].dropna().astype(float)
            varies = len(both) >= MIN_DRIVER_WINDOWS and both[col].nunique() > 1
            r = both["output_throughput"].corr(both[col]) if varies else None
            row[f"r_{col}"] = None if r is None or math.isnan(r) else round(float(r), 2)
        rows.append(row)
    return _sorted(rows, [*CONFIG_KEYS, "n", *(f"r_{c}" for c in present)])


# ------------------------------------------------------------------------------------------- formats


def document(frame: pd.DataFrame, meta: dict[str, Any] | None = None, title: str | None = None) -> Document:
    """The windows in every format; the JSON adds their spread and drivers."""
    return Document(
        frame,
        VIEW,
        lambda: to_markdown(frame, title),
        head={"view": "windows", **(meta or {})},
        tail={"spread": records(spread(frame)), "drivers": records(drivers(frame))},
    )


# The windows as the Markdown table shows them; a column without a format is text, escaped.
_MD: tuple[Column, ...] = tuple(
    Column(key, head, fmt, text=not fmt)
    for head, key, fmt in (
        ("#", "order_index", "d"),
        ("batch", "batch_size", "d"),
        ("mode", "spec_mode", ""),
        ("steps", "steps", "d"),
        ("accept pinned", "accept_length_pinned", "g"),
        ("rep", "repeat", "d"),
        ("status", "status", ""),
        ("tok/s", "output_throughput", ",.1f"),
        ("TPOT ms", "tpot_mean_ms", ".3f"),
        ("ITL p99 ms", "itl_p99_ms", ".2f"),
        ("TTFT p50 ms", "ttft_p50_ms", ".2f"),
        ("window s", "duration_s", ".2f"),
        ("done", "completed", "d"),
        ("accept len", "accept_length", ".2f"),
        ("SM min MHz", "sm_clock_min_mhz", ".0f"),
        ("SM median MHz", "sm_clock_median_mhz", ".0f"),
        ("temp max °C", "temp_max_c", ".0f"),
        ("power W", "power_mean_w", ".1f"),
        ("load 1m start", "host_load_1m_start", ".2f"),
        ("load 1m end", "host_load_1m_end", ".2f"),
        ("CPU busy %", "host_cpu_busy_pct", ".1f"),
        ("CPU steal %", "host_cpu_steal_pct", ".2f"),
        ("CPU pressure %", "cpu_pressure_pct", ".2f"),
        ("max CPU busy %", "host_cpu_max_busy_pct", ".1f"),
        ("max CPU steal %", "host_cpu_steal_max_pct", ".2f"),
        ("mem MHz", "mem_clock_median_mhz", ".0f"),
        ("GPU util %", "gpu_util_mean_pct", ".1f"),
        ("server CPU %", "server_cpu_pct", ".1f"),
        ("busiest proc CPU %", "server_busiest_cpu_pct", ".1f"),
        ("busiest proc", "server_busiest_process", ""),
        ("clock events", "clock_event_reasons", ""),
        ("host probe ms", "cpu_probe_ms", ".3f"),
        ("probe CPU ms", "cpu_probe_cpu_ms", ".3f"),
        ("busiest proc CPUs", "server_busiest_cpus", ""),
        ("busiest proc moves", "server_busiest_cpu_moves", "d"),
        ("probe CPUs", "cpu_probe_cpus", ""),
        ("probe on", "cpu_probe_on", ""),
        ("probe on server %", "cpu_probe_on_server_pct", ".1f"),
        ("client stall max ms", "client_loop_lag_max_ms", ".1f"),
        ("client stall p99 ms", "client_loop_lag_p99_ms", ".1f"),
        ("server stall max ms", "server_loop_stall_max_ms", ".1f"),
        ("probe follow errors", "cpu_probe_follow_errors", "d"),
    )
)


def _note(r: Mapping[str, Any]) -> str:
    if not missing(r["reason"]):
        return md.text(r["reason"])
    return "throttled" if r["throttled"] is True else ""


# A configuration's cells, first in the spread and drivers tables.
_CONFIG = (
    Column("batch_size", "batch", "d"),
    Column("spec_mode", "mode", text=True),
    Column("steps", "steps", "d"),
    Column("accept_length_pinned", "accept pinned", "g"),
    Column("n", "n", "d"),
)
_SPREAD = (
    *_CONFIG,
    Column("mean_output_throughput", "mean tok/s", ",.1f"),
    Column(
        "cv", "CV", show=lambda s: "–" if missing(cv := s["cv_output_throughput"]) else f"{100 * cv:.1f} %"
    ),
)


def to_markdown(frame: pd.DataFrame, title: str | None = None) -> str:
    cols = [c for c in _MD if c.key in frame.columns]
    lines = md_title(title) if title else []
    lines += md_table(frame.to_dict(orient="records"), [*cols, Column("note", text=True, show=_note)])
    if frame.empty:
        lines.append("| " + " | ".join("–" for _ in cols) + " | no windows stored for this run |")
    lines += [
        "",
        "Spread per configuration (ok windows): CV = standard deviation / mean of output throughput.",
        "",
        *md_table(spread(frame).to_dict(orient="records"), _SPREAD),
    ]
    table = drivers(frame)
    if not table.empty:
        lines += [
            "",
            f"What moved with throughput (ok windows, at least {MIN_DRIVER_WINDOWS}): Pearson r of output "
            "throughput with each recorded column; a lead, not a cause.",
            "",
            *md_table(
                table.to_dict(orient="records"),
                [*_CONFIG, *(Column(f"r_{c}", h, "+.2f") for c, h in DRIVERS if f"r_{c}" in table.columns)],
            ),
        ]
    return "\n".join(lines) + "\n"
