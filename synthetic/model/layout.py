"""Sizes, `config.json` and tensor layout of a synthetic DeepSeek-V3 + MTP checkpoint, as sglang 0.5.13's
loader accepted on an H200 (shared/gpu/README.md); the MTP layer sits at index `layers`, always MoE.
"""

import dataclasses
import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

Mode = Literal["agree", "random", "mirror"]
MODES: tuple[Mode, ...] = ("agree", "random", "mirror")

# FlashMLA's kernels are built for DeepSeek-V3's MLA head geometry; these are not free parameters.
KV_LORA_RANK = 512
QK_ROPE_HEAD_DIM = 64
QK_NOPE_HEAD_DIM = 128
V_HEAD_DIM = 128

ROPE_THETA = 10000.0

BOS_TOKEN_ID = 0
EOS_TOKEN_ID = 1

# Widths stay on this grid so GEMM tiles and vectorised kernels see aligned shapes.
ALIGN = 64


class SynthConfigError(ValueError):
    """The requested sizes cannot make a checkpoint that sglang + FlashMLA would load."""


class Init(Enum):
    """How one tensor is filled; `build.py` maps each to a draw per mode."""

    EMBED = "embed"  # token embedding
    LM_HEAD = "lm_head"  # output projection (a permuted copy of the embedding in `agree` mode)
    LINEAR = "linear"  # N(0, 0.02) in both modes
    SILENCED = "silenced"  # writes into the residual stream: zero (plus optional noise) in `agree` mode
    EH_PROJ = "eh_proj"  # MTP input projection: [I | 0] in `agree` mode
    NORM = "norm"  # RMSNorm weight: ones
    ROUTER_BIAS = "router_bias"  # e_score_correction_bias: float32 zeros


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: Literal["bfloat16", "float32"]
    init: Init

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class SynthSizes:
    """The free sizes of the synthetic model; the defaults give the recipe's 95 tensors / 108.8 M params."""

    hidden: int = 1024
    layers: int = 2
    vocab: int = 32000
    experts: int = 8
    heads: int = 16
    experts_per_tok: int = 2
    intermediate: int = 2048
    moe_intermediate: int = 256
    q_lora_rank: int = 512
    first_k_dense: int = 1
    max_position_embeddings: int = 4096

    def validate(self) -> None:
        """Raise SynthConfigError with every problem found, so one run of the CLI reports them all."""
        problems: list[str] = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool):
                problems.append(f"{f.name} must be an integer, got {value!r}")
        if problems:
            raise SynthConfigError("; ".join(problems))
        minimum = {"hidden": ALIGN, "layers": 1, "vocab": 8, "experts": 1, "heads": 1, "experts_per_tok": 1}
        for name, lo in minimum.items():
            if getattr(self, name) < lo:
                problems.append(f"{name} must be >= {lo}, got {getattr(self, name)}")
        for name in ("hidden", "intermediate", "moe_intermediate", "q_lora_rank"):
            if getattr(self, name) <= 0 or getattr(self, name) % ALIGN:
                problems.append(f"{name} must be a positive multiple of {ALIGN}, got {getattr(self, name)}")
        if self.heads > 0 and self.hidden % self.heads:
            problems.append(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.heads > 128:
            # FlashMLA decode handles at most 128 query heads per KV head (DeepSeek-V3 has 128).
            problems.append(f"heads must be <= 128 for FlashMLA, got {self.heads}")
        if self.experts_per_tok > self.experts:
            problems.append(f"experts_per_tok ({self.experts_per_tok}) exceeds experts ({self.experts})")
        if not 0 <= self.first_k_dense <= self.layers:
            problems.append(f"first_k_dense must be in [0, layers={self.layers}], got {self.first_k_dense}")
        if self.max_position_embeddings < 64:
            problems.append(f"max_position_embeddings must be >= 64, got {self.max_position_embeddings}")
        if problems:
            raise SynthConfigError("; ".join(problems))


def hf_config(s: SynthSizes) -> dict[str, Any]:
    """The `config.json` that sglang 0.5.13.post1 loaded as DeepseekV3ForCausalLM with one NextN layer."""
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "vocab_size": s.vocab,
        "hidden_size": s.hidden,
        "intermediate_size": s.intermediate,
        "moe_intermediate_size": s.moe_intermediate,
        "num_hidden_layers": s.layers,
        "num_nextn_predict_layers": 1,
        "num_attention_heads": s.heads,
        "num_key_value_heads": s.heads,
        "n_routed_experts": s.experts,
        "num_experts_per_tok": s.experts_per_tok,
        "n_shared_experts": 1,
        "routed_scaling_factor": 1.0,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "norm_topk_prob": True,
        "moe_layer_freq": 1,
        "first_k_dense_replace": s.first_k_dense,
        "ep_size": 1,
        "q_lora_rank": s.q_lora_rank,
        "kv_lora_rank": KV_LORA_RANK,
        "qk_rope_head_dim": QK_ROPE_HEAD_DIM,
        "qk_nope_head_dim": QK_NOPE_HEAD_DIM,
        "v_head_dim": V_HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": s.max_position_embeddings,
        "rms_norm_eps": 1e-6,
        "rope_theta": ROPE_THETA,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "use_cache": True,
        "bos_token_id": BOS_TOKEN_ID,
        "eos_token_id": EOS_TOKEN_ID,
        "torch_dtype": "bfloat16",
    }


def _bf16(name: str, shape: tuple[int, ...], init: Init) -> TensorSpec:
    return TensorSpec(name, shape, "bfloat16", init)


def _attention(p: str, s: SynthSizes) -> list[TensorSpec]:
    qk_head = QK_NOPE_HEAD_DIM + QK_ROPE_HEAD_DIM
    kv_a, kv_b = KV_LORA_RANK + QK_ROPE_HEAD_DIM, QK_NOPE_HEAD_DIM + V_HEAD_DIM
    return [
        _bf16(f"{p}self_attn.q_a_proj.weight", (s.q_lora_rank, s.hidden), Init.LINEAR),
        _bf16(f"{p}self_attn.q_a_layernorm.weight", (s.q_lora_rank,), Init.NORM),
        _bf16(f"{p}self_attn.q_b_proj.weight", (s.heads * qk_head, s.q_lora_rank), Init.LINEAR),
        _bf16(f"{p}self_attn.kv_a_proj_with_mqa.weight", (kv_a, s.hidden), Init.LINEAR),
        _bf16(f"{p}self_attn.kv_a_layernorm.weight", (KV_LORA_RANK,), Init.NORM),
        _bf16(f"{p}self_attn.kv_b_proj.weight", (s.heads * kv_b, KV_LORA_RANK), Init.LINEAR),
        _bf16(f"{p}self_attn.o_proj.weight", (s.hidden, s.heads * V_HEAD_DIM), Init.SILENCED),
        _bf16(f"{p}input_layernorm.weight", (s.hidden,), Init.NORM),
        _bf16(f"{p}post_attention_layernorm.weight", (s.hidden,), Init.NORM),
    ]


def _mlp(p: str, width: int, hidden: int) -> list[TensorSpec]:
    return [
        _bf16(f"{p}gate_proj.weight", (width, hidden), Init.LINEAR),
        _bf16(f"{p}up_proj.weight", (width, hidden), Init.LINEAR),
        _bf16(f"{p}down_proj.weight", (hidden, width), Init.SILENCED),
    ]


def _moe(p: str, s: SynthSizes) -> list[TensorSpec]:
    out = [
        _bf16(f"{p}mlp.gate.weight", (s.experts, s.hidden), Init.LINEAR),
        TensorSpec(f"{p}mlp.gate.e_score_correction_bias", (s.experts,), "float32", Init.ROUTER_BIAS),
    ]
    for e in range(s.experts):
        out += _mlp(f"{p}mlp.experts.{e}.", s.moe_intermediate, s.hidden)
    out += _mlp(f"{p}mlp.shared_experts.", s.moe_intermediate, s.hidden)  # n_shared_experts = 1
    return out


def tensor_layout(s: SynthSizes) -> list[TensorSpec]:
    """Every tensor of the checkpoint, in a fixed order (the file itself is written sorted by safetensors)."""
    out = [
        _bf16("model.embed_tokens.weight", (s.vocab, s.hidden), Init.EMBED),
        _bf16("lm_head.weight", (s.vocab, s.hidden), Init.LM_HEAD),
        _bf16("model.norm.weight", (s.hidden,), Init.NORM),
    ]
    for i in range(s.layers + 1):
        p = f"model.layers.{i}."
        out += _attention(p, s)
        moe = i >= s.first_k_dense or i == s.layers  # the MTP layer (index `layers`) is always MoE
        out += _moe(p, s) if moe else _mlp(f"{p}mlp.", s.intermediate, s.hidden)
    mtp = f"model.layers.{s.layers}."
    out += [
        _bf16(f"{mtp}enorm.weight", (s.hidden,), Init.NORM),
        _bf16(f"{mtp}hnorm.weight", (s.hidden,), Init.NORM),
        _bf16(f"{mtp}eh_proj.weight", (s.hidden, 2 * s.hidden), Init.EH_PROJ),
        _bf16(f"{mtp}shared_head.norm.weight", (s.hidden,), Init.NORM),
    ]
    return out
