"""The 8-GPU validation's sweep (sweeps/h200x8-v3-tp8.yaml) against the 61-layer shard's: the same cells, a model
that is the whole of what the shard is one GPU of, a dry run that launches tp 8 with balanced routing, and the
model gpu_evidence.sh builds from the sweep's model name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from bench.model_config import is_shard_of, model_shape, read_model_config
from bench.sweep import expand, load_sweep
from runners.cli import app
from synthetic.model.presets import preset_config
from tests.paths import REPO_ROOT

TP8 = REPO_ROOT / "sweeps" / "h200x8-v3-tp8.yaml"
SHARD = REPO_ROOT / "sweeps" / "h200-v3shard-61l.yaml"


def _cells(path: Path) -> set[tuple[object, ...]]:
    spec = load_sweep(str(path))
    return {
        (
            p.batch_size,
            p.server.algorithm,
            p.server.steps,
            p.server.draft_tokens,
            p.server.accept_length,
            p.server.spec_mode,
            p.workload.key(),
            p.num_prompts,
        )
        for g in expand(spec)
        for p in g.points
    }


def test_the_tp_sweep_measures_exactly_the_shards_cells() -> None:
    tp8, shard = load_sweep(str(TP8)), load_sweep(str(SHARD))
    assert (tp8.server.tp, shard.server.tp) == (8, 1)
    assert _cells(TP8) == _cells(SHARD) and len(_cells(TP8)) == 20
    assert tp8.repeats == shard.repeats and tp8.measure == shard.measure and tp8.profile == shard.profile
    assert dict(tp8.server.args) == dict(shard.server.args)
    assert tp8.server.load_format == shard.server.load_format == "dummy"
    assert tp8.server.balanced_routing == "auto" and tp8.server.pair_colocate is False


def test_its_model_is_the_whole_of_the_shard() -> None:
    whole = preset_config("deepseek-v3-tp8-shard", tp=1)
    assert whole["num_hidden_layers"] == 61 and whole["num_attention_heads"] == 128
    assert whole["vocab_size"] == 129280 and whole["num_nextn_predict_layers"] == 1
    assert whole["quantization_config"]["weight_block_size"] == [128, 128]
    shard_61 = model_shape(preset_config("deepseek-v3-tp8-shard"))
    assert shard_61 is not None and is_shard_of(shard_61, model_shape(whole) or {}, 8) == []
    shard_40 = model_shape(preset_config("deepseek-v3-tp8-shard", 40))
    assert shard_40 is not None and is_shard_of(shard_40, model_shape(whole) or {}, 8) != []


def test_gpu_evidence_builds_the_whole_model_from_the_sweeps_name(tmp_path: Path) -> None:
    """The script builds the directory the sweep names, from its name (`-tp1`: the whole model); MODEL puts
    a directory of that name under tmp_path, not in the checkout's .models."""
    named = load_sweep(str(TP8)).model
    target = tmp_path / ".models" / Path(named).name
    env = {
        **os.environ,
        "SPECBENCH": f"{sys.executable} -m runners.cli",
        "PYTHON": sys.executable,
        "STEPS": "model",
        "SWEEP": str(TP8),
        "MODEL": str(target),
        "PYTHONPATH": str(REPO_ROOT),
    }
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "gpu_evidence.sh"), str(tmp_path / "work")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--tp 1" in done.stdout
    cfg = read_model_config(target)
    assert cfg == preset_config("deepseek-v3-tp8-shard", tp=1)
    manifest = json.loads((target / "specbench_synth.json").read_text())
    assert manifest["tp"] == 1


def test_dry_run_launches_tp_8_with_balanced_routing(tmp_path: Path) -> None:
    model = tmp_path / "whole"
    assert (
        CliRunner()
        .invoke(app, ["synth-model", str(model), "--preset", "deepseek-v3-tp8-shard", "--tp", "1"])
        .exit_code
        == 0
    )
    sweep = tmp_path / "tp8.yaml"
    sweep.write_text(TP8.read_text().replace("model: .models/deepseek-v3-tp8-shard-tp1", f"model: {model}"))
    res = CliRunner().invoke(app, ["run", str(sweep), "--dry-run"])
    # No eight GPUs (nor SGLang) here: the dry run says so and exits 2, as the run would; the launches print.
    assert res.exit_code == 2 and "would this run here? no" in res.output, res.output
    launches = [line for line in res.output.splitlines() if line.strip().startswith("argv:")]
    assert len(launches) == 5
    assert all("--tp-size 8" in a and "--load-format dummy" in a for a in launches)
    assert res.output.count("SGLANG_SIMULATE_UNIFORM_EXPERTS=1") == 5
