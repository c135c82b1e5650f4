"""Config-only presets: the fields match the published config.json files, and the CLI writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.floor import ModelShape
from runners.cli import app
from synthetic.model import SynthConfigError, approx_params, build_preset, preset_config

# Values from the published deepseek-ai/DeepSeek-V3 config.json (huggingface.co/deepseek-ai/DeepSeek-V3,
# found through its copies in public code; DeepSeek-R1 ships the same shape), typed in by hand here so a
# slip in the preset table cannot agree with itself.
PUBLISHED_V3 = {
    "hidden_size": 7168,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "n_group": 8,
    "topk_group": 4,
    "moe_intermediate_size": 2048,
    "intermediate_size": 18432,
    "first_k_dense_replace": 3,
    "vocab_size": 129280,
    "num_nextn_predict_layers": 1,
    "num_hidden_layers": 61,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "routed_scaling_factor": 2.5,
    "max_position_embeddings": 163840,
    "architectures": ["DeepseekV3ForCausalLM"],
}
# deepseek-ai/DeepSeek-V2-Lite config.json.
PUBLISHED_V2_LITE = {
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "q_lora_rank": None,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "moe_intermediate_size": 1408,
    "intermediate_size": 10944,
    "first_k_dense_replace": 1,
    "vocab_size": 102400,
    "num_hidden_layers": 27,
    "topk_method": "greedy",
    "architectures": ["DeepseekV2ForCausalLM"],
}


def test_published_fields() -> None:
    v3 = preset_config("deepseek-v3-slice")
    for key, want in PUBLISHED_V3.items():
        assert v3[key] == want, key
    assert "quantization_config" not in v3  # FP8 left out: served in bf16
    lite = preset_config("deepseek-v2-lite")
    for key, want in PUBLISHED_V2_LITE.items():
        assert lite[key] == want, key
    assert "num_nextn_predict_layers" not in lite


@pytest.mark.parametrize(("layers", "dense"), [(1, 0), (2, 1), (3, 2), (4, 3), (5, 3), (8, 3)])
def test_slice_keeps_a_moe_layer(layers: int, dense: int) -> None:
    cfg = preset_config("deepseek-v3-slice", layers)
    assert cfg["num_hidden_layers"] == layers
    assert cfg["first_k_dense_replace"] == dense
    for key in ("hidden_size", "n_routed_experts", "moe_intermediate_size", "vocab_size"):
        assert cfg[key] == PUBLISHED_V3[key]


def test_weight_estimate_matches_the_h200_load() -> None:
    # SGLang logged 49.7 GB (GiB) for 5 layers and 25.1 for the NextN layer with dummy weights, bf16.
    p = approx_params(preset_config("deepseek-v3-slice", 5))
    assert abs(p["target"] * 2 / 2**30 - 49.7) < 1.0
    assert abs(p["mtp"] * 2 / 2**30 - 25.1) < 1.0


def test_bad_layers_and_preset() -> None:
    with pytest.raises(SynthConfigError):
        preset_config("deepseek-v3-slice", 0)
    with pytest.raises(SynthConfigError):
        preset_config("deepseek-v3-slice", 62)
    with pytest.raises(SynthConfigError):
        preset_config("llama", 2)


def test_cli_writes_config_only(tmp_path: Path) -> None:
    out = tmp_path / "v3"
    r = CliRunner().invoke(app, ["synth-model", str(out), "--preset", "deepseek-v3-slice", "--layers", "5"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "generation_config.json",
        "specbench_synth.json",
        "tokenizer.json",  # the offline tokenizer text-mode clients need (--no-tokenizer skips it)
        "tokenizer_config.json",
    ]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 5 and cfg["first_k_dense_replace"] == 3
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen == {"bos_token_id": 0, "eos_token_id": 1}
    again = CliRunner().invoke(app, ["synth-model", str(out), "--preset", "deepseek-v3-slice"])
    assert again.exit_code == 2  # not empty, no --force
    build_preset(out, "deepseek-v2-lite", force=True)
    assert json.loads((out / "config.json").read_text())["model_type"] == "deepseek_v2"


# The published config's quantization_config (huggingface.co/deepseek-ai/DeepSeek-V3 config.json and its
# README_WEIGHTS.md), typed in by hand like PUBLISHED_V3.
PUBLISHED_V3_QUANT = {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
}
# What tensor parallelism splits (SGLang's DeepSeek model: heads, the dense and every expert's MLP width, the
# vocabulary); everything else of the published config stays as it is.
SHARDED = (
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "moe_intermediate_size",
    "vocab_size",
)


@pytest.mark.parametrize("tp", [8, 4, 16, 1])
def test_tp_shard_is_the_published_config_divided_by_tp(tp: int) -> None:
    cfg = preset_config("deepseek-v3-tp8-shard", tp=tp)
    for key, want in PUBLISHED_V3.items():
        assert cfg[key] == (want // tp if key in SHARDED else want), key
    assert cfg["quantization_config"] == PUBLISHED_V3_QUANT
    # Nothing but the sharded fields differs from the published config (plus its quantisation).
    slice_cfg = preset_config("deepseek-v3-slice")
    assert {k for k in cfg if cfg[k] != slice_cfg.get(k)} == {
        *(k for k in SHARDED if tp > 1),
        "quantization_config",
    }


def test_tp8_shard_by_hand() -> None:
    cfg = preset_config("deepseek-v3-tp8-shard")  # tp 8 unless told otherwise
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (16, 16)
    assert (cfg["intermediate_size"], cfg["moe_intermediate_size"]) == (2304, 256)
    assert cfg["vocab_size"] == 16160  # 129280 / 8: embedding and LM head rows on one GPU of TP 8
    assert (cfg["q_lora_rank"], cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]) == (1536, 512, 64)
    assert (cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["n_group"], cfg["topk_group"]) == (
        256,
        8,
        8,
        4,
    )
    assert (cfg["num_hidden_layers"], cfg["first_k_dense_replace"], cfg["num_nextn_predict_layers"]) == (
        61,
        3,
        1,
    )


def test_tp_shard_sizes_match_the_issue() -> None:
    # Issue 29: about 86 GB of FP8 weights plus 0.5 GB of embedding and head; a 40-layer shard about 57 GB.
    # Hand count for one MoE layer of the TP-8 shard: 256 experts x 3 x 7168 x 256 FP8 bytes (1.409 GB) plus
    # the scales and attention (~37 MB) and the router (3.7 MB, bf16).
    full = ModelShape.from_config(preset_config("deepseek-v3-tp8-shard")).weight_bytes()
    assert 85e9 < full["target_layers"] + full["nextn_layer"] < 87e9
    assert full["embed_and_head"] == 2 * 16160 * 7168 * 2
    short = ModelShape.from_config(preset_config("deepseek-v3-tp8-shard", 40)).weight_bytes()
    assert 55e9 < sum(short.values()) < 58e9


@pytest.mark.parametrize("tp", [3, 5, 32, 0])
def test_tp_that_does_not_divide_is_refused(tp: int) -> None:
    with pytest.raises(SynthConfigError, match="valid tp: 1, 2, 4, 8, 16") as e:
        preset_config("deepseek-v3-tp8-shard", tp=tp)
    assert "\n" not in str(e.value)
    with pytest.raises(SynthConfigError, match="tp8-shard only"):
        preset_config("deepseek-v3-slice", tp=8)


def test_cli_writes_the_shard(tmp_path: Path) -> None:
    out = tmp_path / "shard"
    r = CliRunner().invoke(
        app, ["synth-model", str(out), "--preset", "deepseek-v3-tp8-shard", "--layers", "40"]
    )
    assert r.exit_code == 0, r.output
    cfg = json.loads((out / "config.json").read_text())
    assert cfg == preset_config("deepseek-v3-tp8-shard", 40)
    manifest = json.loads((out / "specbench_synth.json").read_text())
    assert manifest["preset"] == "deepseek-v3-tp8-shard" and manifest["tp"] == 8 and manifest["layers"] == 40
    assert any("all-reduce" in line for line in manifest["left_out"])
    assert any("routing" in line for line in manifest["left_out"])
    assert "FP8 weights incl. block scales" in r.output and "56.2 GB" in r.output
    # The synthetic tokenizer has exactly the shard's 16,160 ids.
    tok = json.loads((out / "tokenizer.json").read_text())
    assert len(tok["model"]["vocab"]) == 16160 and max(tok["model"]["vocab"].values()) == 16159
    bad = CliRunner().invoke(
        app, ["synth-model", str(tmp_path / "x"), "--preset", "deepseek-v3-tp8-shard", "--tp", "3"]
    )
    assert bad.exit_code == 2 and "does not divide" in bad.output
    other = CliRunner().invoke(app, ["synth-model", str(tmp_path / "y"), "--tp", "8"])
    assert other.exit_code == 2
