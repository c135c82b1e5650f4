"""Summaries of a point's repeats: the median of every metric, and a confidence interval for throughput.

Why a Student-t interval on the mean, and not an order-statistic or bootstrap interval on the median: a
point has few repeats (3 by default). The distribution-free interval [x_(j), x_(n-j+1)] covers the median
with probability 1 - 2·P(Binomial(n, 1/2) < j), which for n = 3 is at most 75 % ([min, max]) and reaches
95 % only from n = 6. A bootstrap on 3 values is no better: it can never leave [min, max] either. The
t-interval mean ± t_{(1+c)/2, n-1} · s/√n is exact when repeats are normal, which run-to-run throughput of
a warmed-up server is to a good approximation, and its width grows honestly as n shrinks (t = 4.30 for
n = 3). The headline number stays the median, robust to one odd repeat; for the near-symmetric spread of
repeats it sits next to the mean, and for n <= 3 it provably lies inside the interval.

The t quantile is computed from the exact CDF for integer degrees of freedom (Abramowitz & Stegun 26.7.3/4)
by bisection, so the module needs no SciPy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float | None, float | None]:
    """(median, low, high): the median of `values` and the two-sided t-interval of their mean.

    With one value there is no spread to speak of: low = high = None.
    """
    if not values:
        raise ValueError("median_ci needs at least one value")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    med = float(statistics.median(values))
    n = len(values)
    if n < 2:
        return med, None, None
    mean = statistics.fmean(values)
    half = t_quantile(confidence, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return med, mean - half, mean + half


def t_quantile(confidence: float, df: int) -> float:
    """t such that P(|T| <= t) = confidence for Student's T with `df` degrees of freedom."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    lo, hi = 0.0, 1.0
    while _t_central(hi, df) < confidence:
        hi *= 2.0
    # 200 halvings reach double precision long before; stop once the bracket stops shrinking.
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _t_central(mid, df) < confidence:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _t_central(t: float, df: int) -> float:
    """A(t|df) = P(|T| <= t), the closed form for integer degrees of freedom."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    s = math.sin(theta)
    if df % 2 == 1:
        if df == 1:
            return 2.0 * theta / math.pi
        term, acc = math.cos(theta), math.cos(theta)
        for k in range(3, df - 1, 2):  # (2·4···(k-1))/(1·3···k) cos^k θ
            term *= c2 * (k - 1) / k
            acc += term
        return 2.0 / math.pi * (theta + s * acc)
    term, acc = 1.0, 1.0
    for k in range(2, df - 1, 2):  # (1·3···(k-1))/(2·4···k) cos^k θ
        term *= c2 * (k - 1) / k
        acc += term
    return s * acc
