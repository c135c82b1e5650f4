"""The `/metrics` page (`--enable-metrics`): a small set of SGLang's Prometheus series, done right.

Names, types and labels follow contract §4. Scheduler gauges are refreshed by the engine on each
prefill batch and every `--decode-log-interval` decode iterations, as SGLang does, and once more
when the scheduler goes idle; counters and histograms are updated per finished request (health
probes and the warmup are excluded).
"""

from __future__ import annotations

from bisect import bisect_left

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800)


class Histogram:
    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, times: int = 1) -> None:
        # Prometheus buckets are inclusive upper bounds (le), hence bisect_left.
        self.counts[bisect_left(self.bounds, value)] += times
        self.sum += value * times
        self.count += times


class Metrics:
    def __init__(self, *, model_name: str, speculative: bool, spec_gauges: bool, verify_calls: bool) -> None:
        self._speculative = speculative
        self._spec_gauges = spec_gauges and speculative
        self._verify_calls = verify_calls and speculative
        name = _escape(model_name)
        self._tok_labels = f'model_name="{name}"'
        self._sched_labels = (
            f'engine_type="unified",model_name="{name}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
        )
        self.gauges: dict[str, float] = {
            "num_running_reqs": 0.0,
            "num_queue_reqs": 0.0,
            "gen_throughput": 0.0,
            "token_usage": 0.0,
            "num_used_tokens": 0.0,
            "cache_hit_rate": 0.0,
            "max_total_num_tokens": 0.0,
            "is_cuda_graph": 0.0,
        }
        if speculative:
            self.gauges["spec_accept_length"] = 0.0
            self.gauges["spec_accept_rate"] = 0.0
        if self._spec_gauges:
            self.gauges["spec_num_steps"] = 0.0
            self.gauges["spec_num_draft_tokens"] = 0.0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.cached_tokens = 0
        self.num_requests = 0
        self.spec_verify_calls = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)

    def render(self) -> str:
        out: list[str] = []
        for key, value in self.gauges.items():
            out += _series(f"sglang:{key}", "gauge", _HELP.get(key, key), self._sched_labels, value)
        counters = [
            ("prompt_tokens", self.prompt_tokens, "Number of prefill tokens processed."),
            ("generation_tokens", self.generation_tokens, "Number of generation tokens processed."),
            ("cached_tokens", self.cached_tokens, "Number of cached prompt tokens."),
            ("num_requests", self.num_requests, "Number of requests processed."),
        ]
        if self._verify_calls:
            counters.append(
                ("spec_verify_calls", self.spec_verify_calls, "Number of speculative verify calls.")
            )
        for key, total, text in counters:
            out.append(f"# HELP sglang:{key}_total {text}")
            out.append(f"# TYPE sglang:{key}_total counter")
            out.append(f"sglang:{key}_total{{{self._tok_labels}}} {float(total)}")
        for key, hist, text in (
            ("time_to_first_token_seconds", self.ttft, "Histogram of time to first token in seconds."),
            ("inter_token_latency_seconds", self.itl, "Histogram of inter-token latency in seconds."),
            ("e2e_request_latency_seconds", self.e2e, "Histogram of End-to-end request latency in seconds"),
        ):
            out.append(f"# HELP sglang:{key} {text}")
            out.append(f"# TYPE sglang:{key} histogram")
            running = 0
            for bound, count in zip((*hist.bounds, float("inf")), hist.counts, strict=True):
                running += count
                le = "+Inf" if bound == float("inf") else repr(float(bound))
                out.append(f'sglang:{key}_bucket{{le="{le}",{self._tok_labels}}} {float(running)}')
            out.append(f"sglang:{key}_count{{{self._tok_labels}}} {float(hist.count)}")
            out.append(f"sglang:{key}_sum{{{self._tok_labels}}} {hist.sum}")
        return "\n".join(out) + "\n"


_HELP = {
    "num_running_reqs": "The number of running requests.",
    "num_queue_reqs": "The number of requests in the waiting queue.",
    "gen_throughput": "The generation throughput (token/s).",
    "token_usage": "The token usage.",
    "num_used_tokens": "The number of used tokens.",
    "cache_hit_rate": "The prefix cache hit rate.",
    "max_total_num_tokens": "Maximum total number of tokens in the KV cache pool.",
    "is_cuda_graph": "Whether the batch is using CUDA graph.",
    "spec_accept_length": "The average acceptance length of speculative decoding.",
    "spec_accept_rate": "The average acceptance rate of speculative decoding.",
    "spec_num_steps": "The number of speculative decoding steps.",
    "spec_num_draft_tokens": "The number of speculative draft tokens.",
}


def _series(name: str, kind: str, text: str, labels: str, value: float) -> list[str]:
    return [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {float(value)}"]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
