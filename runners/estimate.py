"""How long a sweep will take, before it runs: server starts x startup + points x repeats x window.

A rough planning figure with its assumptions stated; earlier runs' measured startups, windows and overheads
(runners/host_history.py) replace the assumptions. A resume counts only what is missing: unstored repeats and
the extra ABBA repeats of v1/v2 pairs short of `measure.ratio_target`; complete servers are not started.
"""

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from sqlalchemy import Engine

from bench.pairing import Pair, restart_blocks
from bench.sweep import PointPlan, ServerConfig, ServerGroup, SweepSpec
from db.engine import session_scope
from runners import store
from runners.pair_target import in_link, measured_repeats, narrow_enough, relative_half_width
from runners.steps import Step, schedule

# Without history: a DeepSeek-V3 class model loads and captures CUDA graphs in minutes; the stand-in in its
# startup_s plus a Python process start.
SGLANG_STARTUP_S = 300.0
SIM_PROCESS_START_S = 3.0
# One decode step per output token, i.e. no credit for accepted draft tokens: an upper bound on the window.
SGLANG_STEP_MS = 25.0
# The stand-in's performance model: 2.4-5.8 ms per step at time_scale 1 (synthetic/server/perf.py).
SIM_STEP_MS = 5.0
POINT_OVERHEAD_S = 1.0  # flush, /server_info, storing the repeat


@dataclass(frozen=True)
class ResumeState:
    """A run to resume: stored repeats per point key, and the v1/v2 keys whose pair met ratio_target."""

    run_id: int
    stored: dict[str, set[int]]
    pairs_done: frozenset[str] = frozenset()

    def complete(self, spec: SweepSpec, group: ServerGroup) -> bool:
        return not any(self.remaining(spec, p) for p in group.points)

    def remaining(self, spec: SweepSpec, plan: PointPlan) -> int:
        """At most the repeats `plan` still takes: unstored planned ones, plus an unmet pair's extension."""
        have = self.stored.get(plan.key(), set())
        missing = sum(1 for r in range(plan.repeats) if r not in have)
        if not spec.repeats_may_grow(plan) or plan.key() in self.pairs_done:
            return missing
        return missing + max(most_repeats(spec, plan) - measured_repeats(plan.repeats, have), 0)


def most_repeats(spec: SweepSpec, plan: PointPlan) -> int:
    """Planned repeats, or max_pair_repeats per pair it is in where ratio_target may grow it."""
    if not spec.repeats_may_grow(plan):
        return plan.repeats
    return spec.max_pair_repeats * max(plan.repeats // spec.repeats, 1)


def resume_state(engine: Engine, run_id: int, spec: SweepSpec, groups: list[ServerGroup]) -> ResumeState:
    """Run `run_id`'s stored repeats and which pairs are narrow enough (as runners.pair_target says)."""
    target = spec.measure.ratio_target
    done: set[str] = set()
    with session_scope(engine) as s:
        stored = store.stored_repeats(s, run_id)
        if target is not None:
            for unit in schedule(groups, spec):
                if not isinstance(unit, Pair):
                    continue
                for pa, pb in zip(unit.a.points, unit.b.points, strict=True):
                    width = relative_half_width(
                        in_link(store.ok_values(s, run_id, pa.key()), unit.slot_a),
                        in_link(store.ok_values(s, run_id, pb.key()), unit.slot_b),
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


def startup_s(spec: SweepSpec) -> float:
    if spec.server.backend == "external":
        return 0.0
    if spec.server.backend == "sim":
        return spec.server.sim.startup_s * spec.server.sim.time_scale + SIM_PROCESS_START_S
    return SGLANG_STARTUP_S


def point_time(spec: SweepSpec, p: PointPlan, past_window_s: dict[int, float]) -> tuple[float, float]:
    """(window, warmup) seconds: earlier windows at the batch size, else a decode step per output token."""
    waves = max(p.num_prompts / p.batch_size, 1.0)
    if p.batch_size in past_window_s:
        window = past_window_s[p.batch_size]
        return window, window / waves * spec.warmup.waves
    wave_s = p.workload.output_len * _step_ms(spec) / 1000.0
    # The window keeps sending until `measure.min_window_s` has passed (10 s on a GPU).
    return max(waves * wave_s, spec.min_window_s), wave_s * spec.warmup.waves


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
    """Wall time: launches x startup + each repeat's window, warmup and overhead (only what `resume` misses).

    Past figures are medians measured `measured_where`; `past_overhead_s`: per repeat outside its window.
    """
    past_window_s = past_window_s or {}
    notes: list[str] = []
    steps = schedule(groups, spec)
    if spec.measure.baseline_pairs:
        # A chain: each config's points plan repeats x the pairs it is in; a start per server the walk starts.
        groups = planned_groups(steps)
    if resume is not None:
        left = [g for g in groups if not resume.complete(spec, g)]
        notes.append(
            f"run {resume.run_id} resumed: {len(groups) - len(left)} of {len(groups)} server config(s) "
            "complete, and only missing repeats counted"
        )
        groups = left
    launches = 0 if spec.server.backend == "external" else len(groups)
    if spec.measure.baseline_pairs and launches:
        complete = {g.server for g in planned_groups(steps)} - {g.server for g in groups}
        launches = chain_starts(steps, complete)
        notes.append(
            f"{launches} server start(s) for the chain of pairs (measure.baseline_pairs: one server swapped per "
            "step, both of a pair up side by side)"
        )
    if past_startup_s is not None:
        startup = past_startup_s
        shown = f"{startup:.0f}" if startup >= 10 else f"{startup:.1f}"
        notes.append(f"server startup {shown} s: median of the launches measured {measured_where}")
    else:
        startup = startup_s(spec)
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
    measured_from_history = windows = 0
    measure = 0.0
    for g in groups:
        for p in g.points:
            window, warmup = point_time(spec, p, past_window_s)
            measured_from_history += p.batch_size in past_window_s
            # measure.ratio_target may grow a pair's points up to max_repeats: count the most it can take.
            repeats = most_repeats(spec, p)
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


def human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def planned_groups(steps: list[Step]) -> list[ServerGroup]:
    """Each server config of a schedule once, with its points as the schedule plans them (a chain's)."""
    seen: dict[ServerConfig, ServerGroup] = {}
    for step in steps:
        for g in (step.a, step.b) if isinstance(step, Pair) else step:
            seen.setdefault(g.server, g)
    return list(seen.values())


def chain_starts(
    steps: list[Step], complete: AbstractSet[ServerConfig] = frozenset(), *, blocks: bool = False
) -> int:
    """Server starts of the schedule: what each pair (block) finds down; a pair both `complete` none."""
    starts, up = 0, set[ServerConfig]()
    for step in steps:
        if not isinstance(step, Pair):
            starts += len(step)
            up = set()
            continue
        configs = {step.a.server, step.b.server}
        if configs <= complete:
            continue
        if blocks:
            sequence = [step.side(side).server for side, _ in restart_blocks(step.repeats)]
            starts += len(sequence) - (1 if sequence[0] in up else 0)
            up = {sequence[-1]}
        else:
            starts += len(configs - up)
            up = configs
    return starts


# A part after the first starts its servers again and re-measures a window on another host (runners/parts.py).
DEFAULT_PART_S = 1200.0


@dataclass(frozen=True)
class Work:
    """One piece of the run in its order: a server start, or one point's windows in a pair or on its own."""

    seconds: float
    step: str  # what the part list names: the pair (`baseline~v1 s3`) or the config
    batch_size: int | None = None
    starts: int = 0


@dataclass
class PartEstimate:
    """One part of about `part_s`: its time, the steps it finishes or stops in, and what resuming it costs."""

    seconds: float = 0.0
    done: list[str] = field(default_factory=list)
    stops_in: str | None = None
    resume_s: float = 0.0

    def line(self, n: int) -> str:
        parts = [*self.done, *([f"{self.stops_in} (cut inside)"] if self.stops_in else [])]
        cost = f", {human(self.resume_s)} of it to start again" if self.resume_s else ""
        return f"part {n} (about {human(self.seconds)}{cost}): " + ", ".join(parts)


def _config_name(cfg: ServerConfig) -> str:
    return "baseline" if cfg.is_baseline else f"{cfg.spec_mode} s{cfg.steps}"


def step_name(step: Step) -> str:
    if isinstance(step, Pair):
        return f"{_config_name(step.a.server)}~{_config_name(step.b.server)}"
    return ", ".join(_config_name(g.server) for g in step)


def timeline(
    spec: SweepSpec,
    steps: list[Step],
    *,
    startup: float,
    past_window_s: dict[int, float] | None = None,
    blocks: bool = False,
) -> list[Work]:
    """The run as Work in order at the planned repeats; `blocks`: pairs one server at a time."""

    def point(p: PointPlan, repeats: int, name: str) -> Work:
        window, warmup = point_time(spec, p, past_window_s or {})
        return Work(warmup + repeats * (window + POINT_OVERHEAD_S), name, p.batch_size)

    start = Work(startup + spec.warmup_after_start_s, "", starts=1)
    out: list[Work] = []
    up: set[ServerConfig] = set()
    for step in steps:
        name = step_name(step)
        if not isinstance(step, Pair):
            for g in step:
                out += [Work(start.seconds, name, starts=1), *(point(p, p.repeats, name) for p in g.points)]
            up = set()
            continue
        if not blocks:
            out += [Work(start.seconds, name, starts=1)] * len({step.a.server, step.b.server} - up)
            up = {step.a.server, step.b.server}
            for pa, pb in zip(step.a.points, step.b.points, strict=True):
                out += [point(pa, step.repeats, name), point(pb, step.repeats, name)]
            continue
        for side, reps in restart_blocks(step.repeats):
            g = step.side(side)
            if g.server not in up:
                out.append(Work(start.seconds, name, starts=1))
            up = {g.server}
            out += [point(p, len(reps), name) for p in g.points]
    return out


def split(work: list[Work], part_s: float, resume_s: float) -> list[PartEstimate]:
    """`work` in parts of about `part_s`; each after the first pays `resume_s` (restarts, drift check)."""
    parts = [PartEstimate()]
    left = {w.step: sum(1 for x in work if x.step == w.step) for w in work}
    for w in work:
        here = parts[-1]
        if here.seconds >= part_s:
            here = PartEstimate(seconds=resume_s, resume_s=resume_s)
            parts.append(here)
        here.seconds += w.seconds
        left[w.step] -= 1
        if left[w.step] == 0:
            here.done.append(w.step)
            here.stops_in = None
        else:
            here.stops_in = w.step + (f" to batch {w.batch_size}" if w.batch_size else "")
    return parts
