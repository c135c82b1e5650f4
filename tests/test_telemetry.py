"""Window telemetry: summaries, nvidia-smi parsing, and the throttled flag written at the end of a run."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from bench.sweep import expand, parse_sweep
from bench.telemetry import (
    CpuCounters,
    TelemetrySource,
    _parse_smi_line,
    cpu_shares,
    parse_cpu_pressure,
    parse_proc_stat,
    read_cpu_counters,
    summarize,
    throttle_reason,
)
from db.engine import session_scope
from db.models import Point, Run, Sample
from runners import store
from runners.run_checks import flag_throttled


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
    assert _parse_smi_line("1980, 612.35, 57") == (1980.0, 612.35, 57.0)
    assert _parse_smi_line("1980, [N/A], 57") == (1980.0, None, 57.0)
    assert _parse_smi_line("") == (None, None, None)


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
    assert cpu_shares(a, CpuCounters(12.0, None, None)) == {
        "host_cpu_busy_pct": None,
        "host_cpu_steal_pct": None,
        "cpu_pressure_pct": None,
    }
    assert cpu_shares(None, b)["host_cpu_busy_pct"] is None


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
