"""The physical floor of a point: the bytes one decode step (or speculative cycle) must read from GPU memory,
over the GPU's memory bandwidth (docs/reference/synthetic-models.md#the-floor-of-a-step). Pure: a model
config, a GPU name and the point's shape in, a time out. A cycle is `steps` NextN passes plus the verify of
`batch x draft_tokens` tokens. Experts: balanced routing touches E·(1 − (1 − k/E)^n) of E in expectation (an
expectation of bytes bounds a window's mean step), taking the smaller reading where SGLang 0.5.13-0.5.15
overwrite a fused shared expert's slot; other routing counts k per layer. What is left out (norms, padding,
activations, all-reduces) keeps the floor below the truth."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.model_config import fp8_block, routed_experts, shard_config

# Peak memory bandwidth in TB/s from vendor data sheets; first match wins, so narrower nvidia-smi names first.
GPU_BANDWIDTH_TBPS: tuple[tuple[str, float], ...] = (
    (r"\bH200\b", 4.8),
    (r"\bH100\b.*\bPCIE\b", 2.0),
    (r"\bH100\b.*\bNVL\b", 3.9),
    (r"\bH100\b", 3.35),
    (r"\bH800\b", 3.35),
    (r"\bH20\b", 4.0),
    (r"\bB200\b", 8.0),
    (r"\bA100\b.*\b80GB\b.*\bPCIE\b", 1.935),
    (r"\bA100\b.*\b80GB\b", 2.039),
    (r"\bA100\b", 1.555),
)
_GPU_PATTERNS = tuple((re.compile(p), bw) for p, bw in GPU_BANDWIDTH_TBPS)
SCALE_BYTES = 4  # float32 weight_scale_inv per FP8 block
FLOOR_TOLERANCE = 1.0  # floor_fraction above this: measured faster than physics allows

Routing = Literal["balanced", "minimum"]


class FloorError(ValueError):
    """No floor for this point; the message says why (shown where the floor would be)."""


def gpu_bandwidth_tbps(gpu_name: str | None) -> float | None:
    """The GPU's peak memory bandwidth (TB/s) from the table, or None for a GPU it does not list."""
    name = (gpu_name or "").upper().replace("-", " ")
    return next((bw for pattern, bw in _GPU_PATTERNS if pattern.search(name)), None)


def _int(cfg: dict[str, Any], key: str, default: int | None = None) -> int:
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise FloorError(f"config.json has no usable {key} ({v!r})")
    return v


@dataclass(frozen=True)
class ModelShape:
    """What the floor reads of a DeepSeek-style (MLA, optionally MoE, optional NextN) config."""

    hidden: int
    layers: int
    dense_layers: int
    heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_rope: int
    qk_nope: int
    v_head: int
    intermediate: int
    moe_intermediate: int
    experts: int
    shared_experts: int
    experts_per_token: int
    vocab: int
    nextn_layers: int
    fp8_block: tuple[int, int] | None
    dtype_bytes: int = 2  # bf16: what the config's torch_dtype and every DeepSeek checkpoint store

    @classmethod
    def from_config(cls, cfg: dict[str, Any], tp: int = 1) -> ModelShape:
        """The shape one GPU of a `tp`-way deployment computes (bench.model_config.shard_config)."""
        if "kv_lora_rank" not in cfg:
            raise FloorError("not an MLA (DeepSeek-style) config: the floor reads kv_lora_rank")
        if tp != 1:
            cfg = shard_config(cfg, tp)
        layers = _int(cfg, "num_hidden_layers")
        experts = routed_experts(cfg)
        q_lora = cfg.get("q_lora_rank")
        return cls(
            hidden=_int(cfg, "hidden_size"),
            layers=layers,
            # first_k_dense_replace: dense layers first; a dense model (no experts) is all dense.
            dense_layers=min(_int(cfg, "first_k_dense_replace", 0), layers) if experts else layers,
            heads=_int(cfg, "num_attention_heads"),
            q_lora_rank=q_lora if isinstance(q_lora, int) and q_lora > 0 else None,
            kv_lora_rank=_int(cfg, "kv_lora_rank"),
            qk_rope=_int(cfg, "qk_rope_head_dim"),
            qk_nope=_int(cfg, "qk_nope_head_dim"),
            v_head=_int(cfg, "v_head_dim"),
            intermediate=_int(cfg, "intermediate_size"),
            moe_intermediate=_int(cfg, "moe_intermediate_size", 0) if experts else 0,
            experts=experts,
            shared_experts=_int(cfg, "n_shared_experts", 0) if experts else 0,
            experts_per_token=_int(cfg, "num_experts_per_tok", 0) if experts else 0,
            vocab=_int(cfg, "vocab_size"),
            nextn_layers=_int(cfg, "num_nextn_predict_layers", 0),
            fp8_block=fp8_block(cfg),
        )

    def linear(self, out: int, inp: int) -> int:
        """One projection [out, in] as stored: FP8 + float32 block scales, or bf16."""
        if self.fp8_block is None:
            return out * inp * self.dtype_bytes
        b0, b1 = self.fp8_block
        return out * inp + math.ceil(out / b0) * math.ceil(inp / b1) * SCALE_BYTES

    def mlp(self, width: int) -> int:
        """gate, up and down of a SwiGLU MLP of this width."""
        return 2 * self.linear(width, self.hidden) + self.linear(self.hidden, width)

    @property
    def attention(self) -> int:
        h, heads = self.hidden, self.heads
        qk = self.qk_nope + self.qk_rope
        if self.q_lora_rank:
            q = self.linear(self.q_lora_rank, h) + self.linear(heads * qk, self.q_lora_rank)
        else:
            q = self.linear(heads * qk, h)
        kv = self.linear(self.kv_lora_rank + self.qk_rope, h) + self.linear(
            heads * (self.qk_nope + self.v_head), self.kv_lora_rank
        )
        return q + kv + self.linear(h, heads * self.v_head)

    @property
    def expert(self) -> int:
        return self.mlp(self.moe_intermediate)

    @property
    def router(self) -> int:
        return self.experts * self.hidden * self.dtype_bytes

    @property
    def head(self) -> int:
        """The LM head (and the embedding table: the same size), bf16."""
        return self.vocab * self.hidden * self.dtype_bytes

    @property
    def eh_proj(self) -> int:
        """NextN's input projection [hidden, 2 x hidden], bf16 (a plain nn.Linear in SGLang)."""
        return 2 * self.hidden * self.hidden * self.dtype_bytes

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers

    def weight_bytes(self) -> dict[str, int]:
        """All stored weights (held, not read per step): target, NextN layer, embed + head."""
        dense = self.dense_layers * (self.attention + self.mlp(self.intermediate))
        moe_layer = (
            self.attention
            + self.experts * self.expert
            + self.mlp(self.moe_intermediate * self.shared_experts)
            + self.router
        )
        nextn = self.nextn_layers * (
            moe_layer if self.experts else self.attention + self.mlp(self.intermediate)
        )
        return {
            "target_layers": dense + self.moe_layers * moe_layer,
            "nextn_layer": nextn + self.nextn_layers * self.eh_proj,
            "embed_and_head": 2 * self.head,
        }

    def touched_experts(self, tokens: int, routing: Routing) -> float:
        """Expert-sized weight blocks (routed + shared) one MoE layer reads for `tokens` tokens."""
        if not self.experts or tokens <= 0:
            return 0.0
        e, k, s = self.experts, self.experts_per_token, self.shared_experts
        if routing == "minimum":
            return float(min(k, e) + s)
        unfused = expected_experts(e, k, tokens) + s
        # SGLang 0.5.13-0.5.15 with a fused shared expert: k + s routed draws, the shared one never read.
        fused = expected_experts(e, min(k + s, e), tokens) if s else unfused
        return min(unfused, fused)

    def forward_bytes(
        self,
        *,
        tokens: int,
        requests: int,
        context: float,
        kv_bytes: int,
        routing: Routing,
        nextn: bool = False,
    ) -> dict[str, float]:
        """Bytes of one forward of `tokens` tokens from `requests` requests at mean context `context`: the
        target, or with `nextn` the NextN layer and its projection; both read the head."""
        experts = self.touched_experts(tokens, routing)
        moe_layer = self.attention + self.router + experts * self.expert
        if nextn:
            if not self.nextn_layers:
                raise FloorError("the config has no NextN (MTP) layer for a draft step")
            weights = self.nextn_layers * (
                self.eh_proj + (moe_layer if self.experts else self.attention + self.mlp(self.intermediate))
            )
            kv_layers = self.nextn_layers
        else:
            weights = self.dense_layers * (self.attention + self.mlp(self.intermediate))
            weights += self.moe_layers * moe_layer
            kv_layers = self.layers
        return {
            "weights": float(weights),
            # MLA caches per token and layer the latent and the rope key.
            "kv": requests * context * kv_layers * (self.kv_lora_rank + self.qk_rope) * kv_bytes,
            "head": float(self.head),
            "embed_rows": float(tokens * self.hidden * self.dtype_bytes),
        }


def expected_experts(experts: int, per_token: int, tokens: int) -> float:
    """Distinct experts touched in expectation when each token draws `per_token` of `experts` uniformly."""
    return 0.0 if experts <= 0 or tokens <= 0 else experts * (1.0 - (1.0 - per_token / experts) ** tokens)


@dataclass(frozen=True)
class Floor:
    """The floor of one step (decode) or cycle (speculative) and the bytes behind it."""

    ms: float
    bytes: float
    bandwidth_tbps: float
    parts: dict[str, float] = field(default_factory=dict)  # bytes by part: target, draft, kv, head, ...


def step_floor(
    shape: ModelShape,
    bandwidth_tbps: float,
    *,
    batch: int,
    context: float,
    steps: int | None = None,
    draft_tokens: int | None = None,
    kv_bytes: int = 2,
    routing: Routing = "balanced",
) -> Floor:
    """The floor of a decode step (steps None) or a speculative cycle (steps and draft_tokens set)."""
    if batch < 1 or bandwidth_tbps <= 0:
        raise FloorError(f"batch {batch} and bandwidth {bandwidth_tbps} TB/s must be positive")
    common = {"requests": batch, "context": context, "kv_bytes": kv_bytes, "routing": routing}
    if steps is None:
        parts = shape.forward_bytes(tokens=batch, **common)  # type: ignore[arg-type]
    else:
        if not draft_tokens or steps < 1:
            raise FloorError(
                f"a speculative cycle needs steps >= 1 and draft tokens, got {steps}/{draft_tokens}"
            )
        verify = shape.forward_bytes(tokens=batch * draft_tokens, **common)  # type: ignore[arg-type]
        draft = shape.forward_bytes(tokens=batch, nextn=True, **common)  # type: ignore[arg-type]
        parts = {
            "verify_weights": verify["weights"],
            "verify_kv": verify["kv"],
            "verify_head": verify["head"] + verify["embed_rows"],
            "draft": steps * (draft["weights"] + draft["head"] + draft["embed_rows"]),
            "draft_kv": steps * draft["kv"],
        }
    total = sum(parts.values())
    return Floor(
        ms=total / (bandwidth_tbps * 1e12) * 1e3, bytes=total, bandwidth_tbps=bandwidth_tbps, parts=parts
    )


def mean_context(input_len: int, output_len: int) -> float:
    """A request's mean context over its decode steps: the prompt plus half of what it generates."""
    return input_len + max(output_len - 1, 0) / 2.0


def measured_step_ms(tpot_ms: float | None, accept_length: float | None, speculative: bool) -> float | None:
    """The measured time of one step: TPOT for a decode step, TPOT x tokens per verify for a cycle."""
    if tpot_ms is None or tpot_ms <= 0 or not math.isfinite(tpot_ms):
        return None
    if not speculative:
        return tpot_ms
    if accept_length is None or accept_length <= 0 or not math.isfinite(accept_length):
        return None
    return tpot_ms * accept_length


def floor_fraction(floor_ms: float | None, step_ms: float | None) -> float | None:
    """floor / measured: 1 is a step at the memory bus's speed; above 1 is faster than physics allows."""
    return None if floor_ms is None or step_ms is None or step_ms <= 0 else floor_ms / step_ms


def below_floor_reason(floor_ms: float, step_ms: float) -> str:
    """The flag of a point measured faster than its floor."""
    return (
        f"faster than its physical floor: a step of {step_ms:.3g} ms against a floor of {floor_ms:.3g} ms "
        f"(floor_fraction {floor_ms / step_ms:.2f} > 1) is impossible; the server did not read what the "
        "model's config says (collapsed expert routing, or a wrong config.json)"
    )


def kv_cache_bytes(server_args: dict[str, Any]) -> int:
    """Bytes per cached value: 1 for `--kv-cache-dtype` fp8 variants, else the bf16 model's 2."""
    dtype = str(server_args.get("kv-cache-dtype") or server_args.get("kv_cache_dtype") or "auto").lower()
    return 1 if dtype.startswith("fp8") else 2


def gpu_for_floor(server_info: dict[str, Any] | None, host_gpu: str | None) -> str | None:
    """The GPU bounding the server: the one the stand-in emulates (`specbench_sim`), else the run's GPU."""
    sim = (server_info or {}).get("specbench_sim")
    if isinstance(sim, dict) and isinstance(sim.get("gpu_name"), str):
        return str(sim["gpu_name"])
    return host_gpu


def point_floor(
    cfg: dict[str, Any] | None,
    gpu_name: str | None,
    *,
    tp: int,
    batch: int,
    input_len: int,
    output_len: int,
    steps: int | None = None,
    draft_tokens: int | None = None,
    kv_bytes: int = 2,
    routing: Routing = "balanced",
) -> tuple[Floor | None, str | None]:
    """The floor of one point, or (None, why there is none)."""
    if cfg is None:
        return None, "no floor: the model is not a local directory with a config.json"
    if not gpu_name or gpu_name == "none":
        return None, "no floor: the run names no GPU"
    bandwidth = gpu_bandwidth_tbps(gpu_name)
    if bandwidth is None:
        return None, f"no floor: {gpu_name} is not in the bandwidth table (bench/floor.py GPU_BANDWIDTH_TBPS)"
    try:
        shape = ModelShape.from_config(cfg, tp)
        floor = step_floor(
            shape,
            bandwidth,
            batch=batch,
            context=mean_context(input_len, output_len),
            steps=steps,
            draft_tokens=draft_tokens,
            kv_bytes=kv_bytes,
            routing=routing,
        )
    except (FloorError, ValueError) as e:
        return None, f"no floor: {e}"
    return floor, None
