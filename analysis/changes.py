"""Change points of series (E-divisive means), with the throughput attribution and stored triage state."""

import itertools
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from analysis import md
from analysis.labels import MEASURED, kinds_text, run_kind
from analysis.stats.attribution import ThroughputFactors, attribute
from analysis.stats.changepoint import ChangePointParams, detect_change_points
from bench.catalog import higher_is_better

CHANGE_COLUMNS: tuple[str, ...] = (
    *("fingerprint", "metric", "index", "run_id", "point_id", "started_at", "sglang_version"),
    *("sglang_commit", "prev_run_id", "prev_version", "prev_commit", "mean_before", "mean_after"),
    *("rel_change", "magnitude", "pvalue", "n_before", "n_after", "direction", "why"),
    "kind",  # of the runs whose points make the means before and after (analysis.labels.kinds_text)
)


def change_points(series: pd.DataFrame, metric: str, params: ChangePointParams | None = None) -> pd.DataFrame:
    """Change points of one series (rows in time order: `db.queries.series_values` with its run axes)."""
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
    kinds = _kinds(frame)
    out = []
    for cp in found:
        at, prev = frame.iloc[cp.index], frame.iloc[cp.index - 1]
        better = cp.rel_change > 0 if hib else cp.rel_change < 0
        out.append(
            {
                **asdict(cp),  # index, the means, p-value and counts (the frame drops the rest)
                "fingerprint": fp,
                "metric": metric,
                "run_id": int(at["run_id"]),
                "point_id": int(at["point_id"]),
                "started_at": at["started_at"],
                "sglang_version": at.get("sglang_version"),
                "sglang_commit": at.get("sglang_commit"),
                "prev_run_id": int(prev["run_id"]),
                "prev_version": prev.get("sglang_version"),
                "prev_commit": prev.get("sglang_commit"),
                "rel_change": cp.rel_change,
                "magnitude": cp.magnitude,
                "direction": "improvement" if better else "regression",
                "why": _segment_why(frame, cp.index, cp.n_before, cp.n_after)
                if metric == "output_throughput"
                else "",
                "kind": kinds_text(kinds[cp.index - cp.n_before : cp.index + cp.n_after]) if kinds else None,
            }
        )
    return out


def _kinds(frame: pd.DataFrame) -> list[str] | None:
    """Each row's kind of number, from its run's `simulated` and `trigger` (None: the frame has neither)."""
    if "simulated" not in frame or "trigger" not in frame:
        return None
    return [run_kind(s, t) for s, t in zip(frame["simulated"], frame["trigger"], strict=True)]


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
    """Change points of every series in `history` (`series_history`). Hundreds of series a call: the frame is
    cleaned and split once, each series a NumPy slice, rows built only where something changed."""
    if history.empty:
        return pd.DataFrame(columns=list(CHANGE_COLUMNS))
    frame = history.dropna(subset=[metric]).sort_values(
        ["fingerprint", "created_at", "point_id"], kind="stable", ignore_index=True
    )
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


def main_cause(why: pd.Series) -> pd.Series:
    """The largest factor of each attribution, without its figure: "acceptance dropped 5.7%, ..." ->
    "acceptance dropped". One cause (a draft-model change, a kernel) moves many series the same way."""
    first = why.fillna("").astype(str).str.split(",").str[0]
    return first.str.replace(r"\s?[+-]?[\d.]+%", "", regex=True).str.strip()


def changes_of_run(changes: pd.DataFrame, run_id: int, cause: str | None = None) -> pd.DataFrame:
    """The changes that start at one run, optionally only those whose main cause is `cause`."""
    keep = changes["run_id"].astype(int) == int(run_id)
    if cause:
        keep &= main_cause(changes["why"]) == cause
    return changes[keep].reset_index(drop=True)


def first_runs_after(changes: pd.DataFrame) -> list[str]:
    """Per change, the first run after it as `#ID · VERSION@COMMIT` (plain text; the tables escape it)."""
    return [
        f"#{r} · {v or '?'}@{str(c or '')[:7]}"
        for r, v, c in zip(
            changes["run_id"], changes["sglang_version"], changes["sglang_commit"], strict=True
        )
    ]


def summarize_by_run(changes: pd.DataFrame) -> list[str]:
    """One Markdown line per run where changes start, busiest first: series, typical Δ, main cause."""
    lines = []
    groups = sorted(changes.groupby("run_id"), key=lambda g: (-len(g[1]), -int(g[0])))
    for run_id, g in groups:
        first = g.iloc[0]
        commit = str(first.get("sglang_commit") or "")[:7]
        causes = main_cause(g["why"])
        cause = causes[causes != ""].mode()
        directions = g["direction"].value_counts()
        what = " and ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in directions.items())
        kind = kinds_text(
            k for v in g.get("kind", pd.Series(dtype=object)).dropna() for k in str(v).split("+")
        )
        tag = "" if kind == MEASURED else f"{kind} numbers, "
        lines.append(  # Markdown: the stored version and cause are escaped (analysis.md)
            f"**Run #{int(run_id)}** ({tag}{md.text(first.get('sglang_version') or '?')}@{md.text(commit)}): {what} "
            f"across {g['fingerprint'].nunique()} series, median {g['rel_change'].median() * 100:+.1f}%"
            + (f", mostly *{md.text(cause.iloc[0])}*" if len(cause) else "")
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
