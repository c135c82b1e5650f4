"""Summaries of a point's repeats: the median of every metric and a throughput confidence interval.

Why a Student-t interval on the mean: with 3 repeats the distribution-free interval on the median is at most
75 % ([min, max]; 95 % from n = 6), and a bootstrap cannot leave [min, max] either. The t-interval mean ±
t·s/√n is exact for normal repeats (close for a warmed-up server) and widens honestly as n shrinks (t = 4.30
at n = 3). The headline stays the median, which for n <= 3 lies inside the interval. The t quantile comes from
bench.stats.tdist."""

import math
import statistics
from collections.abc import Sequence

from bench.stats.tdist import t_quantile


def median_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float | None, float | None]:
    """(median, low, high): the median and the t-interval of the mean; one value: low = high = None."""
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
