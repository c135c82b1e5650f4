"""Paired v1/v2 runs on the stand-in, end to end: ABBA windows on two live servers, time-sized windows,
pinned acceptance checked against the server, telemetry and order stored per repeat, the drift check."""

from __future__ import annotations

import hashlib
import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from analysis import v2_vs_v1
from bench.measure import _check_pinned_accept
from bench.pairing import abba_sides
from bench.sweep import SweepError, expand, parse_sweep
from benchmarks.run_cost import report, run_cost
from db.engine import session_scope
from db.models import Point, RequestRow, Run, Sample, ServerInstance
from runners import pair_target
from runners.estimate import estimate as estimate_sweep
from runners.pair_target import relative_half_width
from runners.sweep_runner import RunOutcome, execute_sweep
from tests.fixtures.db import sqlite_only

pytestmark = pytest.mark.slow  # whole sweeps on live stand-in servers: scheduled first (tests/conftest.py)
# What a paired run measures and in which order is the executor's doing, not the database's: those tests run on
# SQLite (`sqlite_only`). The ABBA run itself and the two resumes, which read the stored windows back to decide
# what to measure, run on PostgreSQL too.

PAIRED = """
name: paired
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  load_format: dummy
  sim: {time_scale: 0.05, seed: 5, startup_s: 0.0}
grid: {batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [2], accept_lengths: [2.5], baseline: false}
workload: {input_len: 32, output_len: 16, num_prompts: 8}
measure: {min_window_s: 0.4}
repeats: 4
"""


def _run(text: str, engine: Engine, tmp_path: Path) -> Any:
    spec = parse_sweep(text)
    return execute_sweep(spec, text, engine, log_dir=tmp_path / "logs", show_progress=False)


def test_paired_run_interleaves_abba_on_two_live_servers(engine: Engine, tmp_path: Path) -> None:
    out = _run(PAIRED, engine, tmp_path)
    assert out.status in ("done", "unstable") and out.launches == 2  # unstable: a straggler on a busy host
    with session_scope(engine) as s:
        servers = {si.spec_mode_requested: si for si in s.scalars(select(ServerInstance))}
        assert set(servers) == {"v1", "v2"}
        assert all(si.env["specbench.co_resident_idle_servers"] == "1" for si in servers.values())
        assert all(si.argv[si.argv.index("--load-format") + 1] == "dummy" for si in servers.values())
        rows = s.execute(
            select(
                Sample.order_index, Point.spec_mode, Point.batch_size, Sample.repeat, Sample.window_started_at
            )
            .join(Point, Sample.point_id == Point.id)
            .order_by(Sample.order_index)
        ).all()
        assert [r.order_index for r in rows] == list(range(16)), (rows, out, list(s.scalars(select(Point))))
        for bs in (1, 4):
            seq = [(r.repeat, r.spec_mode) for r in rows if r.batch_size == bs]
            assert "".join("A" if m == "v1" else "B" for _, m in seq) == "ABBAABBA"
            assert [rep for rep, _ in seq] == [0, 0, 1, 1, 2, 2, 3, 3]
        starts = [r.window_started_at for r in rows]
        assert starts == sorted(starts)
        # both servers were alive across the interleaved windows
        for si in servers.values():
            assert si.started_at <= starts[0] and si.stopped_at is not None and si.stopped_at >= starts[-1]

        samples = list(s.scalars(select(Sample)))
        for smp in samples:
            assert smp.status in ("ok", "unstable"), smp.reason
            assert smp.duration_s is not None and smp.duration_s >= 0.4  # min_window_s honoured
            assert smp.telemetry is not None and smp.telemetry["source"] in ("none", "nvml", "nvidia-smi")
            assert smp.telemetry["host_load_1m_start"] is not None
            # the measured stand-in's own CPU time, read from its process tree (launched servers only); the
            # amount is tested in test_telemetry.py: a short stand-in window can use less than one clock tick
            assert smp.telemetry["server_cpu_pct"] is not None and smp.telemetry["server_cpu_pct"] >= 0
            assert smp.telemetry["server_busiest_process"], smp.telemetry
            # the stand-in's own longest loop stall in the window, from its /server_info (bench.measure.judge)
            assert smp.telemetry["server_loop_stall_max_ms"] >= 0
            # pinned 2.5 at steps 2 (max 3): the server's figure is close to it
            assert smp.server_accept_length is not None and abs(smp.server_accept_length - 2.5) < 0.15
        # windows outlasted the 8-prompt budget with fresh prompts: more requests, never a cache hit
        assert max(smp.completed or 0 for smp in samples) > 8
        cached = s.scalars(select(RequestRow.cached_tokens).where(RequestRow.cached_tokens > 0)).all()
        assert cached == []
        points = list(s.scalars(select(Point)))
        assert {p.accept_length_pinned for p in points} == {2.5}
        assert len({p.fingerprint for p in points}) == 4

        run = s.scalars(select(Run)).one()
        drift = run.drift
    assert out.drift is not None and drift == out.drift.as_json()

    # Run cost: every window and warmup accounted to its server; the windows are a fraction of the wall time.
    cost = run_cost(engine, out.run_id)
    windows = sum(smp.duration_s or 0.0 for smp in samples)
    by_server = sum(sc.cost.windows_s for sc in cost["servers"])
    assert by_server == pytest.approx(windows)
    assert sum(c.repeats for _, c in cost["points"]) == 16
    assert all(sc.cost.warmup_s > 0 for sc in cost["servers"])  # each warmed up at each batch size
    assert 0 < windows / cost["held_s"] < 1 and cost["held_s"] <= cost["wall_s"] + 1e-6
    assert "inside measurement windows" in report(cost, show_points=True)
    found = out.drift
    assert found.batch_size == 1 and found.first is not None and found.first.order_index == 0
    # The run's last step is the pair that holds the reference point: re-measured on its live server,
    # no extra launch (a warm restart costs about a minute on a GPU host).
    assert found.same_server is True and found.startup_s is None and "startup_s" not in drift
    assert found.last is not None and found.last.output_throughput
    assert found.first.output_throughput
    assert found.output_throughput_change == found.last.output_throughput / found.first.output_throughput - 1


@sqlite_only
def test_pinned_acceptance_off_by_more_than_the_tolerance_is_invalid(engine: Engine, tmp_path: Path) -> None:
    # A tolerance far below the sampling spread of ~100 verify steps: the server's average cannot match.
    text = PAIRED.replace(
        "min_window_s: 0.4", "min_window_s: 0.8, accept_length_tolerance: 0.000001, drift_check: false"
    )
    text = text.replace("repeats: 4", "repeats: 1").replace("batch_sizes: [1, 4]", "batch_sizes: [2]")
    _run(text, engine, tmp_path)
    with session_scope(engine) as s:
        samples = list(s.scalars(select(Sample)))
    # Only a repeat whose server reported an average can be checked (a short window may end before the
    # server's first acceptance log interval); each of those must be invalid, naming both figures.
    checked = [x for x in samples if x.server_accept_length is not None]
    assert checked, [(x.status, x.reason) for x in samples]
    assert all(x.status == "invalid" for x in checked), [(x.status, x.reason) for x in checked]
    assert all("pinned accept length 2.5" in (x.reason or "") for x in checked)


def test_pinned_check_keeps_worse_verdicts() -> None:
    assert _check_pinned_accept("ok", None, 2.49, 2.5, 0.15) == ("ok", None)
    assert _check_pinned_accept("ok", None, None, 2.5, 0.15) == ("ok", None)  # nothing reported
    status, reason = _check_pinned_accept("unstable", "p99", 2.0, 2.5, 0.15)
    assert status == "invalid" and reason is not None and reason.endswith("; p99")
    status, reason = _check_pinned_accept("failed", "dead", 2.0, 2.5, 0.15)
    assert status == "failed" and reason is not None and reason.startswith("dead; pinned")


SHARED_GPU = """
name: paired-fallback
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  args: {mem-fraction-static: 0.6}
  sim: {time_scale: 0.05, seed: 7, startup_s: 0.0, shared_gpu: true}
grid: {batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [2], accept_lengths: [2.0, 2.5], baseline: false}
workload: {input_len: 32, output_len: 16, num_prompts: 8}
measure: {drift_check: false}
repeats: 2
"""


@sqlite_only
def test_pair_that_cannot_share_the_gpu_falls_back_to_alternating_restarts(
    engine: Engine, tmp_path: Path
) -> None:
    # Two servers of 0.6 of the emulated GPU each cannot both be up: the second start fails like SGLang's.
    out = _run(SHARED_GPU, engine, tmp_path)
    assert out.status in ("done", "unstable")
    with session_scope(engine) as s:
        servers = list(s.scalars(select(ServerInstance).order_by(ServerInstance.id)))
        failed = [si for si in servers if si.status == "failed"]
        assert len(failed) == 1  # tried once; the run's second pair went straight to restarts
        assert "alternating restarts" in (failed[0].error or "")
        assert "Not enough memory" in (failed[0].error or "")
        measured = [si for si in servers if si.status == "stopped"]
        # per pair, blocks A[0] | B[0, 1] | A[1]: three starts, each measuring both batch sizes
        assert len(measured) == 6
        assert all(si.env["specbench.co_resident_idle_servers"] == "0" for si in measured)
        rows = s.execute(
            select(
                Sample.order_index,
                Sample.status,
                Point.spec_mode,
                Point.batch_size,
                Point.accept_length_pinned,
            )
            .join(Point, Sample.point_id == Point.id)
            .order_by(Sample.order_index)
        ).all()
    assert len(rows) == 2 * 2 * 2 * 2 and all(r.status in ("ok", "unstable") for r in rows)
    for acc in (2.0, 2.5):
        for bs in (1, 4):
            seq = [r.spec_mode for r in rows if r.batch_size == bs and r.accept_length_pinned == acc]
            assert "".join("A" if m == "v1" else "B" for m in seq) == "ABBA"
    assert out.launches == 1 + 1 + 3 + 3 - 1  # A, failed B, then B and A; second pair: A, B, A


class _JumpingClock:
    """`time` for the executor only: its monotonic clock can jump past a deadline on the test's signal."""

    def __init__(self) -> None:
        self.jump = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.jump

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@sqlite_only
def test_a_deadline_inside_a_pair_still_measures_the_drift_on_the_live_server(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _JumpingClock()
    monkeypatch.setattr("runners.executor.time", clock)

    def pass_the_deadline_after_three_windows() -> None:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            with session_scope(engine) as s:
                if len(s.scalars(select(Sample.id)).all()) >= 3:
                    clock.jump = 1e6
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=pass_the_deadline_after_three_windows, daemon=True)
    watcher.start()
    spec = parse_sweep(PAIRED.replace("repeats: 4", "repeats: 50"))
    out = execute_sweep(
        spec, PAIRED, engine, log_dir=tmp_path / "logs", show_progress=False, deadline=time.monotonic() + 3600
    )
    watcher.join()
    assert out.status == "partial" and "deadline" in (out.error or "")
    # The cut came mid-pair, long before its 200 windows; the reference point was re-measured on its
    # server before the pair went down, as at the end of a whole run.
    assert out.drift is not None and out.drift.same_server is True
    assert out.drift.last is not None and out.drift.last.output_throughput
    assert out.drift.output_throughput_change is not None
    with session_scope(engine) as s:
        assert 3 <= len(s.scalars(select(Sample.id)).all()) < 20
        assert s.scalars(select(Run)).one().drift == out.drift.as_json()


TARGETED = PAIRED.replace("batch_sizes: [1, 4]", "batch_sizes: [2]").replace("repeats: 4", "repeats: 3")


@pytest.mark.parametrize(
    ("target", "widths", "expected"),
    [
        # Never met (no two windows are that alike): the pair grows to max_repeats, in ABBA alternation.
        ("{ratio_target: 0.000000001, max_repeats: 5}", None, "ABBAABBAAB"),
        # The interval as the run sees it (pinned here, since a busy host's windows decide the real one):
        # too wide after the planned 3 repeats, narrow enough after one more.
        ("{ratio_target: 0.05, max_repeats: 5}", [0.2, 0.01], "ABBAABBA"),
        # Narrow enough at once: the planned repeats only.
        ("{ratio_target: 0.05, max_repeats: 5}", [0.01], "ABBAAB"),
    ],
)
@sqlite_only
def test_ratio_target_adds_abba_repeats_until_the_interval_is_narrow_enough(
    engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    widths: list[float] | None,
    expected: str,
) -> None:
    if widths is not None:
        seen = iter(widths)
        monkeypatch.setattr(pair_target, "pair_half_width", lambda ex, pair, a, b: next(seen))
    text = TARGETED.replace(
        "measure: {min_window_s: 0.4}", "measure: {min_window_s: 0.2, drift_check: false, " + target[1:]
    )
    out = _run(text, engine, tmp_path)
    assert out.status in ("done", "unstable")
    with session_scope(engine) as s:
        rows = s.execute(
            select(Point.spec_mode, Sample.repeat)
            .join(Point, Sample.point_id == Point.id)
            .order_by(Sample.order_index)
        ).all()
    assert "".join("A" if m == "v1" else "B" for m, _ in rows) == expected
    n = len(expected) // 2
    assert (
        sorted(r for m, r in rows if m == "v1") == list(range(n)) == sorted(r for m, r in rows if m == "v2")
    )


@sqlite_only
def test_ratio_target_min_batch_leaves_smaller_batches_at_the_planned_repeats(
    engine: Engine, tmp_path: Path
) -> None:
    """The target is for the batches a PR asks about: batch 1 stops at `repeats` while batch 2, never narrow
    enough, grows to max_repeats. The dry run's estimate counts the same windows."""
    text = PAIRED.replace("batch_sizes: [1, 4]", "batch_sizes: [1, 2]").replace(
        "measure: {min_window_s: 0.4}",
        "measure: {min_window_s: 0.1, drift_check: false, ratio_target: 0.000000001, max_repeats: 5, "
        "ratio_target_min_batch: 2}",
    )
    spec = parse_sweep(text)
    assert estimate_sweep(spec, expand(spec)).windows == 2 * 4 + 2 * 5
    out = _run(text, engine, tmp_path)
    assert out.status in ("done", "unstable")
    with session_scope(engine) as s:
        rows = s.execute(select(Point.batch_size, Point.spec_mode, Sample.repeat).join(Point)).all()
    for bs, n in ((1, 4), (2, 5)):
        for mode in ("v1", "v2"):
            assert sorted(r for b, m, r in rows if b == bs and m == mode) == list(range(n)), (bs, mode)
    with pytest.raises(SweepError, match="above every batch size"):
        parse_sweep(text.replace("ratio_target_min_batch: 2", "ratio_target_min_batch: 4"))
    with pytest.raises(SweepError, match=r"ratio_target_min_batch: only used with measure\.ratio_target"):
        parse_sweep(PAIRED.replace("min_window_s: 0.4", "min_window_s: 0.4, ratio_target_min_batch: 2"))


def test_a_repeat_finished_by_a_resumed_run_is_not_paired_across_invocations(
    engine: Engine, tmp_path: Path
) -> None:
    text = PAIRED.replace("min_window_s: 0.4", "min_window_s: 0.2")  # window length is not what this tests
    spec = parse_sweep(text)
    first = execute_sweep(spec, text, engine, log_dir=tmp_path / "a", show_progress=False)
    with session_scope(engine) as s:  # the host was lost between the two windows of repeat 1 at batch 4
        lost = s.scalars(
            select(Sample)
            .join(Point)
            .where(Point.batch_size == 4, Point.spec_mode == "v1", Sample.repeat == 1)
        ).one()
        s.delete(lost)
    execute_sweep(spec, text, engine, log_dir=tmp_path / "b", show_progress=False, resume_run_id=first.run_id)
    with session_scope(engine) as s:
        rows = s.execute(
            select(Point.spec_mode, Sample.repeat, Sample.invocation).join(Point).where(Point.batch_size == 4)
        ).all()
    inv = {(m, r): i for m, r, i in rows}
    # The resumed invocation began after the last stored window (order index 15), never on one of its indices.
    assert len(inv) == 8 and inv[("v1", 1)] == 16
    assert {i for (m, r), i in inv.items() if (m, r) != ("v1", 1)} == {0}
    with session_scope(engine) as s:
        samples = list(s.scalars(select(Sample)))
        first_servers = {
            si.id for si in s.scalars(select(ServerInstance).order_by(ServerInstance.id).limit(2))
        }
        windows_first = sum(x.duration_s or 0.0 for x in samples if x.invocation == 0)
        resumed = [x for x in samples if x.invocation != 0]
    # Each window names the server that measured it; the point's own server moved to the resumed one.
    assert len(resumed) == 1 and resumed[0].server_instance_id not in first_servers
    assert {x.server_instance_id for x in samples if x.invocation == 0} == first_servers
    cost = run_cost(engine, first.run_id)
    by_first = sum(sc.cost.windows_s for sc in cost["servers"][:2])
    assert by_first == pytest.approx(windows_first)  # not the point's latest server
    table = v2_vs_v1.load(engine, first.run_id).set_index("batch_size")
    # repeat 1's two windows ran in different invocations: at batch 4 it makes no pair, at batch 1 it does.
    # Counted from the stored statuses: only `ok` windows count, and a repeat with an `unstable` side pairs
    # nowhere (the stand-in's windows are `ok` on a loaded host too: bench.measure.judge reads the host's
    # stalls in both processes; the test does not rely on it).
    with session_scope(engine) as s:
        ok = {
            (bs, m, r)
            for bs, m, r in s.execute(
                select(Point.batch_size, Point.spec_mode, Sample.repeat)
                .join(Point)
                .where(Sample.status == "ok")
            )
        }

    for bs, pairable in ((4, [0, 2, 3]), (1, [0, 1, 2, 3])):  # at batch 4, repeat 1 is left out even when ok
        pairs = sum((bs, "v1", r) in ok and (bs, "v2", r) in ok for r in pairable)
        if pairs >= 2:
            assert (table.loc[bs, "method"], table.loc[bs, "n"]) == ("paired", pairs)
            continue
        # Fewer than two pairs left: the unpaired fallback, over the same repeats' `ok` windows only.
        n = min(sum((bs, m, r) in ok for r in pairable) for m in ("v1", "v2"))
        assert (table.loc[bs, "method"], table.loc[bs, "n"]) == ("unpaired" if n else None, n)


def test_relative_half_width_is_the_paired_interval_reach() -> None:
    a = {0: (100.0, 0), 1: (100.0, 0), 2: (100.0, 0), 3: (50.0, 0), 4: (100.0, 0)}
    # repeat 3 has no partner; repeat 4's other side was measured by a later invocation (a resumed run): both
    # left out
    b = {0: (110.0, 0), 1: (95.0, 0), 2: (105.0, 0), 4: (200.0, 9)}
    d = [math.log(1.10), math.log(0.95), math.log(1.05)]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)  # t(0.975, 2)
    assert relative_half_width(a, b) == pytest.approx(math.exp(half) - 1.0, rel=1e-6)
    assert relative_half_width({0: (1.0, None)}, {0: (2.0, None)}) is None  # one pair: no interval
    assert abba_sides(0) == ("A", "B") and abba_sides(3) == ("B", "A")


@pytest.mark.parametrize(
    ("measure", "repeats", "message"),
    [
        ("{max_repeats: 8}", 4, "only used with measure.ratio_target"),
        ("{ratio_target: 0.05, max_repeats: 3}", 4, r"below repeats \(4\)"),
        ("{ratio_target: 0.05}", 1, "needs repeats >= 2"),
    ],
)
def test_ratio_target_settings_are_checked(measure: str, repeats: int, message: str) -> None:
    text = PAIRED.replace("measure: {min_window_s: 0.4}", f"measure: {measure}").replace(
        "repeats: 4", f"repeats: {repeats}"
    )
    with pytest.raises(SweepError, match=message) as e:
        parse_sweep(text)
    assert len(e.value.problems) == len(set(e.value.problems))  # each problem once
    unpaired = PAIRED.replace("spec_modes: [v1, v2]", "spec_modes: [v2]").replace(
        "measure: {min_window_s: 0.4}", "measure: {ratio_target: 0.05}"
    )
    with pytest.raises(SweepError, match="needs pairs"):
        parse_sweep(unpaired)
    assert parse_sweep(PAIRED.replace("min_window_s: 0.4", "ratio_target: 0.05")).max_pair_repeats == 12


@sqlite_only
def test_a_freshly_started_server_warms_up_for_after_start_s_before_its_first_window(
    engine: Engine, tmp_path: Path
) -> None:
    text = (
        PAIRED.replace("spec_modes: [v1, v2]", "spec_modes: [v2]")
        .replace("repeats: 4", "repeats: 2")
        .replace("measure: {min_window_s: 0.4}", "measure: {min_window_s: 0.1}\nwarmup: {after_start_s: 0.6}")
    )
    _run(text, engine, tmp_path)
    with session_scope(engine) as s:
        rows = s.execute(
            select(Point.batch_size, Sample.repeat, Sample.telemetry)
            .join(Point, Sample.point_id == Point.id)
            .order_by(Sample.order_index)
        ).all()
    warm = {(bs, r): (tel or {}).get("warmup_s", 0.0) for bs, r, tel in rows}
    assert warm[(1, 0)] >= 0.6  # the server's first point: warm waves until 0.6 s had passed
    assert 0.0 < warm[(4, 0)] < 0.6  # later points: one wave, as before
    assert warm[(1, 1)] == 0.0 and warm[(4, 1)] == 0.0  # later repeats of a visit: no warmup
    # The default: a GPU server started by specbench warms up for a window's length; others not at all.
    gpu = parse_sweep(
        PAIRED.replace("backend: sim", "backend: sglang")
        .replace("  sim: {time_scale: 0.05, seed: 5, startup_s: 0.0}\n", "")
        .replace("measure: {min_window_s: 0.4}\n", "")
    )
    assert gpu.warmup_after_start_s == gpu.min_window_s == 10.0
    assert parse_sweep(PAIRED).warmup_after_start_s == 0.0


@sqlite_only
def test_a_deadline_in_a_later_pair_measures_the_drift_of_that_pairs_first_point(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A grid run in parts: the baseline (the run's reference point) is done and its server down when the
    # deadline cuts the next pair; that pair's first point is re-measured instead of no drift at all.
    clock = _JumpingClock()
    monkeypatch.setattr("runners.executor.time", clock)
    # The baseline runs all its repeats before the pair starts (2 x 6 windows of at least 0.2 s); the pair's
    # 24 windows then take at least 4.8 s, far longer than the watcher needs to see its first three.
    text = PAIRED.replace("baseline: false", "baseline: true").replace("repeats: 4", "repeats: 6")
    text = text.replace("measure: {min_window_s: 0.4}", "measure: {min_window_s: 0.2}")

    def pass_the_deadline_in_the_pair() -> None:
        end = time.monotonic() + 300
        while time.monotonic() < end:
            with session_scope(engine) as s:
                spec_windows = s.scalars(
                    select(Sample.id)
                    .join(Point, Sample.point_id == Point.id)
                    .where(Point.spec_mode.is_not(None))
                ).all()
                if len(spec_windows) >= 3:
                    clock.jump = 1e6
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=pass_the_deadline_in_the_pair, daemon=True)
    watcher.start()
    out = execute_sweep(
        parse_sweep(text),
        text,
        engine,
        log_dir=tmp_path / "logs",
        show_progress=False,
        deadline=time.monotonic() + 3600,
    )
    watcher.join()
    assert out.status == "partial" and "deadline" in (out.error or "")
    drift = out.drift
    assert drift is not None and drift.same_server is True, drift
    assert "(no spec)" not in drift.label and "v1" in drift.label  # the pair's point, not the baseline
    assert "cut the run inside a later pair" in drift.note
    assert drift.batch_size == 1 and drift.last is not None and drift.last.output_throughput
    assert drift.first is not None
    with session_scope(engine) as s:
        first = s.scalars(select(Sample).where(Sample.order_index == drift.first.order_index)).one()
        point = s.get(Point, first.point_id)
        assert point is not None and point.spec_mode == "v1" and point.batch_size == 1


def _in_two_parts(sweep: str, engine: Engine, tmp_path: Path) -> tuple[RunOutcome, RunOutcome]:
    """`sweep` (a TARGETED variant) as a grid run in parts: a first invocation whose max_repeats stops at the
    planned 3 repeats with the interval never narrow enough, then a resumed one allowed 5."""
    never_met = "measure: {min_window_s: 0.2, drift_check: false, ratio_target: 0.000000001, max_repeats: %d}"
    planned = sweep.replace("measure: {min_window_s: 0.4}", never_met % 3)
    grown = sweep.replace("measure: {min_window_s: 0.4}", never_met % 5)
    first = _run(planned, engine, tmp_path)
    with session_scope(engine) as s:
        # The run is of the grown sweep, cut by a deadline just after the planned repeats: the resume below
        # runs the run's own sweep, which the runner requires (runners/resume_guard.py).
        run = s.get(Run, first.run_id)
        assert run is not None
        run.sweep_yaml, run.sweep_hash = grown, hashlib.sha256(grown.encode()).hexdigest()
    second = execute_sweep(
        parse_sweep(grown),
        grown,
        engine,
        log_dir=tmp_path / "b",
        show_progress=False,
        resume_run_id=first.run_id,
    )
    return first, second


def test_a_resumed_run_extends_a_pair_whose_interval_is_still_too_wide(
    engine: Engine, tmp_path: Path
) -> None:
    # A grid run in parts: the deadline came after a pair's planned repeats but before its interval reached
    # measure.ratio_target. The next invocation must add the missing ABBA repeats, not skip the point because
    # its planned repeats are stored. (Simulated by a first invocation whose max_repeats stops at the plan.)
    first, second = _in_two_parts(TARGETED, engine, tmp_path)
    assert second.run_id == first.run_id and second.status in ("done", "unstable")
    with session_scope(engine) as s:
        rows = s.execute(
            select(Point.spec_mode, Sample.repeat, Sample.invocation, Sample.status)
            .join(Point, Sample.point_id == Point.id)
            .order_by(Sample.order_index)
        ).all()
    order = "".join("A" if m == "v1" else "B" for m, _, _, _ in rows)
    assert order == "ABBAAB" + "BAAB"  # the extension continues the ABBA alternation: repeat 3 B A, 4 A B
    assert [r for _, r, _, _ in rows[6:]] == [3, 3, 4, 4]
    assert {i for _, _, i, _ in rows[:6]} == {0} and {i for _, _, i, _ in rows[6:]} == {6}
    table = v2_vs_v1.load(engine, first.run_id)
    # Repeats 3 and 4 pair (both sides in one invocation), so all 5 count where both windows are ok. Counted
    # from the stored statuses: on a loaded host a stand-in window can be `unstable` (its p99 TTFT is a few
    # ms), and such a repeat pairs nowhere.
    ok = {(m, r) for m, r, _, st in rows if st == "ok"}
    both = sum(("v1", r) in ok and ("v2", r) in ok for r in range(5))
    assert table["n"].tolist() == [both] and both >= 3


@sqlite_only
def test_a_resumed_pair_measured_by_restarts_starts_no_server_for_an_extension(
    engine: Engine, tmp_path: Path
) -> None:
    # Alternating restarts never extend a pair (only interleaving on two live servers does), so a resumed run
    # whose pairs have all their planned repeats must not start a server for an extension it would not make.
    restarts = TARGETED.replace("load_format: dummy", "load_format: dummy\n  pair_colocate: false")
    first, second = _in_two_parts(restarts, engine, tmp_path)
    assert first.launches >= 2 and second.launches == 0
    with session_scope(engine) as s:
        assert len(s.scalars(select(Sample.id)).all()) == 6
