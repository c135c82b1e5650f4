"""Golden series for change-point detection: known steps are found where they are, noise and tiny steps are not.

The series are pinned as literals (made once from a seeded generator, rounded), so a change in NumPy's random
streams cannot silently move the goalposts; the expected outputs are pinned per parameter set, like Otava's
golden tests.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from analysis.stats.changepoint import ChangePointParams, detect_change_points
from analysis.stats.edivisive import (
    ChangePointDetector,
    PairDistanceCalculator,
    PermutationSignificanceTester,
    TTestSignificanceTester,
)
from analysis.stats.edivisive.base import Interval, intervals_between, segments_around
from bench.stats.tdist import betainc, student_ttest, t_two_sided_p, welch_ttest

# Output throughput (tok/s) of one point over 70 nightly runs; drops 8% at index 40 (noise 0.8%).
STEP = [
    1479.5,
    1484.5,
    1499.9,
    1459.1,
    1497.7,
    1487.7,
    1479.2,
    1465.1,
    1473.7,
    1468.2,
    1467.7,
    1477.9,
    1489.2,
    1462.7,
    1457.1,
    1468.5,
    1469.4,
    1472.8,
    1477.9,
    1495.1,
    1480.0,
    1480.6,
    1479.7,
    1486.4,
    1493.7,
    1493.1,
    1487.8,
    1465.8,
    1487.7,
    1478.4,
    1484.1,
    1499.6,
    1448.3,
    1470.2,
    1486.6,
    1474.9,
    1479.6,
    1475.9,
    1503.2,
    1482.7,
    1359.2,
    1359.4,
    1369.0,
    1380.0,
    1360.9,
    1376.8,
    1363.4,
    1338.4,
    1376.3,
    1336.4,
    1363.1,
    1378.3,
    1381.2,
    1367.1,
    1341.7,
    1375.1,
    1360.0,
    1351.8,
    1358.7,
    1348.7,
    1355.9,
    1354.5,
    1363.0,
    1358.9,
    1367.9,
    1374.7,
    1349.7,
    1331.2,
    1380.0,
    1356.4,
]
# The same point with no change at all: 90 runs of noise (1.2%).
NOISE = [
    1481.9,
    1454.9,
    1494.0,
    1482.8,
    1478.3,
    1509.5,
    1477.3,
    1467.1,
    1483.5,
    1489.6,
    1496.4,
    1532.6,
    1484.3,
    1491.3,
    1461.5,
    1461.6,
    1483.8,
    1463.2,
    1495.3,
    1483.1,
    1491.3,
    1477.6,
    1504.8,
    1479.2,
    1464.7,
    1483.1,
    1488.2,
    1467.2,
    1460.3,
    1474.9,
    1467.3,
    1460.8,
    1494.1,
    1496.7,
    1480.4,
    1498.3,
    1468.0,
    1504.1,
    1480.0,
    1499.9,
    1452.8,
    1500.9,
    1469.1,
    1472.7,
    1466.9,
    1505.7,
    1441.6,
    1478.2,
    1510.3,
    1501.6,
    1481.7,
    1461.7,
    1501.3,
    1463.4,
    1463.7,
    1480.6,
    1476.6,
    1466.4,
    1519.2,
    1462.0,
    1488.2,
    1472.0,
    1508.2,
    1471.4,
    1518.6,
    1465.1,
    1467.2,
    1498.7,
    1449.7,
    1466.1,
    1490.1,
    1482.6,
    1453.6,
    1509.2,
    1458.0,
    1504.4,
    1473.6,
    1523.6,
    1452.2,
    1483.1,
    1461.9,
    1477.6,
    1489.9,
    1491.9,
    1465.1,
    1452.5,
    1473.9,
    1454.6,
    1466.9,
    1486.0,
]
# TPOT (ms) that rises 7.5% at index 35 and recovers at index 60.
TWO = [
    51.49,
    52.1,
    51.96,
    51.64,
    51.37,
    52.07,
    52.1,
    52.19,
    51.53,
    52.66,
    53.08,
    51.14,
    51.75,
    51.62,
    51.69,
    52.22,
    52.02,
    52.48,
    52.08,
    52.27,
    51.93,
    51.9,
    50.81,
    51.79,
    51.47,
    50.93,
    52.52,
    51.91,
    52.86,
    52.06,
    52.06,
    52.41,
    51.94,
    51.13,
    52.17,
    55.98,
    55.76,
    55.3,
    56.5,
    55.8,
    55.83,
    55.53,
    56.25,
    56.3,
    54.89,
    56.05,
    55.88,
    56.58,
    56.0,
    56.26,
    55.79,
    55.72,
    56.78,
    55.72,
    56.1,
    55.55,
    56.54,
    56.52,
    55.03,
    56.46,
    51.88,
    52.73,
    51.3,
    52.39,
    52.73,
    52.12,
    51.77,
    52.45,
    51.61,
    51.34,
    52.45,
    51.99,
    52.63,
    52.39,
    52.42,
    52.31,
    53.16,
    52.18,
    52.78,
    51.57,
    52.18,
    52.94,
    52.19,
    52.43,
    51.52,
    52.94,
    53.01,
    52.19,
    52.03,
    52.25,
]
# A real but tiny +2% step at index 40, measured very precisely (noise 0.15%).
TINY = [
    1001.1,
    1000.8,
    998.3,
    997.5,
    1001.0,
    1001.8,
    1000.2,
    996.7,
    1002.1,
    998.2,
    1001.0,
    999.6,
    997.9,
    1002.2,
    1001.2,
    999.6,
    1000.2,
    1000.5,
    1001.3,
    998.4,
    997.0,
    1002.5,
    999.6,
    1001.3,
    999.9,
    1000.5,
    998.6,
    1001.7,
    1001.1,
    1001.5,
    999.3,
    1000.7,
    1000.3,
    1001.1,
    999.6,
    998.9,
    999.7,
    1001.1,
    998.9,
    1001.0,
    1020.8,
    1021.3,
    1018.6,
    1017.3,
    1018.6,
    1020.3,
    1020.1,
    1018.1,
    1020.4,
    1016.8,
    1022.7,
    1019.5,
    1019.8,
    1018.4,
    1020.6,
    1019.3,
    1018.5,
    1018.2,
    1017.9,
    1018.9,
    1021.1,
    1021.1,
    1021.1,
    1018.2,
    1019.3,
    1019.0,
    1020.2,
    1021.2,
    1019.1,
    1018.8,
    1018.3,
    1018.4,
    1020.1,
    1018.0,
    1019.3,
    1021.1,
    1020.1,
    1020.3,
    1018.9,
    1020.6,
]

# Synthetic nightly throughput with shifts at 50 (-5%), 67 (+10%) and 78 (-5%). The first sits on the
# edge of Otava's window/2 grid (windows [0,50), [25,75), [50,..)): the only window holding it also holds the
# second shift, and its mixed right segment fails the t-test. Advancing by window/4 finds it.
EDGE = [
    2984.3,
    2972.1,
    2983.8,
    2958.8,
    3016.1,
    2980.7,
    2979.3,
    2947.1,
    2972.1,
    2975.2,
    2962.4,
    2991.8,
    2975.0,
    2985.5,
    2929.6,
    2992.4,
    2973.4,
    2953.8,
    2987.6,
    2995.4,
    2987.1,
    2954.4,
    2972.5,
    2985.0,
    2998.4,
    2941.5,
    2940.6,
    2972.2,
    2980.1,
    2996.3,
    2999.6,
    2989.5,
    2955.5,
    2985.8,
    2962.3,
    2995.4,
    2992.8,
    3001.4,
    3018.7,
    2987.4,
    2989.0,
    3017.3,
    2943.9,
    3000.8,
    2937.7,
    2984.9,
    3003.9,
    3004.2,
    2974.8,
    2961.3,
    2868.8,
    2783.4,
    2862.7,
    2812.0,
    2825.6,
    2827.2,
    2830.9,
    2805.3,
    2801.4,
    2839.9,
    2804.8,
    2797.8,
    2835.6,
    2788.2,
    2807.0,
    2868.9,
    2829.5,
    3115.5,
    3166.8,
    3119.5,
    3130.4,
    3087.7,
    3040.7,
    3160.9,
    3143.4,
    3104.7,
    3073.2,
    3088.5,
    2936.9,
    2928.8,
    2952.0,
    2963.4,
    2986.8,
    2909.3,
]

DEFAULT = ChangePointParams()
NO_FLOOR = ChangePointParams(min_magnitude=0.0)
SMALL_WINDOW = ChangePointParams(window=30, min_magnitude=0.0)
PARAMS = pytest.mark.parametrize(
    "params", [DEFAULT, NO_FLOOR, SMALL_WINDOW], ids=["default", "no-floor", "window30"]
)


def found(series: list[float], params: ChangePointParams) -> list[tuple[int, float]]:
    return [(cp.index, round(cp.rel_change, 4)) for cp in detect_change_points(series, params)]


@PARAMS
def test_clean_step_is_found_at_its_index(params: ChangePointParams) -> None:
    assert found(STEP, params) == [(40, -0.0798)]
    (cp,) = detect_change_points(STEP, params)
    assert cp.pvalue < 1e-40
    assert (cp.n_before, cp.n_after) == (40, 30)
    assert cp.mean_before == pytest.approx(np.mean(STEP[:40]))
    assert cp.magnitude == pytest.approx(max(abs(cp.rel_change), abs(cp.mean_before / cp.mean_after - 1)))


@PARAMS
def test_noise_alone_gives_no_change_point(params: ChangePointParams) -> None:
    assert found(NOISE, params) == []


@PARAMS
def test_step_and_recovery_are_both_found(params: ChangePointParams) -> None:
    assert found(TWO, params) == [(35, 0.0778), (60, -0.0662)]


def test_shift_on_a_window_edge_is_found() -> None:
    assert [cp.index for cp in detect_change_points(EDGE)] == [50, 67, 78]
    assert [round(cp.rel_change, 3) for cp in detect_change_points(EDGE)] == [-0.052, 0.102, -0.053]


def test_magnitude_floor_suppresses_a_tiny_step() -> None:
    assert found(TINY, NO_FLOOR) == [(40, 0.0194)]
    assert found(TINY, SMALL_WINDOW) == [(40, 0.0194)]
    assert found(TINY, DEFAULT) == []  # significant (p ~ 1e-68) but below the 5% floor
    assert found(TINY, ChangePointParams(min_magnitude=0.019)) == [(40, 0.0194)]


def test_false_positive_rate_on_noise_stays_low() -> None:
    """The rates docs/reference/regressions.md quotes, on 200 seeded noise series of 100 points (1.5% CV)."""
    rng = np.random.default_rng(7)
    series = rng.normal(1000.0, 15.0, size=(200, 100))
    with_floor = sum(bool(detect_change_points(s, DEFAULT)) for s in series)
    without = sum(bool(detect_change_points(s, NO_FLOOR)) for s in series)
    assert with_floor <= 2  # <= 1% of series
    assert without <= 10  # <= 5%: a t-test after choosing the best split is optimistic (see the docs)


def test_short_and_constant_series() -> None:
    assert detect_change_points([]) == []
    assert detect_change_points([1.0, 2.0]) == []
    assert detect_change_points([5.0] * 30) == []
    steps = detect_change_points([5.0] * 20 + [6.0] * 20)
    assert [(c.index, c.pvalue) for c in steps] == [(20, 0.0)]


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="finite"):
        detect_change_points([1.0, float("nan"), 2.0])
    with pytest.raises(ValueError):
        ChangePointParams(window=2)
    with pytest.raises(ValueError):
        ChangePointParams(max_pvalue=0.0)


def _brute_q(x: np.ndarray, s: int, e: int) -> tuple[int, float]:
    best = (-1, -np.inf)
    for tau, kappa in itertools.product(range(s + 1, e), range(s + 2, e + 1)):
        if kappa <= tau:
            continue
        a, b = x[s:tau], x[tau:kappa]
        n, m = len(a), len(b)
        between = np.abs(a[:, None] - b[None, :]).sum()
        wx = np.abs(a[:, None] - a[None, :]).sum() / 2
        wy = np.abs(b[:, None] - b[None, :]).sum() / 2
        q = 2 / (m + n) * between
        q -= 2 * m / ((m + n) * (n - 1)) * wx if n > 1 else 0.0
        q -= 2 * n / ((m + n) * (m - 1)) * wy if m > 1 else 0.0
        if q > best[1]:
            best = (tau, q)
    return best


@pytest.mark.parametrize("interval", [(0, 14), (0, 2), (3, 11), (5, 14)])
def test_vectorised_qhat_matches_the_definition(interval: tuple[int, int]) -> None:
    x = np.array(TWO[28:42])
    cand = PairDistanceCalculator(x).candidate(Interval(*interval))
    tau, q = _brute_q(x, *interval)
    assert cand.index == tau
    assert cand.qhat == pytest.approx(q, rel=1e-9)


def test_permutation_tester_agrees_on_a_clear_step() -> None:
    x = np.array(STEP[20:60])
    tester = PermutationSignificanceTester(max_pvalue=0.05, permutations=49, seed=1)
    cps = ChangePointDetector(tester).change_points(x)
    assert [c.index for c in cps] == [20]
    assert cps[0].stats.pvalue == pytest.approx(1 / 50)


def test_detector_offsets_windows() -> None:
    cps = ChangePointDetector(TTestSignificanceTester(0.01)).change_points(STEP[30:50], offset=30)
    assert [c.index for c in cps] == [40]


def test_segments_around_split_and_merge() -> None:
    ivs = intervals_between([10, 20], 30)
    assert ivs == [Interval(0, 10), Interval(10, 20), Interval(20, 30)]
    assert segments_around(15, ivs) == (Interval(10, 15), Interval(15, 20))  # a new split
    assert segments_around(20, ivs) == (Interval(10, 20), Interval(20, 30))  # an existing change point
    with pytest.raises(ValueError):
        segments_around(30, ivs)


# Reference values from scipy.stats (t.sf, ttest_ind, special.betainc), pinned so the suite needs no SciPy.
@pytest.mark.parametrize(
    ("t", "df", "p"),
    [
        (2.0, 10, 0.07338803477074037),
        (3.5, 2.7, 0.04652560492194133),
        (12.0, 48, 4.669137132173704e-16),
        (0.3, 1, 0.8144528418445154),
    ],
)
def test_t_tail_matches_scipy(t: float, df: float, p: float) -> None:
    assert t_two_sided_p(t, df) == pytest.approx(p, rel=1e-9)


def test_two_sample_tests_match_scipy() -> None:
    a, b = [1000.0, 1012.0, 991.0, 1003.0], [950.0, 962.0, 941.0, 958.0, 949.0]
    s = student_ttest(a, b)
    assert (s.t, s.df, s.pvalue) == pytest.approx((-8.774964387392123, 7, 5.027927841344667e-05), rel=1e-9)
    w = welch_ttest(a, b)
    assert (w.t, w.df, w.pvalue) == pytest.approx(
        (-8.716463972623675, 6.390552995391705, 8.872889064614689e-05), rel=1e-9
    )
    assert betainc(2.0, 3.0, 0.0) == 0.0
    assert betainc(2.0, 3.0, 0.4) == pytest.approx(0.5248, rel=1e-9)
