"""Aggregate metrics of one measured window, with sglang.bench_serving's definitions (contract §5.1; every
formula in docs/reference/metrics.md). Sums and latencies cover *completed* requests only, as bench_serving's
`calculate_metrics`: failed ones are counted, never averaged in. TTFT counts the first event with new tokens
(bench_serving waits for text, which `--skip-tokenizer-init` never sends); ITL splits an event's gap over its
k tokens; percentiles are numpy's linear ones in ms, std is ddof=0. accept_length is the mean per-request
completion_tokens/spec_verify_ct, accept_length_weighted Σ/Σ; bench_serving's `avg_spec_accept_length` is
`server_accept_length`. Counts: completed, failed (an error), incomplete (never sent), wrong_length."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.results import RequestRecord, SampleMetrics


def compute_metrics(
    records: Sequence[RequestRecord], duration_s: float, server_accept_length: float | None = None
) -> SampleMetrics:
    done = [r for r in records if r.ok]
    failed = sum(1 for r in records if r.error is not None)
    incomplete = len(records) - len(done) - failed
    if done and duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    per_s = 1.0 / duration_s if duration_s > 0 else 0.0

    # A text prompt of unknown length (prompt_len 0) counts what the server reports.
    total_in = sum(r.prompt_len if r.prompt_len > 0 else r.prompt_tokens or 0 for r in done)
    total_out = sum(r.completion_tokens for r in done)
    ttfts = [r.ttft for r in done if r.ttft is not None]
    e2es = [r.e2e for r in done if r.e2e is not None]
    tpots = [
        (r.e2e - r.ttft) / (r.completion_tokens - 1)
        for r in done
        if r.completion_tokens > 1 and r.ttft is not None and r.e2e is not None
    ]
    itl_parts = [_itl(r) for r in done]
    itls = np.concatenate(itl_parts) if itl_parts else np.empty(0)

    spec = [(r.completion_tokens, r.spec_verify_ct) for r in done if r.spec_verify_ct]
    accept = weighted = None
    if spec:
        accept = float(np.mean([tokens / steps for tokens, steps in spec]))
        weighted = sum(tokens for tokens, _ in spec) / sum(steps for _, steps in spec)

    latency: dict[str, Any] = {}  # ttft_mean_ms, ttft_p50_ms, ... e2e_p99_ms, e2e_std_ms
    for kind, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2e", e2es)):
        names = (f"{kind}_{stat}_ms" for stat in ("mean", "p50", "p90", "p99", "std"))
        latency.update(zip(names, _stats(values), strict=True))
    return SampleMetrics(
        duration_s=duration_s,
        completed=len(done),
        failed=failed,
        incomplete=incomplete,
        total_input_tokens=total_in,
        total_output_tokens=total_out,
        request_throughput=len(done) * per_s,
        input_throughput=total_in * per_s,
        output_throughput=total_out * per_s,
        total_throughput=(total_in + total_out) * per_s,
        **latency,
        accept_length=accept,
        accept_length_weighted=weighted,
        server_accept_length=server_accept_length,
        concurrency=sum(e2es) * per_s if done else None,
        max_output_tokens_per_s=_max_tokens_per_s(done),
        wrong_length=sum(1 for r in done if r.completion_tokens != r.max_new_tokens),
        itl_p95_ms=float(np.percentile(itls, 95)) * 1000.0 if len(itls) else None,
        itl_max_ms=float(np.max(itls)) * 1000.0 if len(itls) else None,
    )


def _itl(r: RequestRecord) -> np.ndarray:
    """Per-token inter-token latencies of one request (seconds), bench_serving's `sglang` splitting."""
    if len(r.chunk_times) < 2:
        return np.empty(0)
    t = np.asarray(r.chunk_times, dtype=np.float64)
    tok = np.asarray(r.chunk_tokens, dtype=np.int64)
    ks = tok[1:] - tok[:-1]
    return np.repeat((t[1:] - t[:-1]) / ks, ks)


def _stats(values: Sequence[float] | np.ndarray) -> tuple[float | None, ...]:
    """(mean, p50, p90, p99) in ms (numpy's linear) and bench_serving's `np.std` (ddof=0); None when empty."""
    if len(values) == 0:
        return (None,) * 5
    seconds = np.asarray(values, dtype=np.float64)
    arr = seconds * 1000.0
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return (float(arr.mean()), float(p50), float(p90), float(p99), float(np.std(seconds)) * 1000.0)


def _max_tokens_per_s(done: Sequence[RequestRecord]) -> float | None:
    timed = [r for r in done if r.ttft is not None and r.e2e is not None]
    if not timed:
        return None
    t0 = min(r.start for r in timed)
    times = []
    for r in timed:
        # First token at st + TTFT, each later token one ITL further, exactly as bench_serving rebuilds them.
        first = r.start + r.ttft  # type: ignore[operator]
        times.append(np.array([first]))
        itl = _itl(r)
        if itl.size:
            times.append(first + np.cumsum(itl))
    buckets = np.floor(np.concatenate(times) - t0).astype(np.int64)
    return float(np.bincount(buckets[buckets >= 0]).max())
