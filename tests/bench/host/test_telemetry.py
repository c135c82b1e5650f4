"""Window telemetry: summaries, nvidia-smi parsing, and the throttled flag written at the end of a run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Any

import psutil
import pytest
from sqlalchemy import Engine, select

from bench.host.telemetry import TelemetrySource, throttle_reason
from bench.host.telemetry.gpu import Reading, parse_smi_line, summarize
from bench.host.telemetry.host_cpu import (
    CpuCounters,
    cpu_shares,
    parse_cpu_pressure,
    parse_proc_stat,
    read_cpu_counters,
)
from bench.host.telemetry.server_cpu import (
    cpu_moves,
    process_tree_cpu,
    processes_cpu,
    processes_now,
    server_cpu_shares,
)
from bench.sweep import expand, parse_sweep
from db.engine import session_scope
from db.models import Point, Run, Sample
from runners import store
from runners.run_checks import flag_throttled
from tests.fixtures.waiting import wait_until


def test_summary_over_gpus_and_samples() -> None:
    readings = [[(1980.0, 600.0, 60.0), (1965.0, 610.0, 62.0)], [(1500.0, 700.0, 81.0), (1980.0, None, 63.0)]]
    s = summarize("nvml", readings, 1.5, 2.0)
    assert s["sm_clock_min_mhz"] == 1500.0 and s["sm_clock_max_mhz"] == 1980.0
    assert s["sm_clock_median_mhz"] == 1972.5
    assert s["temp_max_c"] == 81.0
    assert s["power_mean_w"] == 636.7  # mean of the three power readings present
    assert s["samples"] == 2 and s["host_load_1m_start"] == 1.5
    empty = summarize("none", [])
    assert empty["sm_clock_median_mhz"] is None and empty["samples"] == 0


def test_nvidia_smi_lines() -> None:
    full = parse_smi_line("1980, 612.35, 57, 3201, 87, 0x0000000000000005")
    assert full == Reading(1980.0, 612.35, 57.0, 3201.0, 87.0, 0x5)
    assert parse_smi_line("1980, 612.35, 57") == Reading(1980.0, 612.35, 57.0)  # an older driver's basic set
    assert parse_smi_line("1980, [N/A], 57, [N/A], 87, [N/A]") == Reading(
        1980.0, None, 57.0, None, 87.0, None
    )
    assert parse_smi_line("") == Reading(None, None, None)


def test_summary_of_memory_clock_utilisation_and_clock_events() -> None:
    readings = [
        [Reading(1980.0, 600.0, 60.0, 3201.0, 90.0, 0x0)],
        [Reading(1980.0, 600.0, 60.0, 3201.0, 40.0, 0x1)],  # gpu_idle
        [Reading(1800.0, 700.0, 61.0, 2619.0, 95.0, 0x4)],  # sw_power_cap
    ]
    s = summarize("nvml", readings)
    assert s["mem_clock_median_mhz"] == 3201.0
    assert s["gpu_util_mean_pct"] == 75.0  # (90 + 40 + 95) / 3
    assert s["clock_event_reasons"] == ["gpu_idle", "sw_power_cap"]  # every reason any sample showed
    basic = summarize("nvidia-smi", [[(1980.0, 600.0, 60.0)]])  # a source without those fields
    assert "mem_clock_median_mhz" not in basic and "clock_event_reasons" not in basic


def test_server_cpu_shares_hand_computed() -> None:
    start = {10: ("launch_server", 1.0), 11: ("scheduler", 10.0)}
    end = {10: ("launch_server", 1.5), 11: ("scheduler", 19.0), 12: ("detokenizer", 0.5)}  # 12 started inside
    got = server_cpu_shares(start, end, 10.0)
    # (0.5 + 9.0 + 0.5) CPU seconds in 10 s of wall time; the scheduler used 9 s of them
    assert got == {
        "server_cpu_pct": 100.0,
        "server_busiest_cpu_pct": 90.0,
        "server_busiest_process": "scheduler",
    }
    assert server_cpu_shares(None, end, 10.0)["server_cpu_pct"] is None  # the server was gone at the start
    assert server_cpu_shares(start, end, 0.0)["server_busiest_process"] is None


BUSY_CHILD = """
import subprocess, sys, time
spin = "import time; end = time.time() + 30; exec('while time.time() < end: pass')"
child = subprocess.Popen([sys.executable, "-c", spin])
print(child.pid, flush=True)
time.sleep(30)
"""


def test_a_window_records_the_server_process_tree_cpu() -> None:
    # A "server" that sleeps while its child spins, as SGLang's launch process waits on its scheduler.
    busy = subprocess.Popen([sys.executable, "-c", BUSY_CHILD], stdout=subprocess.PIPE, text=True)
    # The sleeper says when its interpreter is up: its start-up is CPU time the window must not see.
    sleeper = "import time; print('up', flush=True); time.sleep(30)"
    idle = subprocess.Popen([sys.executable, "-c", sleeper], stdout=subprocess.PIPE, text=True)
    child_pid = None
    try:
        assert busy.stdout is not None and idle.stdout is not None
        child_pid = int(busy.stdout.readline())
        assert idle.stdout.readline().strip() == "up"
        tree = process_tree_cpu(busy.pid)
        assert tree is not None and {busy.pid, child_pid} <= set(tree)
        windows = {pid: TelemetrySource(enabled=False).window(server_pid=pid) for pid in (busy.pid, idle.pid)}
        for w in windows.values():
            w.start()
        # The window lasts until the spinner used 0.2 s of CPU in it, however long a loaded host takes.
        spinner = psutil.Process(child_pid)
        spun = sum(spinner.cpu_times()[:2])
        wait_until(lambda: sum(spinner.cpu_times()[:2]) >= spun + 0.2, "0.2 s of the spinner's CPU")
        for w in windows.values():
            w.stop()
        hot, cold = windows[busy.pid].summary(), windows[idle.pid].summary()
        # the spinning child, not its sleeping parent, is the busiest process; the sleeper used almost nothing
        assert 0 < hot["server_busiest_cpu_pct"] <= hot["server_cpu_pct"]
        assert hot["server_busiest_cpu_pct"] > cold["server_cpu_pct"]
        assert cold["server_cpu_pct"] < 5
        # the spinning child's CPUs, sampled through the window (no GPU reader here: the thread runs for them)
        assert hot["server_busiest_cpus"] and set(hot["server_busiest_cpus"]) <= os.sched_getaffinity(0)
        assert hot["server_busiest_cpu_moves"] >= 0
    finally:
        for p in (busy, idle):
            p.kill()
            p.wait()
        if child_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child_pid, signal.SIGKILL)
    assert process_tree_cpu(busy.pid) is None  # gone: nothing to read, and the window records None
    gone = TelemetrySource(enabled=False).window(server_pid=busy.pid)
    gone.start()
    gone.stop()
    assert gone.summary()["server_cpu_pct"] is None


PINNED_SPINNER = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
end = time.time() + 30
while time.time() < end:
    pass
"""


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux only")
def test_one_read_per_process_gives_its_cpu_seconds_and_its_cpu() -> None:
    cpu = sorted(os.sched_getaffinity(0))[-1]
    spinner = subprocess.Popen([sys.executable, "-c", PINNED_SPINNER, str(cpu)])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        procs = [psutil.Process(p.pid) for p in (spinner, sleeper)]
        # On a busy host the spinner may get little CPU for a while: wait for its first 0.1 s of CPU time
        # instead of a fixed sleep (a loaded CI box gave it 0.03 s in 0.5 s).
        deadline = time.monotonic() + 120
        now = processes_now(procs)
        while now[spinner.pid].cpu_s <= now[sleeper.pid].cpu_s + 0.1 and time.monotonic() < deadline:
            time.sleep(0.2)
            now = processes_now(procs)
        assert now[spinner.pid].cpu == cpu  # pinned by itself, so the kernel moved it there at once
        assert now[spinner.pid].cpu_s > now[sleeper.pid].cpu_s + 0.1
        assert now[sleeper.pid].cpu in os.sched_getaffinity(0)
        sleeper.kill()
        sleeper.wait()
        later = processes_now(procs)
        assert set(later) == {spinner.pid}  # gone since: left out
        assert later[spinner.pid].cpu_s >= now[spinner.pid].cpu_s
        assert processes_cpu(procs)[spinner.pid][1] >= later[spinner.pid].cpu_s  # the same CPU seconds
    finally:
        for p in (spinner, sleeper):
            p.kill()
            p.wait()


def test_windows_without_a_server_pid_record_no_server_cpu() -> None:
    w = TelemetrySource(enabled=False).window()  # an external server: its processes are not ours to read
    w.start()
    w.stop()
    assert "server_cpu_pct" not in w.summary()


def test_cpu_moves_hand_computed() -> None:
    assert cpu_moves([3, 3, 11, 11, 11, 3, 5]) == {
        "server_busiest_cpus": [3, 11, 5],
        "server_busiest_cpu_moves": 3,
    }
    assert cpu_moves([7]) == {"server_busiest_cpus": [7], "server_busiest_cpu_moves": 0}
    assert cpu_moves([]) == {}


def test_throttle_reason() -> None:
    assert throttle_reason({"sm_clock_median_mhz": 1700.0}, 1980.0, 0.9) is not None  # < 1782
    assert throttle_reason({"sm_clock_median_mhz": 1800.0}, 1980.0, 0.9) is None
    assert throttle_reason({"sm_clock_median_mhz": None}, 1980.0, 0.9) is None


def test_no_gpu_source_still_records_host_load() -> None:
    w = TelemetrySource(enabled=False).window()
    w.start()
    w.stop()
    s = w.summary()
    assert s["source"] == "none" and s["samples"] == 0 and s["host_load_1m_end"] is not None


STAT_A = "cpu  1000 0 200 8000 50 0 50 0 0 0\ncpu0 500 0 100 4000 25 0 25 0 0 0\nintr 1 2 3\n"
STAT_B = "cpu  1600 100 300 9500 50 0 100 350 40 0\ncpu0 800 50 150 4750 25 0 50 175 20 0\nintr 1 2 3\n"
PSI_A = "some avg10=0.34 avg60=0.17 avg300=0.04 total=6440000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
PSI_B = "some avg10=9.99 avg60=0.17 avg300=0.04 total=6440500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"


def test_proc_stat_and_pressure_parsing() -> None:
    assert parse_proc_stat(STAT_A) == (1000, 0, 200, 8000, 50, 0, 50, 0)  # the aggregate line, not cpu0
    assert parse_proc_stat("cpu  1 2 3 4\n") == (1, 2, 3, 4, 0, 0, 0, 0)  # old kernels: fewer fields
    assert parse_proc_stat("intr 1 2\n") is None
    assert parse_cpu_pressure(PSI_A) == 6440000000
    assert parse_cpu_pressure("full avg10=0.00 total=5\n") is None


def test_cpu_shares_hand_computed() -> None:
    a = CpuCounters(10.0, parse_proc_stat(STAT_A), parse_cpu_pressure(PSI_A))
    b = CpuCounters(12.0, parse_proc_stat(STAT_B), parse_cpu_pressure(PSI_B))
    shares = cpu_shares(a, b)
    # deltas: user 600, nice 100, system 100, idle 1500, iowait 0, irq 0, softirq 50, steal 350 -> total 2700
    assert shares["host_cpu_busy_pct"] == round(100 * 850 / 2700, 1) == 31.5
    assert shares["host_cpu_steal_pct"] == round(100 * 350 / 2700, 2) == 12.96
    # 0.5 s of "some" pressure in 2 s of wall time
    assert shares["cpu_pressure_pct"] == 25.0
    assert "host_cpu_steal_max_pct" not in shares  # counters without per-CPU lines
    assert cpu_shares(a, CpuCounters(12.0, None, None)) == {
        "host_cpu_busy_pct": None,
        "host_cpu_steal_pct": None,
        "cpu_pressure_pct": None,
    }
    assert cpu_shares(None, b)["host_cpu_busy_pct"] is None


# Two CPUs: cpu0 runs a busy loop and loses time to the hypervisor; cpu1 idles. Spread over the host, the
# steal looks small; on cpu0 it is a tenth of that CPU's time.
STAT_2CPU_A = "cpu  0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0\n"
STAT_2CPU_B = "cpu  850 0 50 1000 0 0 0 100\ncpu0 850 0 50 0 0 0 0 100\ncpu1 0 0 0 1000 0 0 0 0\n"


def test_per_cpu_busiest_and_steal_hand_computed(tmp_path: Any) -> None:
    stat = tmp_path / "stat"
    stat.write_text(STAT_2CPU_A)
    a = read_cpu_counters(str(stat), str(tmp_path / "no-psi"))
    stat.write_text(STAT_2CPU_B)
    b = read_cpu_counters(str(stat), str(tmp_path / "no-psi"))
    assert a.per_cpu is not None and set(a.per_cpu) == {"cpu0", "cpu1"}  # not the aggregate line
    shares = cpu_shares(a, b)
    assert shares["host_cpu_steal_pct"] == 5.0  # 100 of 2000 jiffies over the host
    assert shares["host_cpu_steal_max_pct"] == 10.0  # 100 of cpu0's 1000
    assert shares["host_cpu_max_busy_pct"] == 90.0  # cpu0: 850 user + 50 system of 1000
    assert shares["host_cpu_busy_pct"] == 45.0


def test_cpu_counters_from_files(tmp_path: Any) -> None:
    stat, psi = tmp_path / "stat", tmp_path / "cpu"
    stat.write_text(STAT_A)
    psi.write_text(PSI_A)
    got = read_cpu_counters(str(stat), str(psi))
    assert got.jiffies == (1000, 0, 200, 8000, 50, 0, 50, 0) and got.pressure_some_us == 6440000000
    missing = read_cpu_counters(str(tmp_path / "no-stat"), str(tmp_path / "no-psi"))  # not Linux, no PSI
    assert missing.jiffies is None and missing.pressure_some_us is None
    stat.write_text("cpu  x y z\n")  # garbage: no figure rather than a failed window
    assert read_cpu_counters(str(stat), str(psi)).jiffies is None


def test_window_records_host_cpu_on_linux() -> None:
    w = TelemetrySource(enabled=False).window()
    w.start()
    sum(i * i for i in range(300_000))  # some CPU work inside the window
    w.stop()
    s = w.summary()
    assert s["host_cpu_busy_pct"] is not None and 0.0 < s["host_cpu_busy_pct"] <= 100.0
    assert s["host_cpu_steal_pct"] is not None and s["host_cpu_steal_pct"] >= 0.0


def test_throttled_windows_are_flagged_not_failed(engine: Engine) -> None:
    text = "name: t\nmodel: m\nserver: {backend: sim}\ngrid: {batch_sizes: [1], spec_modes: [v2], baseline: false}\n"
    spec = parse_sweep(text)
    plan = expand(spec)[0].points[0]
    clocks = [1980.0, 1975.0, 1650.0]
    with session_scope(engine) as s:
        run = store.create_run(s, spec, text, {"simulated": True}, trigger="manual", label=None, job_id=None)
        point = store.get_or_create_point(s, run, plan, None)
        for r, clock in enumerate(clocks):
            s.add(
                Sample(
                    point_id=point.id,
                    repeat=r,
                    status="ok",
                    output_throughput=100.0,
                    telemetry=summarize("nvml", [[(clock, 600.0, 60.0)]]),
                )
            )
        run_id = run.id

    def write(fn: Any, what: str) -> Any:
        with session_scope(engine) as s:
            return fn(s)

    assert flag_throttled(write, run_id, 0.9) == 1
    assert flag_throttled(write, run_id, 0.9) == 0  # idempotent: already flagged
    with session_scope(engine) as s:
        samples = {x.repeat: x for x in s.scalars(select(Sample))}
        assert samples[2].status == "ok" and samples[2].telemetry["throttled"] is True
        assert (samples[2].reason or "").startswith("throttled: median SM clock 1650 MHz")
        assert not samples[0].telemetry.get("throttled") and samples[0].reason is None
        point = s.scalars(select(Point)).one()
        assert "throttled" in (point.reason or "")
        assert s.get(Run, run_id) is not None
