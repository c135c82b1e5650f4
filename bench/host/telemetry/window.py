"""The window sampler: a thread reading the GPUs and the server's processes through one window. Each window
gets a `WindowTelemetry` from the run's `TelemetrySource`: host counters (host_cpu.py) and server CPU seconds
(server_cpu.py) at start and end, GPU samples (gpu.py) and each server process's CPU every `interval_s`;
`summary()` is stored with the repeat. The host's Python speed comes from bench.host.cpu_probe
(`cpu_probe_ms`), run on the runner's CPUs; on a VM that is another vCPU than the scheduler's, so with
`measure.cpu_probe: server` the sampler moves the probe at each sample onto the CPU of the server's busiest
process (`cpu_probe_on_server_pct`: how much it shared it)."""

import bisect
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import psutil

from bench.host.cpu_probe import CpuProbe, ProbeSample
from bench.host.cpu_probe import summarize as summarize_probe
from bench.host.telemetry.gpu import ReadFn, Reading, gpu_reader, summarize
from bench.host.telemetry.host_cpu import CpuCounters, cpu_shares, host_load, read_cpu_counters
from bench.host.telemetry.server_cpu import (
    ProcessCpu,
    ProcessNow,
    busiest_pid,
    busiest_so_far,
    cpu_moves,
    process_tree_cpu,
    processes_cpu,
    processes_now,
    server_cpu_shares,
    server_processes,
)


def on_cpu_pct(samples: Sequence[ProbeSample], placed: Sequence[tuple[float, int]]) -> float | None:
    """Percent of probe samples on the CPU `placed` (monotonic time, CPU) shows nearest in time; or None."""
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
    server_pid: int | None = None  # the launched server; None for an external one (processes elsewhere)
    # The host's Python speed (bench.host.cpu_probe), shared by the run's windows; None: not measured.
    probe: CpuProbe | None = None
    # "server": follow the busiest server process's CPU at each sample, back at stop(); "runner": stay.
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
    # Following the server: (monotonic, pid -> CPU) per sample; the probe's CPUs before; failed moves.
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
        procs = server_processes(self.server_pid) if self.server_pid is not None else None
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
        """The probe's CPUs before it follows the server; unreadable: no move, as none could be undone."""
        pid = self.probe.pid if self.probe is not None else None
        if pid is None:  # it died since the window was handed out
            self.follow_errors += 1
            return
        try:
            self._probe_home = (pid, os.sched_getaffinity(pid))
        except (OSError, AttributeError):  # gone; not Linux (no sched_getaffinity)
            self.follow_errors += 1

    def _read_gpus(self) -> None:
        if self.read is not None:
            try:
                self.readings.append(self.read())
            except Exception:  # a flaky read costs one sample, never the window
                self.errors += 1

    def _loop(self) -> None:
        moved_to: int | None = None  # the CPU the probe was last moved to
        while True:
            self._read_gpus()
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
        """Move the probe to the busiest server process's CPU (the kernel moves it); returns the new CPU."""
        assert self._probe_home is not None
        busiest = busiest_so_far(self.server_start, now)
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
            self._read_gpus()  # one reading at the very end, so even a short window has two
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
        busiest = busiest_pid(self.server_start, self.server_end)
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
                # Did it follow? Samples against the CPU of the window's busiest process (whole-window CPU).
                placed = [(at, cpus[busiest]) for at, cpus in self.placements if busiest in cpus]
                out["cpu_probe_on_server_pct"] = on_cpu_pct(samples, placed)
                out["cpu_probe_follow_errors"] = self.follow_errors
        return out


class TelemetrySource:
    """Opens the reader once (NVML init is not free), a sampler per window; the probe runs until `close()`."""

    def __init__(self, indices: Sequence[int] | None = None, *, enabled: bool = True) -> None:
        self.source, self._read = gpu_reader(indices) if enabled else ("none", None)
        self._probe = CpuProbe() if enabled else None

    def window(self, server_pid: int | None = None, *, cpu_probe: ProbeOn = "runner") -> WindowTelemetry:
        """A sampler for one window; `cpu_probe="server"` follows the server's busiest CPU."""
        probe = self._probe if self._probe is not None and self._probe.start() else None
        return WindowTelemetry(
            self.source, self._read, server_pid=server_pid, probe=probe, probe_on=cpu_probe
        )

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
