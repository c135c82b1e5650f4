"""Change points over a series: E-divisive means with Otava's (Hunter's) windowed split and merge.

1. Split: E-divisive inside each window of `window` points at a relaxed significance (10x `max_pvalue`
   below 0.05); the union is the *weak* change points. Windows keep an old shift from masking a newer,
   smaller one and cost O(window²). They advance by window/4 (Otava: window/2): at window/2 a shift on a
   window edge is seen only beside the next shift, whose mixed segment then fails the t-test.
2. Merge: re-test each weak point (Student's t between its segments) and drop the largest p-value while any
   is above `max_pvalue`, then the smallest relative change while any is below `min_magnitude`, re-testing
   the neighbours of each dropped point.

See docs/reference/regressions.md for the parameters and the false-positive rates they give.
"""

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from analysis.stats.edivisive.base import ChangePoint, FloatArray, intervals_between
from analysis.stats.edivisive.detector import ChangePointDetector
from analysis.stats.edivisive.significance import TTestSignificanceTester, TTestStats

TTestChangePoint = ChangePoint[TTestStats]


@dataclass(frozen=True, slots=True)
class ChangePointParams:
    """window: points per split window; max_pvalue: significance level of the final (merge) test;
    min_magnitude: smallest relative change kept (0.05 = 5 %), which silences real but tiny shifts."""

    window: int = 50
    max_pvalue: float = 0.001
    min_magnitude: float = 0.05

    def __post_init__(self) -> None:
        if self.window < 3:
            raise ValueError(f"window must be at least 3 points, got {self.window}")
        if not 0.0 < self.max_pvalue < 1.0:
            raise ValueError(f"max_pvalue must lie in (0, 1), got {self.max_pvalue}")
        if self.min_magnitude < 0.0:
            raise ValueError(f"min_magnitude must be >= 0, got {self.min_magnitude}")

    @property
    def first_pass_pvalue(self) -> float:
        # Otava's relaxation: the split step over-collects, so the merge step has something to choose from.
        p = self.max_pvalue
        return p * 10 if p < 0.05 else (p * 2 if p < 0.5 else p)


@dataclass(frozen=True, slots=True)
class SeriesChangePoint(TTestStats):
    """A change between series[index - 1] and series[index]: its segments' t-test figures and its Q-hat."""

    index: int
    qhat: float


def detect_change_points(
    values: Sequence[float] | FloatArray, params: ChangePointParams | None = None
) -> list[SeriesChangePoint]:
    """Significant, large-enough level shifts of `values` (in series order), sorted by index."""
    p = params or ChangePointParams()
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("values must be one-dimensional")
    if not np.all(np.isfinite(x)):
        raise ValueError("values must be finite: drop missing points before detecting change points")
    if len(x) < 3:
        return []
    lo, hi = float(x.min()), float(x.max())
    if p.min_magnitude > 0 and lo > 0 and hi / lo - 1.0 < p.min_magnitude:
        # Segment means lie within [min, max], so no change can reach the floor: skip the work (exact).
        return []
    weak = split(x, p.window, p.first_pass_pvalue)
    strong = merge(weak, x, p.max_pvalue, p.min_magnitude)
    return [_public(cp) for cp in strong]


def split(x: FloatArray, window: int, pvalue: float) -> list[TTestChangePoint]:
    """Weak change points: the union of E-divisive over overlapping windows, re-tested on the whole series."""
    detector = ChangePointDetector(TTestSignificanceTester(pvalue))
    step = max(1, window // 4)
    found: dict[int, TTestChangePoint] = {}
    start = 0
    while start < len(x):
        end = min(start + window, len(x))
        new = detector.change_points(x[start:end], offset=start) if end - start >= 3 else []
        for cp in new:
            found.setdefault(cp.index, cp)
        last = new[-1].index if new else 0
        start = max(last, start + step)
    return _retest(sorted(found.values(), key=lambda c: c.index), x)


def merge(
    change_points: list[TTestChangePoint], x: FloatArray, max_pvalue: float, min_magnitude: float
) -> list[TTestChangePoint]:
    """Drop the weakest change point until each survivor has p <= max_pvalue, magnitude >= min_magnitude."""
    cps = list(change_points)
    while cps:
        weakest = max(range(len(cps)), key=lambda i: cps[i].stats.pvalue)
        if cps[weakest].stats.pvalue <= max_pvalue:
            weakest = min(range(len(cps)), key=lambda i: cps[i].stats.magnitude)
            if cps[weakest].stats.magnitude >= min_magnitude:
                return cps
        del cps[weakest]
        # Both neighbours now border a longer segment: re-test them (Otava re-tests only the right ones).
        cps = _retest(cps, x, only={weakest - 1, weakest})
    return cps


def _retest(
    cps: list[TTestChangePoint], x: FloatArray, only: set[int] | None = None
) -> list[TTestChangePoint]:
    tester = TTestSignificanceTester(max_pvalue=1.0)
    intervals = intervals_between(cps, len(x))
    return [
        tester.change_point(cp.to_candidate(), x, intervals) if only is None or i in only else cp
        for i, cp in enumerate(cps)
    ]


def _public(cp: TTestChangePoint) -> SeriesChangePoint:
    return SeriesChangePoint(
        **asdict(cp.stats), index=cp.index, qhat=cp.qhat if math.isfinite(cp.qhat) else 0.0
    )
