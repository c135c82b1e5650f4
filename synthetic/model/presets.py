"""Config-only checkpoints of published DeepSeek shapes, served with SGLang's `--load-format dummy`.

SGLang then fills every weight with random values, so a cost-realistic model needs only the published
config (`published/`, from the Hugging Face Hub) with fewer layers (docs/reference/paired-measurement.md).
The slices are served in bf16, without V3's FP8 `quantization_config`. `deepseek-v3-tp8-shard` is one GPU
of a TP-8 DeepSeek-V3, FP8 as published, split as SGLang splits it (`bench.model_config.shard_config`).
The NextN draft lives in the same checkpoint: SGLang loads it from the target's path (contract §1.2).
"""

import json
import os
from pathlib import Path
from typing import Any, Literal

from bench.floor import ModelShape
from bench.model_config import ShardError, shard_config
from synthetic.model.build import CONFIG_FILE, GENERATION_CONFIG_FILE, MANIFEST_FILE, check_output_dir
from synthetic.model.layout import SynthConfigError

Preset = Literal["deepseek-v3-slice", "deepseek-v2-lite", "deepseek-v3-tp8-shard"]
PRESETS: tuple[Preset, ...] = ("deepseek-v3-slice", "deepseek-v2-lite", "deepseek-v3-tp8-shard")
SHARD_PRESET: Preset = "deepseek-v3-tp8-shard"
SHARD_DEFAULT_TP = 8
PRESET_FILES = (CONFIG_FILE, GENERATION_CONFIG_FILE, MANIFEST_FILE)

# The published configs less `auto_map` (SGLang has its own classes); V3's quantization kept apart.
_PUBLISHED_DIR = Path(__file__).with_name("published")


def _published(name: str) -> dict[str, Any]:
    return dict(json.loads((_PUBLISHED_DIR / f"{name}.json").read_text()))


DEEPSEEK_V3 = _published("deepseek-v3")
DEEPSEEK_V2_LITE = _published("deepseek-v2-lite")
DEEPSEEK_V3_QUANTIZATION = _published("deepseek-v3-quantization")

_PUBLISHED: dict[Preset, dict[str, Any]] = {
    "deepseek-v3-slice": DEEPSEEK_V3,
    "deepseek-v2-lite": DEEPSEEK_V2_LITE,
    "deepseek-v3-tp8-shard": {**DEEPSEEK_V3, "quantization_config": DEEPSEEK_V3_QUANTIZATION},
}
_SOURCE: dict[Preset, str] = {
    "deepseek-v3-slice": "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
    "deepseek-v2-lite": "https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json",
    "deepseek-v3-tp8-shard": "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
}
# The sizes a TP-N shard divides by N (bench.model_config.shard_config), as its manifest lists them.
SHARDED_KEYS = (
    *("num_attention_heads", "num_key_value_heads", "intermediate_size", "moe_intermediate_size"),
    "vocab_size",
)
# What a number measured on the shard does not contain, said in its manifest and next to its numbers.
SHARD_LEFT_OUT = (
    "TP's two all-reduces per layer (after attention and after the MLP/MoE): one GPU runs alone",
    "real weights: every weight is random (--load-format dummy)",
    "real routing: balanced routing (SGLANG_SIMULATE_UNIFORM_EXPERTS, set by specbench) draws each token's "
    "experts uniformly, the upper bound of the experts a step touches; trained routing touches fewer",
    "real acceptance: pinned with SGLANG_SIMULATE_ACC_LEN (grid.accept_lengths)",
)


def preset_config(preset: str, layers: int | None = None, tp: int | None = None) -> dict[str, Any]:
    """`preset`'s config.json: `layers` decoder layers (None: published; N >= 2 keep a MoE one), `tp` wide."""
    if preset not in _PUBLISHED:
        raise SynthConfigError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    cfg = json.loads(json.dumps(_PUBLISHED[preset]))  # a deep copy
    if preset == SHARD_PRESET:
        try:
            cfg = shard_config(cfg, SHARD_DEFAULT_TP if tp is None else tp)
        except ShardError as e:
            raise SynthConfigError(str(e)) from None
    elif tp is not None:
        raise SynthConfigError(
            f"--tp applies to {SHARD_PRESET} only; {preset} is not a tensor-parallel shard"
        )
    published_layers = int(cfg["num_hidden_layers"])
    if layers is None:
        return dict(cfg)
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= published_layers:
        raise SynthConfigError(
            f"layers must be an integer in [1, {published_layers}] for {preset}, got {layers!r}"
        )
    cfg["num_hidden_layers"] = layers
    cfg["first_k_dense_replace"] = min(int(cfg["first_k_dense_replace"]), max(layers - 1, 0))
    return dict(cfg)


def build_preset(
    out_dir: str | os.PathLike[str],
    preset: str,
    layers: int | None = None,
    *,
    tp: int | None = None,
    force: bool = False,
) -> Path:
    """Write config.json, generation_config.json and a manifest (no weights) into `out_dir`."""
    cfg = preset_config(preset, layers, tp)
    out = Path(out_dir)
    check_output_dir(out, force)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("model.safetensors", "perm.json", *PRESET_FILES):  # no weights may sit next to dummy load
        (out / stale).unlink(missing_ok=True)
    generation = {"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"]}
    manifest = {
        "builder": "specbench.bench.synth.presets",
        "preset": preset,
        "source": _SOURCE[preset],  # type: ignore[index]
        "layers": cfg["num_hidden_layers"],
        "first_k_dense_replace": cfg["first_k_dense_replace"],
        "mtp_layers": cfg.get("num_nextn_predict_layers", 0),
        "weights": "none: serve with --load-format dummy (sweep: server.load_format: dummy)",
        "left_out": ["quantization_config (FP8 block quantisation): served in bf16"],
    }
    if preset == SHARD_PRESET:
        width = SHARD_DEFAULT_TP if tp is None else tp
        published = _PUBLISHED[SHARD_PRESET]
        published_layers = published["num_hidden_layers"]
        what = (
            f"one GPU of DeepSeek-V3 served at tensor parallelism {width} (TP {width})"
            if width > 1
            else "the whole DeepSeek-V3 (tp 1): serve it at server.tp: N to shard it N ways"
        )
        manifest.update(
            tp=width,
            published_layers=published_layers,
            what=f"{what}, {cfg['num_hidden_layers']} of {published_layers} layers, FP8 as published",
            sharded={key: f"{published[key]} / {width} = {cfg[key]}" for key in SHARDED_KEYS},
            quantization_config=cfg["quantization_config"],
            weight_bytes=ModelShape.from_config(cfg).weight_bytes(),
            left_out=list(SHARD_LEFT_OUT),
        )
    for name, obj in ((CONFIG_FILE, cfg), (GENERATION_CONFIG_FILE, generation), (MANIFEST_FILE, manifest)):
        tmp = out / (name + ".tmp")
        tmp.write_text(json.dumps(obj, indent=2) + "\n")
        os.replace(tmp, out / name)
    return out


def approx_params(cfg: dict[str, Any]) -> dict[str, int]:
    """Parameter counts of the target layers and of the MTP layer (bf16 bytes = 2x), for the size printout."""
    h, v = int(cfg["hidden_size"]), int(cfg["vocab_size"])
    heads = int(cfg["num_attention_heads"])
    nope, rope, vd = int(cfg["qk_nope_head_dim"]), int(cfg["qk_rope_head_dim"]), int(cfg["v_head_dim"])
    kv, q = int(cfg["kv_lora_rank"]), cfg.get("q_lora_rank")
    q_proj = (h * q + q * heads * (nope + rope)) if q else h * heads * (nope + rope)
    attn = q_proj + h * (kv + rope) + kv * heads * (nope + vd) + heads * vd * h
    dense = 3 * h * int(cfg["intermediate_size"])
    experts = int(cfg["n_routed_experts"]) + int(cfg["n_shared_experts"])
    moe = 3 * h * int(cfg["moe_intermediate_size"]) * experts + h * int(cfg["n_routed_experts"])
    n, k = int(cfg["num_hidden_layers"]), int(cfg["first_k_dense_replace"])
    target = 2 * v * h + k * (attn + dense) + (n - k) * (attn + moe)
    # SGLang's NextN module holds its own embedding and head copies (25.1 GiB measured for V3's).
    mtp = (2 * v * h + attn + moe + 2 * h * h) if cfg.get("num_nextn_predict_layers") else 0
    return {"target": target, "mtp": mtp}
