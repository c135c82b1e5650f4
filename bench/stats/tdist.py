"""Two-sample t-tests without SciPy: Student's (pooled, change points) and Welch's (run comparisons). Tail
probabilities and quantiles, fractional df too, via the regularised incomplete beta P(|T| > t) =
I_{df/(df+t²)}(df/2, 1/2), by Lentz's continued fraction (Numerical Recipes §6.4): fast for every df and t we
meet, and precise in the far tail where 1 - CDF rounds to zero."""

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

_EPS = 1e-15
_TINY = 1e-300


def _nonzero(v: float) -> float:
    return v if abs(v) > _TINY else _TINY


def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 / _nonzero(1.0 - qab * x / qap)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        for aa in (even, odd):
            d = 1.0 / _nonzero(1.0 + aa * d)
            c = _nonzero(1.0 + aa / c)
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must lie in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    # The continued fraction converges fast only on one side of the mean; use the symmetry on the other.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's T with `df` (> 0, may be fractional) degrees of freedom."""
    if df <= 0:
        raise ValueError(f"df must be positive, got {df}")
    if math.isnan(t):
        return 1.0
    if math.isinf(t):
        return 0.0
    return min(1.0, betainc(df / 2.0, 0.5, df / (df + t * t)))


@functools.lru_cache(maxsize=4096)
def t_quantile(confidence: float, df: float) -> float:
    """t with P(|T| <= t) = confidence, `df` > 0 fractional allowed; cached (each is a bisection)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if df <= 0:
        raise ValueError(f"df must be positive, got {df}")
    alpha = 1.0 - confidence
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > alpha:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if t_two_sided_p(mid, df) > alpha:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True, slots=True)
class TTest:
    t: float
    df: float
    pvalue: float


def _mean_var(x: Sequence[float]) -> tuple[int, float, float]:
    n = len(x)
    mean = math.fsum(x) / n
    var = math.fsum((v - mean) ** 2 for v in x) / (n - 1) if n > 1 else 0.0
    return n, mean, var


def student_ttest(left: Sequence[float], right: Sequence[float]) -> TTest:
    """Two-sided pooled t-test, as Otava's change-point tester uses (constant segments: p = 1 or 0)."""
    if not left or not right:
        raise ValueError("both samples must be non-empty")
    n1, m1, v1 = _mean_var(left)
    n2, m2, v2 = _mean_var(right)
    df = n1 + n2 - 2
    if df < 1:
        return TTest(0.0, 0.0, 1.0)
    pooled = ((n1 - 1) * v1 + (n2 - 1) * v2) / df
    se = math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    return _finish(m2 - m1, se, df)


def welch_ttest(a: Sequence[float], b: Sequence[float]) -> TTest:
    """Two-sided Welch test of mean(b) - mean(a), with Welch-Satterthwaite degrees of freedom."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("Welch's test needs at least two values on each side")
    n1, m1, v1 = _mean_var(a)
    n2, m2, v2 = _mean_var(b)
    s1, s2 = v1 / n1, v2 / n2
    se = math.sqrt(s1 + s2)
    # Both samples constant: Satterthwaite's formula is 0/0, and the test degenerates anyway (see _finish).
    df = float(n1 + n2 - 2) if se == 0.0 else (s1 + s2) ** 2 / (s1 * s1 / (n1 - 1) + s2 * s2 / (n2 - 1))
    return _finish(m2 - m1, se, df)


def _finish(diff: float, se: float, df: float) -> TTest:
    if se == 0.0:
        return TTest(0.0 if diff == 0 else math.copysign(math.inf, diff), df, 1.0 if diff == 0 else 0.0)
    t = diff / se
    return TTest(t, df, t_two_sided_p(t, df))
