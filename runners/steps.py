"""The order of a run's work: pairs (or chains of links) as units of their own, other configs in batches."""

from collections.abc import Sequence

from bench.pairing import Pair, chain, pair_units
from bench.sweep import ServerConfig, ServerGroup, SweepSpec

Step = Pair | list[ServerGroup]


def launch_batches(groups: list[ServerGroup], max_parallel: int) -> list[list[ServerGroup]]:
    """Groups in launch batches; the first starts alone to fill the JIT caches the rest reuse."""
    if max_parallel <= 1 or len(groups) <= 1:
        return [[g] for g in groups]
    rest = groups[1:]
    return [groups[:1], *(rest[i : i + max_parallel] for i in range(0, len(rest), max_parallel))]


def schedule(groups: Sequence[ServerGroup], spec: SweepSpec) -> list[Step]:
    """Pairs as units of their own; runs of single groups in launch batches."""
    out: list[Step] = []
    singles: list[ServerGroup] = []
    baseline_modes = spec.measure.baseline_pairs
    units = chain(groups, spec.paired, baseline_modes) if baseline_modes else pair_units(groups, spec.paired)
    for unit in units:
        if isinstance(unit, Pair):
            out += launch_batches(singles, spec.server.max_parallel_starts)
            singles = []
            out.append(unit)
        else:
            singles.append(unit)
    out += launch_batches(singles, spec.server.max_parallel_starts)
    return out


def step_points(step: Step) -> int:
    """Points a step measures, a point counted once per link it is in (the progress bar's units)."""
    if isinstance(step, Pair):
        return len(step.a.points) + len(step.b.points)
    return sum(len(g.points) for g in step)


def shared_config(step: Step, following: Step | None) -> ServerConfig | None:
    """The server config a pair shares with the next pair, whose server it may leave up (a chain)."""
    if not isinstance(step, Pair) or not isinstance(following, Pair):
        return None
    for cfg in (step.b.server, step.a.server):
        if following.holds(cfg) is not None:
            return cfg
    return None
