"""What a measurement returns: request records in, per-repeat metrics out; field names follow bench_serving's
(`*_ms`, `output_throughput` in tok/s) so numbers read as SGLang developers quote them."""

from dataclasses import dataclass, field
from typing import Literal

PointStatus = Literal["ok", "invalid", "failed", "mode_mismatch", "unstable"]
# Order of severity: a point carries the worst status of its repeats.
STATUS_SEVERITY: dict[str, int] = {"ok": 0, "unstable": 1, "invalid": 2, "mode_mismatch": 3, "failed": 4}


@dataclass(slots=True)
class RequestRecord:
    """One request as the client saw it. Times are seconds; `start` is relative to the window start."""

    index: int
    prompt_len: int
    max_new_tokens: int
    start: float = 0.0
    ttft: float | None = None
    e2e: float | None = None
    completion_tokens: int = 0
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    # One entry per streamed event that carried new tokens: seconds since send, cumulative completion tokens.
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.e2e is not None


@dataclass(slots=True)
class SampleMetrics:
    """Aggregate of one repeat of one point (bench_serving definitions, contract §5.1)."""

    duration_s: float
    completed: int
    failed: int
    incomplete: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    input_throughput: float
    output_throughput: float
    total_throughput: float
    ttft_mean_ms: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_mean_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_mean_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p90_ms: float | None = None
    e2e_p99_ms: float | None = None
    # Mean over requests of completion_tokens / spec_verify_ct, and the token-weighted sum/sum.
    accept_length: float | None = None
    accept_length_weighted: float | None = None
    # internal_states[0].avg_spec_accept_length read right after the window (what bench_serving prints).
    server_accept_length: float | None = None
    concurrency: float | None = None
    max_output_tokens_per_s: float | None = None
    wrong_length: int = 0
    # Spread and tail, as bench_serving reports them (std is numpy's population std, ddof=0).
    ttft_std_ms: float | None = None
    tpot_std_ms: float | None = None
    itl_std_ms: float | None = None
    e2e_std_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_max_ms: float | None = None


@dataclass(slots=True)
class SampleResult:
    """One repeat: its metrics, its verdict and the raw requests."""

    repeat: int
    status: PointStatus
    reason: str | None
    metrics: SampleMetrics | None
    requests: list[RequestRecord]
    overhead_s: float = 0.0
