"""The GPUs' clocks, power, temperature and utilisation: the first reader that works, and a window's summary.
A hot or power-capped GPU drops its SM clock and every figure with it; utilisation, memory clock and
clock-event reasons tell slower kernels from a GPU waiting on the host. Sources: NVML (`pynvml`), then
`nvidia-smi --query-gpu` (argv), else none (stand-in, CPU box: `source: "none"`, host load only)."""

import shutil
import statistics
import subprocess
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple


class Reading(NamedTuple):
    """One GPU at one instant; None where the source lacks a field."""

    sm_clock_mhz: float | None
    power_w: float | None
    temp_c: float | None
    mem_clock_mhz: float | None = None
    gpu_util_pct: float | None = None  # share of the last sample period in which a kernel ran
    event_reasons: int | None = None  # NVML clocks-event (throttle) reason bits active now


ReadFn = Callable[[], list[Reading]]

_SMI_BASIC = "clocks.sm,power.draw,temperature.gpu"
# Drivers before 535 call the last field clocks_throttle_reasons.active; then the basic set is read.
_SMI_FULL = _SMI_BASIC + ",clocks.mem,utilization.gpu,clocks_event_reasons.active"

# NVML's nvmlClocksEventReason bits (nvml.h), by the names the summary uses.
EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


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

    # Older pynvml names the event reasons "throttle reasons"; a missing call costs only that field.
    reasons_fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )

    def optional(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # NVML_ERROR_NOT_SUPPORTED on some boards, virtual GPUs
            return None

    def read() -> list[Reading]:
        out: list[Reading] = []
        for h in handles:
            clock = float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
            power = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0  # mW
            temp = float(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))
            mem = optional(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM)
            rates = optional(pynvml.nvmlDeviceGetUtilizationRates, h)
            bits = optional(reasons_fn, h) if reasons_fn is not None else None
            extra = (float(mem) if mem is not None else None, float(rates.gpu) if rates is not None else None)
            out.append(Reading(clock, power, temp, *extra, int(bits) if bits is not None else None))
        return out

    return read


def _smi_reader(indices: Sequence[int] | None) -> ReadFn | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    ids = ["--id=" + ",".join(str(i) for i in indices)] if indices else []

    def reader(fields: str) -> ReadFn:
        argv = [exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits", *ids]

        def read() -> list[Reading]:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=True)
            return [parse_smi_line(line) for line in done.stdout.splitlines() if line.strip()]

        return read

    for fields in (_SMI_FULL, _SMI_BASIC):  # an older driver rejects the whole query over one unknown field
        read = reader(fields)
        try:
            if read():
                return read
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def parse_smi_line(line: str) -> Reading:
    """One line of `nvidia-smi --query-gpu=<_SMI_FULL or _SMI_BASIC> --format=csv,noheader,nounits`."""

    def num(x: str) -> float | None:
        try:
            return float(x.strip())
        except ValueError:  # "[N/A]" and friends
            return None

    def bits(x: str) -> int | None:
        try:
            return int(x.strip(), 16)  # "0x0000000000000004"
        except ValueError:
            return None

    parts = line.split(",")
    parts += [""] * (6 - len(parts))
    mem, util = num(parts[3]), num(parts[4])
    return Reading(num(parts[0]), num(parts[1]), num(parts[2]), mem, util, bits(parts[5]))


def gpu_reader(indices: Sequence[int] | None = None) -> tuple[str, ReadFn | None]:
    """The first working source for these GPU indices (None = all): ("nvml"|"nvidia-smi"|"none", reader)."""
    if (nvml := _nvml_reader(indices)) is not None:
        return "nvml", nvml
    if (smi := _smi_reader(indices)) is not None:
        return "nvidia-smi", smi
    return "none", None


def summarize(
    source: str,
    readings: Sequence[Sequence[Reading]],
    load_start: float | None = None,
    load_end: float | None = None,
    errors: int = 0,
) -> dict[str, Any]:
    """Per window: SM clock min/median (MHz), max temperature, mean power per GPU; where available the median
    memory clock, mean utilisation and every clock-event reason seen (`sw_power_cap`, `gpu_idle`, ...); plus
    the host's 1-minute load at start and end."""
    flat = [Reading(*r) for rs in readings for r in rs]
    clocks = [r.sm_clock_mhz for r in flat if r.sm_clock_mhz is not None]
    powers = [r.power_w for r in flat if r.power_w is not None]
    temps = [r.temp_c for r in flat if r.temp_c is not None]
    mems = [r.mem_clock_mhz for r in flat if r.mem_clock_mhz is not None]
    utils = [r.gpu_util_pct for r in flat if r.gpu_util_pct is not None]
    bits = [r.event_reasons for r in flat if r.event_reasons is not None]
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
    if mems:
        out["mem_clock_median_mhz"] = statistics.median(mems)
    if utils:
        out["gpu_util_mean_pct"] = round(statistics.fmean(utils), 1)
    if bits:
        seen = 0
        for b in bits:
            seen |= b
        out["clock_event_reasons"] = [name for bit, name in EVENT_REASONS.items() if seen & bit]
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
