"""`specbench export --view windows`: one row per measured window of a run, in measurement order, with its
telemetry flattened into columns and the throughput spread per configuration."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from analysis import windows as windows_view
from bench.sweep import expand, parse_sweep
from db.engine import session_scope
from db.models import Point, Run, Sample
from runners import store
from runners.cli import app
from tests.fixtures.markdown import assert_inert, render

SWEEP = (
    "name: windows\nmodel: m\nserver: {backend: sim}\n"
    "grid: {batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [2], accept_lengths: [2.5], baseline: false}\n"
)
HOSTILE_SWEEP = "evil | name <script>alert(1)</script> ![i](http://e.x/p.png)"
HOSTILE_REASON = "server said: a|b <script>x</script>\n| injected | row |"

# (batch size, mode, repeat, order_index, status, output throughput); None: no metrics / no order.
WINDOWS: list[tuple[int, str, int, int | None, str, float | None]] = [
    (1, "v1", 0, 0, "ok", 100.0),
    (1, "v2", 0, 1, "ok", 120.0),
    (1, "v2", 1, 2, "ok", 80.0),  # throttled: a flag, still ok
    (1, "v1", 1, 3, "ok", 110.0),
    (1, "v1", 2, 4, "ok", 90.0),  # the one window with the newer host CPU keys
    (1, "v2", 2, 5, "ok", 121.0),
    (4, "v1", 0, 6, "ok", 300.0),
    (4, "v2", 0, 7, "ok", 200.0),
    (4, "v2", 1, 8, "ok", 210.0),
    (4, "v1", 1, 9, "ok", 330.0),
    (4, "v2", 2, 10, "failed", None),  # failed, no telemetry
    (4, "v1", 2, None, "ok", 310.0),  # stored without an order (an older writer), no telemetry
]
THROTTLED_AT, CPU_AT = 2, 4
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _telemetry(i: int) -> dict[str, Any]:
    """Distinct values per column (derived from the order index), so a swapped column shows."""
    t: dict[str, Any] = {
        "source": "nvml",
        "samples": 8,
        "sm_clock_min_mhz": 1900.0 + i,
        "sm_clock_median_mhz": 1950.0 + i,
        "sm_clock_max_mhz": 1980.0,
        "temp_max_c": 60.0 + i,
        "power_mean_w": 600.5 + i,
        "host_load_1m_start": 1.0 + i / 10,
        "host_load_1m_end": 2.0 + i / 10,
        "warmup_s": 0.5,
    }
    if i == THROTTLED_AT:
        t["throttled"] = True
    if i == CPU_AT:
        t.update(host_cpu_busy_pct=42.5, host_cpu_steal_pct=0.25, cpu_pressure_pct=3.5)
        t.update(mem_clock_median_mhz=3201.0, gpu_util_mean_pct=61.5, server_cpu_pct=104.2)
        t.update(server_busiest_cpu_pct=97.5, server_busiest_process="sglang::scheduler")
        t.update(clock_event_reasons=["gpu_idle", "sw_power_cap"])
        t.update(cpu_probe_ms=2.75, cpu_probe_cpu_ms=2.5, cpu_probe_cpus=[4, 12])
        t.update(server_busiest_cpus=[3, 11], server_busiest_cpu_moves=2)
        t.update(cpu_probe_on="server", cpu_probe_on_server_pct=96.5, cpu_probe_follow_errors=0)
    return t


def _seed(engine: Engine, sweep_name: str = "windows") -> int:
    spec = parse_sweep(SWEEP)
    provenance = {"gpu_name": "NVIDIA H200", "gpu_count": 1, "sglang_version": "0.5.3"}
    with session_scope(engine) as s:
        run = store.create_run(s, spec, SWEEP, provenance, trigger="manual", label=None, job_id=None)
        run.sweep_name = sweep_name
        points = {
            (plan.batch_size, plan.server.spec_mode): store.get_or_create_point(s, run, plan, None)
            for step in expand(spec)
            for plan in step.points
        }
        for bs, mode, repeat, order, status, tput in WINDOWS:
            reason = None
            if order == THROTTLED_AT:
                reason = "throttled: median SM clock 1952 MHz < 90% of the run's max"
            if status == "failed":
                reason = HOSTILE_REASON
            s.add(
                Sample(
                    point_id=points[(bs, mode)].id,
                    repeat=repeat,
                    status=status,
                    reason=reason,
                    order_index=order,
                    window_started_at=None if order is None else T0 + timedelta(seconds=2 * order),
                    telemetry=None if order is None or status == "failed" else _telemetry(order),
                    output_throughput=tput,
                    tpot_mean_ms=None if tput is None else 1000.0 * bs / tput,
                    itl_p99_ms=None if tput is None else 2.0 * bs,
                    ttft_p50_ms=None if tput is None else 30.0,
                    duration_s=None if tput is None else 1.25,
                    completed=None if tput is None else 8 * bs,
                    accept_length=None if tput is None else 2.4 + repeat / 100,
                )
            )
        return run.id


def _export(engine: Engine, fmt: str, *extra: str) -> Any:
    url = engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(app, ["export", "--db", url, "--view", "windows", "--format", fmt, *extra])


def _cv(values: list[float]) -> float:
    """Sample standard deviation over mean, by hand."""
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) / mean


# Recorded by runs since the server-CPU and GPU-utilisation readings (seeded at CPU_AT only).
NEWER_TELEMETRY = (
    "mem_clock_median_mhz",
    "gpu_util_mean_pct",
    "server_cpu_pct",
    "server_busiest_cpu_pct",
    "server_busiest_process",
    "clock_event_reasons",
    "cpu_probe_ms",
    "cpu_probe_cpu_ms",
    "server_busiest_cpu_moves",
    "server_busiest_cpus",
    "cpu_probe_cpus",
    "cpu_probe_on_server_pct",
    "cpu_probe_follow_errors",
    "cpu_probe_on",
)


def test_csv_lists_every_window_in_measurement_order_with_its_telemetry(engine: Engine) -> None:
    run_id = _seed(engine)
    r = _export(engine, "csv", "--run", str(run_id))
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    header = list(rows[0])
    assert {row["kind"] for row in rows} == {"measured"}  # what the numbers are, on every row
    assert header[:8] == [
        "kind",
        "order_index",
        "batch_size",
        "spec_mode",
        "steps",
        "accept_length_pinned",
        "repeat",
        "status",
    ]
    for col in (
        "output_throughput",
        "tpot_mean_ms",
        "itl_p99_ms",
        "ttft_p50_ms",
        "duration_s",
        "completed",
        "accept_length",
        "sm_clock_min_mhz",
        "sm_clock_median_mhz",
        "temp_max_c",
        "power_mean_w",
        "host_load_1m_start",
        "host_load_1m_end",
        "host_cpu_busy_pct",
        "host_cpu_steal_pct",
        "cpu_pressure_pct",
        *NEWER_TELEMETRY,
        "reason",
    ):
        assert col in header, col

    # Measurement order, not point/repeat order; the window without an order_index last.
    assert [r["order_index"] for r in rows] == [str(i) for i in range(11)] + [""]
    expected = [(str(bs), mode, str(rep), status) for bs, mode, rep, _, status, _ in WINDOWS]
    assert [(r["batch_size"], r["spec_mode"], r["repeat"], r["status"]) for r in rows] == expected
    assert all(r["steps"] == "2" and r["accept_length_pinned"] == "2.5" for r in rows)

    for row in rows[:10]:  # each window's telemetry in its own columns
        i = int(row["order_index"])
        assert float(row["sm_clock_min_mhz"]) == 1900 + i
        assert float(row["sm_clock_median_mhz"]) == 1950 + i
        assert float(row["temp_max_c"]) == 60 + i
        assert float(row["power_mean_w"]) == pytest.approx(600.5 + i)
        assert float(row["host_load_1m_start"]) == pytest.approx(1.0 + i / 10)
        assert float(row["host_load_1m_end"]) == pytest.approx(2.0 + i / 10)
        cpu = (row["host_cpu_busy_pct"], row["host_cpu_steal_pct"], row["cpu_pressure_pct"])
        assert cpu == (("42.5", "0.25", "3.5") if i == CPU_AT else ("", "", ""))
        extra = tuple(row[c] for c in NEWER_TELEMETRY)
        expected_extra = (
            "3201",
            "61.5",
            "104.2",
            "97.5",
            "sglang::scheduler",
            "gpu_idle sw_power_cap",
            "2.75",
            "2.5",
            "2",
            "3 11",
            "4 12",
            "96.5",
            "0",  # followed the server and stored no follow errors: none
            "server",
        )
        assert extra == (expected_extra if i == CPU_AT else ("",) * len(NEWER_TELEMETRY))
    telemetry_cols = header[header.index("sm_clock_min_mhz") : header.index("cpu_pressure_pct") + 1]
    for row in rows[10:]:  # the failed window and the unordered one stored no telemetry: empty cells
        assert all(row[c] == "" for c in telemetry_cols), row

    by_order = {r["order_index"]: r for r in rows}
    assert by_order["2"]["throttled"] == "True" and by_order["2"]["reason"].startswith("throttled:")
    assert by_order["2"]["output_throughput"] == "80"
    assert by_order["10"]["status"] == "failed" and by_order["10"]["reason"] == HOSTILE_REASON
    assert by_order["10"]["output_throughput"] == ""
    assert by_order["0"]["completed"] == "8" and by_order["6"]["completed"] == "32"
    assert float(by_order["6"]["tpot_mean_ms"]) == pytest.approx(4000 / 300, rel=1e-5)


def test_json_has_the_spread_per_configuration(engine: Engine) -> None:
    run_id = _seed(engine)
    r = _export(engine, "json", "--run", str(run_id))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["view"] == "windows" and doc["run_id"] == run_id and doc["gpu"] == "1x NVIDIA H200"
    assert [row["order_index"] for row in doc["rows"]] == [*range(11), None]
    assert doc["rows"][11]["sm_clock_min_mhz"] is None and doc["rows"][0]["sm_clock_min_mhz"] == 1900
    assert datetime.fromisoformat(doc["rows"][3]["window_started_at"]) == T0 + timedelta(seconds=6)
    assert doc["rows"][2]["throttled"] is True and doc["rows"][0]["throttled"] is False
    assert doc["rows"][11]["throttled"] is None and doc["rows"][10]["status"] == "failed"
    spread = {(s["batch_size"], s["spec_mode"]): s for s in doc["spread"]}
    assert list(spread) == [(1, "v1"), (1, "v2"), (4, "v1"), (4, "v2")]
    # ok windows only (the throttled one is ok: it counts); the failed one does not.
    expected = {
        (1, "v1"): [100.0, 110.0, 90.0],
        (1, "v2"): [120.0, 80.0, 121.0],
        (4, "v1"): [300.0, 330.0, 310.0],
        (4, "v2"): [200.0, 210.0],
    }
    for key, values in expected.items():
        got = spread[key]
        assert got["n"] == len(values)
        assert got["steps"] == 2 and got["accept_length_pinned"] == 2.5
        assert got["mean_output_throughput"] == pytest.approx(sum(values) / len(values))
        assert got["cv_output_throughput"] == pytest.approx(_cv(values), rel=1e-12)
    assert spread[(1, "v1")]["cv_output_throughput"] == pytest.approx(0.1)  # sd 10 over mean 100


def test_markdown_escapes_user_text_and_shows_the_spread(engine: Engine) -> None:
    run_id = _seed(engine, sweep_name=HOSTILE_SWEEP)
    r = _export(engine, "md", "--run", str(run_id))
    assert r.exit_code == 0, r.output
    text = r.stdout
    html = render(text)
    assert_inert(html, own_details=0)
    assert "<script" not in html and "&lt;script&gt;" in html
    # Two tables: the windows (header + 12) and the spread (header + 4); the hostile reason added no row.
    assert html.count("<table>") == 2 and html.count("<tr>") == (1 + len(WINDOWS)) + (1 + 4)
    lines = [line for line in text.splitlines() if line.startswith("|")]
    window_lines = lines[2 : 2 + len(WINDOWS)]
    head = lines[0]
    assert all(line.count(" | ") == head.count(" | ") for line in window_lines)  # no cell split by a `|`
    assert window_lines[0].startswith("| 0 | 1 | v1 | 2 | 2.5 | 0 | ok | 100.0 | 10.000 |")
    assert "| 1950 | 60 | 600.5 | 1.00 | 2.00 |" in window_lines[0]
    assert "| 42.5 |" in window_lines[CPU_AT]
    assert "| 61.5 | 104.2 | 97.5 | sglang::scheduler | gpu\\_idle sw\\_power\\_cap |" in window_lines[CPU_AT]
    assert "throttled:" in window_lines[THROTTLED_AT]
    assert "| 1 | v1 | 2 | 2.5 | 3 | 100.0 | 10.0 % |" in text


def test_probe_follow_errors_are_a_column_next_to_the_probe_on_server_share(engine: Engine) -> None:
    """bench.host.telemetry stores `cpu_probe_follow_errors` for every window that followed the server: a column in
    every format, 0 for a window that followed without errors, empty where the probe stayed on the runner's
    CPUs (or the run had no probe)."""
    run_id = _seed(engine)
    with session_scope(engine) as s:  # window 1 followed the server and had 3 moves refused
        sample = s.scalars(
            select(Sample).join(Point).where(Point.run_id == run_id, Sample.order_index == 1)
        ).one()
        sample.telemetry = {
            **(sample.telemetry or {}),
            "cpu_probe_on": "server",
            "cpu_probe_on_server_pct": 62.5,
            "cpu_probe_follow_errors": 3,
        }
    with session_scope(engine) as s:  # window 0's probe stayed on the runner's CPUs
        sample = s.scalars(
            select(Sample).join(Point).where(Point.run_id == run_id, Sample.order_index == 0)
        ).one()
        sample.telemetry = {**(sample.telemetry or {}), "cpu_probe_on": "runner", "cpu_probe_ms": 3.0}

    rows = list(csv.DictReader(io.StringIO(_export(engine, "csv", "--run", str(run_id)).stdout)))
    header = list(rows[0])
    assert header.index("cpu_probe_follow_errors") == header.index("cpu_probe_on_server_pct") + 1
    by_order = {r["order_index"]: r for r in rows}
    assert by_order["1"]["cpu_probe_follow_errors"] == "3"
    assert by_order[str(CPU_AT)]["cpu_probe_follow_errors"] == "0"
    assert by_order["0"]["cpu_probe_follow_errors"] == "" and by_order["2"]["cpu_probe_follow_errors"] == ""

    doc = json.loads(_export(engine, "json", "--run", str(run_id)).stdout)
    errors = {r["order_index"]: r["cpu_probe_follow_errors"] for r in doc["rows"]}
    assert errors[1] == 3 and errors[CPU_AT] == 0 and errors[0] is None

    text = _export(engine, "md", "--run", str(run_id)).stdout
    lines = [line for line in text.splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    at = head.index("probe follow errors")
    assert head[at - 1] == "probe on server %"
    cells = {int(c[0]): c for c in ([x.strip() for x in line.strip("|").split("|")] for line in lines[2:13])}
    assert (cells[1][at - 1], cells[1][at]) == ("62.5", "3")
    assert (cells[CPU_AT][at - 1], cells[CPU_AT][at]) == ("96.5", "0")
    assert cells[0][at] == "–"


def test_a_run_without_the_server_probe_has_no_follow_errors_column(engine: Engine) -> None:
    run_id = _seed(engine)
    with session_scope(engine) as s:
        ids = s.scalars(select(Sample.id).join(Point).where(Point.run_id == run_id))
        for sample in s.scalars(select(Sample).where(Sample.id.in_(list(ids)))):
            if sample.telemetry and sample.telemetry.get("cpu_probe_on") == "server":
                # as bench.host.telemetry writes a window whose probe stayed on the runner's CPUs
                kept = {k: v for k, v in sample.telemetry.items() if k != "cpu_probe_follow_errors"}
                sample.telemetry = {**kept, "cpu_probe_on": "runner"}
    rows = list(csv.DictReader(io.StringIO(_export(engine, "csv", "--run", str(run_id)).stdout)))
    assert "cpu_probe_on" in rows[0] and "cpu_probe_follow_errors" not in rows[0]


def test_windows_view_needs_exactly_one_run(engine: Engine) -> None:
    first, second = _seed(engine), _seed(engine)
    two = _export(engine, "csv", "--run", str(first), "--run", str(second))
    assert two.exit_code == 2
    assert "--view windows" in two.output and "give one --run (got 2)" in two.output
    every = _export(engine, "json", "--all-runs")
    assert every.exit_code == 2 and "give one --run" in every.output
    bench = _export(engine, "bench-serving-json", "--run", str(first))
    assert bench.exit_code == 2 and "not bench-serving-json" in bench.output
    latest = _export(engine, "json")  # no --run: the latest, named on stderr
    assert latest.exit_code == 0 and json.loads(latest.stdout)["run_id"] == second


def test_an_older_run_without_telemetry_or_order_still_exports(engine: Engine) -> None:
    run_id = _seed(engine)
    with session_scope(engine) as s:
        ids = s.scalars(select(Sample.id).join(Point).where(Point.run_id == run_id))
        for sample in s.scalars(select(Sample).where(Sample.id.in_(list(ids)))):
            sample.telemetry, sample.order_index = None, None
        assert s.get(Run, run_id) is not None
    rows = list(csv.DictReader(io.StringIO(_export(engine, "csv", "--run", str(run_id)).stdout)))
    # point by point, repeat by repeat; the newer host CPU columns only appear when some window has them
    assert [(r["batch_size"], r["spec_mode"], r["repeat"]) for r in rows][:3] == [
        ("1", "v1", "0"),
        ("1", "v1", "1"),
        ("1", "v1", "2"),
    ]
    assert "host_cpu_busy_pct" not in rows[0] and rows[0]["sm_clock_min_mhz"] == ""
    assert rows[0]["throttled"] == ""


def _driver_frame() -> pd.DataFrame:
    rows = []
    for i in range(5):  # one config, five ok windows: throughput 100..140
        rows.append(
            {"batch_size": 8, "spec_mode": "v1", "steps": 2, "accept_length_pinned": 2.5, "status": "ok",
             "output_throughput": 100.0 + 10 * i, "power_mean_w": 200.0 + 10 * i,
             "host_cpu_steal_pct": 0.5 - 0.1 * i, "sm_clock_median_mhz": 1980.0, "reason": None,
             "cpu_probe_ms": 3.0 - 0.25 * i,
             "throttled": False}
        )  # fmt: skip
    rows.append({**rows[0], "status": "failed", "output_throughput": None, "power_mean_w": 900.0})
    for i in range(3):  # too few windows for a correlation
        rows.append({**rows[i], "spec_mode": "v2"})
    return pd.DataFrame(rows)


def test_drivers_correlate_throughput_with_the_recorded_context() -> None:
    table = windows_view.drivers(_driver_frame())
    assert len(table) == 1  # v2 has 3 windows, under the minimum of 4
    row = table.iloc[0]
    assert row["spec_mode"] == "v1" and row["n"] == 5  # the failed window is left out
    assert row["r_power_mean_w"] == 1.0  # rises with throughput, exactly
    assert row["r_host_cpu_steal_pct"] == -1.0  # falls as throughput rises
    assert row["r_sm_clock_median_mhz"] is None  # did not move: no correlation to report
    assert row["r_cpu_probe_ms"] == -1.0  # a slower host (longer probe), a slower window
    assert "r_gpu_util_mean_pct" not in table.columns  # not recorded by this run
    text = windows_view.to_markdown(_driver_frame())
    assert (
        "What moved with throughput" in text
        and "| 8 | v1 | 2 | 2.5 | 5 | +1.00 | – | -1.00 | -1.00 |" in text
    )
    doc = json.loads(windows_view.document(_driver_frame()).text("json"))
    assert doc["drivers"][0]["r_power_mean_w"] == 1.0 and doc["drivers"][0]["r_sm_clock_median_mhz"] is None
