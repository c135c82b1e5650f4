"""The `mirror` checkpoint: attention decides every token; the NextN draft computes what the target computes.

Layer 0 is a *previous-token head* whose output picks the next token (`agree` mode could compute attention
wrongly without changing a token):

* Embeddings `e_x = [a, b * c_x, 0...]`, a = b = sqrt(hidden / 2), `c_x` a random unit code of C dims; dim 0
  is a constant that queries and rope keys read.
* Layer 0's attention has no content term; its constant rope query (A) and key (cos theta_i, sin theta_i)
  give score(d) = A * sum_i cos((d - 1) * theta_i) over the ROPE_PAIRS fastest GPT-J pairs, which beats
  every other distance by ATTENTION_GAP: each position attends to the one before it.
* The value path copies the attended code through kv_a, kv_b and o_proj into dims C+1..2C (norm beta = b).
* `lm_head` row y = [0, g1 * c_{P^-1(y)}, g2 * c_{Q^-1(y)}, 0...], g2 = 3 * g1: the greedy next token is
  **Q(token before the current one)** at ~3L against ~L for P(current) and sqrt(10 / C) L noise. Without
  attention it falls back to P (the `agree` model); wrong attention picks a wrong token.
* Other layers and MLPs are silenced. The NextN layer copies layer 0's attention, sees only the embedding
  (`eh_proj = [I | 0]`) and shares the head, so it reads what the target reads one position later: greedy
  acceptance is steps + 1 when the draft's attention is right, 1 when it is wrong.

P and Q are permutations with eos fixed, so no trajectory that starts away from eos reaches it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from synthetic.model.layout import KV_LORA_RANK, QK_NOPE_HEAD_DIM, QK_ROPE_HEAD_DIM, V_HEAD_DIM, SynthSizes

if TYPE_CHECKING:
    import torch

# Rope pairs (fastest first): 8 give the widest gap (1.07 * A) up to 4096; slow pairs barely turn.
ROPE_PAIRS = 8
# Softmax-logit margin between the previous position and any other one: e^-20 ~ 2e-9 of weight each.
ATTENTION_GAP = 20.0
# Logit scale L: the winner scores ~3L, the self-bigram ~L, the rest sqrt(10 / C) L.
LOGIT_SCALE = 6.0
PREVIOUS_WEIGHT = 3.0  # g2 / g1: how much more the previous token's code counts than the current one's
MIN_CODE_DIMS = 32


def code_dims(sizes: SynthSizes) -> int:
    """C: the code's width: it and its copy must fit the hidden size, the latent and the value heads."""
    return min(KV_LORA_RANK, (sizes.hidden - 1) // 2, sizes.heads * V_HEAD_DIM)


def check_sizes(sizes: SynthSizes) -> list[str]:
    c = code_dims(sizes)
    if c < MIN_CODE_DIMS:
        return [
            f"mirror mode needs a token code of >= {MIN_CODE_DIMS} dims (hidden >= {2 * MIN_CODE_DIMS + 1}); "
            f"hidden {sizes.hidden} and {sizes.heads} head(s) give {c}"
        ]
    return []


def rope_thetas(rope_theta: float) -> list[float]:
    """theta_i = base^(-2i/64), the frequency of rope pair i (SGLang's and the reference's formula)."""
    half = QK_ROPE_HEAD_DIM // 2
    return [rope_theta ** (-i / half) for i in range(half)]


def kernel_gap(rope_theta: float, max_position: int, pairs: int = ROPE_PAIRS) -> float:
    """min over d != 1 (0 <= d < max_position) of sum_i (1 - cos((d - 1) theta_i)), unit amplitude."""
    thetas = rope_thetas(rope_theta)[:pairs]
    return min(sum(1.0 - math.cos((d - 1) * t) for t in thetas) for d in range(max_position) if d != 1)


def apply(
    tensors: dict[str, torch.Tensor],
    sizes: SynthSizes,
    perms: tuple[list[int], list[int]],
    codes: torch.Tensor,
    *,
    rope_theta: float,
) -> None:
    """Overwrite embedding, head and layer 0's and NextN's attention; `perms` = (P, Q), `codes` [vocab, C]."""
    import torch

    h, c, vocab = sizes.hidden, code_dims(sizes), sizes.vocab
    a = b = math.sqrt(h / 2.0)
    beta = b
    p_map, q_map = perms

    embed = torch.zeros(vocab, h)
    embed[:, 0] = a
    embed[:, 1 : 1 + c] = b * codes
    head = torch.zeros(vocab, h)
    # The final norm divides by rms(e + attention) = sqrt(1 + beta^2 / h): fold it into g1 and g2.
    rms = math.sqrt(1.0 + beta * beta / h)
    g1, g2 = LOGIT_SCALE * rms / b, PREVIOUS_WEIGHT * LOGIT_SCALE * rms / beta
    head[torch.tensor(p_map), 1 : 1 + c] = g1 * codes
    head[torch.tensor(q_map), 1 + c : 1 + 2 * c] = g2 * codes
    tensors["model.embed_tokens.weight"] = embed.to(torch.bfloat16).contiguous()
    tensors["lm_head.weight"] = head.to(torch.bfloat16).contiguous()

    attention = _previous_token_head(sizes, a=a, beta=beta, rope_theta=rope_theta)
    for layer in (0, sizes.layers):  # the target's first layer and the NextN layer mirror each other
        for name, value in attention.items():
            tensors[f"model.layers.{layer}.self_attn.{name}"] = value.to(torch.bfloat16).contiguous()


def _previous_token_head(
    sizes: SynthSizes, *, a: float, beta: float, rope_theta: float
) -> dict[str, torch.Tensor]:
    import torch

    h, c, heads, rank = sizes.hidden, code_dims(sizes), sizes.heads, sizes.q_lora_rank
    qk_head = QK_NOPE_HEAD_DIM + QK_ROPE_HEAD_DIM
    softmax_scale = 1.0 / math.sqrt(qk_head)
    gap = kernel_gap(rope_theta, sizes.max_position_embeddings)
    amplitude = ATTENTION_GAP / (softmax_scale * gap)
    thetas = rope_thetas(rope_theta)[:ROPE_PAIRS]
    query = torch.zeros(QK_ROPE_HEAD_DIM)
    key = torch.zeros(QK_ROPE_HEAD_DIM)
    for i, theta in enumerate(thetas):
        # GPT-J pairs (2i, 2i+1): q.k after rotating by t and s is A cos((t - s) theta - theta).
        query[2 * i] = amplitude
        key[2 * i], key[2 * i + 1] = math.cos(theta), math.sin(theta)

    q_a = torch.zeros(rank, h)
    q_a[0, 0] = 1.0  # reads the constant dim; q_a_layernorm makes it sqrt(rank) exactly
    q_b = torch.zeros(heads * qk_head, rank)
    for head in range(heads):
        q_b[head * qk_head + QK_NOPE_HEAD_DIM : (head + 1) * qk_head, 0] = query / math.sqrt(rank)
    kv_a = torch.zeros(KV_LORA_RANK + QK_ROPE_HEAD_DIM, h)
    kv_a[torch.arange(c), 1 + torch.arange(c)] = 1.0  # the code into the latent (normed to sqrt(512) * code)
    kv_a[KV_LORA_RANK:, 0] = key / a  # the rope key, from the constant dim: the same for every token
    kv_b = torch.zeros(heads * (QK_NOPE_HEAD_DIM + V_HEAD_DIM), KV_LORA_RANK)
    o = torch.zeros(h, heads * V_HEAD_DIM)
    for k in range(c):
        head, j = divmod(k, V_HEAD_DIM)
        kv_b[head * (QK_NOPE_HEAD_DIM + V_HEAD_DIM) + QK_NOPE_HEAD_DIM + j, k] = 1.0
        o[1 + c + k, head * V_HEAD_DIM + j] = beta / math.sqrt(KV_LORA_RANK)
    ones = torch.ones
    return {
        "q_a_proj.weight": q_a,
        "q_a_layernorm.weight": ones(rank),
        "q_b_proj.weight": q_b,
        "kv_a_proj_with_mqa.weight": kv_a,
        "kv_a_layernorm.weight": ones(KV_LORA_RANK),
        "kv_b_proj.weight": kv_b,
        "o_proj.weight": o,
    }


def continuation(previous_map: list[int], prompt: list[int], n: int) -> list[int]:
    """The `n` greedy tokens of a mirror checkpoint after `prompt` (>= 2 tokens): x_{t+1} = Q(x_{t-1})."""
    if len(prompt) < 2:
        raise ValueError("a mirror checkpoint's continuation needs at least two prompt tokens")
    seq = list(prompt[-2:])
    for _ in range(n):
        seq.append(previous_map[seq[-2]])
    return seq[2:]
