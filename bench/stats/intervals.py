"""Summaries of a point's repeats: the median of every metric, and a confidence interval for throughput.

Why a Student-t interval on the mean, and not an order-statistic or bootstrap interval on the median: a
point has few repeats (3 by default). The distribution-free interval [x_(j), x_(n-j+1)] covers the median
with probability 1 - 2·P(Binomial(n, 1/2) < j), which for n = 3 is at most 75 % ([min, max]) and reaches
95 % only from n = 6. A bootstrap on 3 values is no better: it can never leave [min, max] either. The
t-interval mean ± t_{(1+c)/2, n-1} · s/√n is exact when repeats are normal, which run-to-run throughput of
a warmed-up server is to a good approximation, and its width grows honestly as n shrinks (t = 4.30 for
n = 3). The headline number stays the median, robust to one odd repeat; for the near-symmetric spread of
repeats it sits next to the mean, and for n <= 3 it provably lies inside the interval.

The t quantile comes from bench.stats.tdist (no SciPy).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from bench.stats.tdist import t_quantile


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
