"""Run vs run: a verdict for every configuration the two runs share, with the throughput attribution."""

import functools
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

import pandas as pd

from analysis.labels import (
    config_label,
    key_part,
    none_if_nan,
    run_tag,
    short_gpu,
    short_model,
    short_workload,
    spec_mode_key,
)
from analysis.stats.attribution import ThroughputFactors, attribute
from analysis.stats.compare import DEFAULT_CONFIDENCE, DEFAULT_THRESHOLD, Method, compare_samples
from db.queries import CONFIG_COLUMNS

VERDICT_ORDER = ("regression", "improvement", "insufficient data", "no change")
COMPARE_COLUMNS: tuple[str, ...] = (
    *("config", "model", "workload", "spec_mode", "steps", "batch_size", "metric", "baseline", "candidate"),
    *("center", "delta", "ci_low", "ci_high", "pvalue", "verdict", "n_baseline", "n_candidate", "why"),
    *("note", "point_baseline", "point_candidate", "fingerprint"),
    # The correctness gate's verdict on each side's point, and why the failing side failed (candidate first).
    *("correctness_baseline", "correctness_candidate", "correctness_why"),
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
    """Run B (candidate) against run A (baseline), point by point, paired on the series key without the GPU
    (an H100 run compares with an H200 run); a point on one side only is `insufficient data`."""
    # Pinned acceptance (grid.accept_lengths) splits a config into one point per value.
    keys = [*CONFIG_COLUMNS, "accept_length_pinned"]
    a = _keyed(points_a, keys)
    b = _keyed(points_b, keys)
    merged = a.merge(b, on="_key", how="outer", suffixes=("_a", "_b"), indicator=True)
    by_point_a = _sample_lists(samples_a, metric)
    by_point_b = _sample_lists(samples_b, metric)
    rows = []
    for rec in merged.to_dict("records"):
        side = "_b" if rec["_merge"] != "left_only" else "_a"
        ident = {k: rec.get(f"{k}{side}") for k in keys}
        pa, pb = none_if_nan(rec.get("point_id_a")), none_if_nan(rec.get("point_id_b"))
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
                **asdict(c),  # metric, centres, delta, interval, verdict, counts: the columns keep these
                "config": config_label(ident),
                "model": short_model(ident["model"]),
                "workload": short_workload(ident["workload_key"]),
                "spec_mode": spec_mode_key(ident["spec_mode"]),
                "steps": none_if_nan(ident["steps"]),
                "batch_size": int(ident["batch_size"]),
                "why": _why(rec, c.verdict) if metric == "output_throughput" else "",
                "note": note,
                "point_baseline": pa,
                "point_candidate": pb,
                "fingerprint": none_if_nan(rec.get("fingerprint_b")) or none_if_nan(rec.get("fingerprint_a")),
                **_checks(rec),
            }
        )
    table = pd.DataFrame(rows, columns=list(COMPARE_COLUMNS))
    if table.empty:
        return table
    table["_v"] = table["verdict"].map({v: i for i, v in enumerate(VERDICT_ORDER)})
    table["_m"] = table["spec_mode"].map({"baseline": 0, "v1": 1, "v2": 2})
    # Runs of different grids share few points: the one-sided rows go last, so they do not bury the pairs.
    table["_p"] = one_sided(table)
    order = ["_v", "_p", "model", "workload", "_m", "steps", "batch_size"]
    table = table.sort_values(order, na_position="first")
    return table.drop(columns=["_v", "_m", "_p"]).reset_index(drop=True)


def _checks(rec: Mapping[str, Any]) -> dict[str, Any]:
    a, b = none_if_nan(rec.get("correctness_a")), none_if_nan(rec.get("correctness_b"))
    failed = "b" if b == "fail" else "a" if a == "fail" else None
    why = none_if_nan(rec.get(f"correctness_reason_{failed}")) if failed else None
    return {"correctness_baseline": a, "correctness_candidate": b, "correctness_why": why or ""}


def _keyed(points: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    measured = ("output_throughput", "accept_length", "tpot_mean_ms", "correctness", "correctness_reason")
    frame = points.reindex(columns=[*keys, "point_id", "status", "fingerprint", *measured]).copy()
    # One string key: NULL-safe (baseline points have NULL steps) and blind to int-vs-float columns.
    frame["_key"] = ["|".join(key_part(v) for v in row) for row in frame[keys].itertuples(index=False)]
    return frame


def _sample_lists(samples: pd.DataFrame, metric: str) -> dict[int, list[float]]:
    if samples.empty or metric not in samples:
        return {}
    ok = samples[samples["status"] != "failed"].dropna(subset=[metric])
    return {int(pid): grp[metric].astype(float).tolist() for pid, grp in ok.groupby("point_id")}


def _why(rec: Mapping[str, Any], verdict: str) -> str:
    if verdict not in ("regression", "improvement"):
        return ""
    ta, tb = none_if_nan(rec.get("output_throughput_a")), none_if_nan(rec.get("output_throughput_b"))
    if not ta or not tb:
        return ""
    fa, fb = (
        ThroughputFactors(
            float(t), none_if_nan(rec.get(f"accept_length_{s}")), none_if_nan(rec.get(f"tpot_mean_ms_{s}"))
        )
        for t, s in ((ta, "a"), (tb, "b"))
    )
    return attribute(fa, fb).summary.split(": ", 1)[-1]


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    counts = table["verdict"].value_counts().to_dict() if not table.empty else {}
    return {v: int(counts.get(v, 0)) for v in VERDICT_ORDER}


def one_sided(table: pd.DataFrame) -> pd.Series:
    """Rows whose configuration one run lacks."""
    return table["point_baseline"].isna() | table["point_candidate"].isna()


def center_text(table: pd.DataFrame) -> str:
    """What the Baseline / Candidate columns hold (the values Δ is computed on), for headers."""
    paired = table[~one_sided(table)] if not table.empty else table
    centers = sorted(set(paired["center"].dropna()))
    return " / ".join(centers) if centers else "median"


def comparability_key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """Runs compare on one model, GPU class and kind of numbers (a stand-in never pairs with a real run)."""
    return (
        str(row.get("model") or ""),
        short_gpu(row.get("gpu_name")),
        run_tag(row.get("simulated"), row.get("trigger")) or "measured",
    )


def comparable_pair(
    runs: pd.DataFrame, series_of: Callable[[int], set[str]] | None = None
) -> tuple[int, int] | None:
    """(baseline, candidate): the newest run with an earlier comparable one, and the newest such (same sweep
    first); with `series_of` (a run's series with ok points) they must share one. `runs`: newest first."""
    records = runs.to_dict("records")
    series = functools.cache(series_of or (lambda _: set()))
    for i, cand in enumerate(records):
        key = comparability_key(cand)
        older = [r for r in records[i + 1 :] if comparability_key(r) == key]
        if series_of is not None and older:
            mine = series(int(cand["id"]))
            older = [r for r in older if mine & series(int(r["id"]))]
        if older:
            same_sweep = [r for r in older if r.get("sweep_name") == cand.get("sweep_name")]
            base = (same_sweep or older)[0]
            return int(base["id"]), int(cand["id"])
    return None
