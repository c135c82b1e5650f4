"""E-divisive means change-point detection (Matteson & James 2014), in the shape of Apache Otava's package.

`base`: dataclasses, abstract tester and calculator; `calculator`: vectorised Q-hat; `significance`: Student's
t (Otava's default) and the original permutation test; `detector`: the divisive loop. Otava's windowed split
and merge sit on top, in `analysis.stats.changepoint`.
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
