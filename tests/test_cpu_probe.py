"""The host-speed probe: a real child process timing fixed Python work, read per window, gone with its parent."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import psutil

from bench.cpu_probe import CpuProbe, ProbeSample, parse_line, summarize
from bench.telemetry import TelemetrySource


def test_lines_and_summary_hand_computed() -> None:
    assert parse_line("12.5 1.25 1.0 3\n") == ProbeSample(12.5, 1.25, 1.0, 3)
    assert parse_line("12.5 1.25 1.0 -\n") == ProbeSample(12.5, 1.25, 1.0, None)
    assert parse_line("garbage") is None and parse_line("1 2 x 0") is None and parse_line("1 2 3") is None
    samples = [
        ProbeSample(1.0, 2.0, 1.9, 5),
        ProbeSample(2.0, 6.0, 2.1, 2),
        ProbeSample(3.0, 3.0, 2.0, 2),
        ProbeSample(4.0, 3.5, 2.0, None),
    ]
    assert summarize(samples) == {
        "cpu_probe_ms": 3.25,
        "cpu_probe_cpu_ms": 2.0,
        "cpu_probe_max_ms": 6.0,
        "cpu_probe_samples": 4,
        "cpu_probe_cpus": [2, 5],  # most often first
    }
    assert summarize([]) == {}


def test_the_child_times_its_work_and_windows_get_their_own_samples() -> None:
    probe = CpuProbe(period_s=0.02)
    assert probe.start()
    try:
        time.sleep(0.3)  # the child's interpreter start, then samples
        t0 = time.monotonic()
        time.sleep(0.4)
        t1 = time.monotonic()
        time.sleep(0.2)
        first = probe.between(t0, t1)
        assert len(first) >= 5
        assert all(t0 <= s.at <= t1 for s in first)
        assert all(s.wall_ms > 0 and 0 < s.cpu_ms <= s.wall_ms * 1.05 + 0.05 for s in first)
        assert {s.cpu for s in first} <= os.sched_getaffinity(0)  # the CPUs it may run on, as /proc reports
        later = probe.between(t1, time.monotonic())
        assert later and all(s.at >= t1 for s in later)
        assert probe.between(t0, t1) == []  # a later window's read drops what came before it
    finally:
        probe.close()
    assert probe._proc is None


PARENT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from bench.cpu_probe import CpuProbe
    probe = CpuProbe(period_s=0.05)
    probe.start()
    print(probe._proc.pid, flush=True)
    time.sleep(60)
    """
)


def test_the_child_exits_when_its_runner_is_killed() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, root], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    assert child.is_running()
    parent.kill()  # -9: no cleanup runs in the parent
    parent.wait()
    gone, alive = psutil.wait_procs([child], timeout=5)
    assert gone and not alive


def test_a_telemetry_window_carries_the_probe_figures() -> None:
    source = TelemetrySource(enabled=True)  # no GPU here: host figures and the probe only
    try:
        source.window().start()  # starts the probe; the first figures follow its interpreter start
        time.sleep(0.3)
        w = source.window()
        w.start()
        time.sleep(1.0)
        w.stop()
        s = w.summary()
        assert s["cpu_probe_samples"] >= 2
        assert s["cpu_probe_cpu_ms"] > 0 and s["cpu_probe_ms"] <= s["cpu_probe_max_ms"]
    finally:
        source.close()
    off = TelemetrySource(enabled=False).window()  # an external server's run: no probe
    off.start()
    off.stop()
    assert "cpu_probe_ms" not in off.summary()
