"""Why throughput moved: the acceptance part, the per-step-time part, and what neither explains.

A verify step (time S, draft + verify) commits L tokens per request (L = acceptance length with the bonus
token), so TPOT = S / L and, with C requests in flight, output throughput T ≈ C · L / S.

With r_T = T_b/T_a, r_L = L_b/L_a, r_S = S_b/S_a and the rest r_O = r_T · r_S / r_L (concurrency, prefill and
scheduling gaps, noise), exactly

    r_T = r_L / r_S · r_O        and        ln r_T = ln r_L − ln r_S + ln r_O,

so each part's share is its log term over ln r_T ("acceptance dropped 8%": r_L = 0.92). A no-spec point has
L = 1; without a TPOT the step part folds into the rest.
"""

import math
from dataclasses import dataclass

# Parts smaller than this (relative) are not worth a word in the summary.
NEGLIGIBLE = 0.01


@dataclass(frozen=True, slots=True)
class ThroughputFactors:
    """What one point measured: median output throughput, acceptance length and TPOT."""

    output_throughput: float
    accept_length: float | None = None  # None for a no-spec baseline point: one token per step
    tpot_ms: float | None = None

    @property
    def acceptance(self) -> float:
        return self.accept_length if self.accept_length and self.accept_length > 0 else 1.0

    @property
    def step_time_ms(self) -> float | None:
        """Time of one verify step as a request sees it: TPOT · L."""
        return self.tpot_ms * self.acceptance if self.tpot_ms and self.tpot_ms > 0 else None


@dataclass(frozen=True, slots=True)
class Attribution:
    throughput_change: float  # r_T - 1
    acceptance_change: float  # r_L - 1
    step_time_change: float | None  # r_S - 1 (positive = slower steps); None without TPOT on both sides
    other_change: float  # r_O - 1
    acceptance_share: float | None  # ln r_L / ln r_T; None when throughput did not move
    step_time_share: float | None  # -ln r_S / ln r_T
    other_share: float | None
    summary: str


def attribute(baseline: ThroughputFactors, candidate: ThroughputFactors) -> Attribution:
    """Split candidate-vs-baseline throughput change into acceptance, step time and the rest."""
    if baseline.output_throughput <= 0 or candidate.output_throughput <= 0:
        raise ValueError("throughputs must be positive to attribute a change")
    r_t = candidate.output_throughput / baseline.output_throughput
    r_l = candidate.acceptance / baseline.acceptance
    s_a, s_b = baseline.step_time_ms, candidate.step_time_ms
    r_s = s_b / s_a if s_a and s_b else None
    r_o = r_t * (r_s if r_s is not None else 1.0) / r_l

    ln_t = math.log(r_t)
    shares: tuple[float | None, float | None, float | None] = (None, None, None)
    if abs(ln_t) > 1e-12:
        shares = (
            math.log(r_l) / ln_t,
            -math.log(r_s) / ln_t if r_s is not None else None,
            math.log(r_o) / ln_t,
        )
    return Attribution(
        throughput_change=r_t - 1.0,
        acceptance_change=r_l - 1.0,
        step_time_change=r_s - 1.0 if r_s is not None else None,
        other_change=r_o - 1.0,
        acceptance_share=shares[0],
        step_time_share=shares[1],
        other_share=shares[2],
        summary=_summary(r_t, r_l, r_s, r_o),
    )


def _pct(r: float) -> str:
    return f"{abs(r - 1.0) * 100:.1f}%"


def _summary(r_t: float, r_l: float, r_s: float | None, r_o: float) -> str:
    """Largest contributions first, in the words an SGLang engineer would use."""
    parts: list[tuple[float, str]] = []
    if abs(r_l - 1.0) >= NEGLIGIBLE:
        parts.append((abs(math.log(r_l)), f"acceptance {'rose' if r_l > 1 else 'dropped'} {_pct(r_l)}"))
    if r_s is not None and abs(r_s - 1.0) >= NEGLIGIBLE:
        parts.append(
            (abs(math.log(r_s)), f"verify steps got {_pct(r_s)} {'slower' if r_s > 1 else 'faster'}")
        )
    if abs(r_o - 1.0) >= NEGLIGIBLE:
        what = "other (concurrency, prefill, scheduling)"
        parts.append((abs(math.log(r_o)), f"{what} {'+' if r_o > 1 else '-'}{_pct(r_o)}"))
    head = f"throughput {'+' if r_t >= 1 else '-'}{_pct(r_t)}"
    if not parts:
        return f"{head}: no part moved by {NEGLIGIBLE:.0%} or more"
    parts.sort(key=lambda p: p[0], reverse=True)
    return f"{head}: " + ", ".join(text for _, text in parts)
