"""The sweep for the verdict on the 40-layer shard (sweeps/hopper-v3shard-40l-verdict.yaml, issue 34): every cell
of the question, steps 3 measured first, speculation paired with the baseline like v2/v1, and a dry run that says
how the run splits into parts of a lent GPU's time, on a GPU that holds a pair and on one that holds one server."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from bench.pairing import Pair
from bench.sweep import expand, load_sweep
from runners import estimate
from runners.cli import app
from runners.steps import schedule
from tests.paths import REPO_ROOT

VERDICT = REPO_ROOT / "sweeps" / "hopper-v3shard-40l-verdict.yaml"
SHARD_RUN = REPO_ROOT / "examples" / "h100-v3shard-40l-steps3" / "shard.db"


def test_the_sweep_holds_every_cell_of_the_question() -> None:
    spec = load_sweep(str(VERDICT))
    assert spec.model == ".models/deepseek-v3-tp8-shard-40l" and spec.server.load_format == "dummy"
    cells = {
        (p.server.spec_mode, p.server.steps, p.server.accept_length, p.batch_size)
        for g in expand(spec)
        for p in g.points
    }
    modes = {(None, None, None), ("v1", 1, 1.8), ("v2", 1, 1.8), ("v1", 3, 2.5), ("v2", 3, 2.5)}
    assert cells == {(*m, b) for m in modes for b in (1, 8, 32, 64)}
    assert (
        spec.repeats >= 3 and spec.measure.ratio_target == 0.05 and spec.measure.ratio_target_min_batch == 8
    )
    assert spec.measure.baseline_pairs == ["v1", "v2"] and spec.paired
    assert spec.profile is not None and spec.profile.at == [8, 64] and spec.profile.activities == ["GPU"]


def test_steps_3_is_measured_first_one_server_swapped_per_step() -> None:
    spec = load_sweep(str(VERDICT))
    steps = schedule(expand(spec), spec)
    assert all(isinstance(s, Pair) for s in steps) and len(steps) == 6
    pairs = [s for s in steps if isinstance(s, Pair)]
    assert [s.a.server.steps or s.b.server.steps for s in pairs] == [3, 3, 3, 1, 1, 1]
    # 7 starts side by side (the baseline three times), 19 in blocks (four per pair, one carried over)
    assert estimate.chain_starts(steps) == 7 and estimate.chain_starts(steps, blocks=True) == 19
    assert estimate.estimate(spec, expand(spec)).launches == 7


def test_the_dry_run_splits_the_run_into_parts_of_a_lent_gpu(tmp_path: Path) -> None:
    """With the H100 shard run's measured starts and windows (the model's earlier run), as a GPU session would
    plan it after importing that example."""
    db = tmp_path / "plan.db"
    imported = CliRunner().invoke(app, ["import", str(SHARD_RUN), "--db", f"sqlite:///{db}"])
    assert imported.exit_code == 0, imported.output
    res = CliRunner().invoke(
        app, ["run", str(VERDICT), "--dry-run", "--db", f"sqlite:///{db}", "--deadline-s", "1200"]
    )
    out = " ".join(res.output.split())
    # The parts are planned whether or not this host could run the sweep; its exit code says which.
    assert res.exit_code == (0 if "would this run here? yes" in out else 2), out
    # The H100 host's figures (this host measured none), named as another host's.
    assert "median of the launches measured on another host or GPU (vm, NVIDIA H100 80GB HBM3;" in out
    assert "in run(s) of the same model #1" in out
    assert "in parts of about 20 min of GPU time (--deadline-s 1200 each" in out
    side, blocks = out.split("both servers of a pair up side by side")[1].split(
        "one server at a time, in blocks"
    )
    assert "7 start(s)" in side and "19 start(s)" in blocks
    for text in (side, blocks):
        parts = text.split("part ")[1:]
        assert 3 <= len(parts) <= 6, parts  # about an hour of GPU time either way
        # the pairs in the order the parts measure them: every steps-3 pair before any steps-1 pair
        named = re.findall(r"(?:baseline|v[12] s(\d))~(?:baseline|v[12] s(\d))", text)
        order = [int(a or b) for a, b in named]
        assert order == sorted(order, reverse=True) and order[0] == 3 and order[-1] == 1, named
        assert parts[0].startswith("1 (about") and "baseline~v1 s3" in parts[0]
