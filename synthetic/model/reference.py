"""A small pure-torch forward pass of the synthetic DeepSeek-V3 + MTP checkpoint, for tests and spot checks.

Rope pairs dims GPT-J style (2i, 2i+1) as SGLang's DeepSeek attention does by default (`rope_interleave`);
the mirror checkpoint depends on it. Simplified where the checks do not care: no YaRN, float32 math, no KV
cache; the MTP layer gets the target's final-norm hidden state, as sglang's logits processor captures it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from synthetic.model.build import CONFIG_FILE, WEIGHTS_FILE


@dataclass(frozen=True)
class SpecResult:
    """Greedy speculative decoding: committed tokens and one accept length per verify step."""

    output_ids: list[int]
    accept_lengths: list[int]


class ReferenceModel:
    def __init__(self, weights: dict[str, torch.Tensor], config: dict[str, Any], device: str = "cpu") -> None:
        # float32 everywhere; on a GPU with TF32 off, so "cuda" computes what "cpu" does, only sooner.
        self.device = torch.device(device)
        self.w = {k: v.to(self.device, torch.float32) for k, v in weights.items()}
        self.cfg = config
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.nope = int(config["qk_nope_head_dim"])
        self.rope = int(config["qk_rope_head_dim"])
        self.v_dim = int(config["v_head_dim"])
        self.kv_lora = int(config["kv_lora_rank"])
        self.eps = float(config["rms_norm_eps"])
        self.top_k = int(config["num_experts_per_tok"])
        self.experts = int(config["n_routed_experts"])
        self.first_dense = int(config["first_k_dense_replace"])
        self.theta = float(config["rope_theta"])
        self.interleaved = bool(config.get("rope_interleave", True))

    @classmethod
    def from_dir(cls, model_dir: str | os.PathLike[str], device: str = "cpu") -> ReferenceModel:
        from safetensors.torch import load_file

        d = Path(model_dir)
        config = json.loads((d / CONFIG_FILE).read_text())
        return cls(load_file(str(d / WEIGHTS_FILE)), config, device)

    def ids(self, rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def _rms(self, x: torch.Tensor, name: str) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.w[name]

    def _lin(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x @ self.w[name].T

    def _rotary(self, x: torch.Tensor) -> torch.Tensor:
        """Rotary embedding over the last dim of x [B, T, ..., rope]: pair i turns by position * theta_i."""
        t = x.shape[1]
        half = self.rope // 2
        inv = 1.0 / (self.theta ** (torch.arange(half, dtype=torch.float32, device=self.device) / half))
        ang = torch.arange(t, dtype=torch.float32, device=self.device)[:, None] * inv[None, :]  # [T, half]
        shape = [1, t] + [1] * (x.dim() - 3) + [half]
        cos, sin = ang.cos().view(shape), ang.sin().view(shape)
        if self.interleaved:  # GPT-J: pairs (2i, 2i+1), as SGLang's DeepSeek attention (rotate_gptj)
            x1, x2 = x[..., 0::2], x[..., 1::2]
            return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def _attention(self, p: str, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self._lin(
            self._rms(self._lin(x, f"{p}q_a_proj.weight"), f"{p}q_a_layernorm.weight"), f"{p}q_b_proj.weight"
        )
        q = q.view(b, t, self.heads, self.nope + self.rope)
        q_nope, q_pe = q[..., : self.nope], self._rotary(q[..., self.nope :])
        kv_a = self._lin(x, f"{p}kv_a_proj_with_mqa.weight")
        latent = self._rms(kv_a[..., : self.kv_lora], f"{p}kv_a_layernorm.weight")
        k_pe = self._rotary(kv_a[..., self.kv_lora :].unsqueeze(2))  # one rope key shared by all heads
        kv = self._lin(latent, f"{p}kv_b_proj.weight").view(b, t, self.heads, self.nope + self.v_dim)
        k_nope, v = kv[..., : self.nope], kv[..., self.nope :]
        k = torch.cat([k_nope, k_pe.expand(b, t, self.heads, self.rope)], dim=-1)
        qf = torch.cat([q_nope, q_pe], dim=-1)
        scores = torch.einsum("bthd,bshd->bhts", qf, k) / math.sqrt(self.nope + self.rope)
        causal = torch.ones(t, t, dtype=torch.bool, device=self.device).tril()
        attn = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        out = torch.einsum("bhts,bshd->bthd", attn, v).reshape(b, t, self.heads * self.v_dim)
        return self._lin(out, f"{p}o_proj.weight")

    def _mlp(self, p: str, x: torch.Tensor) -> torch.Tensor:
        gate = F.silu(self._lin(x, f"{p}gate_proj.weight"))
        return self._lin(gate * self._lin(x, f"{p}up_proj.weight"), f"{p}down_proj.weight")

    def _moe(self, p: str, x: torch.Tensor) -> torch.Tensor:
        scores = torch.sigmoid(self._lin(x, f"{p}gate.weight"))
        # noaux_tc: the bias only steers the choice; the weights are the unbiased scores.
        chosen = (scores + self.w[f"{p}gate.e_score_correction_bias"]).topk(self.top_k, dim=-1).indices
        weights = scores.gather(-1, chosen)
        if self.cfg.get("norm_topk_prob", True):
            weights = weights / weights.sum(-1, keepdim=True)
        weights = weights * float(self.cfg.get("routed_scaling_factor", 1.0))
        out = self._mlp(f"{p}shared_experts.", x)
        for e in range(self.experts):
            gate_e = (weights * (chosen == e)).sum(-1, keepdim=True)
            if bool((gate_e != 0).any()):
                out = out + gate_e * self._mlp(f"{p}experts.{e}.", x)
        return out

    def _layer(self, i: int, x: torch.Tensor) -> torch.Tensor:
        p = f"model.layers.{i}."
        x = x + self._attention(f"{p}self_attn.", self._rms(x, f"{p}input_layernorm.weight"))
        h = self._rms(x, f"{p}post_attention_layernorm.weight")
        is_moe = i >= self.first_dense or i == self.layers
        return x + (self._moe(f"{p}mlp.", h) if is_moe else self._mlp(f"{p}mlp.", h))

    @torch.no_grad()
    def target(self, ids: torch.Tensor, *, last: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, T] → (logits [B, T, V], final-norm hidden [B, T, H]); `last`: the last N logits only."""
        x = self.w["model.embed_tokens.weight"][ids]
        for i in range(self.layers):
            x = self._layer(i, x)
        normed = self._rms(x, "model.norm.weight")
        return self._lin(normed if last is None else normed[:, -last:], "lm_head.weight"), normed

    def target_next(self, ids: torch.Tensor) -> torch.Tensor:
        """Greedy next token after each row of ids [B, T] → [B]."""
        logits, _ = self.target(ids, last=1)
        return logits[:, -1].argmax(-1)

    def greedy(self, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        """Plain greedy decoding (no draft) of each prompt; prompts of one length go through as one batch."""
        out: list[list[int]] = [[] for _ in prompts]
        by_len: dict[int, list[int]] = {}
        for i, p in enumerate(prompts):
            by_len.setdefault(len(p), []).append(i)
        for rows in by_len.values():
            ids = self.ids([prompts[i] for i in rows])
            for _ in range(max_new_tokens):
                nxt = self.target_next(ids)
                ids = torch.cat([ids, nxt[:, None]], dim=1)
            for j, i in enumerate(rows):
                out[i] = ids[j, -max_new_tokens:].tolist()
        return out

    @torch.no_grad()
    def mtp(
        self, hidden: torch.Tensor, next_ids: torch.Tensor, *, last: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """hidden[:, i] with the token after it, next_ids[:, i] → (logits, MTP hidden)."""
        p = f"model.layers.{self.layers}."
        e = self._rms(self.w["model.embed_tokens.weight"][next_ids], f"{p}enorm.weight")
        h = self._rms(hidden, f"{p}hnorm.weight")
        x = self._lin(torch.cat([e, h], dim=-1), f"{p}eh_proj.weight")  # embedding half first
        x = self._layer(self.layers, x)
        normed = self._rms(x, f"{p}shared_head.norm.weight")
        return self._lin(normed if last is None else normed[:, -last:], "lm_head.weight"), normed

    def draft(self, context: list[int], steps: int) -> list[int]:
        """EAGLE-style chain of `steps` greedy drafts after `context` (>= 2 tokens, the last committed)."""
        if len(context) < 2:
            raise ValueError("draft needs at least two context tokens (a prompt token and the first output)")
        ids = self.ids([context])
        _, target_hidden = self.target(ids[:, :-1], last=1)
        hidden, nxt = target_hidden, ids[:, 1:]
        drafts: list[int] = []
        for _ in range(steps):
            logits, mtp_hidden = self.mtp(hidden, nxt, last=1)
            tok = int(logits[0, -1].argmax())
            drafts.append(tok)
            # The next draft step extends the MTP sequence with its own hidden state and the token it drafted.
            hidden = torch.cat([hidden, mtp_hidden[:, -1:]], dim=1)
            nxt = torch.cat([nxt, self.ids([[tok]])], dim=1)
        return drafts

    def speculative_generate(self, prompt: list[int], steps: int, max_new_tokens: int) -> SpecResult:
        """Greedy chain speculative decoding (topk 1): draft `steps` tokens, verify with the target."""
        if steps < 1 or max_new_tokens < 1:
            raise ValueError("steps and max_new_tokens must be >= 1")
        out = [int(self.target_next(self.ids([prompt]))[0])]  # the prefill token
        accepts: list[int] = []
        while len(out) < max_new_tokens:
            context = prompt + out
            drafts = self.draft(context, steps)
            logits, _ = self.target(self.ids([context + drafts]), last=steps + 1)
            # preds[j] is the target's token after context + drafts[:j]
            preds = logits[0].argmax(-1).tolist()
            accepted = 0
            while accepted < steps and drafts[accepted] == preds[accepted]:
                accepted += 1
            out += [*drafts[:accepted], preds[accepted]]
            accepts.append(accepted + 1)
        return SpecResult(output_ids=out[:max_new_tokens], accept_lengths=accepts)


def top2_margin(model: ReferenceModel, ids: list[int]) -> float:
    """(top1 - top2) / |top1| of the target's logits after `ids`: how far the greedy choice is from a tie."""
    logits, _ = model.target(model.ids([ids]), last=1)
    top = logits[0, -1].topk(2).values
    return float((top[0] - top[1]) / top[0].abs().clamp_min(1e-6))
