"""The synthetic DeepSeek-V3 + MTP checkpoint: layout, determinism, and what target and draft compute."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from safetensors import safe_open
from typer.testing import CliRunner

from synthetic import model as synth
from tests.fixtures.synth_model import cli_app, expected_layout

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first

# torch (imported by the reference model) is imported by the tests that run it, not when every xdist worker
# collects this module: it costs each worker ~1.5 s of CPU.
if TYPE_CHECKING:
    from synthetic.model.reference import ReferenceModel

# Small enough for a CPU test, but with DeepSeek-V3's MLA head geometry that FlashMLA needs.
SMALL: dict[str, Any] = {"hidden": 256, "vocab": 2048, "layers": 2, "experts": 8, "heads": 16}


@pytest.fixture(scope="module")
def agree_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth.build_checkpoint(tmp_path_factory.mktemp("agree"), mode="agree", seed=7, **SMALL)


@pytest.fixture(scope="module")
def random_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth.build_checkpoint(tmp_path_factory.mktemp("random"), mode="random", seed=7, **SMALL)


@pytest.fixture(scope="module")
def agree_model(agree_dir: Path) -> ReferenceModel:
    from synthetic.model.reference import ReferenceModel

    return ReferenceModel.from_dir(agree_dir)


@pytest.fixture(scope="module")
def random_model(random_dir: Path) -> ReferenceModel:
    from synthetic.model.reference import ReferenceModel

    return ReferenceModel.from_dir(random_dir)


@pytest.mark.parametrize("mode_dir", ["agree_dir", "random_dir"])
def test_tensors_match_config(mode_dir: str, request: pytest.FixtureRequest) -> None:
    d: Path = request.getfixturevalue(mode_dir)
    cfg = json.loads((d / "config.json").read_text())
    want = expected_layout(cfg)
    with safe_open(str(d / "model.safetensors"), framework="pt") as f:
        assert f.metadata() == {"format": "pt"}
        got = {k: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for k in f.keys()}  # noqa: SIM118
    assert got == want
    assert (cfg["kv_lora_rank"], cfg["qk_rope_head_dim"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]) == (
        512,
        64,
        128,
        128,
    )
    assert cfg["architectures"] == ["DeepseekV3ForCausalLM"] and cfg["num_nextn_predict_layers"] == 1
    assert json.loads((d / "generation_config.json").read_text()) == {"bos_token_id": 0, "eos_token_id": 1}


def test_default_sizes_match_recipe() -> None:
    layout = synth.tensor_layout(synth.SynthSizes())
    assert len(layout) == 95
    assert sum(t.numel for t in layout) == 108_753_936  # the recipe's "108.8 M"
    want = expected_layout(synth.hf_config(synth.SynthSizes()))
    assert {t.name: t.shape for t in layout} == {k: v[0] for k, v in want.items()}


def test_mtp_layer_is_moe_even_when_all_layers_are_dense() -> None:
    names = {t.name for t in synth.tensor_layout(synth.SynthSizes(hidden=256, layers=1, first_k_dense=1))}
    assert "model.layers.0.mlp.gate_proj.weight" in names
    assert "model.layers.1.mlp.gate.e_score_correction_bias" in names
    assert "model.layers.1.eh_proj.weight" in names


def test_manifest(agree_dir: Path) -> None:
    m = synth.read_manifest(agree_dir)
    assert m["mode"] == "agree" and m["seed"] == 7 and m["sizes"]["hidden"] == 256
    assert m["num_tensors"] == 95
    assert m["sha256"]["model.safetensors"] == synth.build.file_sha256(agree_dir / "model.safetensors")


# ---- determinism ----


def test_same_seed_same_bytes(tmp_path: Path, agree_dir: Path) -> None:
    again = synth.build_checkpoint(tmp_path / "again", mode="agree", seed=7, **SMALL)
    for name in ("model.safetensors", "config.json", "perm.json"):
        assert (again / name).read_bytes() == (agree_dir / name).read_bytes(), name


def test_other_seed_other_weights(tmp_path: Path, agree_dir: Path) -> None:
    other = synth.build_checkpoint(tmp_path / "other", mode="agree", seed=8, **SMALL)
    assert synth.read_manifest(other)["sha256"] != synth.read_manifest(agree_dir)["sha256"]


def test_perm_is_a_permutation_with_eos_fixed(agree_dir: Path) -> None:
    perm = synth.read_perm(agree_dir)
    assert sorted(perm) == list(range(SMALL["vocab"]))
    assert perm[1] == 1  # eos maps to itself, so no other trajectory ever reaches it
    assert sum(perm[i] == i for i in range(len(perm))) < 10


# ---- agree mode: target == draft == perm ----


def test_agree_target_follows_perm(agree_model: ReferenceModel, agree_dir: Path) -> None:
    import torch

    perm = torch.tensor(synth.read_perm(agree_dir))
    ids = torch.randint(2, SMALL["vocab"], (16, 24), generator=torch.Generator().manual_seed(0))
    assert torch.equal(agree_model.target_next(ids), perm[ids[:, -1]])
    # every position, not just the last: the target is a pure function of the current token
    logits, _ = agree_model.target(ids)
    assert torch.equal(logits.argmax(-1), perm[ids])


def test_agree_draft_equals_target(agree_model: ReferenceModel, agree_dir: Path) -> None:
    import torch

    perm = synth.read_perm(agree_dir)
    gen = torch.Generator().manual_seed(1)
    for row in torch.randint(2, SMALL["vocab"], (8, 20), generator=gen).tolist():
        first = int(agree_model.target_next(torch.tensor([row]))[0])
        drafts = agree_model.draft([*row, first], steps=3)
        assert drafts == synth.expected_continuation(perm, first, 3)
        assert drafts[0] == int(agree_model.target_next(torch.tensor([[*row, first]]))[0])


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_agree_speculative_loop_accepts_everything(
    steps: int, agree_model: ReferenceModel, agree_dir: Path
) -> None:
    import torch

    perm = synth.read_perm(agree_dir)
    gen = torch.Generator().manual_seed(steps)
    max_new = 1 + 5 * (steps + 1)  # the prefill token, then five full verify steps
    for row in torch.randint(2, SMALL["vocab"], (4, 16), generator=gen).tolist():
        res = agree_model.speculative_generate(row, steps=steps, max_new_tokens=max_new)
        assert res.accept_lengths == [steps + 1] * 5
        assert res.output_ids == synth.expected_continuation(perm, row[-1], max_new)


def test_agree_with_noise_still_agrees(tmp_path: Path) -> None:
    import torch

    from synthetic.model.reference import ReferenceModel

    d = synth.build_checkpoint(tmp_path / "noisy", mode="agree", seed=3, noise=1e-3, **SMALL)
    model, perm = ReferenceModel.from_dir(d), synth.read_perm(d)
    row = torch.randint(2, SMALL["vocab"], (12,), generator=torch.Generator().manual_seed(5)).tolist()
    res = model.speculative_generate(row, steps=3, max_new_tokens=13)
    assert res.accept_lengths == [4, 4, 4]
    assert res.output_ids == synth.expected_continuation(perm, row[-1], 13)


# ---- random mode: the draft disagrees ----


def test_random_mode_draft_disagrees(random_model: ReferenceModel, random_dir: Path) -> None:
    import torch

    assert not (random_dir / "perm.json").exists()
    gen = torch.Generator().manual_seed(2)
    accepts: list[int] = []
    for row in torch.randint(2, SMALL["vocab"], (4, 16), generator=gen).tolist():
        res = random_model.speculative_generate(row, steps=3, max_new_tokens=12)
        assert len(res.output_ids) == 12 and all(1 <= a <= 4 for a in res.accept_lengths)
        accepts += res.accept_lengths
    assert min(accepts) < 4


# ---- input checks ----


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hidden": 256, "heads": 3}, "divisible by heads"),
        ({"hidden": 200}, "multiple of 64"),
        ({"experts": 1}, "exceeds experts"),
        ({"layers": 0}, "layers must be >= 1"),
        ({"mode": "bogus"}, "mode must be one of"),
        ({"mode": "random", "noise": 0.1}, "only applies to agree"),
        ({"seed": -1}, "seed must be"),
        ({"device": "nonsense"}, "not a torch device"),
    ],
)
def test_bad_sizes_are_refused(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(synth.SynthConfigError, match=message):
        synth.build_checkpoint(tmp_path / "x", **{"vocab": 64, **kwargs})
    assert not (tmp_path / "x").exists()


def test_non_empty_dir_needs_force(tmp_path: Path) -> None:
    d = tmp_path / "ck"
    synth.build_checkpoint(d, hidden=128, vocab=64, heads=2)
    with pytest.raises(synth.OutputDirError, match="not empty"):
        synth.build_checkpoint(d, hidden=128, vocab=64, heads=2)
    synth.build_checkpoint(d, mode="random", hidden=128, vocab=64, heads=2, force=True)
    assert not (d / "perm.json").exists()  # a forced random rebuild drops the stale agree-mode map
    (d / "model-00001-of-00002.safetensors").write_bytes(b"")
    with pytest.raises(synth.OutputDirError, match="did not write"):
        synth.build_checkpoint(d, hidden=128, vocab=64, heads=2, force=True)


# ---- CLI ----


def test_cli_writes_checkpoint(tmp_path: Path) -> None:
    runner = CliRunner()
    d = tmp_path / "cli"
    args = ["synth-model", str(d), "--hidden", "128", "--heads", "2", "--vocab", "64", "--seed", "3"]
    result = runner.invoke(cli_app(), args)
    assert result.exit_code == 0, result.output
    assert "model.safetensors" in result.output and "perm[x]" in result.output
    assert synth.read_manifest(d)["seed"] == 3

    again = runner.invoke(cli_app(), args)
    assert again.exit_code == 2 and "not empty" in again.output
    assert runner.invoke(cli_app(), [*args, "--force", "--mode", "random"]).exit_code == 0
    assert synth.read_manifest(d)["mode"] == "random"


def test_cli_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        cli_app(), ["synth-model", str(tmp_path / "bad"), "--hidden", "256", "--heads", "3"]
    )
    assert result.exit_code == 2 and "divisible by heads" in result.output
    result = runner.invoke(cli_app(), ["synth-model", str(tmp_path / "bad"), "--mode", "nope"])
    assert result.exit_code == 2
