"""E-divisive means change-point detection (Matteson & James 2014), in the shape of Apache Otava's package.

`base` holds the dataclasses and the abstract tester/calculator, `calculator` the vectorised Q-hat,
`significance` the testers (Student's t, as Otava's default analysis, and the original permutation test),
`detector` the divisive loop. Nothing here knows where a series comes from; `analysis.stats.changepoint` adds
Otava's windowed split and merge on top.
"""

from analysis.stats.edivisive.base import (
    BaseStats,
    Calculator,
    CandidateChangePoint,
    ChangePoint,
    SignificanceTester,
)
from analysis.stats.edivisive.calculator import PairDistanceCalculator
from analysis.stats.edivisive.detector import ChangePointDetector
from analysis.stats.edivisive.significance import (
    PermutationSignificanceTester,
    PermutationStats,
    TTestSignificanceTester,
    TTestStats,
)
