"""Which windows of two points pair, and their ratio with a 95% interval: the rule behind every paired view.

Two windows pair when one invocation of the run (a resumed run may finish a repeat on another server or host)
measured them for the same comparison (samples.link) at the same repeat (link_repeat; before links: `repeat`).
Pairs combine across a run's parts only within a group (bench.pairing.part_groups: same host and GPU, or a
drift check that agreed); a cell spanning groups takes the one with the most pairs (the later on a tie) and
names the parts left out. The interval (bench.stats.ratio) is paired over two or more pairs, else Welch on the
logs of the same repeats' `ok` windows; a run that did not interleave compares every `ok` window unpaired.
"""

import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from analysis.plain import cast_or_none, missing
from bench.pairing import PartRecord, part_groups, part_of
from bench.stats.ratio import RatioInterval, half_width, paired_ratio, pairs_for, unpaired_ratio, verdict
from db import queries

# How a cell's sides took turns, as its windows stored it (samples.link_mode), in the views' words.
TURNS = {"abba": "interleaved", "blocks": "blocks"}
TARGET = 0.05
SAMPLE_METRICS = ("output_throughput", "tpot_mean_ms")


@dataclass(frozen=True)
class Comparison:
    """`b` over `a` in one metric of one cell: the interval, the pairs it needs for +-target, how the sides
    took turns (`interleaved`, `blocks`, both, None: not recorded), the parts it uses and those left out."""

    interval: RatioInterval | None
    pairs_for_target: int | None
    turns: str | None
    parts: tuple[int, ...]
    left_out: tuple[int, ...]


def _column(rows: pd.DataFrame, name: str) -> pd.Series:
    return rows[name] if name in rows else pd.Series([None] * len(rows), index=rows.index, dtype=object)


def _keyed(rows: pd.DataFrame, link: str | None) -> pd.DataFrame:
    """The rows of one link (or none) with their pair key (link_repeat, else `repeat`) and invocation."""
    links = _column(rows, "link")
    if link is not None:
        rows = rows[links.isna() | (links == link)]
    key = [
        int(r) if missing(lr) else int(lr)
        for r, lr in zip(rows["repeat"], _column(rows, "link_repeat"), strict=True)
    ]
    invocation = [cast_or_none(i, int) for i in _column(rows, "invocation")]
    return rows.assign(pair_key=key, pair_invocation=invocation)


def shared_link(a: pd.DataFrame, b: pd.DataFrame) -> str | None:
    """The comparison both points' windows were measured for (two configs are linked at most once)."""
    common = set(_column(a, "link").dropna()) & set(_column(b, "link").dropna())
    return sorted(common)[0] if common else None


def _turns(rows: pd.DataFrame) -> str | None:
    modes = sorted({TURNS.get(str(m), str(m)) for m in _column(rows, "link_mode").dropna()})
    return " + ".join(modes) if modes else None


def _ok(rows: pd.DataFrame, metric: str) -> dict[Hashable, float]:
    ok = rows[(rows["status"] == "ok") & rows[metric].notna()]
    return {k: float(v) for k, v in zip(ok["pair_key"], ok[metric], strict=True) if float(v) > 0}


def compare(
    a_rows: pd.DataFrame,
    b_rows: pd.DataFrame,
    metric: str,
    parts: Sequence[PartRecord] = (),
    *,
    by_repeat: bool,
    target: float = 0.05,
    confidence: float = 0.95,
) -> Comparison:
    """`b` over `a` in `metric`, from each side's windows (one point's run_samples rows): a shared link pairs
    them, or with `by_repeat` (v1/v2: always measured as a pair) their `repeat` if interleaved."""
    link = shared_link(a_rows, b_rows)
    a, b = _keyed(a_rows, link), _keyed(b_rows, link)
    ordered = bool(_column(a, "order_index").notna().all() and _column(b, "order_index").notna().all())
    interleaved = link is not None or (by_repeat and ordered)
    groups = part_groups(parts)

    def group(invocation: int | None) -> int:
        part = part_of(parts, invocation)
        return 0 if part is None else groups[part]  # 0: a run without recorded parts

    a = a.assign(pair_group=[group(i) for i in a["pair_invocation"]])
    b = b.assign(pair_group=[group(i) for i in b["pair_invocation"]])
    everywhere = {part_of(parts, i) for i in [*a["pair_invocation"], *b["pair_invocation"]]}
    # Pairable: keys both sides hold, measured by one invocation (any status; the `ok` ones count below).
    inv_a = dict(zip(a["pair_key"], a["pair_invocation"], strict=True))
    inv_b = dict(zip(b["pair_key"], b["pair_invocation"], strict=True))
    pairable = {k for k in set(inv_a) & set(inv_b) if inv_a[k] == inv_b[k]} if interleaved else None
    ok_a, ok_b = _ok(a, metric), _ok(b, metric)
    group_of = dict(zip(a["pair_key"], a["pair_group"], strict=True))
    # One group of parts: the one with the most pairs (then the most windows a side, then the later one).
    candidates = set(a["pair_group"]) | set(b["pair_group"])

    def weight(g: int) -> tuple[int, int, int]:
        pairs = sum(1 for k in pairable or () if group_of.get(k) == g and k in ok_a and k in ok_b)
        sides = min(
            sum(1 for x in a[a["pair_group"] == g]["pair_key"] if x in ok_a),
            sum(1 for x in b[b["pair_group"] == g]["pair_key"] if x in ok_b),
        )
        return pairs, sides, g

    chosen = max(candidates, key=weight) if candidates else None
    a, b = a[a["pair_group"] == chosen], b[b["pair_group"] == chosen]
    keys_a, keys_b = set(a["pair_key"]), set(b["pair_key"])
    ok_a = {k: v for k, v in ok_a.items() if k in keys_a}
    ok_b = {k: v for k, v in ok_b.items() if k in keys_b}
    common: list[Hashable] = []
    if pairable is not None:
        pairable = {k for k in pairable if k in keys_a and k in keys_b}
        ok_a = {k: v for k, v in ok_a.items() if k in pairable}
        ok_b = {k: v for k, v in ok_b.items() if k in pairable}
        common = sorted((k for k in pairable if k in ok_a and k in ok_b), key=str)
    interval: RatioInterval | None = None
    if len(common) >= 2:
        interval = paired_ratio([ok_a[k] for k in common], [ok_b[k] for k in common], confidence)
    elif ok_a and ok_b:
        interval = unpaired_ratio(list(ok_a.values()), list(ok_b.values()), confidence)
    needed = (
        pairs_for([ok_a[k] for k in common], [ok_b[k] for k in common], target, confidence)
        if pairable is not None
        else None
    )
    used = sorted(
        {p for p in (part_of(parts, i) for i in [*a["pair_invocation"], *b["pair_invocation"]]) if p}
    )
    left_out = sorted(p for p in everywhere - set(used) if p is not None)
    turns = _turns(pd.concat([a, b])) if link is not None else None
    return Comparison(interval, needed, turns, tuple(used), tuple(left_out))


def parts_text(c: Comparison) -> str | None:
    """`1+2`, or `2 (not 1)` when a part's pairs did not combine; None for a run without parts."""
    if not c.parts:
        return None
    used = "+".join(map(str, c.parts))
    return f"{used} (not {'+'.join(map(str, c.left_out))})" if c.left_out else used


def run_inputs(engine: Engine, run_id: int) -> tuple[pd.DataFrame, pd.DataFrame, list[PartRecord]]:
    """A stored run's points, samples (SAMPLE_METRICS) and parts: what a paired view reads."""
    points = queries.run_points(engine, run_id)
    samples = queries.run_samples(engine, run_id, list(SAMPLE_METRICS))
    return points, samples, part_records(queries.run_parts(engine, [run_id])[run_id])


def cell_of(k: Mapping[str, Any]) -> dict[str, Any]:
    """The cell a paired view's row names, from its point's keys."""
    return {
        "batch_size": int(k["batch_size"]),
        "steps": cast_or_none(k["steps"], int),
        "accept_length": cast_or_none(k["accept_length_pinned"]),
        "topk": cast_or_none(k["topk"], int),
        "workload_key": k["workload_key"],
    }


def medians(rows: pd.DataFrame, side: str, *, by_repeat: bool) -> dict[str, float | None]:
    """`{side}_output_throughput` and `{side}_tpot_ms`: the median of the `ok` windows (one a repeat)."""
    out = {}
    for metric, name in (("output_throughput", "output_throughput"), ("tpot_mean_ms", "tpot_ms")):
        ok = rows[(rows["status"] == "ok") & rows[metric].notna()]
        keyed = [(k, float(v)) for k, v in zip(ok["repeat"], ok[metric], strict=True) if float(v) > 0]
        values = list(dict(keyed).values()) if by_repeat else [v for _, v in keyed]
        out[f"{side}_{name}"] = statistics.median(values) if values else None
    return out


def part_records(parts: Sequence[Mapping[str, Any]]) -> list[PartRecord]:
    """A run's parts as stored (db.queries.run_parts) in the form pairing reads."""
    out = []
    for p in parts:
        check = p.get("check")
        agrees = check.get("agrees") if isinstance(check, dict) else None
        count = int(p.get("gpu_count") or 0)
        gpu = f"{count}x {p.get('gpu_name')}" if count else "no GPU"
        agrees = agrees if isinstance(agrees, bool) else None
        out.append(PartRecord(int(p["part"]), int(p["invocation"]), str(p["host"]), gpu, agrees))
    return out


def ratio_cells(
    a_rows: pd.DataFrame,
    b_rows: pd.DataFrame,
    parts: Sequence[PartRecord],
    *,
    by_repeat: bool,
    target: float,
    confidence: float,
) -> dict[str, Any]:
    """`b` over `a`: ratio, interval, verdict of throughput and (`tpot_`) TPOT (lower is faster), and the
    throughput's n, method, pairs for +-target, pairing and parts."""
    row: dict[str, Any] = {}
    for metric, prefix, higher in (("output_throughput", "", True), ("tpot_mean_ms", "tpot_", False)):
        found = compare(
            a_rows, b_rows, metric, parts, by_repeat=by_repeat, target=target, confidence=confidence
        )
        iv = found.interval
        low, high = (iv.low, iv.high) if iv else (None, None)
        row |= {f"{prefix}ratio": iv.ratio if iv else None, f"{prefix}ci_low": low, f"{prefix}ci_high": high}
        row[f"{prefix}verdict"] = verdict(low, high, higher_is_better=higher)
        if metric == "output_throughput":
            row |= {"n": iv.n if iv else 0, "method": iv.method if iv else None, "parts": parts_text(found)}
            row |= {"pairs_for_5pct": found.pairs_for_target, "pairing": found.turns}
    return row


def wider_than(r: Mapping[str, Any], target: float) -> bool:
    """A paired cell whose interval reaches further than `target` from its ratio."""
    if r.get("method") != "paired" or any(missing(r.get(c)) for c in ("ratio", "ci_low", "ci_high")):
        return False
    width = half_width(float(r["ci_low"]), float(r["ratio"]), float(r["ci_high"]))
    return width is not None and width > target


def cell_name(r: Mapping[str, Any]) -> str:
    """`batch 8 steps 3 accept len 2.5`: a cell as the notes under a paired view's table name it."""
    return (
        f"batch {r['batch_size']}"
        + ("" if missing(r["steps"]) else f" steps {int(r['steps'])}")
        + ("" if missing(r["accept_length"]) else f" accept len {r['accept_length']:g}")
    )


def pairs_needed(r: Mapping[str, Any]) -> str:
    """The pairs a cell's interval needs for +-5% (`pairs_for_5pct`), in words."""
    n = r.get("pairs_for_5pct")
    return "more than 1000" if n is None or missing(n) else f"about {int(n)}"
