from __future__ import annotations

import math

import pytest

from bench.stats.intervals import median_ci
from bench.stats.summary import Repeat, summarize_repeats
from bench.stats.tdist import t_quantile


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


def _repeat(
    i: int, tput: float | None, ttft: float | None, status: str = "ok", reason: str | None = None
) -> Repeat:
    metrics: dict[str, float | int | None] = {
        "output_throughput": tput,
        "ttft_p50_ms": ttft,
        "completed": 8 + i,
    }
    return Repeat(i, status, reason, metrics)


def test_summarize_repeats_takes_medians_and_skips_missing() -> None:
    s = summarize_repeats([_repeat(0, 100.0, 5.0), _repeat(1, 120.0, None), _repeat(2, 110.0, 7.0)])
    assert (s.status, s.reason, s.repeats) == ("ok", None, 3)
    assert s.metrics["output_throughput"] == 110.0
    assert s.metrics["ttft_p50_ms"] == 6.0  # median of the two repeats that have it
    assert s.metrics["accept_length"] is None
    assert s.metrics["completed"] == 9 and isinstance(s.metrics["completed"], int)
    low, high = s.output_throughput_ci_low, s.output_throughput_ci_high
    assert low is not None and high is not None and low < 110.0 < high


def test_summarize_repeats_worst_status_every_reason_and_no_failed_metrics() -> None:
    s = summarize_repeats(
        [
            _repeat(2, 90.0, 5.0, "unstable", "p99 TTFT high"),
            _repeat(0, 100.0, 5.0),
            _repeat(1, None, None, "failed", "server died"),
        ]
    )
    assert s.status == "failed"
    assert s.reason == "repeat 1: server died; repeat 2: p99 TTFT high"
    assert s.metrics["output_throughput"] == 95.0  # the failed repeat carries no numbers
    assert summarize_repeats([]).status == "failed"
