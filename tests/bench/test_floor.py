"""The physical floor of a step: bytes counted by hand for small configs, the expert expectation against
SGLang's own uniform draw, and the flag of a point faster than its floor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import floor
from bench.floor import FloorError, ModelShape, expected_experts, gpu_bandwidth_tbps, point_floor, step_floor
from synthetic.model.presets import preset_config

# A small dense MLA config, bf16, no NextN layer: every byte below is counted by hand.
DENSE = {
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "q_lora_rank": None,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "intermediate_size": 4096,
    "vocab_size": 32000,
}
# q 8x192x1024, kv_a 576x1024, kv_b 8x256x512, o 1024x1024, at 2 bytes
DENSE_ATTENTION = (8 * 192 * 1024 + 576 * 1024 + 8 * 256 * 512 + 1024 * 1024) * 2
DENSE_MLP = 3 * 4096 * 1024 * 2
DENSE_HEAD = 32000 * 1024 * 2


def test_dense_decode_step_by_hand() -> None:
    assert DENSE_ATTENTION == 8_519_680 and DENSE_MLP == 25_165_824
    shape = ModelShape.from_config(DENSE)
    batch, context = 4, 100 + (21 - 1) / 2  # input 100, output 21: mean context 110
    kv = batch * context * 2 * (512 + 64) * 2  # requests x context x layers x (latent + rope) x bf16
    embed_rows = batch * 1024 * 2
    want = 2 * (DENSE_ATTENTION + DENSE_MLP) + DENSE_HEAD + kv + embed_rows
    got = step_floor(shape, 4.8, batch=batch, context=floor.mean_context(100, 21))
    assert got.bytes == pytest.approx(want, rel=1e-12)
    assert got.ms == pytest.approx(want / 4.8e12 * 1e3, rel=1e-12)


# A small FP8 MoE config with one NextN layer: 1 dense layer, 1 MoE layer of 16 experts (top 2) + 1 shared.
MOE = {
    **DENSE,
    "num_hidden_layers": 2,
    "first_k_dense_replace": 1,
    "q_lora_rank": 256,
    "moe_intermediate_size": 256,
    "n_routed_experts": 16,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "num_nextn_predict_layers": 1,
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
}


def _fp8(out: int, inp: int) -> int:
    return out * inp + math.ceil(out / 128) * math.ceil(inp / 128) * 4  # FP8 bytes + float32 block scales


def test_fp8_moe_speculative_cycle_by_hand() -> None:
    attn = _fp8(256, 1024) + _fp8(8 * 192, 256) + _fp8(576, 1024) + _fp8(8 * 256, 512) + _fp8(1024, 1024)
    dense_mlp = 2 * _fp8(4096, 1024) + _fp8(1024, 4096)
    expert = 2 * _fp8(256, 1024) + _fp8(1024, 256)
    router = 16 * 1024 * 2
    head = 32000 * 1024 * 2
    eh_proj = 2 * 1024 * 1024 * 2
    shape = ModelShape.from_config(MOE)
    assert shape.attention == attn and shape.expert == expert
    batch, drafts, steps, ctx = 2, 3, 2, 50.0
    kv_token = (512 + 64) * 2
    # verify: 6 tokens through both layers; the MoE layer touches 16(1-(1-2/16)^6) routed + 1 shared expert
    # (the fused reading, 16(1-(1-3/16)^6) = 11.7, is larger here, so the floor keeps the unfused one)
    touched_verify = 16 * (1 - (14 / 16) ** 6) + 1
    assert touched_verify < 16 * (1 - (13 / 16) ** 6)
    verify = (attn + dense_mlp) + (attn + router + touched_verify * expert) + head
    verify += batch * ctx * 2 * kv_token + batch * drafts * 1024 * 2
    # each draft pass: 2 tokens through the NextN layer (MoE) and its projection, the head, its own KV
    touched_draft = 16 * (1 - (14 / 16) ** 2) + 1
    draft = (
        eh_proj + attn + router + touched_draft * expert + head + batch * 1024 * 2 + batch * ctx * kv_token
    )
    want = verify + steps * draft
    got = step_floor(shape, 3.35, batch=batch, context=ctx, steps=steps, draft_tokens=drafts)
    assert got.bytes == pytest.approx(want, rel=1e-12)
    assert got.ms == pytest.approx(want / 3.35e12 * 1e3, rel=1e-12)
    # Without balanced routing the floor counts the fewest experts any routing touches: top-2 + shared.
    low = step_floor(
        shape, 3.35, batch=batch, context=ctx, steps=steps, draft_tokens=drafts, routing="minimum"
    )
    assert low.bytes == pytest.approx(
        want - (touched_verify - 3) * expert - steps * (touched_draft - 3) * expert
    )


def test_expected_experts_is_sglangs_uniform_draw() -> None:
    # SGLang 0.5.13.post1 (sglang/srt/layers/moe/topk.py, SGLANG_SIMULATE_UNIFORM_EXPERTS): per token a random
    # offset in [0, E), its k experts at offset + j * (E // k) mod E. Replayed here with numpy.
    rng = np.random.default_rng(7)
    e, k = 256, 8
    for tokens in (1, 4, 8, 32, 256):
        counts = []
        for _ in range(400):
            offsets = rng.integers(0, e, size=(tokens, 1))
            ids = (offsets + np.arange(k)[None, :] * (e // k)) % e
            counts.append(len(np.unique(ids)))
        assert float(np.mean(counts)) == pytest.approx(expected_experts(e, k, tokens), rel=0.03, abs=0.3)


def test_verify_touches_more_experts_than_decode_mostly_at_small_batch() -> None:
    # The figures of docs/reference/synthetic-models.md: 4 tokens per request verified against 1 decoded.
    shard = ModelShape.from_config(preset_config("deepseek-v3-tp8-shard"))
    ratio = {
        b: shard.touched_experts(4 * b, "balanced") / shard.touched_experts(b, "balanced") for b in (1, 8, 64)
    }
    assert ratio[8] == pytest.approx(2.81, abs=0.01)
    assert ratio[64] == pytest.approx(1.15, abs=0.01)
    assert ratio[1] > ratio[8] > ratio[64] > 1


def test_gpu_table() -> None:
    assert gpu_bandwidth_tbps("NVIDIA H200") == 4.8
    assert gpu_bandwidth_tbps("NVIDIA H100 80GB HBM3") == 3.35
    assert gpu_bandwidth_tbps("NVIDIA H100 PCIe") == 2.0
    assert gpu_bandwidth_tbps("NVIDIA A100-SXM4-80GB") == 2.039
    assert gpu_bandwidth_tbps("NVIDIA H20") == 4.0
    assert gpu_bandwidth_tbps("NVIDIA GH200 480GB") is None  # not H200: no guess
    assert gpu_bandwidth_tbps("none") is None and gpu_bandwidth_tbps(None) is None


def test_no_floor_says_why() -> None:
    common = {"tp": 1, "batch": 1, "input_len": 8, "output_len": 8}
    assert point_floor(None, "NVIDIA H200", **common)[1] == (
        "no floor: the model is not a local directory with a config.json"
    )
    assert "not in the bandwidth table" in str(point_floor(DENSE, "NVIDIA T4", **common)[1])
    assert "names no GPU" in str(point_floor(DENSE, "none", **common)[1])
    assert "not an MLA" in str(point_floor({"hidden_size": 8}, "NVIDIA H200", **common)[1])
    with pytest.raises(FloorError):
        step_floor(
            ModelShape.from_config(DENSE), 4.8, batch=1, context=1, steps=1, draft_tokens=2
        )  # no NextN


def test_tp_floor_is_the_floor_of_its_shard() -> None:
    full = preset_config("deepseek-v3-tp8-shard", tp=1)
    shard = preset_config("deepseek-v3-tp8-shard")
    args = {"batch": 8, "input_len": 256, "output_len": 256, "steps": 3, "draft_tokens": 4}
    at_tp8, _ = point_floor(full, "NVIDIA H200", tp=8, **args)
    alone, _ = point_floor(shard, "NVIDIA H200", tp=1, **args)
    assert at_tp8 is not None and alone is not None and at_tp8.ms == pytest.approx(alone.ms)


def test_floor_fraction_and_the_flag() -> None:
    assert floor.measured_step_ms(2.0, 2.5, speculative=True) == 5.0
    assert floor.measured_step_ms(2.0, None, speculative=False) == 2.0
    assert floor.measured_step_ms(2.0, None, speculative=True) is None
    assert floor.floor_fraction(4.0, 5.0) == 0.8
    assert floor.floor_fraction(None, 5.0) is None
    reason = floor.below_floor_reason(10.0, 4.0)
    assert "faster than its physical floor" in reason and "2.50" in reason
