"""The host's CPUs over a window, from counters at its ends: the busy and stolen shares of all CPUs
(`/proc/stat`), the busiest single CPU and its most stolen, and the share of time runnable tasks waited
(`/proc/pressure/cpu` "some"); None where a file is missing. A speculative cycle on a small model is
host-bound (docs/results/2026-12-03-h200-v3-slice-profiles.md)."""

import os
import time
from dataclasses import dataclass

PROC_STAT = "/proc/stat"
PROC_CPU_PRESSURE = "/proc/pressure/cpu"


def host_load() -> float | None:
    """The 1-minute load average; None where the platform has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class CpuCounters:
    """Cumulative host CPU counters at one instant; two of them make a window's CPU shares."""

    wall_s: float
    jiffies: tuple[int, ...] | None  # user nice system idle iowait irq softirq steal (aggregate `cpu` line)
    pressure_some_us: int | None  # PSI "some" total: time in which a runnable task waited for a CPU
    # Per CPU too: steal on the scheduler's one CPU can be several percent, a fraction of the host's.
    per_cpu: dict[str, tuple[int, ...]] | None = None


def _cpu_lines(text: str) -> dict[str, tuple[int, ...]]:
    """The first eight fields of each `cpu`/`cpuN` line of /proc/stat by name (old kernels padded with 0)."""
    out: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("cpu") and (parts[0] == "cpu" or parts[0][3:].isdigit()):
            fields = [int(x) for x in parts[1:9]]
            out[parts[0]] = tuple(fields + [0] * (8 - len(fields)))
    return out


def parse_proc_stat(text: str) -> tuple[int, ...] | None:
    """The aggregate `cpu` line's first eight fields."""
    return _cpu_lines(text).get("cpu")


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
        lines = _cpu_lines(stat) if stat is not None else {}
    except ValueError:
        lines = {}
    jiffies = lines.pop("cpu", None)
    try:
        some = parse_cpu_pressure(pressure) if pressure is not None else None
    except ValueError:
        some = None
    return CpuCounters(time.monotonic(), jiffies, some, lines or None)


def cpu_shares(start: CpuCounters | None, end: CpuCounters | None) -> dict[str, float | None]:
    """Percent of host CPU busy and stolen between two readings, and of wall time tasks waited (PSI)."""
    out: dict[str, float | None] = dict.fromkeys(
        ("host_cpu_busy_pct", "host_cpu_steal_pct", "cpu_pressure_pct")
    )
    if start is None or end is None:
        return out
    if start.per_cpu and end.per_cpu:
        out.update(_per_cpu_extremes(start.per_cpu, end.per_cpu))
    if start.jiffies is not None and end.jiffies is not None:
        shares = _busy_steal(start.jiffies, end.jiffies)
        if shares is not None:
            out["host_cpu_busy_pct"], out["host_cpu_steal_pct"] = round(shares[0], 1), round(shares[1], 2)
    wall_us = (end.wall_s - start.wall_s) * 1e6
    if start.pressure_some_us is not None and end.pressure_some_us is not None and wall_us > 0:
        out["cpu_pressure_pct"] = round(100.0 * (end.pressure_some_us - start.pressure_some_us) / wall_us, 2)
    return out


def _busy_steal(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[float, float] | None:
    """Percent of the time between two readings of one `cpu` line busy and stolen; None if none passed."""
    user, nice, system, idle, iowait, irq, softirq, steal = (y - x for x, y in zip(a, b, strict=True))
    total = user + nice + system + idle + iowait + irq + softirq + steal
    if total <= 0:
        return None
    return 100.0 * (user + nice + system + irq + softirq) / total, 100.0 * steal / total


def _per_cpu_extremes(start: dict[str, tuple[int, ...]], end: dict[str, tuple[int, ...]]) -> dict[str, float]:
    """The busiest single CPU's busy share and the most any single CPU had stolen, in percent of that CPU."""
    busiest, steal_max = 0.0, 0.0
    for name, b in end.items():
        a = start.get(name)
        shares = _busy_steal(a, b) if a is not None else None  # None: brought online inside the window
        if shares is not None:
            busiest, steal_max = max(busiest, shares[0]), max(steal_max, shares[1])
    return {"host_cpu_max_busy_pct": round(busiest, 1), "host_cpu_steal_max_pct": round(steal_max, 2)}
