"""DataFrame-level analysis shared by the pages and the CLI: labels, run comparison, change-point scans.

Pure pandas on top of `bench.stats`; no Streamlit and no SQL, so `specbench compare` / `regressions` and the
dashboard produce the very same tables.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from bench.stats.attribution import ThroughputFactors, attribute
from bench.stats.changepoint import ChangePointParams, detect_change_points
from bench.stats.compare import (
    DEFAULT_CONFIDENCE,
    DEFAULT_THRESHOLD,
    Method,
    compare_samples,
    higher_is_better,
)
from db.queries import CONFIG_COLUMNS

VERDICT_ORDER = ("regression", "improvement", "insufficient data", "no change")


def _none(v: Any) -> Any:
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
    c = _none(count)
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
    steps = _none(row.get("steps"))
    if _none(row.get("algorithm")) is None or steps is None:
        head = "baseline"
    else:
        topk = _none(row.get("topk"))
        k = f" k{int(topk)}" if topk and int(topk) != 1 else ""
        head = f"{row['algorithm']} s{int(steps)}{k} {_none(row.get('spec_mode')) or ''}".rstrip()
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
    return str(value) if _none(value) else "baseline"


# ---------------------------------------------------------------------------------------------- compare

COMPARE_COLUMNS: tuple[str, ...] = (
    "config",
    "model",
    "workload",
    "spec_mode",
    "steps",
    "batch_size",
    "metric",
    "baseline",
    "candidate",
    "delta",
    "ci_low",
    "ci_high",
    "pvalue",
    "verdict",
    "n_baseline",
    "n_candidate",
    "why",
    "note",
    "point_baseline",
    "point_candidate",
    "fingerprint",
)


def compare_runs(
    points_a: pd.DataFrame,
    samples_a: pd.DataFrame,
    points_b: pd.DataFrame,
    samples_b: pd.DataFrame,
    *,
    metric: str = "output_throughput",
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    method: Method = "t",
) -> pd.DataFrame:
    """Point-by-point comparison of run B (candidate) against run A (baseline).

    Points pair on their configuration (the series key without the GPU, so an H100 run compares against an
    H200 run too). A point present on one side only is listed as `insufficient data`.
    """
    keys = list(CONFIG_COLUMNS)
    a = _keyed(points_a, keys)
    b = _keyed(points_b, keys)
    merged = a.merge(b, on="_key", how="outer", suffixes=("_a", "_b"), indicator=True)
    by_point_a = _sample_lists(samples_a, metric)
    by_point_b = _sample_lists(samples_b, metric)
    rows = []
    for rec in merged.to_dict("records"):
        side = "_b" if rec["_merge"] != "left_only" else "_a"
        ident = {k: rec.get(f"{k}{side}") for k in keys}
        pa, pb = _none(rec.get("point_id_a")), _none(rec.get("point_id_b"))
        sa = by_point_a.get(int(pa), []) if pa is not None else []
        sb = by_point_b.get(int(pb), []) if pb is not None else []
        c = compare_samples(sa, sb, metric=metric, threshold=threshold, confidence=confidence, method=method)
        note = c.note
        if rec["_merge"] == "left_only":
            note = "only in the baseline run"
        elif rec["_merge"] == "right_only":
            note = "only in the candidate run"
        elif c.verdict == "insufficient data" and (
            rec.get("status_a") != "ok" or rec.get("status_b") != "ok"
        ):
            note = f"status {rec.get('status_a')} → {rec.get('status_b')}; " + note
        rows.append(
            {
                "config": config_label(ident),
                "model": short_model(ident["model"]),
                "workload": short_workload(ident["workload_key"]),
                "spec_mode": spec_mode_key(ident["spec_mode"]),
                "steps": _none(ident["steps"]),
                "batch_size": int(ident["batch_size"]),
                "metric": metric,
                "baseline": c.baseline,
                "candidate": c.candidate,
                "delta": c.delta,
                "ci_low": c.ci_low,
                "ci_high": c.ci_high,
                "pvalue": c.pvalue,
                "verdict": c.verdict,
                "n_baseline": c.n_baseline,
                "n_candidate": c.n_candidate,
                "why": _why(rec, c.verdict) if metric == "output_throughput" else "",
                "note": note,
                "point_baseline": pa,
                "point_candidate": pb,
                "fingerprint": _none(rec.get("fingerprint_b")) or _none(rec.get("fingerprint_a")),
            }
        )
    table = pd.DataFrame(rows, columns=list(COMPARE_COLUMNS))
    if table.empty:
        return table
    table["_v"] = table["verdict"].map({v: i for i, v in enumerate(VERDICT_ORDER)})
    table["_m"] = table["spec_mode"].map({"baseline": 0, "v1": 1, "v2": 2})
    # Runs of different grids share few points: the one-sided rows go last, so they do not bury the pairs.
    table["_p"] = table["point_baseline"].isna() | table["point_candidate"].isna()
    order = ["_v", "_p", "model", "workload", "_m", "steps", "batch_size"]
    table = table.sort_values(order, na_position="first")
    return table.drop(columns=["_v", "_m", "_p"]).reset_index(drop=True)


def _keyed(points: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    cols = [*keys, "point_id", "status", "fingerprint", "output_throughput", "accept_length", "tpot_mean_ms"]
    frame = points.reindex(columns=cols).copy()
    # One string key: NULL-safe (baseline points have NULL steps) and blind to int-vs-float columns (pandas
    # turns an integer column with a NULL into floats, so 3 and 3.0 must read the same).
    frame["_key"] = ["|".join(_key_part(v) for v in row) for row in frame[keys].itertuples(index=False)]
    return frame


def _key_part(v: Any) -> str:
    v = _none(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return "" if v is None else str(v)


def _sample_lists(samples: pd.DataFrame, metric: str) -> dict[int, list[float]]:
    if samples.empty or metric not in samples:
        return {}
    ok = samples[samples["status"] != "failed"] if "status" in samples else samples
    ok = ok.dropna(subset=[metric])
    return {int(pid): grp[metric].astype(float).tolist() for pid, grp in ok.groupby("point_id")}


def _why(rec: Mapping[str, Any], verdict: str) -> str:
    if verdict not in ("regression", "improvement"):
        return ""
    ta, tb = _none(rec.get("output_throughput_a")), _none(rec.get("output_throughput_b"))
    if not ta or not tb:
        return ""
    fa = ThroughputFactors(float(ta), _none(rec.get("accept_length_a")), _none(rec.get("tpot_mean_ms_a")))
    fb = ThroughputFactors(float(tb), _none(rec.get("accept_length_b")), _none(rec.get("tpot_mean_ms_b")))
    return attribute(fa, fb).summary.split(": ", 1)[-1]


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    counts = table["verdict"].value_counts().to_dict() if not table.empty else {}
    return {v: int(counts.get(v, 0)) for v in VERDICT_ORDER}


# ---------------------------------------------------------------------------------------------- changes

CHANGE_COLUMNS: tuple[str, ...] = (
    "fingerprint",
    "metric",
    "index",
    "run_id",
    "point_id",
    "started_at",
    "sglang_version",
    "sglang_commit",
    "prev_run_id",
    "prev_version",
    "prev_commit",
    "mean_before",
    "mean_after",
    "rel_change",
    "magnitude",
    "pvalue",
    "n_before",
    "n_after",
    "direction",
    "why",
)


def change_points(series: pd.DataFrame, metric: str, params: ChangePointParams | None = None) -> pd.DataFrame:
    """Change points of one series (rows in time order, as `db.queries.series_points` returns them)."""
    frame = series.dropna(subset=[metric]).reset_index(drop=True)
    rows = _change_rows(frame, frame[metric].to_numpy(dtype=np.float64), metric, params)
    return pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))


def _change_rows(
    frame: pd.DataFrame, values: np.ndarray, metric: str, params: ChangePointParams | None
) -> list[dict[str, Any]]:
    """Detect on `values` (the metric column of `frame`, already without NaN) and describe each change."""
    found = detect_change_points(values, params) if len(values) else []
    if not found:
        return []
    hib = higher_is_better(metric)
    fp = frame["fingerprint"].iloc[0] if "fingerprint" in frame else None
    out = []
    for cp in found:
        at, prev = frame.iloc[cp.index], frame.iloc[cp.index - 1]
        better = cp.rel_change > 0 if hib else cp.rel_change < 0
        out.append(
            {
                "fingerprint": fp,
                "metric": metric,
                "index": cp.index,
                "run_id": int(at["run_id"]),
                "point_id": int(at["point_id"]),
                "started_at": at["started_at"],
                "sglang_version": at.get("sglang_version"),
                "sglang_commit": at.get("sglang_commit"),
                "prev_run_id": int(prev["run_id"]),
                "prev_version": prev.get("sglang_version"),
                "prev_commit": prev.get("sglang_commit"),
                "mean_before": cp.mean_before,
                "mean_after": cp.mean_after,
                "rel_change": cp.rel_change,
                "magnitude": cp.magnitude,
                "pvalue": cp.pvalue,
                "n_before": cp.n_before,
                "n_after": cp.n_after,
                "direction": "improvement" if better else "regression",
                "why": _segment_why(frame, cp.index, cp.n_before, cp.n_after)
                if metric == "output_throughput"
                else "",
            }
        )
    return out


def _segment_why(frame: pd.DataFrame, index: int, n_before: int, n_after: int) -> str:
    before = frame.iloc[index - n_before : index]
    after = frame.iloc[index : index + n_after]

    def factors(seg: pd.DataFrame) -> ThroughputFactors:
        def mean(col: str) -> float | None:
            if col not in seg or seg[col].isna().all():
                return None
            return float(seg[col].mean())

        return ThroughputFactors(
            float(seg["output_throughput"].mean()), mean("accept_length"), mean("tpot_mean_ms")
        )

    try:
        return attribute(factors(before), factors(after)).summary.split(": ", 1)[-1]
    except ValueError:
        return ""


def scan_changes(history: pd.DataFrame, metric: str, params: ChangePointParams | None = None) -> pd.DataFrame:
    """Change points of every series in `history` (rows of many fingerprints, as `series_history` returns).

    Hundreds of series per call (the Overview, `specbench regressions`): the frame is cleaned and split once,
    each series is handed to the detector as a NumPy slice, and rows are built only where something changed.
    """
    if history.empty:
        return pd.DataFrame(columns=list(CHANGE_COLUMNS))
    frame = history.dropna(subset=[metric]).sort_values(
        ["fingerprint", "created_at", "point_id"], kind="stable"
    )
    frame = frame.reset_index(drop=True)
    values = frame[metric].to_numpy(dtype=np.float64)
    keys = frame["fingerprint"].to_numpy()
    bounds = [0, *np.flatnonzero(keys[1:] != keys[:-1]) + 1, len(frame)]
    rows: list[dict[str, Any]] = []
    for a, b in itertools.pairwise(bounds):
        if b - a >= 3:
            rows.extend(_change_rows(frame.iloc[a:b].reset_index(drop=True), values[a:b], metric, params))
    if not rows:
        return pd.DataFrame(columns=list(CHANGE_COLUMNS))
    out = pd.DataFrame(rows, columns=list(CHANGE_COLUMNS))
    return out.sort_values("started_at", ascending=False, ignore_index=True)


def summarize_by_run(changes: pd.DataFrame) -> list[str]:
    """One Markdown line per run where changes start, busiest first: how many series, typical Δ, main cause."""
    lines = []
    groups = sorted(changes.groupby("run_id"), key=lambda g: (-len(g[1]), -int(g[0])))
    for run_id, g in groups:
        first = g.iloc[0]
        commit = str(first.get("sglang_commit") or "")[:7]
        causes = g["why"].fillna("").str.split(",").str[0].str.replace(r"\s?[+-]?[\d.]+%", "", regex=True)
        cause = causes[causes != ""].mode()
        kinds = g["direction"].value_counts()
        what = " and ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in kinds.items())
        lines.append(
            f"**Run #{int(run_id)}** ({first.get('sglang_version') or '?'}@{commit}): {what} across "
            f"{g['fingerprint'].nunique()} series, median {g['rel_change'].median() * 100:+.1f}%"
            + (f", mostly *{cause.iloc[0]}*" if len(cause) else "")
        )
    return lines


def attach_triage(changes: pd.DataFrame, triage: pd.DataFrame) -> pd.DataFrame:
    """Add `state` (open / acknowledged / dismissed) and `note` from stored triage to detected changes."""
    out = changes.copy()
    if triage.empty or out.empty:
        out["state"] = "open"
        out["note"] = None
        return out
    t = triage[["fingerprint", "metric", "run_id", "state", "note"]].drop_duplicates(
        ["fingerprint", "metric", "run_id"], keep="last"
    )
    out = out.merge(t, on=["fingerprint", "metric", "run_id"], how="left")
    out["state"] = out["state"].fillna("open")
    return out


# ---------------------------------------------------------------------------------------------- sweep

SWEEP_COLUMNS: tuple[str, ...] = (
    "batch_size",
    "steps",
    "spec_mode",
    "output_throughput",
    "accept_length",
    "speedup_v2_over_v1",
    "speedup_over_baseline",
)


def sweep_grid(points: pd.DataFrame) -> pd.DataFrame:
    """The ok points of one run (one workload, one topk), spec mode as `baseline`/`v1`/`v2`, with speedups.

    speedup_v2_over_v1 (v2 rows only): throughput over the v1 point at the same batch size and steps.
    speedup_over_baseline (spec rows): throughput over the no-spec point at the same batch size.
    """
    f = points[points["status"] == "ok"].copy()
    if f.empty:
        return pd.DataFrame(columns=list(SWEEP_COLUMNS))
    f["spec_mode"] = f["spec_mode"].map(spec_mode_key)
    base = f[f["spec_mode"] == "baseline"].set_index("batch_size")["output_throughput"]
    spec = f[f["spec_mode"] != "baseline"].copy()
    spec["speedup_over_baseline"] = spec["output_throughput"] / spec["batch_size"].map(base)
    v1 = spec[spec["spec_mode"] == "v1"].set_index(["batch_size", "steps"])["output_throughput"]
    keys = list(zip(spec["batch_size"], spec["steps"], strict=True))
    spec["speedup_v2_over_v1"] = [
        (t / v1.get(k, np.nan)) if m == "v2" else np.nan
        for t, k, m in zip(spec["output_throughput"], keys, spec["spec_mode"], strict=True)
    ]
    out = pd.concat([f[f["spec_mode"] == "baseline"], spec], ignore_index=True)
    return out.reindex(columns=list(SWEEP_COLUMNS))


# ---------------------------------------------------------------------------------------------- catalog

# Filter facets of the Trends page: (column added by `annotate_catalog`, label shown to the user).
FACETS: tuple[tuple[str, str], ...] = (
    ("model_s", "Model"),
    ("gpu_s", "GPU"),
    ("backend_s", "Backend"),
    ("mode_s", "Spec mode"),
    ("steps_s", "Steps"),
    ("bs_s", "Batch size"),
    ("workload_s", "Workload"),
)


def annotate_catalog(catalog: pd.DataFrame) -> pd.DataFrame:
    """The series catalog with one readable string column per filter facet, and a full label."""
    c = catalog.copy()
    if c.empty:
        for col, _ in FACETS:
            c[col] = pd.Series(dtype=str)
        c["label"] = pd.Series(dtype=str)
        return c
    c["model_s"] = [short_model(m) for m in c["model"]]
    c["gpu_s"] = [short_gpu(n, k) for n, k in zip(c["gpu_name"], c["gpu_count"], strict=True)]
    c["backend_s"] = c["attention_backend"].astype(str)
    c["mode_s"] = c["spec_mode"].map(spec_mode_key)
    c["steps_s"] = [_key_part(s) or "none" for s in c["steps"]]
    c["bs_s"] = [str(int(b)) for b in c["batch_size"]]
    c["workload_s"] = [short_workload(w) for w in c["workload_key"]]
    c["label"] = [series_label(r) for r in c.to_dict("records")]
    return c


def facet_options(values: pd.Series) -> list[str]:
    """Distinct facet values in a natural order (numbers numerically, `baseline`/`none` first)."""

    def key(v: str) -> tuple[int, float, str]:
        if v in ("baseline", "none"):
            return (0, 0.0, v)
        try:
            return (1, float(v), v)
        except ValueError:
            return (2, 0.0, v)

    return sorted({str(v) for v in values.dropna()}, key=key)
