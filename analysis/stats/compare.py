"""Run vs baseline: the effect of a change on one point, from the per-repeat samples of both runs.

delta = candidate / baseline - 1: for positive metrics the ratio of geometric means, with a Welch t-interval
on log means mapped back through exp (on logs a ratio is a difference and noise near symmetric); metrics that
can be zero use the difference of means over |mean(a)|. Flagged only when the interval excludes zero *and*
|delta| >= threshold (5 %): a tight +0.8 % and a large noisy shift both read "no change". Under `min_repeats`
(3) a side is "insufficient data" (at two repeats the t quantile is 12.7). `method="bootstrap"`: a percentile
bootstrap of the ratio of medians, for many heavy-tailed repeats (bench/stats/intervals.py).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from bench.catalog import higher_is_better
from bench.stats.tdist import t_quantile, welch_ttest

ChangeVerdict = Literal["regression", "improvement", "no change", "insufficient data"]
Method = Literal["t", "bootstrap"]

DEFAULT_THRESHOLD = 0.05
DEFAULT_CONFIDENCE = 0.95
MIN_REPEATS = 3


@dataclass(frozen=True, slots=True)
class Comparison:
    metric: str
    n_baseline: int
    n_candidate: int
    # The centres Δ is computed on (`center`): candidate / baseline - 1 == delta, always.
    baseline: float | None
    candidate: float | None
    delta: float | None  # relative change, candidate vs baseline (0.05 = +5 %)
    ci_low: float | None
    ci_high: float | None
    pvalue: float | None
    verdict: ChangeVerdict
    higher_is_better: bool
    method: str
    note: str = ""
    # "geometric mean" (t, positive values), "median" (bootstrap; too few repeats) or "mean" (can be 0).
    center: str = "median"

    @property
    def significant(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None and (self.ci_low > 0 or self.ci_high < 0)


def compare_samples(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    metric: str = "output_throughput",
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    method: Method = "t",
    min_repeats: int = MIN_REPEATS,
    higher: bool | None = None,
    n_boot: int = 4000,
    seed: int = 0,
) -> Comparison:
    """One point's repeats in two runs (None, NaN ignored); which way is better: catalogue or `higher`."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    a = _clean(baseline)
    b = _clean(candidate)
    hib = higher_is_better(metric) if higher is None else higher
    base: dict[str, Any] = {
        "metric": metric,
        "n_baseline": len(a),
        "n_candidate": len(b),
        "baseline": float(np.median(a)) if len(a) else None,
        "candidate": float(np.median(b)) if len(b) else None,
        "higher_is_better": hib,
        "method": method,
    }
    if method == "t" and len(a) and len(b) and np.all(a > 0) and np.all(b > 0):
        # The t method's Δ is a ratio of geometric means: show those, with too few repeats as well.
        base["baseline"], base["candidate"] = _geomean(a), _geomean(b)
        base["center"] = "geometric mean"
    if len(a) < min_repeats or len(b) < min_repeats:
        note = f"needs >= {min_repeats} repeats on each side (have {len(a)} and {len(b)})"
        return _insufficient(base, note, _ratio(base["baseline"], base["candidate"]))
    if method == "bootstrap":
        if np.any(a <= 0) or np.any(b <= 0):
            return _insufficient(base, "bootstrap of a ratio needs positive values")
        delta, low, high = _bootstrap_ratio(a, b, confidence, n_boot, seed)
        pvalue = welch_ttest(np.log(a).tolist(), np.log(b).tolist()).pvalue
    elif np.all(a > 0) and np.all(b > 0):
        delta, low, high, pvalue = _log_welch(a, b, confidence)
    else:
        scale = abs(float(np.mean(a)))
        if scale == 0.0:
            return _insufficient(base, "baseline mean is 0: no relative change to speak of")
        diff, half, pvalue = _welch_diff(a, b, confidence)
        delta, low, high = diff / scale, (diff - half) / scale, (diff + half) / scale
        base["baseline"], base["candidate"] = float(np.mean(a)), float(np.mean(b))
        base["center"] = "mean"
    verdict = verdict_for(delta, low, high, threshold, hib)
    note = ""
    if verdict == "no change" and (low > 0 or high < 0):
        note = f"significant but below the {threshold:.0%} threshold"
    elif verdict == "no change" and abs(delta) >= threshold:
        note = "large but noisy: the interval includes zero"
    return Comparison(
        **base, delta=delta, ci_low=low, ci_high=high, pvalue=pvalue, verdict=verdict, note=note
    )


def verdict_for(delta: float, low: float, high: float, threshold: float, higher: bool) -> ChangeVerdict:
    excludes_zero = low > 0 or high < 0
    if not excludes_zero or abs(delta) < threshold:
        return "no change"
    better = delta > 0 if higher else delta < 0
    return "improvement" if better else "regression"


def _geomean(x: np.ndarray) -> float:
    return float(np.exp(np.mean(np.log(x))))


def _clean(values: Sequence[float | None]) -> np.ndarray:
    out = np.asarray([v for v in values if v is not None], dtype=np.float64)
    return out[np.isfinite(out)]


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a - 1.0 if a and b is not None else None


def _insufficient(base: dict[str, Any], note: str, delta: float | None = None) -> Comparison:
    return Comparison(
        **base, delta=delta, ci_low=None, ci_high=None, pvalue=None, verdict="insufficient data", note=note
    )


def _welch_diff(a: np.ndarray, b: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """(mean(b) - mean(a), half-width of its interval, two-sided p-value)."""
    test = welch_ttest(a.tolist(), b.tolist())
    se = math.sqrt(np.var(a, ddof=1) / len(a) + np.var(b, ddof=1) / len(b))
    q = t_quantile(confidence, max(1, math.floor(test.df)))  # df floored: a slightly wider, safer interval
    return float(np.mean(b) - np.mean(a)), q * se, test.pvalue


def _log_welch(a: np.ndarray, b: np.ndarray, confidence: float) -> tuple[float, float, float, float]:
    diff, half, pvalue = _welch_diff(np.log(a), np.log(b), confidence)
    return math.expm1(diff), math.expm1(diff - half), math.expm1(diff + half), pvalue


def _bootstrap_ratio(
    a: np.ndarray, b: np.ndarray, confidence: float, n_boot: int, seed: int
) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    ma = np.median(rng.choice(a, size=(n_boot, len(a)), replace=True), axis=1)
    mb = np.median(rng.choice(b, size=(n_boot, len(b)), replace=True), axis=1)
    ratios = mb / ma - 1.0
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    return float(np.median(b) / np.median(a) - 1.0), float(low), float(high)
