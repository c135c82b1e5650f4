from __future__ import annotations

import math

import pytest

from bench.results import SampleMetrics
from bench.stats.intervals import median_ci, summarize_samples, t_quantile


@pytest.mark.parametrize(
    ("confidence", "df", "expected"),
    # Published two-sided Student t critical values.
    [
        (0.95, 1, 12.706205),
        (0.95, 2, 4.302653),
        (0.95, 4, 2.776445),
        (0.95, 30, 2.042272),
        (0.99, 5, 4.032143),
    ],
)
def test_t_quantile_matches_tables(confidence: float, df: int, expected: float) -> None:
    assert t_quantile(confidence, df) == pytest.approx(expected, abs=1e-6)


def test_median_ci_single_value_has_no_interval() -> None:
    assert median_ci([5.0]) == (5.0, None, None)


def test_median_ci_three_values() -> None:
    med, low, high = median_ci([10.0, 11.0, 13.0])
    mean, sd = 34 / 3, math.sqrt(((10 - 34 / 3) ** 2 + (11 - 34 / 3) ** 2 + (13 - 34 / 3) ** 2) / 2)
    half = 4.302653 * sd / math.sqrt(3)
    assert med == 11.0
    assert low == pytest.approx(mean - half, rel=1e-6)
    assert high == pytest.approx(mean + half, rel=1e-6)
    assert low is not None and high is not None and low < med < high


def test_median_ci_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        median_ci([])
    with pytest.raises(ValueError):
        median_ci([1.0, 2.0], confidence=1.0)


def _sample(tput: float, ttft: float | None) -> SampleMetrics:
    return SampleMetrics(
        duration_s=1.0,
        completed=8,
        failed=0,
        incomplete=0,
        total_input_tokens=80,
        total_output_tokens=int(tput),
        request_throughput=8.0,
        input_throughput=80.0,
        output_throughput=tput,
        total_throughput=tput + 80.0,
        ttft_p50_ms=ttft,
    )


def test_summarize_samples_takes_medians_and_skips_missing() -> None:
    s = summarize_samples([_sample(100.0, 5.0), _sample(120.0, None), _sample(110.0, 7.0)])
    assert s["output_throughput"] == 110.0
    assert s["ttft_p50_ms"] == 6.0  # median of the two repeats that have it
    assert s["accept_length"] is None
    assert s["n_samples"] == 3.0
    low, high = s["output_throughput_ci_low"], s["output_throughput_ci_high"]
    assert low is not None and high is not None and low < 110.0 < high
