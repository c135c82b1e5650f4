"""Speculative cycles in an SGLang trace and their figures: wall time, GPU busy and idle, time per phase
(docs/reference/profiles.md). A cycle runs from one `step[TARGET_VERIFY]` to the next; figures come from the
`cycles - 1` complete ones. Tracks: GPU annotations, else CPU ones, else (GPU-only trace) `graph`, where the
verify is the CUDA graph replayed right before the tree verification kernel (VERIFY_KERNEL), not the largest
(the draft graph can be larger), `draft` holds all other kernel time and batch sizes are 0. GPU busy time is
the union of kernel intervals (copies run on copy engines: not counted)."""

import bisect
import functools
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bench.profile.collectives import collective_kind, short_name
from bench.profile.trace import Span, Step, TraceEvents, extract

# SGLang ForwardMode name -> phase of the speculative cycle.
PHASE_OF_MODE = {
    "TARGET_VERIFY": "target_verify",
    "DRAFT_EXTEND_V2": "draft_extend",
    "DRAFT_EXTEND": "draft_extend",
    "DECODE": "draft",  # a draft forward that goes through ModelRunner.forward (no draft CUDA graph)
    "EXTEND": "prefill",
    "MIXED": "prefill",
    "SPLIT_PREFILL": "prefill",
}
PHASES = ("target_verify", "draft", "draft_extend")
DEFAULT_DISTORTION_THRESHOLD = 1.2
# A profiled cycle under half the unprofiled one cannot be the profiler's doing: the cycles were cut wrong.
IMPLAUSIBLE_DISTORTION = 0.5
# The kernel checking drafts against the target's logits (greedy or sampling).
VERIFY_KERNEL = re.compile(r"verify_?tree|tree_?speculative_?sampling", re.IGNORECASE)


@functools.lru_cache(maxsize=8192)
def _is_verify_kernel(name: str) -> bool:
    """Cached for the reason collectives.collective_kind is: few distinct, very long names."""
    return VERIFY_KERNEL.search(name) is not None


# Trace times are us since an epoch: a double resolves ~0.25 us, so adjacent kernels may overlap a little.
TIMESTAMP_RESOLUTION_US = 0.5


@dataclass
class Cycle:
    index: int
    start_ms: float
    wall_ms: float
    batch_size: int
    # None without kernels in the trace.
    gpu_busy_ms: float | None = None
    gpu_busy_fraction: float | None = None
    gpu_idle_ms: float | None = None
    largest_idle_gap_ms: float | None = None
    gpu_phase_ms: dict[str, float] = field(default_factory=dict)
    cpu_phase_ms: dict[str, float] = field(default_factory=dict)
    has_prefill: bool = False
    # Kernel time of each tensor-parallel collective in the cycle (bench.profile.collectives); {} at TP 1.
    collective_ms: dict[str, float] = field(default_factory=dict)
    collective_kernels: dict[str, int] = field(default_factory=dict)


def stat(values: list[float]) -> dict[str, float] | None:
    """Median with spread (quartiles and range); None for no values."""
    if not values:
        return None
    a = np.asarray(values, dtype=float)
    p25, med, p75 = np.percentile(a, [25, 50, 75])
    return {
        "median": float(med),
        "p25": float(p25),
        "p75": float(p75),
        "min": float(a.min()),
        "max": float(a.max()),
        "n": len(values),
    }


def union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merged, sorted intervals."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def clip(spans: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(a, lo), min(b, hi)) for a, b in spans if b > lo and a < hi]


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)


def find_cycles(ev: TraceEvents) -> tuple[list[Cycle], str, int]:
    """Complete cycles, the track that cut them, and the number of verify steps found."""
    if any(s.mode == "TARGET_VERIFY" for s in ev.gpu_steps):
        steps, track = ev.gpu_steps, "gpu"
    elif any(s.mode == "TARGET_VERIFY" for s in ev.cpu_steps):
        steps, track = ev.cpu_steps, "cpu"
    else:
        steps, track = graph_verify_steps(ev.kernels), "graph"
    verifies = [s for s in steps if s.mode == "TARGET_VERIFY"]
    merged = union([(k.start, k.end) for k in ev.kernels])
    comm, comm_starts = _collective_spans(ev.kernels)
    cpu_cycles = _cpu_phases(ev) if ev.cpu_recorded else []
    cycles: list[Cycle] = []
    for i in range(len(verifies) - 1):
        lo, hi = verifies[i].start, verifies[i + 1].start
        inside = [s for s in steps if lo <= s.start < hi]
        c = Cycle(
            index=i,
            start_ms=lo / 1000.0,
            wall_ms=(hi - lo) / 1000.0,
            batch_size=verifies[i].batch_size,
            has_prefill=any(PHASE_OF_MODE.get(s.mode) == "prefill" for s in inside),
        )
        if merged:
            busy = clip(merged, lo, hi)
            busy_us = _length(busy)
            c.gpu_busy_ms = busy_us / 1000.0
            c.gpu_busy_fraction = busy_us / (hi - lo) if hi > lo else None
            c.gpu_idle_ms = (hi - lo - busy_us) / 1000.0
            edges = [lo, *(x for ab in busy for x in ab), hi]
            gaps = (edges[i + 1] - edges[i] for i in range(0, len(edges) - 1, 2))
            c.largest_idle_gap_ms = max(gaps, default=hi - lo) / 1000.0
            c.gpu_phase_ms = _gpu_phases(busy, inside, lo, hi)
            c.collective_ms = {kind: _length(clip(s, lo, hi)) / 1000.0 for kind, s in comm.items()}
            c.collective_kernels = {kind: sum(lo <= t < hi for t in ts) for kind, ts in comm_starts.items()}
        if i < len(cpu_cycles):
            c.cpu_phase_ms = cpu_cycles[i]
        cycles.append(c)
    return cycles, track, len(verifies)


def _collective_spans(
    kernels: list[Span],
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, list[float]]]:
    """Merged intervals and start times of the collective kernels of each kind found (none at TP 1)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for k in kernels:
        if (kind := collective_kind(k.name)) is not None:
            spans.setdefault(kind, []).append((k.start, k.end))
    return {kind: union(s) for kind, s in spans.items()}, {
        kind: [a for a, _ in s] for kind, s in spans.items()
    }


def collectives_summary(kernels: list[Span], clean: list[Cycle]) -> dict[str, dict[str, Any]]:
    """Per collective kind: time per cycle (union of its kernels inside the cycle), share of the cycle's wall
    time, kernels per cycle, kernels in the trace, and its most frequent names with counts."""
    out: dict[str, dict[str, Any]] = {}
    names: dict[str, Counter[str]] = defaultdict(Counter)
    for k in kernels:
        if (kind := collective_kind(k.name)) is not None:
            names[kind][short_name(k.name)] += 1
    timed = [c for c in clean if c.wall_ms > 0]
    for kind, counts in names.items():
        out[kind] = {
            "ms_per_cycle": stat([c.collective_ms.get(kind, 0.0) for c in timed]),
            "share_of_cycle": stat([c.collective_ms.get(kind, 0.0) / c.wall_ms for c in timed]),
            "kernels_per_cycle": stat([float(c.collective_kernels.get(kind, 0)) for c in timed]),
            "kernels": sum(counts.values()),
            "kernel_names": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]),
        }
    return out


def graph_verify_steps(kernels: list[Span]) -> list[Step]:
    """Verify steps of an annotation-less trace: the replays of the target-verify CUDA graph (module doc)."""
    groups: dict[int, list[Span]] = {}
    for k in kernels:
        if k.correlation is not None:
            groups.setdefault(k.correlation, []).append(k)
    graphs = {c: g for c, g in groups.items() if len(g) >= 2}  # one CUDA-graph replay per launch
    if not graphs:  # no graph replays: nothing tells a verify apart
        return []
    # A replay: (start, end, the graph's kernel-name sequence, which names the graph across replays).
    replays = sorted((g[0].start, max(k.end for k in g), tuple(k.name for k in g)) for g in graphs.values())
    verify_graphs: set[tuple[str, ...]] = set()
    i = 0
    for k in kernels:  # in start order
        if not _is_verify_kernel(k.name):
            continue
        while i < len(replays) and replays[i][1] <= k.start + TIMESTAMP_RESOLUTION_US:
            i += 1
        if i:  # else the trace starts after that step's verify: nothing to name
            verify_graphs.add(replays[i - 1][2])  # the last replay that ended before the verification
    if not verify_graphs:  # no tree verification kernel: the graph with the most kernels, one graph only
        verify_graphs = {max(replays, key=lambda r: (len(r[2]), -r[0]))[2]}
    return [Step("TARGET_VERIFY", 0, a, b, "graph") for a, b, sig in replays if sig in verify_graphs]


def _gpu_phases(
    busy: list[tuple[float, float]], inside: list[Step], lo: float, hi: float
) -> dict[str, float]:
    """Kernel time under each annotated phase; kernel time under no annotation is the draft."""
    out = dict.fromkeys(PHASES, 0.0)
    annotated = 0.0
    for s in inside:
        phase = PHASE_OF_MODE.get(s.mode, "other")
        t = _length(clip(busy, max(s.start, lo), min(s.end, hi)))
        out[phase] = out.get(phase, 0.0) + t
        annotated += t
    out["draft"] += _length(busy) - annotated
    return {k: v / 1000.0 for k, v in out.items()}


def _cpu_phases(ev: TraceEvents) -> list[dict[str, float]]:
    """Per CPU cycle (verify to verify on the CPU thread): time inside each annotated step, and the rest."""
    verifies = [s for s in ev.cpu_steps if s.mode == "TARGET_VERIFY"]
    out = []
    for i in range(len(verifies) - 1):
        lo, hi = verifies[i].start, verifies[i + 1].start
        row = dict.fromkeys(("target_verify", "draft_extend"), 0.0)
        for s in ev.cpu_steps:
            if lo <= s.start < hi:
                phase = PHASE_OF_MODE.get(s.mode, "other")
                row[phase] = row.get(phase, 0.0) + (min(s.end, hi) - s.start) / 1000.0
        # Scheduling, draft launch and result processing: everything outside the annotated forwards.
        row["outside_steps"] = (hi - lo) / 1000.0 - sum(row.values())
        out.append(row)
    return out


def summarize(trace: dict[str, Any]) -> dict[str, Any]:
    """The figures of one trace as plain JSON-able data (see module doc)."""
    ev = extract(trace)
    cycles, track, n_verify = find_cycles(ev)
    clean = [c for c in cycles if not c.has_prefill] or cycles
    modes = dict(Counter(s.mode for s in (ev.gpu_steps if track == "gpu" else ev.cpu_steps)))
    if track == "graph":
        modes = {"TARGET_VERIFY (CUDA graph)": n_verify}
    phase_names = sorted({p for c in clean for p in c.gpu_phase_ms} | set(PHASES))
    cpu_names = sorted({p for c in clean for p in c.cpu_phase_ms})
    phases = {
        p: {
            "gpu_ms": stat([c.gpu_phase_ms[p] for c in clean if p in c.gpu_phase_ms]),
            "cpu_ms": stat([c.cpu_phase_ms[p] for c in clean if p in c.cpu_phase_ms]),
        }
        for p in [*phase_names, *(p for p in cpu_names if p not in phase_names)]
    }
    batch_sizes = sorted({c.batch_size for c in cycles})
    return {
        "cycles": n_verify,
        "cycles_timed": len(clean),
        "cycles_with_prefill": sum(c.has_prefill for c in cycles),
        "track": track,
        "cpu_recorded": ev.cpu_recorded,
        "batch_sizes": batch_sizes,
        "steps_by_mode": modes,
        "kernels": len(ev.kernels),
        "cycle_ms": stat([c.wall_ms for c in clean]),
        "gpu_busy_fraction": stat([c.gpu_busy_fraction for c in clean if c.gpu_busy_fraction is not None]),
        "gpu_idle_ms_per_cycle": stat([c.gpu_idle_ms for c in clean if c.gpu_idle_ms is not None]),
        "largest_idle_gap_ms": stat(
            [c.largest_idle_gap_ms for c in clean if c.largest_idle_gap_ms is not None]
        ),
        "phases": phases,
        # Tensor-parallel communication (bench.profile.collectives): {} for a one-GPU trace.
        "collectives": collectives_summary(ev.kernels, clean),
        "per_cycle": [asdict(c) for c in cycles],
    }


def distortion(
    profiled_cycle_ms: float | None,
    tpot_ms: float | None,
    accept_length: float | None,
    threshold: float = DEFAULT_DISTORTION_THRESHOLD,
) -> dict[str, Any]:
    """Profiled cycle / (TPOT x `accept_length`); warns above `threshold` and below IMPLAUSIBLE_DISTORTION."""
    out: dict[str, Any] = {
        "profiled_cycle_ms": profiled_cycle_ms,
        "unprofiled_cycle_ms": None,
        "ratio": None,
        "threshold": threshold,
        "warning": None,
    }
    if profiled_cycle_ms is None or not tpot_ms or not accept_length:
        return out
    unprofiled = tpot_ms * accept_length
    ratio = profiled_cycle_ms / unprofiled
    out.update(unprofiled_cycle_ms=unprofiled, ratio=ratio)
    if ratio < IMPLAUSIBLE_DISTORTION:
        out["warning"] = (
            f"the profiled cycle ({profiled_cycle_ms:.2f} ms) is under half the unprofiled one "
            f"({unprofiled:.2f} ms, x{ratio:.2f}): the trace was probably cut into too many cycles; "
            "check `cycles` against the profiled steps"
        )
    elif ratio > threshold:
        out["warning"] = (
            f"profiling distorted the cycle: {profiled_cycle_ms:.2f} ms profiled vs {unprofiled:.2f} ms "
            f"unprofiled (x{ratio:.2f} > x{threshold:.2f}); compare phases, not absolute times"
        )
    return out


def spans_for_cycles(trace: dict[str, Any], first: int = 0, count: int = 3) -> list[dict[str, Any]]:
    """Timeline bars (ms from the first cycle shown) of `count` cycles from `first`: phases and kernels."""
    ev = extract(trace)
    cycles, _, _ = find_cycles(ev)
    if not cycles:
        return []
    shown = cycles[first : first + count]
    lo = shown[0].start_ms * 1000.0
    hi = (shown[-1].start_ms + shown[-1].wall_ms) * 1000.0
    rows: list[dict[str, Any]] = []

    def add(row: str, kind: str, name: str, phase: str, a: float, b: float) -> None:
        if b > lo and a < hi:
            s, e = (max(a, lo) - lo) / 1000.0, (min(b, hi) - lo) / 1000.0
            rows.append({"row": row, "kind": kind, "name": name, "phase": phase, "start_ms": s, "end_ms": e})

    def phase_of(s: Step) -> str:
        return PHASE_OF_MODE.get(s.mode, s.mode.lower())

    gpu_steps = ev.gpu_steps or (graph_verify_steps(ev.kernels) if not ev.cpu_steps else [])
    for s in gpu_steps:
        add("GPU steps", "phase", f"step[{s.mode} bs={s.batch_size}]", phase_of(s), s.start, s.end)
    for s in ev.cpu_steps:
        add("CPU steps", "phase", f"step[{s.mode} bs={s.batch_size}]", phase_of(s), s.start, s.end)
    steps = sorted(gpu_steps or ev.cpu_steps, key=lambda s: s.start)
    starts = [s.start for s in steps]
    for k in ev.kernels:
        if not (k.end > lo and k.start < hi):
            continue  # outside the cycles shown: no bar, so no step to look up (a trace holds thousands)
        # The step that began last at or before the kernel, if it starts inside it; under no step: the draft.
        i = bisect.bisect_right(starts, k.start) - 1
        under = steps[i] if i >= 0 and k.start < steps[i].end else None
        add("GPU kernels", "kernel", k.name, phase_of(under) if under else "draft", k.start, k.end)
    return rows
