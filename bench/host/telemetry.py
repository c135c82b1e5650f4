"""GPU clocks, power, temperature and utilisation, the host's CPU and the server's own CPU time, per window.

A window's throughput depends on the SM clock the GPU held during it: a hot or power-capped H200 drops its
clock and every figure with it, and nothing in the requests shows why. So a background thread samples the
GPUs the server uses every `interval_s` and the window gets a summary: min and median SM clock, max
temperature, mean power, plus the host's 1-minute load average at the start and end.

A speculative cycle on a small model per GPU is bound by the host CPU (docs/results/2026-12-04-h200-v3-slice.md: the GPU idles
half of each cycle), so the host matters as much as the GPU. Each window also records, from counters read at
its start and end: the share of all host CPUs that was busy and that the hypervisor stole (`/proc/stat`), and
the share of the window in which runnable tasks waited for a CPU (`/proc/pressure/cpu`, "some"). Where a
file is missing (not Linux, no PSI) the figure is None.

What the GPU and the host show did not explain the 5-13% window-to-window spread of speculative servers on
an H200 (docs/results/2026-12-04-h200-v3-slice.md, run 4): the SM clock held, the host was 90% idle, and a baseline server on the
same host spread by < 1%. Two readings tell the remaining causes apart. The GPU's utilisation (the share of
time a kernel ran) and its memory clock and clock-event reasons: a slower window with the GPU as busy as before
means slower kernels; one with the GPU idler means it waited for the host. And the CPU seconds of the server's
own processes (`server_pid`, from /proc through psutil): a scheduler at 100% of a core in its slow windows is
bound by that core's speed, which a VM cannot see otherwise. That speed itself is read by bench.host.cpu_probe: the
time a child process takes for a fixed piece of Python, sampled through the window (`cpu_probe_ms`).

The probe runs on the runner's CPUs, so on a VM it times another vCPU than the scheduler's, and a vCPU's speed
moves on its own there (its host sibling's load). With `measure.cpu_probe: server` (`probe_on="server"`) this
thread moves the probe at every sample onto the CPU the server's busiest process is on now, and back to its
own CPUs after the window; `cpu_probe_on_server_pct` says how much of the window it shared that CPU.

Sources, first that works: NVML through `pynvml` (the nvidia-ml-py package, present on GPU hosts), then
`nvidia-smi --query-gpu=... --format=csv` (argv, no shell), else none (the stand-in, a CPU box): the window
then records only host load and `source: "none"`.
"""

from __future__ import annotations

import bisect
import itertools
import os
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import psutil

from bench.host.cpu_probe import CpuProbe, ProbeSample, by_use
from bench.host.cpu_probe import summarize as summarize_probe
from bench.host.processes import process_tree


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
# Drivers before 535 name the last field clocks_throttle_reasons.active; the reader falls back to the basic set.
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
            out.append(
                Reading(
                    clock,
                    power,
                    temp,
                    float(mem) if mem is not None else None,
                    float(rates.gpu) if rates is not None else None,
                    int(bits) if bits is not None else None,
                )
            )
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
            return [_parse_smi_line(line) for line in done.stdout.splitlines() if line.strip()]

        return read

    for fields in (_SMI_FULL, _SMI_BASIC):  # an older driver rejects the whole query over one unknown field
        read = reader(fields)
        try:
            if read():
                return read
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def _parse_smi_line(line: str) -> Reading:
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
    # The same eight fields per CPU ("cpu0", ...): steal spread over 16 CPUs reads as a fraction of a percent
    # of the host, yet on the one CPU running a server's scheduler it can be several percent of that loop.
    per_cpu: dict[str, tuple[int, ...]] | None = None


def _cpu_lines(text: str) -> dict[str, tuple[int, ...]]:
    """The first eight fields of every `cpu` (aggregate) and `cpuN` line of /proc/stat, by name (guest time is
    already inside user; old kernels have fewer fields, padded with 0)."""
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
    """Percent of all host CPU time busy and stolen between two readings, and percent of wall time in which
    a runnable task waited for a CPU (PSI "some"; can exceed what `busy` suggests on a host with idle cores)."""
    out: dict[str, float | None] = {
        "host_cpu_busy_pct": None,
        "host_cpu_steal_pct": None,
        "cpu_pressure_pct": None,
    }
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
    """Percent of the time between two readings of one /proc/stat `cpu` line that was busy, and that the
    hypervisor stole; None when no time passed."""
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


# pid -> (process name, user + system CPU seconds so far)
ProcessCpu = dict[int, tuple[str, float]]


def process_tree_cpu(pid: int) -> ProcessCpu | None:
    """CPU seconds so far of `pid` and all its descendants (SGLang runs its scheduler, detokenizer and
    tokenizer as child processes of the launch_server process); None when `pid` is gone."""
    procs = _tree(pid)
    return processes_cpu(procs) if procs is not None else None


def _tree(pid: int) -> list[psutil.Process] | None:
    try:
        return process_tree(pid)
    except psutil.Error:
        return None


def processes_cpu(procs: Iterable[psutil.Process]) -> ProcessCpu:
    """CPU seconds so far of these processes; one that is gone is left out."""
    out: ProcessCpu = {}
    for proc in procs:
        try:
            with proc.oneshot():
                times = proc.cpu_times()
                out[proc.pid] = (proc.name(), times.user + times.system)
        except psutil.Error:  # exited between listing and reading
            continue
    return out


class ProcessNow(NamedTuple):
    """One process at one telemetry sample."""

    cpu_s: float  # user + system CPU seconds so far
    cpu: int | None  # the CPU it last ran on; None where psutil does not say (macOS)


def processes_now(procs: Iterable[psutil.Process]) -> dict[int, ProcessNow]:
    """CPU seconds so far and the CPU each of these processes is on, from one read of /proc/PID/stat per
    process (inside oneshot() psutil parses it once for both); one that is gone is left out."""
    out: dict[int, ProcessNow] = {}
    for proc in procs:
        try:
            with proc.oneshot():
                times = proc.cpu_times()
                try:
                    cpu: int | None = proc.cpu_num()
                except AttributeError:  # a platform without cpu_num (macOS)
                    cpu = None
        except psutil.Error:  # exited since the window's start
            continue
        out[proc.pid] = ProcessNow(times.user + times.system, cpu)
    return out


def server_cpu_shares(start: ProcessCpu | None, end: ProcessCpu | None, wall_s: float) -> dict[str, Any]:
    """CPU the server's processes used in a window, in percent of one core: all of them together, and the
    busiest one (SGLang's scheduler in a decode-bound window) with its name. A process that started inside the
    window counts from zero; one that ended inside it is missing (its last reading is gone with it)."""
    out: dict[str, Any] = {
        "server_cpu_pct": None,
        "server_busiest_cpu_pct": None,
        "server_busiest_process": None,
    }
    if start is None or end is None or wall_s <= 0:
        return out
    used = _cpu_used(start, end)
    if not used:
        return out
    name, busiest = max(used.values(), key=lambda x: x[1])
    out["server_cpu_pct"] = round(100.0 * sum(cpu for _, cpu in used.values()) / wall_s, 1)
    out["server_busiest_cpu_pct"] = round(100.0 * busiest / wall_s, 1)
    out["server_busiest_process"] = name
    return out


def _cpu_used(start: ProcessCpu, end: ProcessCpu) -> ProcessCpu:
    """pid -> (name, CPU seconds used between the two readings); a process new since `start` counts from zero."""
    return {pid: (name, cpu - start.get(pid, (name, 0.0))[1]) for pid, (name, cpu) in end.items()}


def cpu_moves(seen: Sequence[int]) -> dict[str, Any]:
    """The CPUs one process was seen on through a window, most often first, and how many times it was on another
    CPU than at the sample before: a scheduler loop that moves between cores of different speed shows here."""
    if not seen:
        return {}
    return {
        "server_busiest_cpus": by_use(seen),
        "server_busiest_cpu_moves": sum(1 for a, b in itertools.pairwise(seen) if a != b),
    }


def _busiest_pid(start: ProcessCpu | None, end: ProcessCpu | None) -> int | None:
    if not start or not end:
        return None
    used = _cpu_used(start, end)
    return max(used, key=lambda pid: used[pid][1]) if used else None


def _busiest_so_far(start: ProcessCpu | None, now: dict[int, ProcessNow]) -> int | None:
    """The process that used the most CPU since the window's start; right after the start, when none has used
    a clock tick yet, the one with the most CPU in its life (a warmed-up scheduler, already)."""
    if not now:
        return None
    used = _cpu_used(start or {}, {pid: ("", p.cpu_s) for pid, p in now.items()})  # names unused here
    busiest = max(used, key=lambda pid: used[pid][1])
    return busiest if used[busiest][1] > 0 else max(now, key=lambda pid: now[pid].cpu_s)


def on_cpu_pct(samples: Sequence[ProbeSample], placed: Sequence[tuple[float, int]]) -> float | None:
    """Percent of the probe's samples taken on the CPU a process was on (`placed`: (time.monotonic(), CPU) per
    telemetry sample, in time order) at the telemetry sample closest in time; None without both."""
    if not samples or not placed:
        return None
    ats = [at for at, _ in placed]
    hits = 0
    for s in samples:
        i = bisect.bisect_left(ats, s.at)
        near = min((j for j in (i - 1, i) if 0 <= j < len(ats)), key=lambda j: abs(ats[j] - s.at))
        hits += s.cpu is not None and s.cpu == placed[near][1]
    return round(100.0 * hits / len(samples), 1)


ProbeOn = Literal["runner", "server"]


@dataclass
class WindowTelemetry:
    """Samples a window in a thread; `summary()` after `stop()` is what gets stored with the repeat."""

    source: str
    read: ReadFn | None
    interval_s: float = 0.25
    # The launched server; None for an external one (its processes are elsewhere).
    server_pid: int | None = None
    # The host's Python speed (bench.host.cpu_probe), shared by the run's windows; None: not measured.
    probe: CpuProbe | None = None
    # "server": move the probe onto the CPU of the server's busiest process at every sample, and back to its
    # own CPUs at stop() (measure.cpu_probe; needs server_pid). "runner": leave it where it is.
    probe_on: ProbeOn = "runner"
    readings: list[list[Reading]] = field(default_factory=list)
    load_start: float | None = None
    load_end: float | None = None
    cpu_start: CpuCounters | None = None
    cpu_end: CpuCounters | None = None
    server_start: ProcessCpu | None = None
    server_end: ProcessCpu | None = None
    errors: int = 0
    # pid -> the CPU it was on at each sample (the server's processes as listed at the window's start)
    server_cpus_seen: dict[int, list[int]] = field(default_factory=dict)
    # Following the server (probe_on="server"): (time.monotonic(), pid -> CPU) at each sample; the probe's CPUs
    # before the window, put back at stop(); moves that failed (a CPU outside the probe's cpuset, a gone probe).
    placements: list[tuple[float, dict[int, int]]] = field(default_factory=list)
    follow_errors: int = 0
    _server_procs: list[psutil.Process] = field(default_factory=list)  # those read at the start, sampled
    _probe_home: tuple[int, set[int]] | None = None  # (probe pid, its CPUs)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def follows_server(self) -> bool:
        return self.probe_on == "server" and self.probe is not None and self.server_pid is not None

    def start(self) -> None:
        self.load_start = host_load()
        self.cpu_start = read_cpu_counters()
        procs = _tree(self.server_pid) if self.server_pid is not None else None
        self.server_start = processes_cpu(procs) if procs is not None else None
        self._server_procs = [p for p in procs or () if p.pid in (self.server_start or {})]
        if self.follows_server:
            self._remember_probe_cpus()
        if self.read is None and not self.server_start:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="window-telemetry", daemon=True)
        self._thread.start()

    def _remember_probe_cpus(self) -> None:
        """The probe's CPUs before it follows the server (the runner's, which it inherited); it is not moved
        when they cannot be read, since they could not be put back."""
        pid = self.probe.pid if self.probe is not None else None
        if pid is None:  # it died since the window was handed out
            self.follow_errors += 1
            return
        try:
            self._probe_home = (pid, os.sched_getaffinity(pid))
        except (OSError, AttributeError):  # gone; not Linux (no sched_getaffinity)
            self.follow_errors += 1

    def _loop(self) -> None:
        moved_to: int | None = None  # the CPU the probe was last moved to
        while True:
            if self.read is not None:
                try:
                    self.readings.append(self.read())
                except Exception:  # a flaky read costs one sample, never the window
                    self.errors += 1
            # Each server process read once per sample: the CPU it is on, and its CPU seconds for _follow.
            now = processes_now(self._server_procs)
            at = time.monotonic()
            cpus = {pid: p.cpu for pid, p in now.items() if p.cpu is not None}
            for pid, cpu in cpus.items():
                self.server_cpus_seen.setdefault(pid, []).append(cpu)
            if self._probe_home is not None:
                self.placements.append((at, cpus))
                moved_to = self._follow(now, cpus, moved_to)
            if self._stop.wait(self.interval_s):
                return

    def _follow(self, now: dict[int, ProcessNow], cpus: dict[int, int], moved_to: int | None) -> int | None:
        """Move the probe onto the CPU the busiest server process (since the window's start) is on now; the
        CPU it is on after this sample. The kernel may move the scheduler at any time, so this runs at every
        sample; only a change costs a system call. The probe is one thread, so its pid's affinity is all of it."""
        assert self._probe_home is not None
        busiest = _busiest_so_far(self.server_start, now)
        cpu = cpus.get(busiest) if busiest is not None else None
        if cpu is None or cpu == moved_to:
            return moved_to
        try:
            os.sched_setaffinity(self._probe_home[0], {cpu})
        except OSError:  # a CPU outside the probe's cpuset, the probe gone: this sample stays where it was
            self.follow_errors += 1
            return moved_to
        return cpu

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
        self.server_end = process_tree_cpu(self.server_pid) if self.server_pid is not None else None
        if self._probe_home is not None:  # after the window's end: back to the runner's CPUs until the next
            try:
                os.sched_setaffinity(*self._probe_home)
            except ProcessLookupError:  # the probe is gone; the next window starts a new one on these CPUs
                pass
            except OSError:
                self.follow_errors += 1
            self._probe_home = None

    def summary(self) -> dict[str, Any]:
        out = summarize(self.source, self.readings, self.load_start, self.load_end, self.errors)
        out.update(cpu_shares(self.cpu_start, self.cpu_end))
        busiest = _busiest_pid(self.server_start, self.server_end)
        if self.server_pid is not None:
            wall = self.cpu_end.wall_s - self.cpu_start.wall_s if self.cpu_start and self.cpu_end else 0.0
            out.update(server_cpu_shares(self.server_start, self.server_end, wall))
            if busiest is not None:
                out.update(cpu_moves(self.server_cpus_seen.get(busiest, [])))
        if self.probe is not None and self.cpu_start is not None and self.cpu_end is not None:
            # the counters' monotonic readings bound the window; the probe stamps its samples on that clock
            samples = self.probe.between(self.cpu_start.wall_s, self.cpu_end.wall_s)
            out.update(summarize_probe(samples))
            out["cpu_probe_on"] = "server" if self.follows_server else "runner"
            if self.follows_server:
                # Did it follow? Its samples against the CPU of the window's busiest process (by the whole
                # window's CPU time, not the running guess it followed) at the nearest telemetry sample.
                placed = [(at, cpus[busiest]) for at, cpus in self.placements if busiest in cpus]
                out["cpu_probe_on_server_pct"] = on_cpu_pct(samples, placed)
                out["cpu_probe_follow_errors"] = self.follow_errors
        return out


def summarize(
    source: str,
    readings: Sequence[Sequence[Reading]],
    load_start: float | None = None,
    load_end: float | None = None,
    errors: int = 0,
) -> dict[str, Any]:
    """Per window: SM clock min/median (MHz, over all GPUs and samples), max temperature, mean power per GPU;
    where the source has them, the median memory clock, the mean GPU utilisation and every clock-event reason
    seen in any sample (by name, e.g. `sw_power_cap`; `gpu_idle` too, which a host-bound GPU shows)."""
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


class TelemetrySource:
    """Opens the reader once per run (NVML init is not free) and hands a fresh sampler to each window. The
    host-speed probe starts with the first window and runs until `close()`."""

    def __init__(self, indices: Sequence[int] | None = None, *, enabled: bool = True) -> None:
        self.source, self._read = gpu_reader(indices) if enabled else ("none", None)
        self._probe = CpuProbe() if enabled else None

    def window(self, server_pid: int | None = None, *, cpu_probe: ProbeOn = "runner") -> WindowTelemetry:
        """A sampler for one window; `cpu_probe="server"` moves the probe onto the server's busiest CPU for
        the window (measure.cpu_probe)."""
        probe = self._probe if self._probe is not None and self._probe.start() else None
        return WindowTelemetry(
            self.source, self._read, server_pid=server_pid, probe=probe, probe_on=cpu_probe
        )

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()


def now_wall() -> float:
    return time.time()
