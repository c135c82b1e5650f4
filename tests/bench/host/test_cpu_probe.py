"""The host-speed probe: a real child process timing fixed Python work, read per window, gone with its parent;
with `measure.cpu_probe: server`, moved onto the CPU of a real busy "server" process for each window."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from bench.host.cpu_probe import CpuProbe, ProbeSample, child_argv, parse_line, summarize
from bench.host.processes import current_cpu, proc_stats
from bench.host.telemetry.window import TelemetrySource, on_cpu_pct
from bench.sweep import SweepError, parse_sweep
from db.engine import session_scope
from db.migrate import open_database
from db.models import Sample
from runners.cli import app
from runners.sweep_runner import execute_sweep
from tests.fixtures.waiting import wait_until
from tests.paths import REPO_ROOT

ALLOWED = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
linux_affinity = pytest.mark.skipif(not ALLOWED, reason="CPU affinity is Linux only")
# One CPU for the "server", another the probe would take when left alone: with one CPU nothing is seen to
# move.
needs_two = pytest.mark.skipif(
    len(ALLOWED) < 2, reason="needs at least two CPUs to see the probe follow the server"
)


def taken_since(probe: CpuProbe, t: float) -> int:
    """How many samples the probe took from `t` on, read without dropping any (`between` drops)."""
    with probe._lock:
        return sum(s.at >= t for s in probe._samples)


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
        # A window that ends once it holds five samples, however slowly a loaded host lets the child run.
        t0 = time.monotonic()
        wait_until(lambda: taken_since(probe, t0) >= 5, "five probe samples")
        t1 = time.monotonic()
        wait_until(lambda: taken_since(probe, t1) >= 1, "a sample after the window")
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


@linux_affinity
def test_the_child_needs_neither_psutil_nor_an_installed_specbench() -> None:
    """As on a host that runs specbench from the tree through PYTHONPATH (the offline bundle), which -I drops:
    -S here drops site-packages too, so the child has the standard library and the root it is handed."""
    argv = child_argv(0.02, os.getpid())
    assert argv[1] == "-I"
    argv.insert(2, "-S")
    for module in ("psutil", "bench"):
        bare = subprocess.run([sys.executable, "-I", "-S", "-c", f"import {module}"], capture_output=True)
        assert bare.returncode != 0, module  # neither is importable there on its own
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    try:
        samples = [parse_line(child.stdout.readline()) for _ in range(3)]  # "" at once if it failed to start
    finally:
        child.kill()
        child.wait()
    assert all(s is not None for s in samples), child.stderr.read()
    assert {s.cpu for s in samples if s is not None} <= os.sched_getaffinity(0)


# Pins itself (the kernel moves it before the call returns), then takes a name that reads like stat fields.
TRICKY_NAME = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
with open("/proc/self/comm", "w") as f:
    f.write("x) Z 1 1 (y ")
print("ready", flush=True)
time.sleep(30)
"""


@linux_affinity
def test_stat_fields_of_a_real_process_whose_name_looks_like_stat_fields() -> None:
    cpu = ALLOWED[-1]
    proc = subprocess.Popen([sys.executable, "-c", TRICKY_NAME, str(cpu)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        assert psutil.Process(proc.pid).name() == "x) Z 1 1 (y "
        fields = dict(proc_stats())[proc.pid]
        assert fields[0] in ("S", "R") and int(fields[1]) == os.getpid()  # state, ppid: after the whole name
        assert current_cpu(f"/proc/{proc.pid}/stat") == cpu == psutil.Process(proc.pid).cpu_num()
    finally:
        proc.kill()
        proc.wait()
    assert current_cpu(f"/proc/{proc.pid}/stat") is None  # gone
    assert current_cpu() in os.sched_getaffinity(0)  # this thread, as the child reads itself


PARENT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from bench.host.cpu_probe import CpuProbe
    probe = CpuProbe(period_s=0.05)
    probe.start()
    print(probe._proc.pid, flush=True)
    time.sleep(60)
    """
)


def test_the_child_exits_when_its_runner_is_killed() -> None:
    root = str(REPO_ROOT)
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
        source.window().start()  # starts the probe
        assert source._probe is not None
        probe = source._probe
        w = source.window()
        w.start()
        assert w.cpu_start is not None  # the window's samples are those from its counters' reading on
        wait_until(lambda: taken_since(probe, w.cpu_start.wall_s) >= 2, "two probe samples in the window")
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


# ---- measure.cpu_probe: server

# A "server" that sleeps while its child spins, as SGLang's launch process waits on its scheduler.
SPINNING_SERVER = """
import subprocess, sys, time
spin = "import time; end = time.time() + 30; exec('while time.time() < end: pass')"
child = subprocess.Popen([sys.executable, "-c", spin])
print(child.pid, flush=True)
time.sleep(30)
"""


@contextlib.contextmanager
def spinning_server(cpu: int) -> Iterator[int]:
    """The server's pid; its spinning child (the busiest process) pinned to `cpu`, from outside."""
    server = subprocess.Popen([sys.executable, "-c", SPINNING_SERVER], stdout=subprocess.PIPE, text=True)
    spinner = None
    try:
        assert server.stdout is not None
        spinner = int(server.stdout.readline())
        os.sched_setaffinity(spinner, {cpu})
        wait_until(lambda: psutil.Process(spinner).cpu_num() == cpu, "the spinner running on its CPU")
        yield server.pid
    finally:
        server.kill()
        server.wait()
        if spinner is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(spinner, signal.SIGKILL)


def started_source() -> tuple[TelemetrySource, int]:
    """A telemetry source whose probe already runs (no GPU here: host figures and the probe only)."""
    source = TelemetrySource(enabled=True)
    warm = source.window()  # starts the probe; the first figures follow its interpreter start
    warm.start()
    probe = source._probe
    assert probe is not None
    wait_until(lambda: taken_since(probe, 0.0) >= 1, "the probe's first sample")
    warm.stop()
    assert probe.pid is not None
    return source, probe.pid


def test_probe_on_server_share_hand_computed() -> None:
    placed = [(10.0, 3), (10.25, 3), (10.5, 7), (10.75, 7)]
    samples = [
        ProbeSample(10.01, 5.0, 5.0, 3),  # nearest 10.0: on 3
        ProbeSample(10.4, 5.0, 5.0, 3),  # nearest 10.5 (7): a miss, the scheduler had moved
        ProbeSample(10.6, 5.0, 5.0, 7),  # nearest 10.5: on 7
        ProbeSample(11.5, 5.0, 5.0, 7),  # after the last sample: the last placement
        ProbeSample(9.0, 5.0, 5.0, None),  # no CPU known: not on it
    ]
    assert on_cpu_pct(samples, placed) == 60.0
    assert on_cpu_pct([], placed) is None and on_cpu_pct(samples, []) is None


@needs_two
def test_server_mode_moves_the_probe_onto_the_busiest_server_cpu_and_back() -> None:
    cpu = ALLOWED[-1]
    source, probe_pid = started_source()
    home = os.sched_getaffinity(probe_pid)
    assert home == set(ALLOWED)  # inherited from the runner
    try:
        with spinning_server(cpu) as server_pid:
            w = source.window(server_pid, cpu_probe="server")
            w.start()
            assert w.cpu_start is not None and source._probe is not None
            probe, started = source._probe, w.cpu_start.wall_s
            # Read from the kernel, not through the module: the window moved the probe onto the spinner's CPU.
            wait_until(
                lambda: os.sched_getaffinity(probe_pid) == {cpu}, "the probe moved onto the server's CPU"
            )
            moved = time.monotonic()
            # Then the window runs until the samples taken there outnumber those from before the move four to
            # one, however long a loaded host takes: the share asserted below is what following gives.
            wait_until(
                lambda: (
                    taken_since(probe, moved)
                    >= max(4, 4 * (taken_since(probe, started) - taken_since(probe, moved)))
                ),
                "probe samples on the server's CPU",
            )
            during = os.sched_getaffinity(probe_pid)
            w.stop()
            after = os.sched_getaffinity(probe_pid)
        s = w.summary()
    finally:
        source.close()
    assert during == {cpu}
    assert after == home  # the next window starts on the runner's CPUs
    assert s["server_busiest_cpus"] == [cpu]  # the spinning child, not its sleeping parent
    assert s["cpu_probe_on"] == "server"
    assert s["cpu_probe_samples"] >= 4
    assert s["cpu_probe_cpus"][0] == cpu  # left alone, it would run on the CPU the spinner leaves idle
    assert s["cpu_probe_on_server_pct"] >= 80, s
    assert s["cpu_probe_follow_errors"] == 0  # followed, and no move was refused


@linux_affinity
def test_runner_mode_leaves_the_probe_where_it_is() -> None:
    source, probe_pid = started_source()
    home = os.sched_getaffinity(probe_pid)
    seen = []
    try:
        with spinning_server(ALLOWED[-1]) as server_pid:
            w = source.window(server_pid)  # the default: runner
            w.start()
            for _ in range(6):
                time.sleep(0.2)
                seen.append(os.sched_getaffinity(probe_pid))
            w.stop()
        s = w.summary()
    finally:
        source.close()
    assert all(cpus == home for cpus in seen)
    assert s["cpu_probe_on"] == "runner"
    assert "cpu_probe_on_server_pct" not in s and "cpu_probe_follow_errors" not in s


@linux_affinity
def test_a_probe_that_cannot_be_moved_costs_the_window_nothing() -> None:
    source, probe_pid = started_source()
    try:
        with spinning_server(ALLOWED[-1]) as server_pid:
            w = source.window(server_pid, cpu_probe="server")
            os.kill(probe_pid, signal.SIGKILL)  # gone before the window starts following it
            psutil.wait_procs([psutil.Process(probe_pid)], timeout=5)
            w.start()
            spinner = psutil.Process(server_pid).children()[0]
            spun = sum(spinner.cpu_times()[:2])
            wait_until(
                lambda: sum(spinner.cpu_times()[:2]) > spun + 0.05, "the server's CPU time in the window"
            )
            w.stop()
        s = w.summary()
        assert s["cpu_probe_on"] == "server" and s["cpu_probe_follow_errors"] == 1
        assert s["server_busiest_cpu_pct"] > 0  # the rest of the window was recorded as ever
        again = source.window(server_pid=None)  # the next window restarts the probe
        assert source._probe is not None and source._probe.pid not in (None, probe_pid)
        again.start()
        again.stop()
    finally:
        source.close()


SWEEP = """\
name: probe-on-server
model: sim-tiny
server: {{backend: {backend}, {server}}}
grid: {{batch_sizes: [1], spec_modes: [], baseline: true}}
workload: {{input_len: 16, output_len: 8}}
repeats: 1
measure: {{cpu_probe: {where}}}
"""


def sweep_text(where: str, backend: str = "sim") -> str:
    server = "sim: {time_scale: 0.05}" if backend == "sim" else "base_url: 'http://127.0.0.1:30000'"
    return SWEEP.format(backend=backend, server=server, where=where)


def test_the_sweep_key_defaults_to_runner_and_refuses_what_cannot_work() -> None:
    assert parse_sweep(sweep_text("runner")).measure.cpu_probe == "runner"
    assert parse_sweep(sweep_text("server")).measure.cpu_probe == "server"
    no_key = sweep_text("runner").replace("measure: {cpu_probe: runner}\n", "")
    assert "cpu_probe" not in no_key and parse_sweep(no_key).measure.cpu_probe == "runner"
    assert parse_sweep(sweep_text("runner", backend="external")).measure.cpu_probe == "runner"
    with pytest.raises(SweepError) as e:
        parse_sweep(sweep_text("server", backend="external"))
    assert e.value.problems == [
        "backend external: measure.cpu_probe: server needs the server's processes on this host to find its "
        "busiest CPU, and specbench does not launch this one (use cpu_probe: runner)"
    ]
    with pytest.raises(SweepError) as e:
        parse_sweep(sweep_text("scheduler"))
    assert e.value.problems == ["measure.cpu_probe: must be 'runner' or 'server' (got 'scheduler')"]


def test_dry_run_says_where_the_probe_runs(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    line = "cpu probe: on the server's busiest CPU in every window (takes ~1-3% of that core)"
    for where, shown in (("server", True), ("runner", False)):
        sweep = tmp_path / f"{where}.yaml"
        sweep.write_text(sweep_text(where))
        res = CliRunner().invoke(app, ["run", str(sweep), "--dry-run", "--db", db])
        assert res.exit_code == 0, res.output
        assert (line in res.stdout) is shown, res.stdout


@linux_affinity
def test_a_run_stores_where_its_windows_probe_ran(sqlite_url: str, tmp_path: Path) -> None:
    text = sweep_text("server")
    engine = open_database(sqlite_url)
    out = execute_sweep(parse_sweep(text), text, engine, log_dir=tmp_path / "logs", show_progress=False)
    assert out.status in ("done", "unstable")
    with session_scope(engine) as s:
        telemetry = [x.telemetry for x in s.scalars(select(Sample))]
    engine.dispose()
    assert telemetry and all(t is not None and t["cpu_probe_on"] == "server" for t in telemetry), telemetry
