"""The divisive loop: split the strongest candidate while it is significant, then look again."""

from collections.abc import Callable, Sequence
from typing import Generic

import numpy as np

from analysis.stats.edivisive.base import (
    Calculator,
    ChangePoint,
    FloatArray,
    S,
    SignificanceTester,
    intervals_between,
)
from analysis.stats.edivisive.calculator import PairDistanceCalculator


class ChangePointDetector(Generic[S]):
    def __init__(
        self,
        tester: SignificanceTester[S],
        calculator: Callable[[FloatArray], Calculator] = PairDistanceCalculator,
    ):
        self.tester = tester
        self.calculator = calculator

    def change_points(self, series: Sequence[float] | FloatArray, offset: int = 0) -> list[ChangePoint[S]]:
        """Change points of `series`, sorted by index; `offset` is added to every index (for windows)."""
        x = np.asarray(series, dtype=np.float64)
        calc = self.calculator(x)
        found: list[ChangePoint[S]] = []
        while True:
            intervals = intervals_between(found, len(x))
            candidate = calc.next_candidate(intervals)
            if candidate is None:
                break
            cp = self.tester.change_point(candidate, x, intervals)
            if not self.tester.is_significant(cp):
                break
            found.append(cp)
            found.sort(key=lambda c: c.index)
        if offset:
            found = [ChangePoint(c.index + offset, c.qhat, c.stats) for c in found]
        return found
