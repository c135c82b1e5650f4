"""What the stand-in answers on its right path: the correctness gate's reference for `backend: sim`.

On a GPU the reference is the pure-torch model of a synthetic checkpoint (synthetic.model.reference). The
stand-in runs no model, but what it answers is known by construction: its greedy tokens are a function of the
prompt and `sim.seed` (synthetic.server.tokens), and which drafts a verify step accepts is drawn from a generator
seeded by the prompt (synthetic.server.acceptance). So a launch of the stand-in can be held against what the same
launch computes with no wrong path: the sweep's `acceptance_rate`, none of `server.sim.fault`'s wrong paths, and no
known bug emulated. A fault that keeps the tokens and lowers acceptance on v1 and v2 alike (the
`flashmla_draft_decode_context` issue) is invisible to the v2/v1 comparison; this is what catches it.

Milliseconds for the check's prompts, computed from the sweep each time the gate judges (not stored: nothing
here depends on the run).
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.correctness.outputs import ReferenceOutputs, prompts_digest
from bench.sweep import SimSettings
from synthetic.server.acceptance import AcceptanceModel, prompt_rng, verify_steps
from synthetic.server.config import SimConfig
from synthetic.server.tokens import TokenTape, prompt_key

# Where the reference was computed (ReferenceOutputs.device): nowhere but here.
DEVICE = "stand-in"


def reference_outputs(
    sim: SimSettings, prompts: list[list[int]], output_len: int, steps: Iterable[int]
) -> ReferenceOutputs:
    """Each prompt's greedy tokens (`output_len`, EOS ignored as the check asks) and, per step count, each
    request's tokens per verify step with chain drafts (topk 1), as a stand-in launch with no wrong path
    reports them."""
    keys = [prompt_key(p, sim.seed) for p in prompts]
    tokens = [_greedy(key, output_len) for key in keys]
    accepts: dict[int, list[float]] = {}
    for n in sorted(set(steps)):
        draw = AcceptanceModel(steps=n, topk=1, rate=sim.acceptance_rate).sampler()
        per_request = [verify_steps(draw, prompt_rng(sim.seed, key), output_len) for key in keys]
        accepts[n] = [output_len / v if v else 1.0 for v in per_request]
    return ReferenceOutputs(
        prompts_digest=prompts_digest(prompts, output_len),
        tokens=tokens,
        accept_lengths=accepts,
        device=DEVICE,
    )


def _greedy(key: int, n: int) -> list[int]:
    tape = TokenTape(key, with_text=False, simulated_acc=False, eos_id=SimConfig().eos_token_id, eos_at=None)
    tape.extend_to(n)
    return tape.ids[:n]
