"""bench_serving's result JSON (`--output-file` JSONL lines) <-> specbench's metric fields, by the catalogue:
each `bench.catalog` metric names its bench_serving key (`median_ttft_ms` for `ttft_p50_ms`), so no second
table. Argument keys and `server_info` describe the point; `read_line` leaves what a line lacks None."""

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench import catalog

# bench_serving's own argument keys, written by `to_line` so that a file round-trips.
ARG_KEYS = (
    *("tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len"),
    *("random_input_len", "random_output_len", "random_range_ratio"),
)


class BenchServingFormatError(ValueError):
    """A line that is not a bench_serving result."""


@dataclass
class ResultLine:
    """One bench_serving result, as specbench stores it."""

    metrics: dict[str, float | int]  # SampleMetrics field -> value
    args: dict[str, Any]  # ARG_KEYS present in the line
    batch_size: int | None  # max_concurrency (None: an open-loop run at a request rate)
    input_len: int
    output_len: int
    completed: int
    server: dict[str, Any] = field(default_factory=dict)  # the line's server_info, or {}


# Bounds past which a result is nonsense: PostgreSQL's INTEGER for counts, 1e30 for measured figures.
MAX_COUNT = 2**31 - 1
MAX_FIGURE = 1e15
MAX_TEXT = 1000  # an argument's or server_info's text (a tag, a backend name, a model path)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _count(
    line: Mapping[str, Any], key: str, *, least: int = 0, required: bool = False, where: str = ""
) -> int | None:
    """A whole number from `least` to MAX_COUNT (JSON's 5.0 is not one; nor is true)."""
    value = line.get(key)
    key = where + key
    if value is None:
        if required:
            raise BenchServingFormatError(f"{key}: required (a whole number from {least} to {MAX_COUNT:,})")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_COUNT:
        raise BenchServingFormatError(
            f"{key}: must be a whole number from {least} to {MAX_COUNT:,} (got {_shown(value)})"
        )
    return value


def _figure(key: str, value: Any) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BenchServingFormatError(f"{key}: must be a number (got {_shown(value)})")
    if not math.isfinite(value) or not 0 <= value <= MAX_FIGURE:
        raise BenchServingFormatError(
            f"{key}: must be a finite number from 0 to {MAX_FIGURE:g} (got {_shown(value)})"
        )
    return value


def _text(where: str, value: Any) -> None:
    if isinstance(value, str) and ("\x00" in value or len(value) > MAX_TEXT):
        raise BenchServingFormatError(f"{where}: text with a NUL byte or longer than {MAX_TEXT} characters")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(line: dict[str, Any]) -> str | None:
    """Where a key or string of `line` holds a lone surrogate, or None (walked with a stack)."""
    stack: list[tuple[str, Any]] = [("", line)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return where
        elif isinstance(value, dict):
            for key, item in value.items():
                shown = ascii(key)[1:-1] if isinstance(key, str) else str(key)
                path = f"{where}.{shown}" if where else shown
                if isinstance(key, str) and _SURROGATE.search(key):
                    return path
                stack.append((path, item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
    return None


def metrics_of(line: Mapping[str, Any]) -> dict[str, float | int]:
    """SampleMetrics field -> value for each catalogue metric the line holds, each checked (type, range)."""
    metrics: dict[str, float | int] = {}
    for m in catalog.METRICS:
        key = m.bench_serving
        if key is None or line.get(key) is None:
            continue
        metrics[m.name] = (_count(line, key) or 0) if key in _COUNTS else _figure(key, line[key])
    return metrics


def read_line(raw: str | bytes) -> ResultLine:
    """One result line, each field checked; the first problem raises BenchServingFormatError naming it."""
    try:
        line = json.loads(raw)  # bench_serving writes Infinity for request_rate inf; json reads it
    except RecursionError:
        raise BenchServingFormatError("not a bench_serving result (JSON nested too deep)") from None
    except ValueError as exc:
        raise BenchServingFormatError(f"not JSON: {exc}") from None
    if not isinstance(line, dict) or "output_throughput" not in line or "completed" not in line:
        raise BenchServingFormatError("not a bench_serving result (no output_throughput / completed)")
    if (surrogate := _lone_surrogate(line)) is not None:
        # JSON's "\ud800" decodes to a string no UTF-8 output holds: it raised UnicodeEncodeError (issue 35).
        raise BenchServingFormatError(
            f"{surrogate}: text with a lone surrogate (\\ud800-\\udfff), not Unicode text"
        )
    completed = _count(line, "completed", least=1, required=True)
    assert completed is not None
    metrics = metrics_of(line)
    server = line.get("server_info")
    if server is not None and not isinstance(server, dict):
        raise BenchServingFormatError(f"server_info: must be a mapping (got {_shown(server)})")
    server = server or {}
    for key in _SERVER_TEXT:
        if server.get(key) is not None and not isinstance(server[key], str):
            raise BenchServingFormatError(f"server_info.{key}: must be text (got {_shown(server[key])})")
        _text(f"server_info.{key}", server.get(key))
    for key in _SERVER_COUNTS:
        _count(server, key, least=1 if key == "tp_size" else 0, where="server_info.")
    for key in ARG_KEYS:
        value = line.get(key)
        if value is not None and not isinstance(value, str | int | float):
            raise BenchServingFormatError(f"{key}: must be text or a number (got {_shown(value)})")
        _text(key, value)
    dataset = line.get("dataset_name")
    random = isinstance(dataset, str) and dataset.startswith("random")

    def length(side: str) -> int:
        """The input or output length; without fixed lengths the file has only totals: the mean stands in."""
        if random and line.get(f"random_{side}_len") is not None:
            return _count(line, f"random_{side}_len", least=1) or 0
        return round((_count(line, f"total_{side}_tokens", required=True) or 0) / completed)

    input_len, output_len = length("input"), length("output")
    return ResultLine(
        metrics=metrics,
        args={k: line[k] for k in ARG_KEYS if k in line},
        batch_size=_count(line, "max_concurrency", least=1),
        input_len=input_len,
        output_len=output_len,
        completed=completed,
        server=server,
    )


# Result keys that count (requests, tokens): whole numbers.
_COUNTS = frozenset({"completed", "total_input_tokens", "total_output_tokens"})
# What specbench reads of server_info (runners/commands/import_results.py).
_SERVER_TEXT = ("model_path", "version", "attention_backend", "speculative_algorithm")
_SERVER_COUNTS = (
    "tp_size",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)


def to_line(metrics: dict[str, Any], args: dict[str, Any], extra: dict[str, Any] | None = None) -> str:
    """One bench_serving-shaped JSON line: the argument keys, then every catalogue metric under its key."""
    out: dict[str, Any] = {k: args.get(k) for k in ARG_KEYS}
    for m in catalog.METRICS:
        if m.bench_serving and m.bench_serving not in out:
            out[m.bench_serving] = metrics.get(m.name)
    if extra:
        out.update(extra)
    return json.dumps(out)
