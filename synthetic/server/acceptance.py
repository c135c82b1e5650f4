"""How many drafted tokens one verify step accepts: the analytic truth the harness is tested against.

With topk 1, E[tokens per verify step] = (1 - p**(steps+1)) / (1 - p); with topk > 1 the per-depth
acceptance is 1 - (1 - p)**topk. `SGLANG_SIMULATE_ACC_LEN=L` overrides it as SGLang does. Draws are seeded
by the prompt, so `verify_steps` replays a request without a server (synthetic.server.reference).
"""

import math
import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class AcceptanceModel:
    steps: int
    topk: int
    rate: float
    simulate_len: float | None = None
    simulate_method: str = "match-expected"
    max_accepted: int | None = None

    @property
    def per_depth_rate(self) -> float:
        return 1.0 - (1.0 - self.rate) ** max(1, self.topk)

    @property
    def acceptable(self) -> int:
        """The most drafts one verify step can accept: `steps`, unless a wrong draft path caps it."""
        return self.steps if self.max_accepted is None else min(self.steps, self.max_accepted)

    def expected_tokens_per_step(self) -> float:
        if self.simulate_len is not None:
            return self._clamped_len()
        p, n = self.per_depth_rate, self.acceptable
        if p >= 1.0:
            return float(n + 1)
        return (1.0 - p ** (n + 1)) / (1.0 - p)

    def sample(self, rng: random.Random) -> int:
        """Accepted drafts (bonus token excluded) for one verify step."""
        return self.sampler()(rng)

    def sampler(self) -> Callable[[random.Random], int]:
        """`sample` with its constants precomputed: the scheduler calls it per request-step."""
        if self.simulate_len is not None:
            return lambda rng: self._sample_simulated(rng) - 1
        p, steps = self.per_depth_rate, self.acceptable
        if p <= 0.0:
            return lambda rng: 0
        if p >= 1.0:
            return lambda rng: steps
        inv_log_p = 1.0 / math.log(p)
        log = math.log

        def draw(rng: random.Random) -> int:
            # Inverse CDF of the truncated geometric: one draw instead of a loop over the steps.
            accepted = int(log(1.0 - rng.random()) * inv_log_p)
            return accepted if accepted < steps else steps

        return draw

    def _clamped_len(self) -> float:
        assert self.simulate_len is not None
        return min(max(self.simulate_len, 1.0), float(self.steps + 1))

    def _sample_simulated(self, rng: random.Random) -> int:
        length = self._clamped_len()
        if self.simulate_method == "multinomial":
            drawn = round(rng.gauss(length, 0.5))
        else:
            low = math.floor(length)
            drawn = low + (1 if rng.random() < length - low else 0)
        return min(max(drawn, 1), self.steps + 1)


def prompt_rng(seed: int, key: int) -> random.Random:
    """Seeded by `sim.seed` and the prompt: the same acceptance on every server, v1 and v2 alike."""
    return random.Random(f"{seed}:prompt-{key}")


def verify_steps(draw: Callable[[random.Random], int], rng: random.Random, limit: int) -> int:
    """Tokens per verify step for `limit` new tokens (the prefill gives the first), cut at the limit."""
    done, steps = min(limit, 1), 0
    while done < limit:
        done += min(draw(rng) + 1, limit - done)
        steps += 1
    return steps
