"""A local model's `config.json`: what a run needs to know of the model. Readers: the random workload
(`vocab_size`), the launcher (`is_moe`: balanced routing for dummy weights) and the floor (`bench.floor`); a
hub id or a directory without one has no config, and each reader says what it does then. `shard_config` is
what one GPU of an N-way TP deployment holds (heads, sharded widths, vocabulary / N). `model_shape` is what
decides a step's work; runs record it so `is_shard_of` can pair a shard run with its TP-N run later (the
`deepseek-v3-tp8-shard` preset is DeepSeek-V3 through it with N = 8)."""

import json
import os
from pathlib import Path
from typing import Any

from bench.files import FileReadError, read_regular_file, regular_file_problem

CONFIG_FILE = "config.json"
SYNTH_MANIFEST = "specbench_synth.json"  # a synthetic checkpoint's (synthetic/model)
MAX_CONFIG_BYTES = 16 << 20  # config.json is a few KiB (DeepSeek-V3's with quantization table: < 10 KiB)
# The vocabulary before `build_prompts` read the model's: the default without a local config.
DEFAULT_VOCAB_SIZE = 32_000
# Names of the routed-expert count across MoE configs (DeepSeek, Qwen-MoE, Mixtral).
_EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")


class ShardError(ValueError):
    """A tensor-parallel width that does not divide the model's heads, widths or vocabulary."""


def model_config_problem(model: str | Path | None) -> str | None:
    """Why a local config.json is no readable JSON object (FIFO, device, huge, deep), or another JSON file of
    the checkpoint a run reads (bench/provenance.py: weight indexes, a synthetic manifest) is no regular file
    within MAX_CONFIG_BYTES (a FIFO index hung the run), or None."""
    if not model:
        return None
    folder = Path(model).expanduser()
    # os.path.isdir, not Path's: no OSError for a name too long
    others = (
        [*folder.glob("*.safetensors.index.json"), folder / SYNTH_MANIFEST] if os.path.isdir(folder) else []
    )
    for other in others:
        if os.path.lexists(other) and (
            problem := regular_file_problem(other, MAX_CONFIG_BYTES, "a model file")
        ):
            return problem
    path = folder / CONFIG_FILE
    if not os.path.lexists(path):
        return None
    try:
        cfg = json.loads(read_regular_file(path, MAX_CONFIG_BYTES, "a model's config.json"))
    except FileReadError as e:
        return str(e)
    except (ValueError, RecursionError) as e:
        return f"{path}: not JSON ({str(e)[:120] or type(e).__name__})"
    return None if isinstance(cfg, dict) else f"{path}: not a JSON object"


def read_model_config(model: str | Path | None) -> dict[str, Any] | None:
    """The model's local config.json as a dict (read via bench/files.py), or None."""
    if not model:
        return None
    path = Path(model).expanduser() / CONFIG_FILE
    try:
        cfg = json.loads(read_regular_file(path, MAX_CONFIG_BYTES, "a model's config.json"))
    except (FileReadError, ValueError, RecursionError):
        return None
    return cfg if isinstance(cfg, dict) else None


def vocab_size(cfg: dict[str, Any] | None) -> int | None:
    """The config's vocabulary size, or None when it has none that is a positive integer."""
    v = (cfg or {}).get("vocab_size")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def prompt_vocab(model: str | Path | None) -> int:
    """The vocabulary random prompt ids are drawn below: the local model's, else DEFAULT_VOCAB_SIZE."""
    return vocab_size(read_model_config(model)) or DEFAULT_VOCAB_SIZE


def routed_experts(cfg: dict[str, Any] | None) -> int:
    """Routed experts per MoE layer; 0 for a dense model."""
    for key in _EXPERT_KEYS:
        v = (cfg or {}).get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 0


def is_moe(cfg: dict[str, Any] | None) -> bool | None:
    """True for a mixture-of-experts config, False for a dense one, None without a config."""
    return None if cfg is None else routed_experts(cfg) > 0


def fp8_block(cfg: dict[str, Any]) -> tuple[int, int] | None:
    """The FP8 weight block ([rows, cols]) of a block-quantised checkpoint, or None."""
    q = cfg.get("quantization_config")
    if not isinstance(q, dict) or q.get("quant_method") != "fp8":
        return None
    block = q.get("weight_block_size")
    if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block):
        return int(block[0]), int(block[1])
    return None


# Sharded by TP in SGLang's DeepSeek model: attention heads, dense and expert MLP widths, the vocabulary.
# Replicated: hidden size, MLA ranks, the router and the expert count (no expert parallelism).
_SHARDED_HEADS = ("num_attention_heads", "num_key_value_heads")
_SHARDED_WIDTHS = ("intermediate_size", "moe_intermediate_size")


def shard_problems(cfg: dict[str, Any], tp: int) -> list[str]:
    """Why `cfg` cannot be split `tp` ways as SGLang splits it; [] when it can."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        return [f"tp must be a positive integer, got {tp!r}"]
    out: list[str] = []
    for key in (*_SHARDED_HEADS, "vocab_size"):
        v = cfg.get(key)
        if isinstance(v, int) and v % tp:
            out.append(f"{key} {v} / {tp}")
    block = fp8_block(cfg)
    for key in _SHARDED_WIDTHS:
        v = cfg.get(key)
        if not isinstance(v, int):
            continue
        if v % tp:
            out.append(f"{key} {v} / {tp}")
        elif block is not None and (v // tp) % block[0]:
            # SGLang's FP8 block quantisation refuses a shard width that is not whole blocks.
            out.append(f"{key} {v} / {tp} = {v // tp}, not a multiple of the FP8 block {block[0]}")
    return out


def valid_tp(cfg: dict[str, Any], limit: int = 64) -> list[int]:
    """The tensor-parallel widths up to `limit` that `shard_config` accepts for `cfg`."""
    return [n for n in range(1, limit + 1) if not shard_problems(cfg, n)]


def shard_config(cfg: dict[str, Any], tp: int) -> dict[str, Any]:
    """What one GPU of a `tp`-way deployment holds of `cfg`; ShardError when `tp` does not divide it."""
    if problems := shard_problems(cfg, tp):
        valid = ", ".join(map(str, valid_tp(cfg)))
        raise ShardError(f"tp {tp} does not divide the model: {'; '.join(problems)} (valid tp: {valid})")
    out = json.loads(json.dumps(cfg))  # a deep copy
    for key in (*_SHARDED_HEADS, *_SHARDED_WIDTHS, "vocab_size"):
        if isinstance(out.get(key), int):
            out[key] = out[key] // tp
    return dict(out)


# What decides a DeepSeek-style step's work: widths, depth, heads, ranks, experts, vocabulary, MTP, dtype.
SHAPE_KEYS: tuple[str, ...] = (
    "architectures",
    "hidden_size",
    "num_hidden_layers",
    "first_k_dense_replace",
    "num_attention_heads",
    "num_key_value_heads",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "intermediate_size",
    "moe_intermediate_size",
    *_EXPERT_KEYS,
    "n_shared_experts",
    "num_experts_per_tok",
    "vocab_size",
    "num_nextn_predict_layers",
    "quantization_config",
)


def model_shape(cfg: dict[str, Any] | None) -> dict[str, Any] | None:
    """The SHAPE_KEYS a config has, as plain JSON values; None without a config."""
    return None if cfg is None else {k: json.loads(json.dumps(cfg[k])) for k in SHAPE_KEYS if k in cfg}


def is_shard_of(shard: dict[str, Any], whole: dict[str, Any], tp: int) -> list[str]:
    """Why `shard` (a model shape) is not what one GPU of `whole` at TP `tp` computes; [] when it is."""
    try:
        expected = model_shape(shard_config(whole, tp)) or {}
    except ShardError as e:
        return [str(e)]
    # `key shard vs expected` for every SHAPE_KEYS entry that differs (a key only one has counts).
    return [
        f"{k} {shard.get(k)!r} vs {expected.get(k)!r}" for k in SHAPE_KEYS if shard.get(k) != expected.get(k)
    ]
