"""What one telemetry sample of a launched server's processes costs the sampler thread (bench/host/telemetry/).

With a launched server, the window's sampler thread reads every server process at every sample: the CPU it is on
(`server_busiest_cpus`), and with `measure.cpu_probe: server` also its CPU seconds, to move the host-speed probe
onto the busiest process's CPU. This starts a real process tree shaped like SGLang's at TP 8 (a launch process,
eight `sglang::scheduler_TP*` children, one detokenizer: 10 processes, `--spinners` of the schedulers busy),
runs a real window on it with the sample interval at 0, so the thread samples back to back, and prints per
sample: wall and CPU microseconds (the process's CPU time over the window; the main thread sleeps meanwhile) and
the /proc files psutil opened in the sampler thread (counted in a separate window, so counting costs the timed
ones nothing).

    .venv/bin/python -m benchmarks.telemetry_sample                     # 10 processes, 3 windows of 2 s per mode
    .venv/bin/python -m benchmarks.telemetry_sample --children 3 --seconds 1 --repeats 5

No GPU is read (the GPU reader is off), so the figures are the server-process part alone. Linux only. Wall
time moves with the host's load; CPU time per sample and the opens are the figures to compare.

On a 2-CPU VM at load 4-5, psutil 7.2, 10 processes, 5 x 2 s: when the loop read each process twice per sample
(its CPU through one psutil.Process, its CPU seconds and name through another), runner 341-368 CPU us and 20
opens per sample, server 1023-1070 CPU us and 49 opens (the names of 15 characters cost a cmdline read each);
with one oneshot() read per process per sample, both modes 250-265 CPU us and 10 opens.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import psutil._common as psutil_common

from bench.host.cpu_probe import CpuProbe
from bench.host.telemetry import ProbeOn, WindowTelemetry

# The launch process starts its children, names them as SGLang's setproctitle does (the kernel keeps 15
# characters, so psutil's name() also reads the cmdline), and waits. The first `spinners` children spin.
SERVER = textwrap.dedent(
    """
    import subprocess, sys, time
    n, spinners = int(sys.argv[1]), int(sys.argv[2])
    names = [f"sglang::scheduler_TP{i}" for i in range(n - 1)] + ["sglang::detokenizer"]
    child = (
        "import sys, time\\n"
        "with open('/proc/self/comm', 'w') as f: f.write(sys.argv[1][:15])\\n"
        "if sys.argv[2] == '1':\\n"
        "    end = time.time() + 600\\n"
        "    while time.time() < end: pass\\n"
        "time.sleep(600)\\n"
    )
    kids = [subprocess.Popen([sys.executable, "-c", child, name, str(int(i < spinners))])
            for i, name in enumerate(names[:n])]
    print(" ".join(str(k.pid) for k in kids), flush=True)
    time.sleep(600)
    """
)


@contextlib.contextmanager
def server_tree(children: int, spinners: int) -> Iterator[int]:
    """The launch process's pid, once its children run; the whole tree is killed on the way out."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(children), str(spinners)], stdout=subprocess.PIPE, text=True
    )
    kids: list[int] = []
    try:
        assert server.stdout is not None
        kids = [int(x) for x in server.stdout.readline().split()]
        time.sleep(0.5)  # the children's interpreters start and rename themselves
        yield server.pid
    finally:
        for pid in [*kids, server.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        server.wait()


@contextlib.contextmanager
def counting_proc_opens() -> Iterator[list[int]]:
    """Counts the files psutil opens in the sampler thread (every /proc read goes through psutil._common's
    open); the window's start and end, in the caller's thread, are left out."""
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += threading.current_thread().name == "window-telemetry"
        return open(*args, **kwargs)

    psutil_common.open = counted  # type: ignore[attr-defined]
    try:
        yield count
    finally:
        del psutil_common.open  # type: ignore[attr-defined]


def window(
    server_pid: int, probe: CpuProbe, probe_on: ProbeOn, seconds: float
) -> tuple[WindowTelemetry, float]:
    """A window sampled back to back for `seconds`; the process's CPU seconds it took."""
    w = WindowTelemetry("none", None, interval_s=0.0, server_pid=server_pid, probe=probe, probe_on=probe_on)
    cpu0 = time.process_time()
    w.start()
    time.sleep(seconds)
    w.stop()
    return w, time.process_time() - cpu0


def samples_of(w: WindowTelemetry) -> int:
    return max((len(seen) for seen in w.server_cpus_seen.values()), default=0)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--children", type=int, default=9, help="server children (plus the launch process)")
    parser.add_argument(
        "--spinners", type=int, default=1, help="children that spin (a scheduler's busy loop)"
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each timed window")
    parser.add_argument("--repeats", type=int, default=3, help="timed windows per mode")
    args = parser.parse_args()

    probe = CpuProbe()
    if not probe.start():
        raise SystemExit("the host-speed probe did not start")
    try:
        with server_tree(args.children, args.spinners) as server_pid:
            n = len(psutil.Process(server_pid).children(recursive=True)) + 1
            print(
                f"{n} server processes ({args.spinners} spinning), {os.cpu_count()} CPUs, "
                f"load {os.getloadavg()[0]:.1f}, {args.repeats} x {args.seconds:.1f} s per mode"
            )
            print(
                f"{'cpu_probe':<10} {'samples/s':>10} {'wall us/sample':>15} {'CPU us/sample':>14} {'/proc opens':>12}"
            )
            modes: tuple[ProbeOn, ...] = ("runner", "server")
            for probe_on in modes:
                walls, cpus, rates = [], [], []
                for _ in range(args.repeats):
                    w, cpu_s = window(server_pid, probe, probe_on, args.seconds)
                    k = samples_of(w)
                    rates.append(k / args.seconds)
                    walls.append(1e6 * args.seconds / k)
                    cpus.append(1e6 * cpu_s / k)
                with counting_proc_opens() as opens:
                    w, _ = window(server_pid, probe, probe_on, 0.3)
                per_sample = opens[0] / samples_of(w)
                print(
                    f"{probe_on:<10} {statistics.median(rates):>10.0f} {statistics.median(walls):>15.1f} "
                    f"{statistics.median(cpus):>14.1f} {per_sample:>12.1f}"
                )
    finally:
        probe.close()


if __name__ == "__main__":
    main()
