"""The demo's two stand-in sweeps (sweeps/demo-sim.yaml, sweeps/demo-sim-candidate.yaml), cut down so `make demo`
is quick, still hold what every dashboard page draws from them: a grid of batch sizes x steps with v1/v2 pairs
and a no-spec baseline (Sweep), a profiled v1/v2 pair (Profiles), and two runs of one grid that differ only in
the draft acceptance, with enough repeats for an interval (Compare)."""

from __future__ import annotations

from bench.sweep import expand, load_sweep
from tests.paths import REPO_ROOT

DEMO = REPO_ROOT / "sweeps" / "demo-sim.yaml"
CANDIDATE = REPO_ROOT / "sweeps" / "demo-sim-candidate.yaml"


def test_the_demo_grid_fills_the_sweep_and_profiles_pages() -> None:
    spec = load_sweep(str(DEMO))
    assert spec.server.backend == "sim"
    points = [p for g in expand(spec) for p in g.points]
    batches = {p.batch_size for p in points}
    steps = {p.server.steps for p in points if p.server.steps is not None}
    assert len(batches) >= 3 and len(steps) >= 2  # a heatmap of batch size x steps, a line per mode
    assert {p.server.spec_mode for p in points} == {None, "v1", "v2"}  # the baseline and both modes
    assert spec.profile is not None and spec.profile.at is not None
    assert set(spec.profile.at) <= batches  # the profiled pair is a point the grid measures
    assert spec.repeats >= 3  # Compare's intervals come from the repeats


def test_the_candidate_is_the_demo_grid_with_a_lower_acceptance() -> None:
    demo, cand = load_sweep(str(DEMO)), load_sweep(str(CANDIDATE))
    assert cand.server.sim.acceptance_rate < demo.server.sim.acceptance_rate
    keys = {(p.key(), p.repeats) for g in expand(demo) for p in g.points}
    assert {(p.key(), p.repeats) for g in expand(cand) for p in g.points} == keys  # every point compares
    assert cand.server.sim.time_scale == demo.server.sim.time_scale
