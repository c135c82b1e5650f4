"""Run-vs-baseline verdicts: regressions and improvements are flagged only with a clear interval and a big
enough change; fewer than 3 repeats is `insufficient data`."""

from __future__ import annotations

import math

import pytest

from analysis.stats.compare import compare_samples, verdict_for
from bench.catalog import higher_is_better

BASE = [1480.2, 1492.7, 1471.9]


def test_clear_throughput_regression() -> None:
    c = compare_samples(BASE, [1361.0, 1370.4, 1355.8])
    assert c.verdict == "regression"
    assert c.delta == pytest.approx(-0.0795, abs=1e-3)
    assert c.ci_low is not None and c.ci_high is not None and c.delta is not None
    assert c.ci_low < c.delta < c.ci_high < 0
    assert c.significant
    assert c.pvalue is not None and c.pvalue < 0.001
    # Δ is the ratio of geometric means, so the columns beside it are those geometric means.
    assert c.center == "geometric mean"
    assert c.baseline == pytest.approx(math.exp(sum(map(math.log, BASE)) / 3))
    assert c.candidate / c.baseline - 1 == pytest.approx(c.delta)


@pytest.mark.parametrize(
    ("a", "b", "kwargs", "center"),
    [
        (BASE, [1361.0, 1370.4, 1355.8], {}, "geometric mean"),
        (BASE, [1361.0, 1370.4, 1355.8], {"method": "bootstrap"}, "median"),
        ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], {"metric": "failed"}, "mean"),
        (BASE, [1361.0], {}, "geometric mean"),  # too few repeats: still the t method's centre
        (BASE, [1361.0], {"method": "bootstrap"}, "median"),
    ],
)
def test_delta_is_computed_on_the_values_shown(
    a: list[float], b: list[float], kwargs: dict, center: str
) -> None:
    c = compare_samples(a, b, **kwargs)
    assert c.center == center
    assert c.baseline is not None and c.candidate is not None and c.delta is not None
    assert c.candidate / c.baseline - 1 == pytest.approx(c.delta)


def test_clear_improvement() -> None:
    c = compare_samples(BASE, [1620.0, 1633.1, 1611.5])
    assert c.verdict == "improvement"
    assert c.delta is not None and c.delta > 0.05


def test_latency_direction_is_reversed() -> None:
    assert not higher_is_better("tpot_p50_ms")
    assert not higher_is_better("failed")
    assert higher_is_better("accept_length")
    faster = compare_samples([12.1, 12.3, 12.0], [10.9, 11.0, 10.8], metric="tpot_p50_ms")
    assert faster.verdict == "improvement"
    slower = compare_samples([12.1, 12.3, 12.0], [13.6, 13.5, 13.8], metric="tpot_p50_ms")
    assert slower.verdict == "regression"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1480.0, 1490.0], [1300.0, 1310.0, 1305.0]),
        (BASE, [1300.0]),
        ([], []),
        (BASE, [None, 1300.0, 1301.0]),
    ],
)
def test_fewer_than_three_repeats_is_insufficient_data(a: list[float], b: list[float | None]) -> None:
    c = compare_samples(a, b)  # type: ignore[arg-type]
    assert c.verdict == "insufficient data"
    assert c.ci_low is None and c.ci_high is None
    assert "3 repeats" in c.note


def test_same_distribution_is_no_change() -> None:
    c = compare_samples(BASE, [1485.0, 1476.3, 1490.8])
    assert c.verdict == "no change"
    assert c.ci_low is not None and c.ci_high is not None and c.ci_low < 0 < c.ci_high


def test_significant_but_small_is_no_change() -> None:
    c = compare_samples([1000.0, 1000.5, 999.5], [1020.0, 1020.4, 1019.6])  # +2%, very tight
    assert c.significant
    assert c.verdict == "no change"
    assert "below the 5% threshold" in c.note
    assert compare_samples([1000.0, 1000.5, 999.5], [1020.0, 1020.4, 1019.6], threshold=0.01).verdict == (
        "improvement"
    )


def test_large_but_noisy_is_no_change() -> None:
    c = compare_samples([1000.0, 1300.0, 800.0], [900.0, 1150.0, 700.0])
    assert c.verdict == "no change"
    assert c.note.startswith("large but noisy")


def test_constant_repeats_give_a_point_interval() -> None:
    c = compare_samples([100.0] * 3, [90.0] * 3)
    assert c.verdict == "regression"
    assert c.ci_low == pytest.approx(-0.1) and c.ci_high == pytest.approx(-0.1)
    same = compare_samples([100.0] * 3, [100.0] * 3)
    assert same.verdict == "no change" and same.delta == 0.0


def test_zero_valued_metric_falls_back_to_linear_scale() -> None:
    c = compare_samples([0.0, 1.0, 2.0], [10.0, 11.0, 12.0], metric="failed")
    assert c.verdict == "regression"
    assert c.delta == pytest.approx(10.0)  # (11 - 1) / 1
    zero = compare_samples([0.0, 0.0, 0.0], [0.0, 1.0, 0.0], metric="failed")
    assert zero.verdict == "insufficient data"


def test_bootstrap_method() -> None:
    c = compare_samples(
        [1480.0, 1492.0, 1471.0, 1488.0, 1479.0],
        [1361.0, 1370.0, 1355.0, 1366.0, 1359.0],
        method="bootstrap",
    )
    assert c.method == "bootstrap"
    assert c.verdict == "regression"
    assert c.delta == pytest.approx(1361.0 / 1480.0 - 1)
    again = compare_samples(
        [1480.0, 1492.0, 1471.0, 1488.0, 1479.0], [1361.0, 1370.0, 1355.0, 1366.0, 1359.0], method="bootstrap"
    )
    assert (again.ci_low, again.ci_high) == (c.ci_low, c.ci_high)  # seeded: reproducible


def test_interval_is_exact_log_welch() -> None:
    a, b = [100.0, 102.0, 98.0], [90.0, 93.0, 87.0]
    c = compare_samples(a, b, confidence=0.9)
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    diff = sum(lb) / 3 - sum(la) / 3
    assert c.delta == pytest.approx(math.expm1(diff))
    assert c.ci_low is not None and c.ci_high is not None
    assert math.log1p(c.ci_low) + math.log1p(c.ci_high) == pytest.approx(2 * diff)  # symmetric in logs


def test_verdict_rules() -> None:
    assert verdict_for(-0.08, -0.1, -0.06, 0.05, higher=True) == "regression"
    assert verdict_for(-0.08, -0.1, 0.01, 0.05, higher=True) == "no change"
    assert verdict_for(-0.04, -0.05, -0.03, 0.05, higher=True) == "no change"
    assert verdict_for(-0.08, -0.1, -0.06, 0.05, higher=False) == "improvement"


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        compare_samples(BASE, BASE, confidence=1.0)
    with pytest.raises(ValueError):
        compare_samples(BASE, BASE, threshold=-0.1)
