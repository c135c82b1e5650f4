"""A ratio of two configurations' metric (v2 over v1) with a confidence interval, on the log scale: spread is
multiplicative (a clock step scales every figure), so the interval is a ratio, never negative, symmetric in
which side is the denominator.

* Paired (repeat r of both sides measured next to each other): d_r = ln(b_r / a_r); ratio = exp(mean d),
interval exp(mean d ± t_{0.975, n-1} · s_d / √n); drift common to neighbours cancels. * Unpaired: Welch on the
logs, ratio = exp(mean ln b - mean ln a), SE √(s²_ln a / n_a + s²_ln b / n_b), Welch-Satterthwaite df. The
centre is the geometric mean ratio; for near-symmetric repeats it sits next to the ratio of medians."""

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bench.stats.tdist import t_quantile

Method = Literal["paired", "unpaired"]
RatioVerdict = Literal["faster", "slower", "no clear difference", "insufficient data"]


@dataclass(frozen=True, slots=True)
class RatioInterval:
    ratio: float
    low: float | None
    high: float | None
    n: int  # paired: common repeats; unpaired: the smaller side
    method: Method


def _logs(values: Sequence[float]) -> list[float]:
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError("a log-ratio interval needs positive, finite values")
    return [math.log(v) for v in values]


def half_width(low: float | None, ratio: float, high: float | None) -> float | None:
    """How far an interval reaches from its ratio, as a fraction: max(high/ratio - 1, 1 - low/ratio)."""
    if low is None or high is None or not ratio > 0:
        return None
    return max(high / ratio - 1.0, 1.0 - low / ratio)


def pairs_for(
    a: Sequence[float], b: Sequence[float], target: float, confidence: float = 0.95, cap: int = 1000
) -> int | None:
    """Pairs needed for the paired interval of b/a to lie within ratio x (1 +- target) at today's spread: the
    smallest n with t_{n-1} s_d / sqrt(n) <= ln(1 + target); None under 2 pairs or past `cap`."""
    if len(a) != len(b) or len(a) < 2:
        return None
    if not target > 0.0:
        raise ValueError(f"target must be positive, got {target}")
    d = [lb - la for la, lb in zip(_logs(a), _logs(b), strict=True)]
    sd, bound = statistics.stdev(d), math.log1p(target)

    def narrow_enough(n: int) -> bool:
        return t_quantile(confidence, n - 1) * sd / math.sqrt(n) <= bound

    # The half-width falls with n, so bisection finds the smallest n in a dozen quantiles, not one per n.
    if not narrow_enough(cap):
        return None
    return 2 + bisect.bisect_left(range(2, cap + 1), True, key=narrow_enough)


def paired_ratio(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> RatioInterval:
    """b over a, repeat by repeat (a[i] and b[i] measured next to each other)."""
    if len(a) != len(b) or not a:
        raise ValueError("paired values need the same, non-zero length")
    d = [lb - la for la, lb in zip(_logs(a), _logs(b), strict=True)]
    n = len(d)
    mean = statistics.fmean(d)
    if n < 2:
        return RatioInterval(math.exp(mean), None, None, n, "paired")
    half = t_quantile(confidence, n - 1) * statistics.stdev(d) / math.sqrt(n)
    return RatioInterval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, "paired")


def unpaired_ratio(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> RatioInterval:
    """b over a from two independent sets of repeats (Welch on the logs)."""
    if not a or not b:
        raise ValueError("both sides need at least one value")
    la, lb = _logs(a), _logs(b)
    diff = statistics.fmean(lb) - statistics.fmean(la)
    n = min(len(la), len(lb))
    if n < 2:
        return RatioInterval(math.exp(diff), None, None, n, "unpaired")
    sa, sb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    se = math.sqrt(sa + sb)
    if se == 0.0:
        return RatioInterval(math.exp(diff), math.exp(diff), math.exp(diff), n, "unpaired")
    df = (sa + sb) ** 2 / (sa * sa / (len(la) - 1) + sb * sb / (len(lb) - 1))
    half = t_quantile(confidence, df) * se
    return RatioInterval(math.exp(diff), math.exp(diff - half), math.exp(diff + half), n, "unpaired")


def verdict(low: float | None, high: float | None, *, higher_is_better: bool = True) -> RatioVerdict:
    """faster / slower when the whole interval lies on one side of 1, else no clear difference."""
    if low is None or high is None:
        return "insufficient data"
    if low > 1.0:
        return "faster" if higher_is_better else "slower"
    if high < 1.0:
        return "slower" if higher_is_better else "faster"
    return "no clear difference"
