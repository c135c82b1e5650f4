"""GPU clock, power and temperature, and the host's CPU, sampled while a measurement window runs.

A window's throughput depends on the SM clock the GPU held during it: a hot or power-capped H200 drops its
clock and every figure with it, and nothing in the requests shows why. So a background thread samples the
GPUs the server uses every `interval_s` and the window gets a summary: min and median SM clock, max
temperature, mean power, plus the host's 1-minute load average at the start and end.

A speculative cycle on a small model per GPU is bound by the host CPU (docs/results-h200.md: the GPU idles
half of each cycle), so the host matters as much as the GPU. Each window also records, from counters read at
its start and end: the share of all host CPUs that was busy and that the hypervisor stole (`/proc/stat`), and
the share of the window in which runnable tasks waited for a CPU (`/proc/pressure/cpu`, "some"). Where a
file is missing (not Linux, no PSI) the figure is None.

Sources, first that works: NVML through `pynvml` (the nvidia-ml-py package, present on GPU hosts), then
`nvidia-smi --query-gpu=... --format=csv` (argv, no shell), else none (the stand-in, a CPU box): the window
then records only host load and `source: "none"`.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# One reading per GPU: (sm_clock_mhz, power_w, temperature_c); None where the source lacks it.
Reading = tuple[float | None, float | None, float | None]
ReadFn = Callable[[], list[Reading]]

_SMI_FIELDS = "clocks.sm,power.draw,temperature.gpu"


def _nvml_reader(indices: Sequence[int] | None) -> ReadFn | None:
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in (indices or range(count)) if i < count]
    except Exception:  # no library, no driver, no GPU: try the next source
        return None
    if not handles:
        return None

    def read() -> list[Reading]:
        out: list[Reading] = []
        for h in handles:
            clock = float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
            power = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0  # mW
            temp = float(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))
            out.append((clock, power, temp))
        return out

    return read


def _smi_reader(indices: Sequence[int] | None) -> ReadFn | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    argv = [exe, f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits"]
    if indices:
        argv.append("--id=" + ",".join(str(i) for i in indices))

    def read() -> list[Reading]:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=True)
        return [_parse_smi_line(line) for line in done.stdout.splitlines() if line.strip()]

    try:
        if not read():
            return None
    except (OSError, subprocess.SubprocessError):
        return None
    return read


def _parse_smi_line(line: str) -> Reading:
    def num(x: str) -> float | None:
        try:
            return float(x.strip())
        except ValueError:  # "[N/A]" and friends
            return None

    parts = line.split(",")
    parts += [""] * (3 - len(parts))
    return num(parts[0]), num(parts[1]), num(parts[2])


def gpu_reader(indices: Sequence[int] | None = None) -> tuple[str, ReadFn | None]:
    """The first working source for these GPU indices (None = all): ("nvml"|"nvidia-smi"|"none", reader)."""
    nvml = _nvml_reader(indices)
    if nvml is not None:
        return "nvml", nvml
    smi = _smi_reader(indices)
    if smi is not None:
        return "nvidia-smi", smi
    return "none", None


def host_load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


PROC_STAT = "/proc/stat"
PROC_CPU_PRESSURE = "/proc/pressure/cpu"


@dataclass(frozen=True, slots=True)
class CpuCounters:
    """Cumulative host CPU counters at one instant; two of them make a window's CPU shares."""

    wall_s: float
    jiffies: (
        tuple[int, ...] | None
    )  # user nice system idle iowait irq softirq steal (the aggregate `cpu` line)
    pressure_some_us: (
        int | None
    )  # PSI "some" total: time in which at least one runnable task waited for a CPU


def parse_proc_stat(text: str) -> tuple[int, ...] | None:
    """The first eight fields of the aggregate `cpu` line (guest time is already inside user)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            fields = [int(x) for x in parts[1:9]]
            return tuple(fields + [0] * (8 - len(fields)))
    return None


def parse_cpu_pressure(text: str) -> int | None:
    """The cumulative `total=` microseconds of the `some` line of /proc/pressure/cpu."""
    for line in text.splitlines():
        if line.startswith("some "):
            for part in line.split()[1:]:
                key, _, value = part.partition("=")
                if key == "total":
                    return int(value)
    return None


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def read_cpu_counters(stat_path: str = PROC_STAT, pressure_path: str = PROC_CPU_PRESSURE) -> CpuCounters:
    stat, pressure = _read_text(stat_path), _read_text(pressure_path)
    try:
        jiffies = parse_proc_stat(stat) if stat is not None else None
    except ValueError:
        jiffies = None
    try:
        some = parse_cpu_pressure(pressure) if pressure is not None else None
    except ValueError:
        some = None
    return CpuCounters(time.monotonic(), jiffies, some)


def cpu_shares(start: CpuCounters | None, end: CpuCounters | None) -> dict[str, float | None]:
    """Percent of all host CPU time busy and stolen between two readings, and percent of wall time in which
    a runnable task waited for a CPU (PSI "some"; can exceed what `busy` suggests on a host with idle cores)."""
    out: dict[str, float | None] = {
        "host_cpu_busy_pct": None,
        "host_cpu_steal_pct": None,
        "cpu_pressure_pct": None,
    }
    if start is None or end is None:
        return out
    if start.jiffies is not None and end.jiffies is not None:
        delta = [b - a for a, b in zip(start.jiffies, end.jiffies, strict=True)]
        total = sum(delta)
        if total > 0:
            user, nice, system, _idle, _iowait, irq, softirq, steal = delta
            out["host_cpu_busy_pct"] = round(100.0 * (user + nice + system + irq + softirq) / total, 1)
            out["host_cpu_steal_pct"] = round(100.0 * steal / total, 2)
    wall_us = (end.wall_s - start.wall_s) * 1e6
    if start.pressure_some_us is not None and end.pressure_some_us is not None and wall_us > 0:
        out["cpu_pressure_pct"] = round(100.0 * (end.pressure_some_us - start.pressure_some_us) / wall_us, 2)
    return out


@dataclass
class WindowTelemetry:
    """Samples a window in a thread; `summary()` after `stop()` is what gets stored with the repeat."""

    source: str
    read: ReadFn | None
    interval_s: float = 0.25
    readings: list[list[Reading]] = field(default_factory=list)
    load_start: float | None = None
    load_end: float | None = None
    cpu_start: CpuCounters | None = None
    cpu_end: CpuCounters | None = None
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.load_start = host_load()
        self.cpu_start = read_cpu_counters()
        if self.read is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="window-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        assert self.read is not None
        while True:
            try:
                self.readings.append(self.read())
            except Exception:  # a flaky read costs one sample, never the window
                self.errors += 1
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=10)
            self._thread = None
            if self.read is not None:
                try:  # one reading at the very end, so even a short window has two
                    self.readings.append(self.read())
                except Exception:
                    self.errors += 1
        self.load_end = host_load()
        self.cpu_end = read_cpu_counters()

    def summary(self) -> dict[str, Any]:
        out = summarize(self.source, self.readings, self.load_start, self.load_end, self.errors)
        out.update(cpu_shares(self.cpu_start, self.cpu_end))
        return out


def summarize(
    source: str,
    readings: Sequence[Sequence[Reading]],
    load_start: float | None = None,
    load_end: float | None = None,
    errors: int = 0,
) -> dict[str, Any]:
    """Per window: SM clock min/median (MHz, over all GPUs and samples), max temperature, mean power per GPU."""
    clocks = [r[0] for rs in readings for r in rs if r[0] is not None]
    powers = [r[1] for rs in readings for r in rs if r[1] is not None]
    temps = [r[2] for rs in readings for r in rs if r[2] is not None]
    out: dict[str, Any] = {
        "source": source,
        "samples": len(readings),
        "sm_clock_min_mhz": min(clocks) if clocks else None,
        "sm_clock_median_mhz": statistics.median(clocks) if clocks else None,
        "sm_clock_max_mhz": max(clocks) if clocks else None,
        "temp_max_c": max(temps) if temps else None,
        "power_mean_w": round(statistics.fmean(powers), 1) if powers else None,
        "host_load_1m_start": load_start,
        "host_load_1m_end": load_end,
    }
    if errors:
        out["read_errors"] = errors
    return out


def throttle_reason(summary: dict[str, Any], run_max_mhz: float | None, fraction: float) -> str | None:
    """A reason when the window's median SM clock fell below `fraction` of the run's highest clock."""
    median = summary.get("sm_clock_median_mhz")
    if median is None or not run_max_mhz:
        return None
    if median < fraction * run_max_mhz:
        return (
            f"throttled: median SM clock {median:.0f} MHz < {fraction:.0%} of the run's max "
            f"{run_max_mhz:.0f} MHz (min {summary.get('sm_clock_min_mhz')}, temp max "
            f"{summary.get('temp_max_c')} C, power {summary.get('power_mean_w')} W)"
        )
    return None


class TelemetrySource:
    """Opens the reader once per run (NVML init is not free) and hands a fresh sampler to each window."""

    def __init__(self, indices: Sequence[int] | None = None, *, enabled: bool = True) -> None:
        self.source, self._read = gpu_reader(indices) if enabled else ("none", None)

    def window(self) -> WindowTelemetry:
        return WindowTelemetry(self.source, self._read)


def now_wall() -> float:
    return time.time()
