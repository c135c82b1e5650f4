"""Reading a torch.profiler Chrome trace as SGLang writes it (`<profile_id>-TP-<rank>.trace.json.gz`).

Three categories of complete events (`ph: "X"`, times in µs) matter: `kernel` (one GPU kernel, `args.stream`),
`user_annotation` (a `torch.profiler.record_function` range on the CPU thread that opened it) and
`gpu_user_annotation` (that range projected onto the GPU, first to last kernel it launched). A GPU-only trace
(`activities: ["GPU"]`) has neither annotation: torch registers its record_function callbacks only with CPU
activity on (`enableProfiler` in torch/csrc/autograd/profiler_kineto.cpp), and Kineto derives
`gpu_user_annotation` from their correlation ids. Kernels keep `args.correlation`, their launch's id, shared
by all kernels of one CUDA-graph replay. SGLang 0.5.13 names each forward pass `step[<ForwardMode> bs=<n>]`
(`step[EXTEND bs=<n> toks=<t>]` for prefill), see `_build_step_span_name` in
sglang/srt/model_executor/model_runner.py."""

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STEP_NAME = re.compile(r"^step\[(?P<mode>[A-Z_0-9]+) bs=(?P<bs>\d+)(?: toks=(?P<toks>\d+))?\]$")


# The device name the stand-in server's profiler writes (synthetic/server/profiler.py): a trace it made up.
STAND_IN_DEVICE = "specbench stand-in (no GPU)"


def from_stand_in(trace: dict[str, Any]) -> bool:
    """Whether the stand-in server wrote this trace: its timings come from a performance model, not a GPU."""
    devices = trace.get("deviceProperties")
    return isinstance(devices, list) and any(
        isinstance(d, dict) and d.get("name") == STAND_IN_DEVICE for d in devices
    )


class TraceError(ValueError):
    """The file is not a Chrome trace this module can read."""


@dataclass(frozen=True)
class Span:
    """One interval on a track, in microseconds since the trace's first event."""

    name: str
    start: float
    end: float
    track: str  # "gpu" or "cpu"
    stream: int | None = None
    correlation: int | None = None  # the launch (cudaLaunchKernel / cudaGraphLaunch) the kernel came from

    @property
    def dur(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Step:
    """One `step[...]` annotation."""

    mode: str
    batch_size: int
    start: float
    end: float
    track: str


@dataclass(frozen=True)
class TraceEvents:
    kernels: list[Span]
    gpu_steps: list[Step]
    cpu_steps: list[Step]
    cpu_recorded: bool  # the trace has CPU operator or annotation events (CPU activity was on)


# A profiler trace of a few dozen steps is tens of megabytes of JSON; past this it is not one of ours (and a
# gzip bomb or /dev/zero must not take the memory of the host, or of the dashboard that reads a stored path).
MAX_TRACE_BYTES = 512 * 2**20


def load_trace(path: str | Path) -> dict[str, Any]:
    """The trace JSON, gzipped (`.gz`) or plain; a clear TraceError otherwise. Only a regular file is read
    (never a FIFO, a device or a directory), and at most MAX_TRACE_BYTES of it, decompressed."""
    p = Path(path)
    try:
        if not p.is_file():
            raise TraceError(f"{p}: not a regular file")
        with open(p, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            raw = (gzip.GzipFile(fileobj=f) if gzipped else f).read(MAX_TRACE_BYTES + 1)
        if len(raw) > MAX_TRACE_BYTES:
            raise TraceError(f"{p}: larger than {MAX_TRACE_BYTES // 2**20} MiB of JSON; not a profiler trace")
        data = json.loads(raw)
    except OSError as e:
        raise TraceError(f"{p}: cannot read: {e}") from None
    except (EOFError, gzip.BadGzipFile, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(f"{p}: not a (gzipped) JSON trace: {e}") from None
    except RecursionError:
        raise TraceError(f"{p}: not a (gzipped) JSON trace: nested too deep") from None
    if isinstance(data, list):  # the bare JSON-array form of the Chrome trace format
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceError(f"{p}: no traceEvents list (not a Chrome trace)")
    return data


def extract(trace: dict[str, Any]) -> TraceEvents:
    """Kernels and step annotations, on a time axis that starts at the earliest of them."""
    kernels: list[tuple[str, float, float, int | None, int | None]] = []
    gpu_steps: list[tuple[str, int, float, float]] = []
    cpu_steps: list[tuple[str, int, float, float]] = []
    cpu_recorded = False
    for ev in trace["traceEvents"]:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = ev.get("cat")
        try:
            ts = float(ev["ts"])
            dur = float(ev.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        if cat == "kernel":
            args = ev.get("args")
            args = args if isinstance(args, dict) else {}
            stream, corr = (
                v if isinstance(v, int) else None for v in (args.get("stream"), args.get("correlation"))
            )
            kernels.append((str(ev.get("name", "")), ts, ts + dur, stream, corr))
        elif cat in ("user_annotation", "gpu_user_annotation"):
            if cat == "user_annotation":
                cpu_recorded = True
            m = STEP_NAME.match(str(ev.get("name", "")))
            if m is None:
                continue
            row = (m["mode"], int(m["bs"]), ts, ts + dur)
            (gpu_steps if cat == "gpu_user_annotation" else cpu_steps).append(row)
        elif cat in ("cpu_op", "python_function"):
            cpu_recorded = True
    starts = [k[1] for k in kernels] + [s[2] for s in gpu_steps] + [s[2] for s in cpu_steps]
    origin = min(starts) if starts else 0.0
    return TraceEvents(
        kernels=sorted(
            (Span(n, a - origin, b - origin, "gpu", st, co) for n, a, b, st, co in kernels),
            key=lambda s: s.start,
        ),
        gpu_steps=_merge_steps(gpu_steps, origin, "gpu"),
        cpu_steps=_merge_steps(cpu_steps, origin, "cpu"),
        cpu_recorded=cpu_recorded,
    )


def _merge_steps(rows: list[tuple[str, int, float, float]], origin: float, track: str) -> list[Step]:
    """Steps in time order; a GPU range on several streams, appearing once per stream, becomes one step."""
    out: list[Step] = []
    for mode, bs, a, b in sorted(rows, key=lambda r: r[2]):
        a, b = a - origin, b - origin
        if out and out[-1].mode == mode and out[-1].batch_size == bs and a < out[-1].end:
            last = out.pop()
            out.append(Step(mode, bs, last.start, max(last.end, b), track))
        else:
            out.append(Step(mode, bs, a, b, track))
    return out
