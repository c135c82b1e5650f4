"""Attribution identities: throughput change = acceptance part / step-time part x the rest, exactly."""

from __future__ import annotations

import math

import pytest

from analysis.stats.attribution import ThroughputFactors, attribute


def test_pure_acceptance_drop() -> None:
    # Same step time (TPOT * L constant), acceptance -8%: throughput -8%.
    a = ThroughputFactors(output_throughput=1500.0, accept_length=3.0, tpot_ms=10.0)
    b = ThroughputFactors(output_throughput=1380.0, accept_length=2.76, tpot_ms=10.0 * 3.0 / 2.76)
    r = attribute(a, b)
    assert r.acceptance_change == pytest.approx(-0.08)
    assert r.step_time_change == pytest.approx(0.0, abs=1e-12)
    assert r.other_change == pytest.approx(0.0, abs=1e-12)
    assert r.acceptance_share == pytest.approx(1.0)
    assert r.summary == "throughput -8.0%: acceptance dropped 8.0%"


def test_pure_step_slowdown() -> None:
    a = ThroughputFactors(output_throughput=1500.0, accept_length=3.0, tpot_ms=10.0)
    b = ThroughputFactors(output_throughput=1500.0 / 1.06, accept_length=3.0, tpot_ms=10.6)
    r = attribute(a, b)
    assert r.step_time_change == pytest.approx(0.06)
    assert r.acceptance_change == 0.0
    assert r.step_time_share == pytest.approx(1.0)
    assert r.summary == "throughput -5.7%: verify steps got 6.0% slower"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (ThroughputFactors(1500.0, 3.0, 10.0), ThroughputFactors(1290.0, 2.8, 11.1)),
        (ThroughputFactors(900.0, 2.2, 7.5), ThroughputFactors(1010.0, 2.5, 7.2)),
        (ThroughputFactors(400.0, None, 20.0), ThroughputFactors(380.0, None, 21.5)),
    ],
)
def test_identity_and_shares(a: ThroughputFactors, b: ThroughputFactors) -> None:
    r = attribute(a, b)
    assert r.step_time_change is not None
    rebuilt = (1 + r.acceptance_change) / (1 + r.step_time_change) * (1 + r.other_change)
    assert rebuilt == pytest.approx(1 + r.throughput_change, rel=1e-12)
    assert r.acceptance_share is not None and r.step_time_share is not None and r.other_share is not None
    assert r.acceptance_share + r.step_time_share + r.other_share == pytest.approx(1.0)
    ln_t = math.log1p(r.throughput_change)
    assert r.acceptance_share * ln_t == pytest.approx(math.log1p(r.acceptance_change))


def test_mixed_change_lists_the_biggest_part_first() -> None:
    a = ThroughputFactors(1500.0, 3.0, 10.0)
    b = ThroughputFactors(1500.0 * 0.92 / 1.03, 2.76, 10.0 * 1.03 * 3.0 / 2.76)
    r = attribute(a, b)
    assert r.summary == "throughput -10.7%: acceptance dropped 8.0%, verify steps got 3.0% slower"


def test_baseline_points_and_missing_tpot() -> None:
    r = attribute(ThroughputFactors(400.0), ThroughputFactors(420.0))
    assert r.acceptance_change == 0.0
    assert r.step_time_change is None and r.step_time_share is None
    assert r.other_change == pytest.approx(0.05)
    assert "other" in r.summary
    flat = attribute(ThroughputFactors(400.0, 2.0, 5.0), ThroughputFactors(400.0, 2.0, 5.0))
    assert flat.acceptance_share is None
    assert flat.summary.endswith("no part moved by 1% or more")
    with pytest.raises(ValueError):
        attribute(ThroughputFactors(0.0), ThroughputFactors(1.0))
