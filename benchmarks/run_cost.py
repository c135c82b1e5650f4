"""Where a run's GPU time went: per server and per point, and the fraction spent inside measurement windows.

A run holds one GPU (or a TP group) from its start to its end; only the measurement windows produce numbers.
Everything else is cost: server starts (cold JIT and CUDA-graph capture, or a warm restart), warmups, flushes
and /server_info between windows, a pair's server idling while its partner is measured, the drift check.

    .venv/bin/python -m benchmarks.run_cost --db sqlite:///specbench.db            # the latest run
    .venv/bin/python -m benchmarks.run_cost --db "$DATABASE_URL" --run 12 --points  # with the per-point table

Figures come from the database alone: server rows (startup_s, started/stopped), samples (window duration,
overhead outside the window, the warmup before it) and the run's drift record.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, select

from db.engine import DatabaseMissingError, session_scope
from db.migrate import open_database_readonly
from db.models import Point, Run, Sample, ServerInstance


@dataclass
class Cost:
    windows_s: float = 0.0
    warmup_s: float = 0.0
    between_s: float = 0.0  # outside the windows, after warmup: flush, /server_info, storing
    repeats: int = 0

    def add(self, sample: Sample) -> None:
        warm = float((sample.telemetry or {}).get("warmup_s") or 0.0)
        self.windows_s += sample.duration_s or 0.0
        self.warmup_s += warm
        self.between_s += max((sample.overhead_s or 0.0) - warm, 0.0)
        self.repeats += 1


@dataclass
class ServerCost:
    label: str
    status: str
    startup_s: float
    lifetime_s: float | None
    cost: Cost = field(default_factory=Cost)

    @property
    def idle_s(self) -> float | None:
        """Alive but neither starting nor measuring nor warming up: e.g. waiting while its pair partner runs."""
        if self.lifetime_s is None:
            return None
        busy = self.cost.windows_s + self.cost.warmup_s + self.cost.between_s
        return max(self.lifetime_s - self.startup_s - busy, 0.0)


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    return None if a is None or b is None else (b - a).total_seconds()


# Gaps in the activity record shorter than this count as held: flushes, /server_info and warmups between the
# windows of a server whose host was lost (no stop time). Longer gaps are time between sessions of a resumed run.
SESSION_GAP_S = 60.0


def held_seconds(intervals: list[tuple[datetime, datetime]], gap_s: float = SESSION_GAP_S) -> float:
    """Seconds covered by the intervals, gaps under `gap_s` filled: overlapping servers of a pair count once,
    and the hours between the sessions of a resumed run not at all."""
    total, start, end = 0.0, None, None
    for a, b in sorted(intervals):
        if start is None or end is None or (a - end).total_seconds() > gap_s:
            if start is not None and end is not None:
                total += (end - start).total_seconds()
            start, end = a, b
        else:
            end = max(end, b)
    if start is not None and end is not None:
        total += (end - start).total_seconds()
    return total


def run_cost(engine: Engine, run_id: int | None = None) -> dict[str, Any]:
    with session_scope(engine) as s:
        run = s.get(Run, run_id) if run_id else s.scalars(select(Run).order_by(Run.id.desc())).first()
        if run is None:
            raise SystemExit("no such run" if run_id else "the database holds no runs")
        instances = list(
            s.scalars(
                select(ServerInstance).where(ServerInstance.run_id == run.id).order_by(ServerInstance.id)
            )
        )
        servers = {
            si.id: ServerCost(
                si.label,
                si.status,
                si.startup_s or 0.0,
                _seconds(si.started_at, si.stopped_at),
            )
            for si in instances
        }
        points: dict[int, tuple[str, Cost]] = {}
        # What the run held the GPU for: each server's launch and life, and every window (a server whose host was
        # lost has no stop time; its windows still show when it was measured).
        activity: list[tuple[datetime, datetime]] = [
            (si.started_at - timedelta(seconds=si.startup_s or 0.0), si.stopped_at or si.started_at)
            for si in instances
        ]
        for point, sample in s.execute(
            select(Point, Sample).join(Sample, Sample.point_id == Point.id).where(Point.run_id == run.id)
        ).all():
            label = (
                "baseline"
                if point.algorithm is None
                else f"s{point.steps} acc{point.accept_length_pinned or '-'} {point.spec_mode}"
            )
            name = f"{label} bs={point.batch_size}"
            points.setdefault(point.id, (name, Cost()))[1].add(sample)
            # The window's own server; older runs only know the point's (its latest, after a resume).
            server_id = sample.server_instance_id or point.server_instance_id
            if server_id in servers:
                servers[server_id].cost.add(sample)
            if sample.window_started_at is not None:
                end = sample.window_started_at + timedelta(seconds=sample.duration_s or 0.0)
                activity.append((sample.window_started_at, end))
        drift = dict(run.drift or {})
        wall = _seconds(run.started_at, run.finished_at)
        if run.finished_at is not None:
            # Within the run's own span: SQLite stores created-at defaults (runs and servers' started_at) in
            # whole seconds, so a server's reconstructed launch start can read up to a second before the run
            # that launched it began.
            activity = [
                (max(a, run.started_at), min(b, run.finished_at))
                for a, b in activity
                if b > run.started_at and a < run.finished_at
            ]
        return {
            "run": run.id,
            "sweep": run.sweep_name,
            "status": run.status,
            "wall_s": wall,
            # The wall time spans the hours between the sessions of a resumed run; the held time does not.
            "held_s": held_seconds(activity) if activity else None,
            "servers": list(servers.values()),
            "points": [points[k] for k in sorted(points)],
            "drift_startup_s": drift.get("startup_s"),
        }


def report(data: dict[str, Any], show_points: bool) -> str:
    servers: list[ServerCost] = data["servers"]
    total = Cost()
    for sc in servers:
        for f in ("windows_s", "warmup_s", "between_s", "repeats"):
            setattr(total, f, getattr(total, f) + getattr(sc.cost, f))
    startup = sum(sc.startup_s for sc in servers) + float(data["drift_startup_s"] or 0.0)
    idle = sum(sc.idle_s or 0.0 for sc in servers)
    wall = data["wall_s"]
    lines = [f"run {data['run']} ({data['sweep']}, {data['status']})"]
    lines.append(
        f"{'server':<48} {'status':>8} {'startup':>8} {'warmup':>8} {'windows':>8} {'between':>8} "
        f"{'idle':>8} {'alive':>8} {'in win':>7}"
    )
    for sc in servers:
        alive = sc.lifetime_s
        frac = f"{sc.cost.windows_s / alive:.0%}" if alive else "-"
        lines.append(
            f"{sc.label[:48]:<48} {sc.status:>8} {sc.startup_s:8.1f} {sc.cost.warmup_s:8.1f} "
            f"{sc.cost.windows_s:8.1f} {sc.cost.between_s:8.1f} {_f(sc.idle_s)} {_f(alive)} {frac:>7}"
        )
    if show_points:
        lines.append("")
        lines.append(f"{'point':<40} {'repeats':>7} {'warmup':>8} {'windows':>8} {'between':>8}")
        for name, c in data["points"]:
            lines.append(
                f"{name[:40]:<40} {c.repeats:7d} {c.warmup_s:8.1f} {c.windows_s:8.1f} {c.between_s:8.1f}"
            )
    lines.append("")
    lines.append(
        f"totals (s): starts {startup:.1f} (incl. the drift check's {float(data['drift_startup_s'] or 0):.1f}), "
        f"warmups {total.warmup_s:.1f}, windows {total.windows_s:.1f} over {total.repeats} repeats, "
        f"between windows {total.between_s:.1f}, servers idle {idle:.1f}"
    )
    held = data["held_s"]
    if wall:
        lines.append(f"run wall time {wall:.1f} s (from start to end, across sessions when resumed)")
    if held:
        lines.append(
            f"GPU time held {held:.1f} s (server launches, server lifetimes and windows; gaps over "
            f"{SESSION_GAP_S:.0f} s are between sessions); inside measurement windows: {total.windows_s / held:.1%}"
        )
    return "\n".join(lines)


def _f(v: float | None) -> str:
    return f"{'-':>8}" if v is None else f"{v:8.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="database URL (sqlite:///file.db or postgresql://...)")
    ap.add_argument("--run", type=int, default=None, help="run id (default: the latest)")
    ap.add_argument("--points", action="store_true", help="also print the per-point table")
    args = ap.parse_args(argv)
    try:
        engine, note = open_database_readonly(args.db)  # a report never changes the file it reads
    except DatabaseMissingError as e:  # a mistyped path: one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    if note:
        print(note, file=sys.stderr)
    print(report(run_cost(engine, args.run), args.points))
    return 0


if __name__ == "__main__":
    sys.exit(main())
