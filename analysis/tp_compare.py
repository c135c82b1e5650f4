"""Shard vs TP-N: does the one-GPU shard predict what the tensor-parallel deployment measures?

Two runs of one grid (paired by analysis.tp_pair), one row per cell both measured: step times, floor
fractions, v2/v1 verdicts, the TP profile's all-reduce time and the cycle-time error without and with it.
Columns and conclusion: docs/reference/shard-vs-tp.md.
"""

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from analysis import md
from analysis.labels import kinds_text
from analysis.pairs import SAMPLE_METRICS
from analysis.plain import cast_or_none, missing
from analysis.profiles import ACTIVITY_PREFERENCE
from analysis.render import Column, Document, columns, interval, md_table, number, signed_pct, with_kind
from analysis.tp_pair import PairRefused, RunSide, check_pair
from analysis.v2_vs_v1 import PAIR_KEYS, v2_vs_v1
from bench.floor import measured_step_ms
from db import profile_queries as pq
from db import queries

TARGET_ERROR = 0.10
MODES = ("baseline", "v1", "v2")
# A point's cell inside a run, the mode included: what a shard point and its TP partner share.
CELL_KEYS: tuple[str, ...] = (*PAIR_KEYS, "mode")
RATIO_SIDES = ("ratio", "ci_low", "ci_high", "verdict", "n", "method")
COLUMNS: tuple[str, ...] = (
    *("batch_size", "steps", "accept_length", "mode", "shard_step_ms", "tp_step_ms", "step_ratio"),
    *("shard_floor_fraction", "tp_floor_fraction", "tp_all_reduce_ms", "tp_all_reduce_share"),
    *("tp_all_reduce_kernels", "tp_profile_cycle_ms", "shard_plus_all_reduce_ms", "cycle_error"),
    "cycle_error_with_all_reduce",
    *(f"shard_{c}" for c in RATIO_SIDES),
    *(f"tp_{c}" for c in RATIO_SIDES),
    *("verdicts_agree", "topk", "draft_tokens", "workload_key"),
)
VIEW = columns(
    COLUMNS,
    ints=("batch_size", "steps", "topk", "draft_tokens", "shard_n", "tp_n"),
    text=("mode", "shard_verdict", "shard_method", "tp_verdict", "tp_method", "workload_key"),
)
# unstable: a repeat's TTFT outlier (a caution), its TPOT and accept length stand; other statuses are listed.
COMPARED_STATUSES = ("ok", "unstable")


@dataclass
class Comparison:
    """One pair's rows, its two runs, the cells not compared (`missing`) and reading cautions (`notes`)."""

    frame: pd.DataFrame
    shard: RunSide
    tp: RunSide
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def conclusion(self) -> dict[str, Any]:
        return conclusion(self.frame)


# ------------------------------------------------------------------------------------------- the rows


def _mode(row: dict[str, Any]) -> str:
    return "baseline" if missing(row.get("algorithm")) else str(row.get("spec_mode"))


def _norm(key: str, v: Any) -> Any:
    """One type per key, so 3 meets 3.0 and None meets NaN across two runs' frames."""
    if missing(v):
        return None
    if key in ("workload_key", "algorithm", "mode"):
        return str(v)
    if key == "accept_length_pinned":
        return round(float(v), 6)
    return int(v)


def _cell(row: dict[str, Any]) -> tuple[Any, ...]:
    values = {**row, "mode": _mode(row)}
    return tuple(_norm(k, values.get(k)) for k in CELL_KEYS)


def _steps(points: pd.DataFrame) -> dict[tuple[Any, ...], dict[str, Any]]:
    """cell -> the point's status, step time (COMPARED_STATUSES only) and floor fraction."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in points.to_dict("records"):
        if _mode(r) not in MODES:
            continue
        accept = r.get("accept_length_weighted")
        accept = r.get("accept_length") if missing(accept) else accept
        speculative = _mode(r) != "baseline"
        step = (
            measured_step_ms(cast_or_none(r.get("tpot_mean_ms")), cast_or_none(accept), speculative)
            if r.get("status") in COMPARED_STATUSES
            else None
        )
        out[_cell(r)] = {
            "status": r.get("status"),
            "step_ms": step,
            "floor_fraction": cast_or_none(r.get("floor_fraction")),
        }
    return out


_RATIO_KEYS = ("workload_key", "topk", "accept_length_pinned", "steps", "batch_size")


def _ratios(points: pd.DataFrame, samples: pd.DataFrame) -> dict[tuple[Any, ...], dict[str, Any]]:
    """_RATIO_KEYS of a cell -> the run's v2/v1 cell (analysis.v2_vs_v1)."""
    out = {}
    for r in v2_vs_v1(points, samples).to_dict("records"):
        key = tuple(_norm(k, r["accept_length" if k == "accept_length_pinned" else k]) for k in _RATIO_KEYS)
        out[key] = {c: r.get(c) for c in RATIO_SIDES}
    return out


def all_reduce_of(summary: dict[str, Any] | None) -> dict[str, Any]:
    """A profile summary's all-reduce medians per cycle (ms, share, kernels) and its cycle_ms. `known`: False
    for a summary from before collectives were recognised (`specbench profile resummarize`); none reads 0."""
    s = summary or {}
    cycle = (s.get("cycle_ms") or {}).get("median")
    if "collectives" not in s:
        return {"known": False, "ms": None, "share": None, "kernels": None, "cycle_ms": cycle}
    ar = (s.get("collectives") or {}).get("all_reduce")
    if cycle is None:  # no whole cycle in the trace: nothing per cycle to read
        return {"known": True, "ms": None, "share": None, "kernels": None, "cycle_ms": None}
    keys = {"ms": "ms_per_cycle", "share": "share_of_cycle", "kernels": "kernels_per_cycle"}
    figures = {k: (ar.get(key) or {}).get("median") if ar else 0.0 for k, key in keys.items()}
    return {"known": True, **figures, "cycle_ms": cycle}


def _profiles(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """cell -> the all-reduce figures of its rank-0 ok profile (GPU-only first, then the latest capture)."""
    best: dict[tuple[Any, ...], tuple[tuple[int, int], dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") != "ok" or r.get("tp_rank") != 0 or r.get("spec_mode") not in ("v1", "v2"):
            continue
        cell = _cell(r)
        rank = (ACTIVITY_PREFERENCE.get(r.get("activities_key") or "", 9), -int(r["id"]))
        if cell not in best or rank < best[cell][0]:
            best[cell] = (rank, {**all_reduce_of(r.get("summary")), "activities": r.get("activities_key")})
    return {cell: figures for cell, (_, figures) in best.items()}


def _describe(cell: tuple[Any, ...]) -> str:
    k = dict(zip(CELL_KEYS, cell, strict=True))
    spec = "" if k["mode"] == "baseline" else f" steps {k['steps']}"
    acc = "" if k["accept_length_pinned"] is None else f" accept len {k['accept_length_pinned']:g}"
    return f"batch {k['batch_size']}{spec}{acc} {k['mode']}"


def _error(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured is None or measured <= 0:
        return None
    return predicted / measured - 1.0


def compare(
    shard_points: pd.DataFrame,
    shard_samples: pd.DataFrame,
    tp_points: pd.DataFrame,
    tp_samples: pd.DataFrame,
    tp_profiles: list[dict[str, Any]],
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The rows (COLUMNS) of every cell both runs measured, a line per cell not compared and per caution.
    Inputs: each run's db.queries.run_points / run_samples, the TP run's db.profile_queries.run_profiles."""
    shard, tp = _steps(shard_points), _steps(tp_points)
    shard_ratio, tp_ratio = _ratios(shard_points, shard_samples), _ratios(tp_points, tp_samples)
    profiles = _profiles(tp_profiles)
    gaps: list[str] = []
    cautions: list[str] = []
    rows: list[dict[str, Any]] = []
    for cell in sorted(set(shard) | set(tp), key=_sort_key):
        a, b = shard.get(cell), tp.get(cell)
        if a is None or b is None:
            gaps.append(f"{_describe(cell)}: only in the {'shard' if b is None else 'TP'} run")
            continue
        bad = [
            f"{side} run: {s['status']}"
            for side, s in (("shard", a), ("TP", b))
            if s["status"] not in COMPARED_STATUSES
        ]
        if bad:
            gaps.append(f"{_describe(cell)}: not compared ({', '.join(bad)})")
            continue
        if unstable := [side for side, s in (("shard", a), ("TP", b)) if s["status"] == "unstable"]:
            cautions.append(
                f"{_describe(cell)}: compared, though the {' and '.join(unstable)} run's point is unstable "
                "(a repeat's p99 TTFT above 10x its median)"
            )
        k = dict(zip(CELL_KEYS, cell, strict=True))
        prof = profiles.get(cell, {})
        ar_ms = prof.get("ms")
        shard_step, tp_step = a["step_ms"], b["step_ms"]
        predicted = shard_step + ar_ms if shard_step is not None and ar_ms is not None else None
        row: dict[str, Any] = {
            "batch_size": k["batch_size"],
            "steps": k["steps"],
            "accept_length": k["accept_length_pinned"],
            "mode": k["mode"],
            "shard_step_ms": shard_step,
            "tp_step_ms": tp_step,
            "step_ratio": tp_step / shard_step if shard_step and tp_step else None,
            "shard_floor_fraction": a["floor_fraction"],
            "tp_floor_fraction": b["floor_fraction"],
            "tp_all_reduce_ms": ar_ms,
            "tp_all_reduce_share": prof.get("share"),
            "tp_all_reduce_kernels": prof.get("kernels"),
            "tp_profile_cycle_ms": prof.get("cycle_ms"),
            "shard_plus_all_reduce_ms": predicted,
            "cycle_error": _error(shard_step, tp_step),
            "cycle_error_with_all_reduce": _error(predicted, tp_step),
            "topk": k["topk"],
            "draft_tokens": k["draft_tokens"],
            "workload_key": k["workload_key"],
        }
        if k["mode"] != "baseline":
            for side, table in (("shard", shard_ratio), ("tp", tp_ratio)):
                r = table.get(tuple(k[c] for c in _RATIO_KEYS)) or {}
                row.update({f"{side}_{c}": r.get(c) for c in RATIO_SIDES})
            sv, tv = row.get("shard_verdict"), row.get("tp_verdict")
            row["verdicts_agree"] = (
                None if sv in (None, "insufficient data") or tv in (None, "insufficient data") else sv == tv
            )
        if prof and not prof.get("known"):
            cautions.append(
                f"{_describe(cell)}: the TP run's profile was summarised before all-reduce kernels were "
                "recognised; `specbench profile resummarize --run ID` redoes it"
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS)), gaps, cautions


def _sort_key(cell: tuple[Any, ...]) -> tuple[Any, ...]:
    k = dict(zip(CELL_KEYS, cell, strict=True))
    return (
        k["workload_key"] or "",
        k["batch_size"],
        -1 if k["steps"] is None else k["steps"],
        -1.0 if k["accept_length_pinned"] is None else k["accept_length_pinned"],
        MODES.index(k["mode"]) if k["mode"] in MODES else 9,
    )


# ------------------------------------------------------------------------------------------- conclusion


def _spec(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["mode"].isin(["v1", "v2"])]


def conclusion(frame: pd.DataFrame, target: float = TARGET_ERROR) -> dict[str, Any]:
    """Per batch size, how the shard's v2/v1 verdicts meet the TP run's (agree, disagree, opposite: faster vs
    slower, undecided: a side without data), `predicts_every_batch`, and the speculative rows' cycle-time
    error without and with the all-reduce time (median and largest |error|, rows within `target`)."""
    spec = _spec(frame)
    cells = spec.drop_duplicates(["batch_size", "steps", "accept_length", "workload_key"])
    by_batch: dict[int, dict[str, int]] = {}
    for r in cells.to_dict("records"):
        b = by_batch.setdefault(
            int(r["batch_size"]), {"cells": 0, "agree": 0, "disagree": 0, "opposite": 0, "undecided": 0}
        )
        b["cells"] += 1
        agree = r.get("verdicts_agree")
        b["agree" if agree is True else "disagree" if agree is False else "undecided"] += 1
        # One run says faster where the other says slower: the shard got the answer wrong, not just unsure.
        b["opposite"] += {r.get("shard_verdict"), r.get("tp_verdict")} == {"faster", "slower"}
    # False as soon as one verdict differs; None while a cell lacks a verdict on either side and none differs.
    if not by_batch or any(b["disagree"] for b in by_batch.values()):
        predicts: bool | None = False if by_batch else None
    else:
        predicts = True if all(b["undecided"] == 0 for b in by_batch.values()) else None

    def errors(col: str) -> dict[str, Any]:
        vals = [float(v) for v in spec[col] if not missing(v)]
        if not vals:
            return {"rows": 0, "median_abs": None, "max_abs": None, "within_target": 0}
        absolute = [abs(v) for v in vals]
        return {
            "rows": len(vals),
            "median_abs": statistics.median(absolute),
            "max_abs": max(absolute),
            "within_target": sum(v <= target for v in absolute),
        }

    with_ar = errors("cycle_error_with_all_reduce")
    return {
        "verdicts_by_batch": by_batch,
        "predicts_every_batch": predicts,
        "cycle_error": errors("cycle_error"),
        "cycle_error_with_all_reduce": with_ar,
        "target": target,
        "within_target": (with_ar["max_abs"] <= target) if with_ar["max_abs"] is not None else None,
    }


def conclusion_lines(c: dict[str, Any], tp: int) -> list[str]:
    """The conclusion in sentences (plain text: numbers and fixed words only)."""
    lines = []
    by_batch = c["verdicts_by_batch"]
    if not by_batch:
        lines.append("No v1/v2 cell was measured by both runs: nothing to say about the v2/v1 verdict.")
    else:
        parts = []
        for batch, b in sorted(by_batch.items()):
            state = (
                "agrees"
                if b["agree"] == b["cells"]
                else f"{b['disagree']} of {b['cells']} disagree ({b['opposite']} opposite)"
                if b["disagree"]
                else f"{b['undecided']} of {b['cells']} without a verdict on both sides"
            )
            parts.append(f"batch {batch}: {state}")
        head = {
            True: f"The shard predicts the TP-{tp} v2/v1 verdict at every batch size",
            False: f"The shard does not predict the TP-{tp} v2/v1 verdict at every batch size",
            None: f"Whether the shard predicts the TP-{tp} v2/v1 verdict is open",
        }[c["predicts_every_batch"]]
        lines.append(f"{head} ({'; '.join(parts)}).")
    raw, ar = c["cycle_error"], c["cycle_error_with_all_reduce"]
    if raw["rows"]:
        lines.append(
            f"Cycle time, shard vs TP-{tp} without the all-reduces: median |error| {raw['median_abs']:.1%}, "
            f"largest {raw['max_abs']:.1%} over {raw['rows']} speculative points."
        )
    if ar["rows"]:
        verdict = "within" if c["within_target"] else "not within"
        lines.append(
            f"With the all-reduce time of the TP-{tp} profile added to the shard's cycle: median |error| "
            f"{ar['median_abs']:.1%}, largest {ar['max_abs']:.1%} ({ar['within_target']} of {ar['rows']} "
            f"profiled points within {c['target']:.0%}): {verdict} the {c['target']:.0%} aim."
        )
    else:
        lines.append(
            f"No TP-{tp} profile with all-reduce figures matches a compared point: the error with the all-reduce "
            "time needs the TP run's profiles (sweep `profile:`)."
        )
    return lines


# ------------------------------------------------------------------------------------------- loading


def load(engine: Engine, shard_run: int, tp_run: int, confidence: float = 0.95) -> Comparison:
    """Two stored runs compared; PairRefused (saying why) unless a shard and its TP share a cell."""
    shard = RunSide.from_facts(queries.run_model_facts(engine, shard_run))
    tp = RunSide.from_facts(queries.run_model_facts(engine, tp_run))
    notes = check_pair(shard, tp)
    frame, gaps, cautions = compare(
        queries.run_points(engine, shard_run),
        queries.run_samples(engine, shard_run, list(SAMPLE_METRICS)),
        queries.run_points(engine, tp_run),
        queries.run_samples(engine, tp_run, list(SAMPLE_METRICS)),
        pq.run_profiles(engine, tp_run),
    )
    if frame.empty:
        listed = "\n".join(f"- {g}" for g in gaps[:40]) or "- neither run has a measured point"
        more = f"\n- ... and {len(gaps) - 40} more" if len(gaps) > 40 else ""
        raise PairRefused(
            f"run #{shard.run_id} and run #{tp.run_id} share no measured cell (same batch size, steps, accept "
            f"length, workload and mode, ok in both):\n{listed}{more}"
        )
    notes += cautions
    if frame["tp_all_reduce_share"].isna().all():
        notes.append(
            f"run #{tp.run_id} has no profile with all-reduce figures for the compared points: the all-reduce "
            "share and the error with it stay empty (profile the TP run: sweep `profile:`, GPU-only)"
        )
    return Comparison(frame, shard, tp, gaps, notes)


# ------------------------------------------------------------------------------------------- formats


def meta(c: Comparison) -> dict[str, Any]:
    """The JSON header: both runs, the conclusion, the cells not compared, the notes."""

    def side(r: RunSide) -> dict[str, Any]:
        return {
            "run_id": r.run_id,
            "sweep": r.sweep,
            "tp": r.tp,
            "gpus": r.gpus,
            "gpu": r.gpu_name,
            "sglang_version": r.sglang_version,
            "simulated": r.simulated,
            "kind": r.kind,
            "model_synth": r.synth,
            "layers": (r.shape or {}).get("num_hidden_layers"),
        }

    return {
        "view": "shard-vs-tp",
        "shard": side(c.shard),
        "tp": side(c.tp),
        "conclusion": c.conclusion,
        "missing": c.missing,
        "notes": c.notes,
    }


def document(c: Comparison) -> Document:
    doc = Document(c.frame, VIEW, lambda: to_markdown(c), head=meta(c))
    return with_kind(doc, kinds_text((c.shard.kind, c.tp.kind)))


def _ratio_cell(r: Mapping[str, Any], side: str) -> str:
    ratio, low, high = r.get(f"{side}_ratio"), r.get(f"{side}_ci_low"), r.get(f"{side}_ci_high")
    if missing(ratio):
        return "–"
    return f"{ratio:.3f}" + ("" if missing(low) or missing(high) else f" {interval(low, high)}")


def _agree(v: Any) -> str:
    return "–" if missing(v) else ("yes" if v else "**no**")


_CELL = (
    Column("batch_size", "batch", "d"),
    Column("steps", "steps", "d"),
    Column("accept_length", "accept len", "g"),
)


def _verdict_columns(tp: int) -> list[Column]:
    def side(name: str, head: str) -> list[Column]:
        return [
            Column(f"{name}_ratio", f"{head} v2/v1 [95% CI]", text=True, show=lambda r: _ratio_cell(r, name)),
            Column(f"{name}_verdict", f"{head} verdict", text=True),
        ]

    agree = Column("verdicts_agree", "agree", text=True, show=lambda r: _agree(r.get("verdicts_agree")))
    return [*_CELL, *side("shard", "shard"), *side("tp", f"TP-{tp}"), agree]


def _step_columns(tp: int) -> list[Column]:
    floors = Column(
        "floor",
        "floor frac shard / TP",
        text=True,
        show=lambda r: (
            f"{number(r['shard_floor_fraction'], '.2f')} / {number(r['tp_floor_fraction'], '.2f')}"
        ),
    )
    return [
        *_CELL,
        Column("mode", "mode", text=True),
        Column("shard_step_ms", "shard step ms", ".3f"),
        Column("tp_step_ms", f"TP-{tp} step ms", ".3f"),
        Column("step_ratio", "TP / shard", ".3f"),
        floors,
        Column("tp_all_reduce_share", "all-reduce share (TP)", ".1%"),
        Column("tp_all_reduce_ms", "all-reduce ms/cycle", ".3f"),
        Column("shard_plus_all_reduce_ms", "shard + all-reduce ms", ".3f"),
        Column("cycle_error", "error", show=lambda r: signed_pct(r["cycle_error"])),
        Column(
            "cycle_error_with_all_reduce",
            "error with all-reduce",
            show=lambda r: signed_pct(r["cycle_error_with_all_reduce"]),
        ),
    ]


def to_markdown(c: Comparison) -> str:
    """Two tables (the v2/v1 verdicts per cell; the step times per point) and the conclusion in sentences."""
    tp = c.tp.tp
    cells = _spec(c.frame).drop_duplicates(["batch_size", "steps", "accept_length", "workload_key"])
    lines = [
        f"**Shard vs TP-{tp}: {md.text(c.shard.describe())} against {md.text(c.tp.describe())}**",
        "",
        *conclusion_lines(c.conclusion, tp),
        "",
        *md_table(cells.to_dict("records"), _verdict_columns(tp)),
    ]
    if cells.empty:
        lines.append("| – | – | – | – | – | – | – | no v1/v2 cell in both runs |")
    lines += ["", *md_table(c.frame.to_dict("records"), _step_columns(tp))]
    lines += [
        "",
        "Step: TPOT × tokens per verify for a speculative point, TPOT for the baseline (unprofiled windows). "
        f"All-reduce: kernel time per speculative cycle in the TP-{tp} profile of the point (rank 0; "
        "bench.profile.collectives names the kernels), and its share of the profiled cycle; baseline points are "
        "not profiled. Error: shard step (+ that all-reduce time) over the TP step, minus 1. v2/v1: output "
        "throughput, 95 % intervals on log ratios, paired by repeat where the run interleaved v1 and v2.",
    ]
    if c.missing:
        lines += ["", "Not compared:"] + [f"- {md.text(g)}" for g in c.missing]
    if c.notes:
        lines += ["", "Notes:"] + [f"- {md.text(n)}" for n in c.notes]
    return "\n".join(lines) + "\n"
