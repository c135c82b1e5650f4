"""A model's config.json as runs read it: the vocabulary random prompts are drawn below, whether it is a MoE."""

from __future__ import annotations

from pathlib import Path

from bench.model_config import DEFAULT_VOCAB_SIZE, is_moe, prompt_vocab, read_model_config
from bench.sweep import WorkloadSpec
from bench.workload import build_prompts
from synthetic.model.presets import build_preset


def test_random_ids_stay_below_the_models_vocabulary(tmp_path: Path) -> None:
    shard = build_preset(tmp_path / "shard", "deepseek-v3-tp8-shard", 2)
    assert prompt_vocab(shard) == 16160  # one GPU's share of TP 8: a token id above it has no row
    assert prompt_vocab("deepseek-ai/DeepSeek-V3") == DEFAULT_VOCAB_SIZE  # a hub id: no local config
    assert prompt_vocab(tmp_path) == DEFAULT_VOCAB_SIZE  # a directory without config.json
    prompts = build_prompts(WorkloadSpec(input_len=512, output_len=4), 64, prompt_vocab(shard))
    ids = [i for p in prompts for i in p.input_ids or []]
    assert max(ids) < 16160 and min(ids) >= 2
    assert max(ids) > 16160 * 0.9  # drawn over the whole vocabulary


def test_moe_or_dense(tmp_path: Path) -> None:
    shard = build_preset(tmp_path / "shard", "deepseek-v3-tp8-shard", 2)
    assert is_moe(read_model_config(shard)) is True
    (tmp_path / "dense").mkdir()
    (tmp_path / "dense" / "config.json").write_text('{"vocab_size": 100, "n_routed_experts": null}')
    assert is_moe(read_model_config(tmp_path / "dense")) is False
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    assert read_model_config(tmp_path / "broken") is None and is_moe(None) is None
