"""How fast the host runs a fixed piece of Python, timed every period in a child process, read per window.

A speculative server on a small model is bound by its scheduler's Python loop
(docs/results/2026-12-03-h200-v3-slice-profiles.md), and a shared VM's CPU speed moves with neighbours in
ways /proc/stat does not show (docs/results/2026-12-04-h200-v3-slice-grid-part1.md). The probe times the
same work each period: wall and CPU time both rising means a slower CPU; wall alone, the probe kept off a
CPU. Its own process (never the client's GIL), ~1% of a core; `measure.cpu_probe: server` moves it onto the
server's busiest CPU (bench/host/telemetry/window.py). It exits with its parent. It runs with -I (none of
the runner's environment), so it is handed the project root and imports only the standard library and
bench.host.processes."""

import bisect
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple

from bench.host.processes import current_cpu

PERIOD_S = 0.25
WORK_ITERATIONS = 20_000  # about 1-2 ms of interpreter work on a current server CPU


class ProbeSample(NamedTuple):
    at: float  # time.monotonic() when the probe finished (CLOCK_MONOTONIC: one clock for both processes)
    wall_ms: float
    cpu_ms: float
    cpu: int | None = None  # the CPU it ran on (None where /proc does not say)


def work(n: int = WORK_ITERATIONS) -> int:
    """Dict, integer and call traffic of the kind a scheduler's bookkeeping does; the result is discarded."""
    table: dict[int, int] = {}
    acc = 0
    for i in range(n):
        key = (i * 2654435761) & 1023
        table[key] = table.get(key, 0) + 1
        acc ^= key
    return acc


def parse_line(line: str) -> ProbeSample | None:
    parts = line.split()
    if len(parts) != 4:
        return None
    try:
        cpu = None if parts[3] == "-" else int(parts[3])
        return ProbeSample(float(parts[0]), float(parts[1]), float(parts[2]), cpu)
    except ValueError:
        return None


def by_use(cpus: Iterable[int]) -> list[int]:
    """The distinct CPUs of `cpus`, the most often seen first (ties: the lower number first)."""
    counts = Counter(cpus)
    return sorted(counts, key=lambda c: (-counts[c], c))


def summarize(samples: list[ProbeSample]) -> dict[str, Any]:
    """A window's probe figures: median wall and CPU milliseconds per probe, and the slowest wall time."""
    if not samples:
        return {}
    walls = [s.wall_ms for s in samples]
    return {
        "cpu_probe_ms": round(statistics.median(walls), 3),
        "cpu_probe_cpu_ms": round(statistics.median(s.cpu_ms for s in samples), 3),
        "cpu_probe_max_ms": round(max(walls), 3),
        "cpu_probe_samples": len(samples),
        "cpu_probe_cpus": by_use(s.cpu for s in samples if s.cpu is not None),
    }


class CpuProbe:
    """The child process and a thread that collects its lines; `between(t0, t1)` gives a window's samples."""

    def __init__(self, period_s: float = PERIOD_S) -> None:
        self.period_s = period_s
        self._samples: list[ProbeSample] = []
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> bool:
        """Start the child; False (and no probe figures) where it cannot run."""
        if self._proc is not None and self._proc.poll() is None:
            return True
        try:
            self._proc = subprocess.Popen(
                child_argv(self.period_s, os.getpid()),
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
        except OSError:
            return False
        self._reader = threading.Thread(target=self._read, name="cpu-probe", daemon=True)
        self._reader.start()
        return True

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            if (sample := parse_line(line)) is not None:
                with self._lock:
                    self._samples.append(sample)

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs (telemetry moves it onto the server's CPU); None otherwise."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def between(self, start: float, end: float) -> list[ProbeSample]:
        """The samples taken in [start, end]. Windows come in time order, so older samples are dropped."""
        with self._lock:
            ats = [s.at for s in self._samples]
            first = bisect.bisect_left(ats, start)
            del self._samples[:first]
            return self._samples[: bisect.bisect_right(ats, end) - first]

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)


# The child's program: the project root on sys.path unless there (installed specbench), then _loop.
_CHILD = """\
import sys
if sys.argv[1] not in sys.path:
    sys.path.insert(0, sys.argv[1])
from bench.host.cpu_probe import _loop
_loop(float(sys.argv[2]), int(sys.argv[3]))
"""


def child_argv(period_s: float, parent: int) -> list[str]:
    """The child's command line: -I leaves the project root off sys.path, so it is passed along."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return [sys.executable, "-I", "-c", _CHILD, root, str(period_s), str(parent)]


def _loop(period_s: float, parent: int) -> None:
    while os.getppid() == parent:
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        work()
        wall1, cpu1 = time.perf_counter(), time.thread_time()
        cpu = current_cpu()
        line = f"{time.monotonic():.6f} {(wall1 - wall0) * 1e3:.4f} {(cpu1 - cpu0) * 1e3:.4f} "
        try:
            print(line + ("-" if cpu is None else str(cpu)), flush=True)
        except BrokenPipeError:  # the reader is gone
            return
        time.sleep(period_s)
