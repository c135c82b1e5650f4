"""How long a sweep will take, before it runs: server starts x startup + points x repeats x window.

A rough figure for planning (will it fit in the night, in a CI job's timeout?), with its assumptions
stated next to it. Where the database holds earlier runs of this host that tell (runners/host_history.py:
this sweep's, else the same model's), their measured startup times, window durations and time outside the
windows replace the assumptions. For a run to resume (`--dry-run --resume`), it
counts only what is missing: planned repeats not stored, and the extra ABBA repeats of v1/v2 pairs whose
interval has not reached `measure.ratio_target` yet; a server whose points are complete is not started.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine

from bench.pairing import Pair, pair_units
from bench.sweep import PointPlan, ServerGroup, SweepSpec
from db.engine import session_scope
from runners import store
from runners.pair_target import measured_repeats, narrow_enough, relative_half_width

# Assumptions when no history exists. A large MoE model (DeepSeek-V3 class) loads and captures CUDA graphs
# in minutes; the stand-in starts in its configured startup_s plus a Python process start.
SGLANG_STARTUP_S = 300.0
SIM_PROCESS_START_S = 3.0
# One decode step per output token, i.e. no credit for accepted draft tokens: an upper bound on the window.
SGLANG_STEP_MS = 25.0
SIM_STEP_MS = (
    5.0  # the stand-in's performance model: 2.4-5.8 ms per step at time_scale 1 (synthetic/server/perf.py)
)
POINT_OVERHEAD_S = 1.0  # flush, /server_info, storing the repeat


@dataclass(frozen=True)
class ResumeState:
    """What a run to resume holds: repeats stored per point key, and the v1/v2 point keys whose pair reached
    `measure.ratio_target` (they take no extra repeats)."""

    run_id: int
    stored: dict[str, set[int]]
    pairs_done: frozenset[str] = frozenset()

    def complete(self, spec: SweepSpec, group: ServerGroup) -> bool:
        return not any(self.remaining(spec, p) for p in group.points)

    def remaining(self, spec: SweepSpec, plan: PointPlan) -> int:
        """Repeats still to measure for `plan`, at most: the planned ones not stored, plus (a pair that has
        not met measure.ratio_target) the extension up to max_pair_repeats."""
        have = self.stored.get(plan.key(), set())
        missing = sum(1 for r in range(plan.repeats) if r not in have)
        if not spec.repeats_may_grow(plan) or plan.key() in self.pairs_done:
            return missing
        return missing + max(spec.max_pair_repeats - measured_repeats(plan.repeats, have), 0)


def resume_state(engine: Engine, run_id: int, spec: SweepSpec, groups: list[ServerGroup]) -> ResumeState:
    """The stored repeats of run `run_id` and which of its pairs are narrow enough (the interval the run
    itself would compute: runners.pair_target)."""
    target = spec.measure.ratio_target
    done: set[str] = set()
    with session_scope(engine) as s:
        stored = store.stored_repeats(s, run_id)
        if target is not None:
            for unit in pair_units(groups, spec.paired):
                if not isinstance(unit, Pair):
                    continue
                for pa, pb in zip(unit.a.points, unit.b.points, strict=True):
                    width = relative_half_width(
                        store.ok_values(s, run_id, pa.key()), store.ok_values(s, run_id, pb.key())
                    )
                    if narrow_enough(width, target):
                        done |= {pa.key(), pb.key()}
    return ResumeState(run_id, stored, frozenset(done))


@dataclass
class Estimate:
    total_s: float
    startup_s: float
    measure_s: float
    launches: int
    windows: int
    assumptions: list[str] = field(default_factory=list)


def _step_ms(spec: SweepSpec) -> float:
    if spec.server.backend == "sim":
        return 0.0 if spec.server.sim.instant else SIM_STEP_MS * spec.server.sim.time_scale
    return SGLANG_STEP_MS


def _startup_s(spec: SweepSpec) -> float:
    if spec.server.backend == "external":
        return 0.0
    if spec.server.backend == "sim":
        return spec.server.sim.startup_s * spec.server.sim.time_scale + SIM_PROCESS_START_S
    return SGLANG_STARTUP_S


def estimate(
    spec: SweepSpec,
    groups: list[ServerGroup],
    *,
    past_startup_s: float | None = None,
    past_window_s: dict[int, float] | None = None,
    resume: ResumeState | None = None,
    past_overhead_s: float | None = None,
    measured_where: str = "in this sweep's earlier runs",
) -> Estimate:
    """The sweep's wall time: launches x startup + every repeat's window, warmup and overhead (of what is
    missing when `resume` is given). The past figures are medians measured `measured_where` (runners.
    host_history); `past_overhead_s` is the time per repeat outside its window, warm-up included."""
    past_window_s = past_window_s or {}
    notes: list[str] = []
    if resume is not None:
        left = [g for g in groups if not resume.complete(spec, g)]
        notes.append(
            f"run {resume.run_id} resumed: {len(groups) - len(left)} of {len(groups)} server config(s) "
            "complete, and only missing repeats counted"
        )
        groups = left
    launches = 0 if spec.server.backend == "external" else len(groups)
    if past_startup_s is not None:
        startup = past_startup_s
        notes.append(f"server startup {_seconds(startup)}: median of the launches measured {measured_where}")
    else:
        startup = _startup_s(spec)
        if spec.server.backend == "sglang":
            notes.append(
                f"server startup {startup:.0f} s (model load and CUDA graph capture of a large model)"
            )
        elif spec.server.backend == "sim":
            notes.append(f"server startup {startup:.0f} s (stand-in startup_s x time_scale + process start)")
    # Starts of one batch of `max_parallel_starts` overlap; measuring stays serial.
    start_batches = -(-launches // spec.server.max_parallel_starts) if launches else 0
    startup_total = start_batches * startup
    step_ms = _step_ms(spec)
    measured_from_history = 0
    measure = 0.0
    windows = 0
    for g in groups:
        for p in g.points:
            waves = max(p.num_prompts / p.batch_size, 1.0)
            if p.batch_size in past_window_s:
                window = past_window_s[p.batch_size]
                warmup = window / waves * spec.warmup.waves
                measured_from_history += 1
            else:
                wave_s = p.workload.output_len * step_ms / 1000.0
                warmup = wave_s * spec.warmup.waves
                # The window keeps sending until `measure.min_window_s` has passed (10 s on a GPU).
                window = max(waves * wave_s, spec.min_window_s)
            # measure.ratio_target may grow a pair's points up to max_repeats: count the most it can take.
            repeats = spec.max_pair_repeats if spec.repeats_may_grow(p) else p.repeats
            if resume is not None:
                repeats = resume.remaining(spec, p)
                if not repeats:
                    continue
            if past_overhead_s is not None:  # measured outside the windows, the warm-up in it
                measure += repeats * (window + past_overhead_s)
            else:
                measure += warmup + repeats * (window + POINT_OVERHEAD_S)
            windows += repeats
    if spec.warmup_after_start_s > 0 and launches:
        measure += launches * spec.warmup_after_start_s
        notes.append(
            f"{spec.warmup_after_start_s:g} s of warmup after each server start (warmup.after_start_s)"
        )
    n_points = sum(len(g.points) for g in groups)
    if measured_from_history:
        notes.append(
            f"windows of {measured_from_history}/{n_points} points: median duration measured {measured_where} "
            "at the same batch size"
        )
    if measured_from_history < n_points:
        notes.append(
            f"window = waves x output_len x {step_ms:g} ms per decode step, one token per step (no credit for "
            "accepted drafts, so an upper bound), at least measure.min_window_s "
            f"({spec.min_window_s:g} s); prefill not counted"
        )
    if spec.measure.ratio_target is not None:
        below = (
            f", batch < {spec.measure.ratio_target_min_batch} at {spec.repeats}"
            if spec.measure.ratio_target_min_batch > 1
            else ""
        )
        notes.append(
            f"v1/v2 points at measure.max_repeats ({spec.max_pair_repeats}): the most measure.ratio_target "
            f"(+-{spec.measure.ratio_target:.0%}) can take; a quiet pair stops at {spec.repeats}{below}"
        )
    if past_overhead_s is not None:
        notes.append(
            f"{past_overhead_s:.2f} s per repeat outside the window (warm-up, flush, storing), as measured "
            f"{measured_where}"
        )
    else:
        notes.append(f"{POINT_OVERHEAD_S:g} s per repeat outside the window (flush, /server_info, storing)")
    return Estimate(
        total_s=startup_total + measure,
        startup_s=startup_total,
        measure_s=measure,
        launches=launches,
        windows=windows,
        assumptions=notes,
    )


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"


def human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
