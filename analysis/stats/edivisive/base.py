"""Dataclasses and abstract parts of E-divisive: candidates, change points, testers and calculators.

Intervals are half-open [start, stop); a change point at index i means "the new level starts at element i",
so it always splits an interval into two non-empty parts.
"""

import itertools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Interval:
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True, slots=True)
class CandidateChangePoint:
    """The index that maximises Q-hat over one interval, and that maximum."""

    index: int
    qhat: float


@dataclass(frozen=True, slots=True)
class BaseStats:
    pvalue: float


S = TypeVar("S", bound=BaseStats)


@dataclass(frozen=True, slots=True)
class ChangePoint(Generic[S]):
    """A candidate that passed (or is being judged by) a significance test."""

    index: int
    qhat: float
    stats: S

    def to_candidate(self) -> CandidateChangePoint:
        return CandidateChangePoint(self.index, self.qhat)


def intervals_between(change_points: Sequence[ChangePoint[S]] | Sequence[int], length: int) -> list[Interval]:
    """The segments that sorted change points cut [0, length) into; empty segments are dropped."""
    idx = sorted(cp if isinstance(cp, int) else cp.index for cp in change_points)
    bounds = [0, *idx, length]
    return [Interval(a, b) for a, b in itertools.pairwise(bounds) if b > a]


class Calculator(ABC):
    """Finds the best split of an interval by the energy statistic."""

    def __init__(self, series: FloatArray):
        self.series = series

    def next_candidate(self, intervals: Sequence[Interval]) -> CandidateChangePoint | None:
        """The strongest candidate over all intervals long enough to split (None when none is)."""
        found = [self.candidate(iv) for iv in intervals if len(iv) > 1]
        return max(found, key=lambda c: c.qhat) if found else None

    @abstractmethod
    def candidate(self, interval: Interval) -> CandidateChangePoint: ...


class SignificanceTester(ABC, Generic[S]):
    """Decides whether a candidate splits its interval into significantly different segments."""

    def __init__(self, max_pvalue: float):
        if not 0.0 < max_pvalue <= 1.0:
            raise ValueError(f"max_pvalue must lie in (0, 1], got {max_pvalue}")
        self.max_pvalue = max_pvalue

    def is_significant(self, cp: ChangePoint[S]) -> bool:
        return cp.stats.pvalue <= self.max_pvalue

    @abstractmethod
    def change_point(
        self, candidate: CandidateChangePoint, series: FloatArray, intervals: Sequence[Interval]
    ) -> ChangePoint[S]:
        """Stats for the candidate given the current segmentation (see `segments_around`)."""


def segments_around(index: int, intervals: Sequence[Interval]) -> tuple[Interval, Interval]:
    """The segments a change point separates: its interval's halves (split) or its neighbours (merge)."""
    for i, iv in enumerate(intervals):
        if iv.stop == index and i + 1 < len(intervals):
            return iv, intervals[i + 1]
        if iv.start < index < iv.stop:
            return Interval(iv.start, index), Interval(index, iv.stop)
    raise ValueError(f"index {index} is neither inside nor between the intervals {list(intervals)}")
