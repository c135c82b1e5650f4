"""Q-hat, the energy statistic of E-divisive, for every split of an interval at once.

For X = Z[s:τ] (n values) and Y = Z[τ:κ] (m values) and distances d(a, b) = |a - b|^α with 0 < α < 2:

    Q(τ, κ) = 2/(m+n) · ΣΣ d(Xi, Yj) − 2m/((m+n)(n−1)) · Σ_{i<k} d(Xi, Xk)
                                     − 2n/((m+n)(m−1)) · Σ_{j<k} d(Yj, Yk)

(= mn/(m+n) times the empirical energy distance of X and Y). The candidate of [s, e) is the τ of the (τ, κ),
s < τ < κ <= e, with the largest Q. Where Otava derives closed-form sums, one 2-D prefix sum P of the distance
matrix (P[i, j] = Σ D[:i, :j]) makes each block sum four lookups and the grid a few broadcasts: O(L²).
"""

from typing import Any

import numpy as np

from analysis.stats.edivisive.base import Calculator, CandidateChangePoint, FloatArray, Interval


class PairDistanceCalculator(Calculator):
    def __init__(self, series: FloatArray, power: float = 1.0):
        super().__init__(np.asarray(series, dtype=np.float64))
        if not 0.0 < power < 2.0:
            raise ValueError(f"power must lie in (0, 2), got {power}")
        self.power = power
        self._prefix: FloatArray | None = None

    def _prefix_sums(self) -> FloatArray:
        if self._prefix is None:
            x = self.series
            d = np.abs(x[:, None] - x[None, :])
            if self.power != 1.0:
                d = d**self.power
            p = np.zeros((len(x) + 1, len(x) + 1))
            p[1:, 1:] = d.cumsum(axis=0).cumsum(axis=1)
            self._prefix = p
        return self._prefix

    def q_values(self, interval: Interval) -> FloatArray:
        """Q(τ, κ) for τ = start+1..stop-1 (rows) and κ = start+2..stop (columns); -inf where κ <= τ."""
        s, e = interval.start, interval.stop
        if e - s < 2:
            raise ValueError(f"interval {interval} is too short to split")
        p: Any = self._prefix_sums()  # fancy-indexed below; numpy's stubs cannot follow the broadcasting
        tau = np.arange(s + 1, e)[:, None]
        kappa = np.arange(s + 2, e + 1)[None, :]
        valid = kappa > tau

        def block(r0: Any, r1: Any, c0: Any, c1: Any) -> FloatArray:
            return np.asarray(p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0], dtype=np.float64)

        kk = np.where(valid, kappa, tau + 1)  # keep indices in range where the cell is masked out anyway
        n = (tau - s).astype(np.float64)
        m = (kk - tau).astype(np.float64)
        between = block(s, tau, tau, kk)
        within_x = block(s, tau, s, tau) / 2.0  # the block counts each pair twice
        within_y = block(tau, kk, tau, kk) / 2.0
        total = m + n
        with np.errstate(divide="ignore", invalid="ignore"):
            wx = np.where(n > 1, 2.0 * m / (total * (n - 1.0)) * within_x, 0.0)
            wy = np.where(m > 1, 2.0 * n / (total * (m - 1.0)) * within_y, 0.0)
        q = 2.0 / total * between - wx - wy
        return np.where(valid, q, -np.inf)

    def candidate(self, interval: Interval) -> CandidateChangePoint:
        q = self.q_values(interval)
        row, col = np.unravel_index(int(np.argmax(q)), q.shape)
        return CandidateChangePoint(index=interval.start + 1 + int(row), qhat=float(q[row, col]))
