"""The correctness gate's reference for `backend: sim`: what the stand-in answers on its right path. Tokens
and acceptance are seeded by the prompt, so it catches faults v1 and v2 share (flashmla_draft_decode_context).
"""

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
    """Each prompt's greedy tokens and, per step count, each request's tokens per verify step (topk 1)."""
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
