"""Metric names as people read them, and which way is better. Pure: used by pages, charts and reports."""

from __future__ import annotations

from bench.stats.compare import higher_is_better

# The metrics a user can pick, in menu order; keys are Point/Sample column names.
METRIC_LABELS: dict[str, str] = {
    "output_throughput": "Output throughput (tok/s)",
    "accept_length": "Acceptance length (tokens/step)",
    "accept_length_weighted": "Acceptance length, token-weighted",
    "server_accept_length": "Acceptance length, server-reported",
    "tpot_p50_ms": "TPOT p50 (ms)",
    "tpot_mean_ms": "TPOT mean (ms)",
    "tpot_p99_ms": "TPOT p99 (ms)",
    "itl_p50_ms": "ITL p50 (ms)",
    "itl_p99_ms": "ITL p99 (ms)",
    "ttft_p50_ms": "TTFT p50 (ms)",
    "ttft_p99_ms": "TTFT p99 (ms)",
    "e2e_p50_ms": "E2E latency p50 (ms)",
    "e2e_p99_ms": "E2E latency p99 (ms)",
    "request_throughput": "Request throughput (req/s)",
    "total_throughput": "Total throughput (tok/s)",
    "input_throughput": "Input throughput (tok/s)",
}
DEFAULT_METRIC = "output_throughput"


def metric_label(name: str) -> str:
    return METRIC_LABELS.get(name, name.replace("_", " "))


def better_direction(name: str) -> str:
    return "higher is better" if higher_is_better(name) else "lower is better"
