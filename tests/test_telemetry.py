"""Window telemetry: summaries, nvidia-smi parsing, and the throttled flag written at the end of a run."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from bench.sweep import expand, parse_sweep
from bench.telemetry import TelemetrySource, _parse_smi_line, summarize, throttle_reason
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
