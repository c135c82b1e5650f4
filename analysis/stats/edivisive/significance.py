"""Significance testers for E-divisive candidates.

`TTestSignificanceTester` (Otava's, Hunter, Fleming et al. 2023): two-sided Student's t between the segments
either side; cheap, works with a handful of points. `PermutationSignificanceTester` (Matteson & James): how
often a within-segment shuffle beats the Q-hat; no normality assumed, but p >= 1/(permutations+1).
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.stats.edivisive.base import (
    BaseStats,
    CandidateChangePoint,
    ChangePoint,
    FloatArray,
    Interval,
    SignificanceTester,
    segments_around,
)
from analysis.stats.edivisive.calculator import PairDistanceCalculator
from bench.stats.tdist import student_ttest


@dataclass(frozen=True, slots=True)
class TTestStats(BaseStats):
    mean_before: float
    mean_after: float
    std_before: float
    std_after: float
    n_before: int
    n_after: int

    @property
    def rel_change(self) -> float:
        return relative_change(self.mean_before, self.mean_after)

    @property
    def magnitude(self) -> float:
        return change_magnitude(self.mean_before, self.mean_after)


def relative_change(mean_before: float, mean_after: float) -> float:
    """mean_after / mean_before - 1 (0 when the level before is 0: no meaningful ratio)."""
    return mean_after / mean_before - 1.0 if mean_before else 0.0


def change_magnitude(mean_before: float, mean_after: float) -> float:
    """Otava's: the larger |relative change| forward or back, so a drop and its recovery weigh the same."""
    fwd = abs(relative_change(mean_before, mean_after))
    back = abs(mean_before / mean_after - 1.0) if mean_after else 0.0
    return max(fwd, back)


def segment_stats(left: FloatArray, right: FloatArray) -> TTestStats:
    test = student_ttest(left.tolist(), right.tolist())
    return TTestStats(
        pvalue=test.pvalue,
        mean_before=float(np.mean(left)),
        mean_after=float(np.mean(right)),
        std_before=float(np.std(left, ddof=1)) if len(left) > 1 else 0.0,
        std_after=float(np.std(right, ddof=1)) if len(right) > 1 else 0.0,
        n_before=len(left),
        n_after=len(right),
    )


class TTestSignificanceTester(SignificanceTester[TTestStats]):
    def change_point(
        self, candidate: CandidateChangePoint, series: FloatArray, intervals: Sequence[Interval]
    ) -> ChangePoint[TTestStats]:
        left, right = segments_around(candidate.index, intervals)
        stats = segment_stats(series[left.start : left.stop], series[right.start : right.stop])
        return ChangePoint(candidate.index, candidate.qhat, stats)


@dataclass(frozen=True, slots=True)
class PermutationStats(BaseStats):
    extreme: int
    permutations: int


class PermutationSignificanceTester(SignificanceTester[PermutationStats]):
    def __init__(self, max_pvalue: float, permutations: int = 199, seed: int | None = 0, power: float = 1.0):
        super().__init__(max_pvalue)
        self.permutations = permutations
        self.power = power
        self.rng = np.random.default_rng(seed)

    def change_point(
        self, candidate: CandidateChangePoint, series: FloatArray, intervals: Sequence[Interval]
    ) -> ChangePoint[PermutationStats]:
        extreme = 0
        for _ in range(self.permutations):
            shuffled = series.copy()
            for iv in intervals:  # permute within segments only: the null is "no further change"
                self.rng.shuffle(shuffled[iv.start : iv.stop])
            best = PairDistanceCalculator(shuffled, self.power).next_candidate(intervals)
            if best is not None and best.qhat >= candidate.qhat:
                extreme += 1
        pvalue = (extreme + 1) / (self.permutations + 1)
        return ChangePoint(
            candidate.index, candidate.qhat, PermutationStats(pvalue, extreme, self.permutations)
        )
