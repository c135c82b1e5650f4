"""Whether two runs compare at all, and if not, the nearest comparison that does.

A Δ means something only between runs of one kind of numbers (a stand-in is not a GPU) sharing a
configuration; otherwise `specbench compare`, `ci` and the Compare page say so.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.compare import comparability_key, one_sided
from analysis.labels import STAND_IN_TAG, SYNTHETIC_TAG, run_tag, short_gpu, short_model

KIND_MEANS = {
    STAND_IN_TAG: "numbers from the stand-in server's performance model with no GPU",
    SYNTHETIC_TAG: "made-up history for load tests",
    "measured": "measured",
}


@dataclass(frozen=True)
class Nearest:
    """A comparison that does mean something: two runs, or the v1/v2 pairs inside one run."""

    baseline: int | None
    candidate: int
    why: str

    def command(self) -> str:
        if self.baseline is None:
            return f"specbench export --run {self.candidate} --view v2-vs-v1"
        return f"specbench compare {self.baseline} {self.candidate}"


@dataclass(frozen=True)
class Refusal:
    """Why runs `a` and `b` do not compare (one sentence), and the nearest comparison that does."""

    reason: str
    nearest: Nearest | None

    def text(self) -> str:
        if self.nearest is None:
            return f"{self.reason}\nNo run in this database compares with either."
        return f"{self.reason}\nNearest meaningful comparison: {self.nearest.command()} ({self.nearest.why})."


def kind(row: Mapping[str, Any]) -> str:
    return run_tag(row.get("simulated"), row.get("trigger")) or "measured"


def refusal(
    run_a: Mapping[str, Any],
    run_b: Mapping[str, Any],
    table: pd.DataFrame,
    runs: pd.DataFrame,
    series_of: Callable[[int], set[str]],
) -> Refusal | None:
    """None when baseline `run_a` and candidate `run_b` compare, else why not and what to compare instead;
    `table`: their `compare_runs`, `runs`: newest first, `series_of(run)`: its series with an ok point."""
    a, b = int(run_a["id"]), int(run_b["id"])
    kinds = kind(run_a), kind(run_b)
    if kinds[0] != kinds[1]:
        reason = (
            f"Run {a} is {_kind_words(run_a)} and run {b} is {_kind_words(run_b)}: a Δ between them "
            "compares two kinds of numbers, not a change."
        )
    elif table.empty or one_sided(table).all():
        reason = (
            f"Runs {a} and {b} share no configuration: run {a} has {_grid(table, 'point_baseline')}, "
            f"run {b} has {_grid(table, 'point_candidate')}; a Δ needs the same server config, batch size and "
            "workload on both sides."
        )
    else:
        return None
    return Refusal(reason, nearest(run_b, run_a, runs, series_of, table))


def nearest(
    run: Mapping[str, Any],
    other: Mapping[str, Any],
    runs: pd.DataFrame,
    series_of: Callable[[int], set[str]],
    table: pd.DataFrame,
) -> Nearest | None:
    """The comparison nearest to `other` vs `run`: `run` against the newest other run of its kind, model and
    GPU class that shares a series with it, else `run`'s own v1/v2 pairs; then the same for `other`."""
    for subject, col in ((run, "point_candidate"), (other, "point_baseline")):
        sid = int(subject["id"])
        mine = series_of(sid)
        key = comparability_key(subject)
        for r in runs.to_dict("records"):
            rid = int(r["id"])
            if rid == sid or comparability_key(r) != key:
                continue
            if shared := mine & series_of(rid):
                base, cand = (rid, sid) if _older(r, subject) else (sid, rid)
                gpu = short_gpu(subject.get("gpu_name"))
                on = f" on {gpu}" if gpu != "none" else ""
                return Nearest(
                    base,
                    cand,
                    f"both {kind(subject)}{on}, {short_model(subject.get('model'))}, "
                    f"{len(shared)} configuration(s) in common",
                )
        modes = set(table.loc[table[col].notna(), "spec_mode"]) if not table.empty else set()
        if {"v1", "v2"} <= modes:
            return Nearest(None, sid, f"run {sid}'s own v2/v1 pairs, with intervals")
    return None


def _older(r: Mapping[str, Any], subject: Mapping[str, Any]) -> bool:
    try:
        return bool(pd.Timestamp(r["started_at"]) <= pd.Timestamp(subject["started_at"]))
    except (KeyError, TypeError, ValueError):
        return int(r["id"]) < int(subject["id"])


def _kind_words(row: Mapping[str, Any]) -> str:
    k = kind(row)
    gpu = short_gpu(row.get("gpu_name"), row.get("gpu_count"))
    where = f" on {gpu}" if k == "measured" and gpu != "none" else ""
    return f"{k}, {KIND_MEANS[k]}," if k != "measured" else f"measured{where}"


def _grid(table: pd.DataFrame, side: str) -> str:
    """What one run measured, in a few words: `8 points (NEXTN s3 v1, NEXTN s3 v2; bs 1, 8, 32, 64)`."""
    rows = table[table[side].notna()] if not table.empty else table
    if rows.empty:
        return "no point"
    heads = sorted({str(c).split(" · ")[0] for c in rows["config"]})
    shown = ", ".join(heads[:3]) + (f" and {len(heads) - 3} more" if len(heads) > 3 else "")
    sizes = ", ".join(str(int(x)) for x in sorted(set(rows["batch_size"])))
    loads = sorted(set(rows["workload"]))
    return f"{len(rows)} point(s) ({shown}; bs {sizes}; {', '.join(loads[:2])})"
