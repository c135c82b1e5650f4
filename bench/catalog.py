"""The metric catalogue: every metric's name, label, unit, direction and bench_serving key, once, for compare
and change scans, dashboard menus, exports and the bench_serving import/export. SampleMetrics and the db
columns keep typed fields; tests/test_metric_catalog.py keeps the three equal. Direction is data, not inferred
from a name (`max_output_tokens_per_s` is a throughput)."""

from dataclasses import dataclass
from typing import Literal

Direction = Literal["higher", "lower"]


@dataclass(frozen=True, slots=True)
class Metric:
    name: str  # field of bench.results.SampleMetrics and column of points/samples
    label: str
    unit: str  # "" for counts and ratios without a unit
    direction: Direction  # which way is better
    bench_serving: str | None  # key in bench_serving's result JSON (contract §5.1); None: specbench's own
    export: bool = False  # a column of `specbench export`
    menu: bool = False  # offered in the dashboard's metric pickers

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"

    @property
    def title(self) -> str:
        """How the metric reads in menus and axis titles: `Output throughput (tok/s)`."""
        return f"{self.label} ({self.unit})" if self.unit else self.label


def _lat(
    kind: str, label: str, stat: str, key: str | None, *, export: bool = False, menu: bool = False
) -> Metric:
    return Metric(f"{kind}_{stat}_ms", f"{label} {stat}", "ms", "lower", key, export, menu)


def _percentiles(kind: str, label: str, suffix: str, *, mean_in_menu: bool = False) -> tuple[Metric, ...]:
    """A latency's mean, p50, p90, p99 (bench_serving's prefixes + suffix); median and p99 in export, menu."""
    return (
        _lat(kind, label, "mean", f"mean_{suffix}", menu=mean_in_menu),
        _lat(kind, label, "p50", f"median_{suffix}", export=True, menu=True),
        _lat(kind, label, "p90", f"p90_{suffix}"),
        _lat(kind, label, "p99", f"p99_{suffix}", export=True, menu=True),
    )


# Menu and export order: throughput first, then acceptance, then latencies, then counts.
METRICS: tuple[Metric, ...] = (
    Metric("output_throughput", "Output throughput", "tok/s", "higher", "output_throughput", True, True),
    Metric("input_throughput", "Input throughput", "tok/s", "higher", "input_throughput", True, True),
    Metric("request_throughput", "Request throughput", "req/s", "higher", "request_throughput", True, True),
    Metric("total_throughput", "Total throughput", "tok/s", "higher", "total_throughput", False, True),
    Metric("max_output_tokens_per_s", "Peak output throughput", "tok/s", "higher", "max_output_tokens_per_s"),
    Metric("accept_length", "Acceptance length", "tokens/step", "higher", None, True, True),
    Metric("accept_length_weighted", "Acceptance length, token-weighted", "", "higher", None, True, True),
    Metric(
        "server_accept_length",
        "Acceptance length, server-reported",
        "",
        "higher",
        "accept_length",
        True,
        True,
    ),
    *_percentiles("ttft", "TTFT", "ttft_ms"),
    *_percentiles("tpot", "TPOT", "tpot_ms", mean_in_menu=True),
    *_percentiles("itl", "ITL", "itl_ms"),
    *_percentiles("e2e", "E2E latency", "e2e_latency_ms"),
    _lat("ttft", "TTFT", "std", "std_ttft_ms"),
    _lat("tpot", "TPOT", "std", "std_tpot_ms"),
    _lat("itl", "ITL", "std", "std_itl_ms"),
    _lat("itl", "ITL", "p95", "p95_itl_ms"),
    _lat("itl", "ITL", "max", "max_itl_ms"),
    _lat("e2e", "E2E latency", "std", "std_e2e_latency_ms"),
    Metric("concurrency", "Concurrency", "requests", "higher", "concurrency"),
    Metric("duration_s", "Window duration", "s", "lower", "duration"),
    Metric("completed", "Completed requests", "", "higher", "completed", True),
    Metric("failed", "Failed requests", "", "lower", None, True),
    Metric("incomplete", "Incomplete requests", "", "lower", None),
    Metric("wrong_length", "Requests of the wrong length", "", "lower", None),
    Metric("total_input_tokens", "Input tokens", "", "higher", "total_input_tokens"),
    Metric("total_output_tokens", "Output tokens", "", "higher", "total_output_tokens"),
)
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
DEFAULT_METRIC = "output_throughput"
MENU: tuple[str, ...] = tuple(m.name for m in METRICS if m.menu)
EXPORTED: tuple[str, ...] = tuple(m.name for m in METRICS if m.export)


def get(name: str) -> Metric:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(BY_NAME)}") from None


def higher_is_better(name: str) -> bool:
    return get(name).higher_is_better


def label(name: str) -> str:
    """The metric's title; a name outside the catalogue reads as its words."""
    m = BY_NAME.get(name)
    return m.title if m else name.replace("_", " ")


def direction_text(name: str) -> str:
    return "higher is better" if higher_is_better(name) else "lower is better"
