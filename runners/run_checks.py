"""Run-level checks after the last point: drift of a reference point, and throttled windows.

Drift (`runs.drift`): the invocation's first point re-measured at the end, on its live server or a restart
(then holding the restart spread, docs/reference/paired-measurement.md). Windows whose median SM clock fell
below `measure.throttle_fraction` of the run's highest are flagged `telemetry.throttled`, not failed.
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from bench.host.telemetry import throttle_reason
from bench.server.launcher import LaunchedServer, LaunchError
from bench.sweep import PointPlan
from db.models import Point, Run, Sample
from runners import dbretry, store
from runners.drift import Drift, DriftWindow
from runners.executor import SweepExecutor


def drift_check(
    executor: SweepExecutor,
    live: LaunchedServer | None = None,
    *,
    after_deadline: bool = False,
    plan: PointPlan | None = None,
    restarted: bool = False,
) -> Drift | None:
    """Re-measure the reference `plan` on `live`, else a fresh start; `restarted`: two starts' spread."""
    reference = executor.drift.reference
    plan = plan if plan is not None else reference
    if plan is None:
        return None
    if not after_deadline:
        executor.check_stop()
    executor.progress.describe(f"drift check: {plan.server.label()} bs={plan.batch_size}")
    started = time.perf_counter()
    if plan is not reference:
        note = (
            "a deadline cut the run inside a later pair: its first point stands in, re-measured on its live "
            "server (the run's reference point's server was already down)"
        )
    elif live is not None and restarted:
        note = "re-measured on a later start of its server config, still up at the end of the run"
    elif live is not None:
        note = "re-measured on the same server, still up at the end of the run"
    else:
        note = "the reference point's server was started again for the check"
    same = live is not None and not restarted
    found = Drift(plan.key(), plan.server.label(), plan.batch_size, same_server=same, note=note)
    # Not counted in `launches` (one per server config and restart block); the drift record says it restarted.
    server: LaunchedServer | LaunchError = live if live is not None else executor.start_server(plan.server)
    if isinstance(server, LaunchError):
        return _save(executor, replace(found, error=f"server failed to start: {str(server).strip()[:500]}"))
    # No server row for a restart (the run's servers are the sweep's configs): the drift record describes it.
    if live is None:
        log_path = str(server.log_path) if server.log_path else None
        found = replace(found, startup_s=server.startup_s, log_path=log_path)
    try:
        result, win = asyncio.run(executor.measure_window(plan, server.base_url, live is None, server.pid))
    finally:
        if live is None:
            server.stop()
    window = result.metrics.duration_s if result is not None and result.metrics is not None else 0.0
    executor.progress.overhead_s += max(time.perf_counter() - started - window, 0.0)
    first = _first_window(executor, plan.key())
    found = replace(found, telemetry=win.telemetry if win is not None else None, first=first)
    if result is None or result.metrics is None:
        why = result.reason if result else "no result"
        return _save(executor, replace(found, error=f"re-measurement failed: {why}"))
    m = result.metrics
    last = DriftWindow(m.output_throughput, m.tpot_mean_ms, status=result.status)
    then = first or DriftWindow(None, None)
    throughput = _change(last.output_throughput, then.output_throughput)
    tpot = _change(last.tpot_mean_ms, then.tpot_mean_ms)
    return _save(executor, replace(found, last=last, output_throughput_change=throughput, tpot_change=tpot))


def _change(now: float | None, then: float | None) -> float | None:
    return now / then - 1.0 if now is not None and then else None


def _first_window(executor: SweepExecutor, point_key: str) -> DriftWindow | None:
    """The reference point's first window of this invocation (not a lost host's)."""
    invocation = executor.progress.invocation

    def read(s: Session) -> DriftWindow | None:
        point = s.scalars(
            select(Point).where(Point.run_id == executor.run_id, Point.point_key == point_key)
        ).first()
        if point is None:
            return None
        sample = s.scalars(
            select(Sample)
            .where(
                Sample.point_id == point.id,
                Sample.output_throughput.is_not(None),
                Sample.invocation == invocation,
            )
            .order_by(Sample.order_index, Sample.repeat)
        ).first()
        if sample is None:
            return None
        return DriftWindow(
            sample.output_throughput,
            sample.tpot_mean_ms,
            repeat=sample.repeat,
            order_index=sample.order_index,
        )

    return executor.write(read, "reading the reference point")


def _save(executor: SweepExecutor, drift: Drift) -> Drift:
    executor.drift.result = drift

    def write(s: Session) -> None:
        run = s.get_one(Run, executor.run_id)
        run.drift = drift.as_json()

    executor.write(write, "storing the drift check")
    return drift


def flag_throttled(
    write_fn: Callable[[Callable[[Session], int], str], int], run_id: int, fraction: float
) -> int:
    """Flag windows clocked below `fraction` of the run's max; how many. Best effort (the run is final)."""

    def write(s: Session) -> int:
        samples = list(
            s.scalars(select(Sample).join(Point, Sample.point_id == Point.id).where(Point.run_id == run_id))
        )
        clocks = [
            float(x.telemetry["sm_clock_max_mhz"])
            for x in samples
            if x.telemetry and x.telemetry.get("sm_clock_max_mhz") is not None
        ]
        if not clocks:
            return 0
        run_max = max(clocks)
        flagged: list[Sample] = []
        for sample in samples:
            if not sample.telemetry or sample.telemetry.get("throttled"):
                continue
            why = throttle_reason(sample.telemetry, run_max, fraction)
            if why is None:
                continue
            sample.telemetry = {**sample.telemetry, "throttled": True}
            sample.reason = f"{sample.reason}; {why}" if sample.reason else why
            flagged.append(sample)
        s.flush()
        for pid in {x.point_id for x in flagged}:
            point = s.get(Point, pid)
            if point is not None:
                store.refresh_point(s, point)
        return len(flagged)

    try:
        return int(write_fn(write, "flagging throttled windows"))
    except dbretry.DatabaseUnavailable:
        return 0
