"""Recovery settings in one place: retry backoff, requeue of lost jobs, and database outage limits."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta

OUTAGE_LIMIT_ENV = "SPECBENCH_DB_OUTAGE_LIMIT_S"
DEFAULT_OUTAGE_LIMIT_S = 900.0  # 15 min: a database restart, a failover or a VM migration fits well inside


@dataclass(frozen=True)
class Backoff:
    """Delay before attempt n+1: base * 2^(n-1), capped."""

    base_s: float = 30.0
    cap_s: float = 3600.0

    def delay(self, attempts: int) -> timedelta:
        return timedelta(seconds=min(self.cap_s, self.base_s * 2 ** max(attempts - 1, 0)))


@dataclass(frozen=True)
class OutagePolicy:
    """Retry a transient database failure with exponential backoff, for at most `limit_s` in a row."""

    limit_s: float = DEFAULT_OUTAGE_LIMIT_S
    first_delay_s: float = 0.2
    max_delay_s: float = 5.0

    @classmethod
    def from_env(cls, limit_s: float | None = None) -> OutagePolicy:
        if limit_s is None:
            raw = os.environ.get(OUTAGE_LIMIT_ENV)
            limit_s = float(raw) if raw else DEFAULT_OUTAGE_LIMIT_S
        return cls(limit_s=max(limit_s, 0.0))


@dataclass(frozen=True)
class RecoveryPolicy:
    # A failed attempt (the run failed, the sweep raised): the job is retried after this backoff.
    retry: Backoff = field(default_factory=Backoff)
    # An expired lease is not the job's failure: counted apart, it fails after `max_lease_expiries`.
    requeue: Backoff = field(default_factory=lambda: Backoff(base_s=1.0, cap_s=60.0))
    max_lease_expiries: int = 10
    outage: OutagePolicy = field(default_factory=OutagePolicy.from_env)
