"""The `mirror` checkpoint: attention picks every token, the draft mirrors the target, margins are clear."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from safetensors import safe_open
from typer.testing import CliRunner

from synthetic import model as synth
from synthetic.model import mirror
from tests.fixtures.synth_model import cli_app, expected_layout

# torch (imported by the reference model) is imported by the tests that run it, not when every xdist worker
# collects this module: it costs each worker ~1.5 s of CPU.
if TYPE_CHECKING:
    from synthetic.model.reference import ReferenceModel

# Small for a CPU test (a 2-core box shared with others), but with the MLA head geometry FlashMLA needs.
SMALL: dict[str, Any] = {
    "hidden": 128,
    "vocab": 1024,
    "layers": 2,
    "experts": 4,
    "heads": 4,
    "q_lora_rank": 64,
    "intermediate": 128,
    "moe_intermediate": 64,
}
OUT = 18


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    import torch

    # Tiny matrices: torch's second thread only fights the other processes of a busy box (10x slower).
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def mirror_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth.build_checkpoint(tmp_path_factory.mktemp("mirror"), mode="mirror", seed=11, **SMALL)


@pytest.fixture
def model(mirror_dir: Path) -> ReferenceModel:
    from synthetic.model.reference import ReferenceModel

    return ReferenceModel.from_dir(mirror_dir)  # fresh per test: some tests edit weights


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    import torch

    return torch.randint(2, SMALL["vocab"], (6, 12), generator=torch.Generator().manual_seed(3)).tolist()


def test_layout_and_files(mirror_dir: Path) -> None:
    cfg = json.loads((mirror_dir / "config.json").read_text())
    with safe_open(str(mirror_dir / "model.safetensors"), framework="pt") as f:
        got = {k: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for k in f.keys()}  # noqa: SIM118
    assert got == expected_layout(cfg)  # the layout SGLang + FlashMLA loaded for agree mode
    assert cfg["rope_interleave"] is True  # the head is built for SGLang's DeepSeek rope pairing
    manifest = synth.read_manifest(mirror_dir)
    assert (
        manifest["mode"] == "mirror"
        and manifest["expect"]["greedy_accept_length"] == "speculative_num_steps + 1"
    )
    assert synth.is_synthetic_checkpoint(mirror_dir)
    p_map, q_map = synth.read_mirror_maps(mirror_dir)
    assert sorted(p_map) == sorted(q_map) == list(range(SMALL["vocab"]))
    assert p_map[1] == q_map[1] == 1 and p_map != q_map  # eos fixed; two different maps


def test_same_seed_same_bytes(tmp_path: Path, mirror_dir: Path) -> None:
    again = synth.build_checkpoint(tmp_path / "again", mode="mirror", seed=11, **SMALL)
    for name in ("model.safetensors", "config.json", "mirror_perms.json"):
        assert (again / name).read_bytes() == (mirror_dir / name).read_bytes(), name


def test_tokens_follow_the_previous_token_with_clear_margins(
    model: ReferenceModel, mirror_dir: Path, prompts: list[list[int]]
) -> None:
    from synthetic.model.reference import top2_margin

    _, q_map = synth.read_mirror_maps(mirror_dir)
    outs = model.greedy(prompts, OUT)
    assert outs == [mirror.continuation(q_map, p, OUT) for p in prompts]
    # Near-ties never decide a token: the winner beats the runner-up by a fifth of its logit or more (C = 63 here; 511 at hidden 1024).
    margins = [top2_margin(model, p + o[:k]) for p, o in zip(prompts, outs, strict=True) for k in (0, 7, 15)]
    assert min(margins) > 0.2


@pytest.mark.parametrize("steps", [1, 3])
def test_draft_mirrors_the_target(
    steps: int, model: ReferenceModel, prompts: list[list[int]], mirror_dir: Path
) -> None:
    _, q_map = synth.read_mirror_maps(mirror_dir)
    for p in prompts[:2]:
        res = model.speculative_generate(p, steps=steps, max_new_tokens=1 + 3 * (steps + 1))
        assert res.accept_lengths == [steps + 1] * 3
        assert res.output_ids == mirror.continuation(q_map, p, 1 + 3 * (steps + 1))


def test_zeroing_the_drafts_attention_lowers_acceptance(
    model: ReferenceModel, prompts: list[list[int]]
) -> None:
    before = [model.speculative_generate(p, steps=3, max_new_tokens=13) for p in prompts[:2]]
    model.w[f"model.layers.{model.layers}.self_attn.o_proj.weight"].zero_()
    after = [model.speculative_generate(p, steps=3, max_new_tokens=13) for p in prompts[:2]]
    # The tokens stay the target's (verification), but every draft is now wrong.
    assert [r.output_ids for r in after] == [r.output_ids for r in before]
    mean = lambda rs: sum(sum(r.accept_lengths) for r in rs) / sum(len(r.accept_lengths) for r in rs)  # noqa: E731
    assert mean(before) == 4.0 and mean(after) < 1.5


def test_changing_the_targets_attention_changes_tokens(
    model: ReferenceModel, mirror_dir: Path, prompts: list[list[int]]
) -> None:
    import torch

    p_map, q_map = synth.read_mirror_maps(mirror_dir)
    before = model.greedy(prompts[:3], OUT)
    # Look two positions back instead of one: another rope phase in layer 0's key.
    key = model.w["model.layers.0.self_attn.kv_a_proj_with_mqa.weight"][512:, 0]
    pairs = key.view(-1, 2)
    angle = torch.atan2(pairs[:, 1], pairs[:, 0]) * 2
    radius = pairs.norm(dim=1)
    pairs[:, 0], pairs[:, 1] = radius * angle.cos(), radius * angle.sin()
    shifted = model.greedy(prompts[:3], OUT)
    assert all(a != b for a, b in zip(before, shifted, strict=True))
    # And with no attention output at all, the model is the agree model: next = P[current].
    model.w["model.layers.0.self_attn.o_proj.weight"].zero_()
    silent = model.greedy(prompts[:3], 6)
    for p, out in zip(prompts[:3], silent, strict=True):
        seq = [p[-1], *out]
        assert out == [p_map[t] for t in seq[:-1]]
    assert before[0][:6] == mirror.continuation(q_map, prompts[0], 6)


def test_kernel_peaks_at_the_previous_position() -> None:
    # Unit amplitude: every other distance up to 4096 scores at least ~1.07 below distance 1.
    assert mirror.kernel_gap(10000.0, 4096) > 1.0


def test_sizes_too_small_are_refused(tmp_path: Path) -> None:
    with pytest.raises(synth.SynthConfigError, match="token code"):
        synth.build_checkpoint(tmp_path / "x", mode="mirror", hidden=64, vocab=64, heads=1)
    assert not (tmp_path / "x").exists()


def test_cli_mirror(tmp_path: Path) -> None:
    d = tmp_path / "cli"
    args = ["synth-model", str(d), "--mode", "mirror", "--hidden", "128", "--heads", "4", "--vocab", "256"]
    result = CliRunner().invoke(cli_app(), [*args, "--no-tokenizer"])
    assert result.exit_code == 0, result.output
    assert "next_of_previous" in result.output and (d / "mirror_perms.json").exists()


# ---- what the correctness gate compares a server with ----


def test_reference_outputs_are_the_mirror_continuation(mirror_dir: Path, prompts: list[list[int]]) -> None:
    from synthetic.model.expected import reference_outputs

    out = 10
    ref = reference_outputs(mirror_dir, prompts[:3], out, [1, 3], device="cpu")
    _, q_map = synth.read_mirror_maps(mirror_dir)
    assert ref.tokens == [mirror.continuation(q_map, p, out) for p in prompts[:3]]
    for steps in (1, 3):
        verify_steps = -(
            -(out - 1) // (steps + 1)
        )  # the prefill token, then full steps, the last one cut short
        assert ref.accept_lengths[steps] == [out / verify_steps] * 3


def test_reference_note(tmp_path: Path, mirror_dir: Path) -> None:
    from synthetic.model.expected import reference_note

    assert reference_note(str(mirror_dir), "sglang") is None
    assert "stand-in" in (reference_note(str(mirror_dir), "sim") or "")
    assert "not a specbench synthetic checkpoint" in (reference_note(str(tmp_path), "sglang") or "")
    rnd = synth.build_checkpoint(tmp_path / "rnd", mode="random", seed=1, **SMALL)
    assert "no clear logit margins" in (reference_note(str(rnd), "sglang") or "")
