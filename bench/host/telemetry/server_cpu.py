"""The CPU time of the launched server's own processes over a window, and the CPUs its busiest one ran on:
with the SM clock steady and the host 90% idle, a scheduler at 100% of a core explains the spread of
speculative windows on a VM (docs/results/2026-12-04-h200-v3-slice-grid-part1.md, -part2.md)."""

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import psutil

from bench.host.cpu_probe import by_use
from bench.host.processes import process_tree

ProcessCpu = dict[int, tuple[str, float]]  # pid -> (process name, user + system CPU seconds so far)


def process_tree_cpu(pid: int) -> ProcessCpu | None:
    """CPU seconds so far of `pid` and its descendants; None when `pid` is gone."""
    procs = server_processes(pid)
    return processes_cpu(procs) if procs is not None else None


def server_processes(pid: int) -> list[psutil.Process] | None:
    """`pid` and its descendants now; None when `pid` is gone."""
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
    """CPU seconds and current CPU per process, one /proc/PID/stat read each; gone ones left out."""
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
    """The server processes' CPU in a window, in percent of one core: all together, and the busiest (the
    scheduler) with its name. Started inside: counted from zero; ended inside: missing."""
    out: dict[str, Any] = dict.fromkeys(
        ("server_cpu_pct", "server_busiest_cpu_pct", "server_busiest_process")
    )
    if start is None or end is None or wall_s <= 0:
        return out
    if not (used := _cpu_used(start, end)):
        return out
    name, busiest = max(used.values(), key=lambda x: x[1])
    out["server_cpu_pct"] = round(100.0 * sum(cpu for _, cpu in used.values()) / wall_s, 1)
    out["server_busiest_cpu_pct"] = round(100.0 * busiest / wall_s, 1)
    out["server_busiest_process"] = name
    return out


def _cpu_used(start: ProcessCpu, end: ProcessCpu) -> ProcessCpu:
    """pid -> (name, CPU seconds between the two readings); a process new since `start` counts from zero."""
    return {pid: (name, cpu - start.get(pid, (name, 0.0))[1]) for pid, (name, cpu) in end.items()}


def cpu_moves(seen: Sequence[int]) -> dict[str, Any]:
    """The CPUs one process was seen on, most often first, and how often it moved between samples."""
    if not seen:
        return {}
    return {
        "server_busiest_cpus": by_use(seen),
        "server_busiest_cpu_moves": sum(1 for a, b in itertools.pairwise(seen) if a != b),
    }


def busiest_pid(start: ProcessCpu | None, end: ProcessCpu | None) -> int | None:
    """The process that used the most CPU between the two readings; None without both."""
    if not start or not end:
        return None
    used = _cpu_used(start, end)
    return max(used, key=lambda pid: used[pid][1]) if used else None


def busiest_so_far(start: ProcessCpu | None, now: dict[int, ProcessNow]) -> int | None:
    """The process with the most CPU since the window's start (before any tick: the most in its life)."""
    if not now:
        return None
    used = _cpu_used(start or {}, {pid: ("", p.cpu_s) for pid, p in now.items()})  # names unused here
    busiest = max(used, key=lambda pid: used[pid][1])
    return busiest if used[busiest][1] > 0 else max(now, key=lambda pid: now[pid].cpu_s)
