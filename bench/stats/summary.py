"""A point from its repeats (the one aggregation rule; `runners.store.refresh_point` stores it): the worst
status with every reason, every metric's median, and the throughput interval (intervals.py says why)."""

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bench import catalog
from bench.results import STATUS_SEVERITY
from bench.stats.intervals import median_ci

# Statuses whose metrics describe what the server did; failed repeats have nothing to summarise.
MEASURED_STATUSES = frozenset({"ok", "unstable", "mode_mismatch", "invalid"})


@dataclass(frozen=True, slots=True)
class Repeat:
    repeat: int
    status: str
    reason: str | None
    metrics: Mapping[str, float | int | None]  # catalogue names; missing = not measured


@dataclass(frozen=True, slots=True)
class PointSummary:
    status: str
    reason: str | None
    repeats: int
    metrics: dict[str, float | int | None] = field(default_factory=dict)
    output_throughput_ci_low: float | None = None
    output_throughput_ci_high: float | None = None


def summarize_repeats(repeats: Sequence[Repeat]) -> PointSummary:
    """Worst repeat's status, all reasons; medians over measured repeats (counts `median_low`), else None."""
    if not repeats:
        return PointSummary(status="failed", reason="no repeat stored yet", repeats=0)
    ordered = sorted(repeats, key=lambda r: r.repeat)
    worst = max(ordered, key=lambda r: STATUS_SEVERITY.get(r.status, 99))
    reasons = [f"repeat {r.repeat}: {r.reason}" for r in ordered if r.reason]
    measured = [
        r for r in ordered if r.status in MEASURED_STATUSES and r.metrics.get("output_throughput") is not None
    ]
    metrics: dict[str, float | int | None] = {}
    for m in catalog.METRICS:
        values = [v for r in measured if (v := r.metrics.get(m.name)) is not None]
        if not values:
            metrics[m.name] = None
        elif all(isinstance(v, int) for v in values):
            metrics[m.name] = statistics.median_low(values)
        else:
            metrics[m.name] = float(statistics.median(values))
    low = high = None
    if throughputs := [float(v) for r in measured if (v := r.metrics.get("output_throughput")) is not None]:
        _, low, high = median_ci(throughputs)
    return PointSummary(
        status=worst.status,
        reason="; ".join(reasons) if reasons else None,
        repeats=len(ordered),
        metrics=metrics,
        output_throughput_ci_low=low,
        output_throughput_ci_high=high,
    )
