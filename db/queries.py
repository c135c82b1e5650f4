"""Read queries for the dashboard and the CLI (and the one write they need: triage verdicts).

Rules that keep them fast at a million points and safe everywhere:
- SQLAlchemy Core selects only, with bound parameters; a metric name picks a mapped column from the schema's
  own list (`METRIC_FIELDS`) and is never spliced into SQL.
- Only the columns a view needs, never `SELECT *` on points (they have ~70 columns).
- Every per-series read walks `ix_points_fingerprint_created` (fingerprint, created_at); per-run reads walk
  `ix_points_run_id`; the series catalog reads one row per series through the fingerprint index.
Results are pandas DataFrames (UTC-aware timestamps), so the dashboard can cache and chart them directly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from sqlalchemy import Engine, Executable, and_, case, func, inspect, select
from sqlalchemy.orm import InstrumentedAttribute

from db.fingerprint import FINGERPRINT_FIELDS
from db.models import METRIC_FIELDS, PROVENANCE_COLUMNS, Point, Run, Sample, ServerInstance

# What identifies a point's configuration inside a run (and across runs on other GPUs): the fingerprint minus
# the GPU. Compare pairs points of two runs on these.
SERIES_COLUMNS: tuple[str, ...] = FINGERPRINT_FIELDS
CONFIG_COLUMNS: tuple[str, ...] = tuple(c for c in FINGERPRINT_FIELDS if c not in ("gpu_name", "gpu_count"))
RUN_COLUMNS: tuple[str, ...] = (
    *("id", "uid", "sweep_name", "status", "trigger", "label", "backend", "simulated", "started_at"),
    *("finished_at", "model", *PROVENANCE_COLUMNS, "error"),
)
PROBLEM_STATUSES: tuple[str, ...] = ("failed", "invalid", "mode_mismatch", "unstable")
# The factors attribution needs travel with every series and run read.
FACTOR_METRICS: tuple[str, ...] = ("output_throughput", "accept_length", "tpot_mean_ms")


class QueryError(LookupError):
    """A run or metric the database does not have; the message is fit for a user."""


def metric_column(name: str) -> InstrumentedAttribute[Any]:
    if name not in METRIC_FIELDS:
        raise QueryError(f"unknown metric {name!r}; choose one of {', '.join(METRIC_FIELDS)}")
    col: InstrumentedAttribute[Any] = getattr(Point, name)
    return col


def read_frame(engine: Engine, stmt: Executable) -> pd.DataFrame:
    with engine.connect() as conn:
        result = conn.execute(stmt)
        # Plain tuples: handing pandas Row objects costs a failed attribute probe per row (2x slower).
        return pd.DataFrame.from_records([tuple(r) for r in result], columns=list(result.keys()))


def _metrics(names: Iterable[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        metric_column(n)
        if n not in out:
            out.append(n)
    return out


# ---------------------------------------------------------------------------------------------- overview


@dataclass(frozen=True)
class Totals:
    runs: int
    synthetic_runs: int
    last_run_at: datetime | None
    # Measured on the stand-in server (bench.sim): simulated, but not synthetic history.
    stand_in_runs: int = 0


def totals(engine: Engine) -> Totals:
    """Run counts and the newest start. (Point and series counts come with `series_catalog`.)"""
    with engine.connect() as c:
        runs, synthetic, last, stand_in = c.execute(
            select(
                func.count(Run.id),
                func.coalesce(func.sum(case((Run.trigger == "synthetic", 1), else_=0)), 0),
                func.max(Run.started_at),
                func.coalesce(
                    func.sum(case((and_(Run.simulated.is_(True), Run.trigger != "synthetic"), 1), else_=0)), 0
                ),
            )
        ).one()
    if isinstance(last, str):  # aggregates bypass the column type on SQLite
        last = datetime.fromisoformat(last)
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=UTC)
    return Totals(int(runs), int(synthetic), last, int(stand_in))


def latest_runs(engine: Engine, limit: int = 25, *, include_synthetic: bool = True) -> pd.DataFrame:
    """The newest runs with their provenance and how many of their points are ok / problems."""
    runs = select(*(getattr(Run, c) for c in RUN_COLUMNS)).order_by(Run.started_at.desc(), Run.id.desc())
    if not include_synthetic:
        runs = runs.where(Run.trigger != "synthetic")
    frame = read_frame(engine, runs.limit(limit))
    if frame.empty:
        return frame.assign(points_ok=pd.Series(dtype=int), points_problem=pd.Series(dtype=int))
    counts = read_frame(
        engine,
        select(
            Point.run_id,
            func.sum(case((Point.status == "ok", 1), else_=0)).label("points_ok"),
            func.sum(case((Point.status != "ok", 1), else_=0)).label("points_problem"),
        )
        .where(Point.run_id.in_(frame["id"].tolist()))
        .group_by(Point.run_id),
    )
    frame = frame.merge(counts, how="left", left_on="id", right_on="run_id").drop(columns=["run_id"])
    return frame.fillna({"points_ok": 0, "points_problem": 0}).astype(
        {"points_ok": int, "points_problem": int}
    )


def problem_points(engine: Engine, run_ids: Sequence[int], limit: int = 500) -> pd.DataFrame:
    """Failed, invalid, unstable and mode-mismatch points of the given runs, with their reasons."""
    if not run_ids:
        return pd.DataFrame(columns=["point_id", "run_id", "status", "reason"])
    stmt = (
        select(
            Point.id.label("point_id"),
            Point.run_id,
            Point.status,
            Point.reason,
            *(getattr(Point, c) for c in SERIES_COLUMNS),
            Point.spec_mode_resolved,
            Run.sglang_version,
            Run.started_at,
        )
        .join(Run, Run.id == Point.run_id)
        .where(Point.run_id.in_(list(run_ids)), Point.status.in_(PROBLEM_STATUSES))
        .order_by(Point.run_id.desc(), Point.id)
        .limit(limit)
    )
    return read_frame(engine, stmt)


# ---------------------------------------------------------------------------------------------- series


def series_catalog(engine: Engine) -> pd.DataFrame:
    """One row per series: its identity columns, point count and last time seen.

    Two steps so a million points stay cheap: group the fingerprint index (covering: fingerprint + rowid) for
    count and newest id, then read those few newest rows by primary key.
    """
    newest = (
        select(
            Point.fingerprint,
            func.count(Point.id).label("n_points"),
            func.max(Point.id).label("newest_id"),
        )
        .group_by(Point.fingerprint)
        .subquery()
    )
    stmt = (
        select(
            newest.c.fingerprint,
            newest.c.n_points,
            *(getattr(Point, c) for c in SERIES_COLUMNS),
            Point.created_at.label("last_at"),
        )
        .join(Point, Point.id == newest.c.newest_id)
        .order_by(Point.model, Point.gpu_name, Point.batch_size)
    )
    return read_frame(engine, stmt)


# What the x-axes need from a run; joined to series values in pandas (see `series_values`).
RUN_AXIS_COLUMNS: tuple[str, ...] = ("started_at", "sglang_version", "sglang_commit", "git_commit", "trigger")


def run_axes(engine: Engine) -> pd.DataFrame:
    """Every run's x-axis fields (id, start, version, commits, trigger): small, and cacheable as a whole."""
    return read_frame(engine, select(Run.id.label("run_id"), *(getattr(Run, c) for c in RUN_AXIS_COLUMNS)))


def series_values(
    engine: Engine,
    fingerprint: str,
    metrics: Sequence[str] = FACTOR_METRICS,
    *,
    since: datetime | None = None,
    statuses: Sequence[str] = ("ok",),
) -> pd.DataFrame:
    """One series' points in time order, points columns only (no join): the Trends page's hot query.

    The status filter is applied after the read: the query then stays a plain walk of the series index
    (points.status is deliberately unindexed, see db/models.py), and non-ok points are few.
    """
    cols = _metrics(metrics)
    stmt = (
        select(
            Point.id.label("point_id"),
            Point.run_id,
            Point.status,
            Point.repeats,
            *(metric_column(m) for m in cols),
            Point.output_throughput_ci_low,
            Point.output_throughput_ci_high,
        )
        .where(Point.fingerprint == fingerprint)
        .order_by(Point.created_at, Point.id)
    )
    if since is not None:
        stmt = stmt.where(Point.created_at >= since)
    frame = read_frame(engine, stmt)
    return frame[frame["status"].isin(list(statuses))].reset_index(drop=True)


def with_run_axes(values: pd.DataFrame, axes: pd.DataFrame) -> pd.DataFrame:
    """Series values plus their runs' x-axis fields, order kept."""
    return values.merge(axes, on="run_id", how="left", validate="many_to_one")


def sample_ranges(engine: Engine, point_ids: Sequence[int], metric: str) -> pd.DataFrame:
    """Per point: min, max and count of one metric over its repeats (the band for metrics without a stored CI)."""
    col = getattr(Sample, metric_column(metric).key)
    if not point_ids:
        return pd.DataFrame(columns=["point_id", "low", "high", "n"])
    frames = []
    ids = list(point_ids)
    for i in range(0, len(ids), 5000):  # stay under every driver's bound-parameter limit
        frames.append(
            read_frame(
                engine,
                select(
                    Sample.point_id,
                    func.min(col).label("low"),
                    func.max(col).label("high"),
                    func.count(col).label("n"),
                )
                .where(Sample.point_id.in_(ids[i : i + 5000]))
                .group_by(Sample.point_id),
            )
        )
    return pd.concat(frames, ignore_index=True)


def series_history(
    engine: Engine,
    *,
    since: datetime,
    fingerprints: Sequence[str] | None = None,
    metrics: Sequence[str] = FACTOR_METRICS,
) -> pd.DataFrame:
    """Ok points of many series from runs started since `since`, for change-point scans.

    Driven by the runs (ix_runs_started_at, then ix_points_run_id): a run's points are stored together, so
    this reads a few pages per run instead of one page per point as a per-series walk would. Status and
    series are filtered after the read, for the reason given in `series_values`.
    """
    cols = _metrics(metrics)
    stmt = (
        select(
            Point.fingerprint,
            Point.status,
            Point.id.label("point_id"),
            Point.run_id,
            Point.created_at,
            *(metric_column(m) for m in cols),
            Run.started_at,
            Run.sglang_version,
            Run.sglang_commit,
        )
        .select_from(Run)
        .join(Point, Point.run_id == Run.id)
        .where(Run.started_at >= since)
    )
    frame = read_frame(engine, stmt)
    keep = frame["status"] == "ok"
    if fingerprints is not None:
        keep &= frame["fingerprint"].isin(set(fingerprints))
    frame = frame[keep].drop(columns=["status"])
    return frame.sort_values(["fingerprint", "created_at", "point_id"], ignore_index=True)


def fingerprints_of_runs(engine: Engine, run_ids: Sequence[int]) -> list[str]:
    """Series with an ok point in the given runs."""
    if not run_ids:
        return []
    # Status is filtered here, not in SQL: with `status = 'ok'` in the WHERE clause SQLite (without ANALYZE
    # statistics) walks ix_points_status, i.e. nearly the whole table, instead of ix_points_run_id.
    stmt = select(Point.fingerprint, Point.status).where(Point.run_id.in_(list(run_ids)))
    with engine.connect() as c:
        return list(dict.fromkeys(fp for fp, status in c.execute(stmt) if status == "ok"))


def series_describe(engine: Engine, fingerprints: Sequence[str]) -> pd.DataFrame:
    """Identity columns of the given series (from each one's newest point)."""
    if not fingerprints:
        return pd.DataFrame(columns=["fingerprint", *SERIES_COLUMNS])
    newest = (
        select(func.max(Point.id).label("pid"))
        .where(Point.fingerprint.in_(list(fingerprints)))
        .group_by(Point.fingerprint)
        .subquery()
    )
    stmt = select(Point.fingerprint, *(getattr(Point, c) for c in SERIES_COLUMNS)).join(
        newest, newest.c.pid == Point.id
    )
    return read_frame(engine, stmt)


# ---------------------------------------------------------------------------------------------- runs


def run_choices(engine: Engine, limit: int = 500) -> pd.DataFrame:
    """Runs for pickers, newest first: id, started_at, sweep, version, GPU, status, trigger, simulated, model."""
    stmt = (
        select(
            Run.id,
            Run.uid,
            Run.started_at,
            Run.sweep_name,
            Run.label,
            Run.sglang_version,
            Run.sglang_commit,
            Run.gpu_name,
            Run.gpu_count,
            Run.status,
            Run.trigger,
            Run.simulated,
            Run.model,
        )
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
    )
    return read_frame(engine, stmt)


def list_runs(
    engine: Engine,
    *,
    name: str | None = None,
    gpu: str | None = None,
    status: str | None = None,
    simulated: bool | None = None,
    limit: int | None = None,
) -> pd.DataFrame:
    """Runs newest first, filtered, with their point counts: what `specbench runs` lists.

    `name` and `gpu` match case-insensitively anywhere in the sweep name / GPU name (bound LIKE patterns,
    escaped, so `%` or `_` in the filter match themselves).
    """
    stmt = select(
        Run.id,
        Run.uid,
        Run.sweep_name,
        Run.label,
        Run.status,
        Run.trigger,
        Run.backend,
        Run.simulated,
        Run.model,
        Run.gpu_name,
        Run.gpu_count,
        Run.sglang_version,
        Run.started_at,
        Run.finished_at,
    ).order_by(Run.started_at.desc(), Run.id.desc())
    if name:
        stmt = stmt.where(func.lower(Run.sweep_name).contains(name.lower(), autoescape=True))
    if gpu:
        stmt = stmt.where(func.lower(Run.gpu_name).contains(gpu.lower(), autoescape=True))
    if status:
        stmt = stmt.where(Run.status == status)
    if simulated is not None:
        stmt = stmt.where(Run.simulated.is_(simulated))
    if limit is not None:
        stmt = stmt.limit(limit)
    frame = read_frame(engine, stmt)
    counts = pd.DataFrame(columns=["run_id", "points", "points_ok"])
    ids = [int(i) for i in frame["id"]]
    if ids:
        counts = pd.concat(
            [
                read_frame(
                    engine,
                    select(
                        Point.run_id,
                        func.count(Point.id).label("points"),
                        func.sum(case((Point.status == "ok", 1), else_=0)).label("points_ok"),
                    )
                    .where(Point.run_id.in_(ids[i : i + 5000]))
                    .group_by(Point.run_id),
                )
                for i in range(0, len(ids), 5000)
            ],
            ignore_index=True,
        )
    frame = frame.merge(counts, how="left", left_on="id", right_on="run_id").drop(columns=["run_id"])
    return frame.fillna({"points": 0, "points_ok": 0}).astype(
        {"points": int, "points_ok": int, "simulated": bool}
    )


def run_info(engine: Engine, run_id: int) -> dict[str, Any]:
    stmt = select(*(getattr(Run, c) for c in RUN_COLUMNS), Run.sweep_yaml).where(Run.id == run_id)
    with engine.connect() as c:
        row = c.execute(stmt).mappings().first()
    if row is None:
        raise QueryError(f"no run with id {run_id}")
    return dict(row)


def run_servers(engine: Engine, run_id: int) -> pd.DataFrame:
    """The launches of a run: config label, resolved mode, start time, status, and how many idle servers shared
    the GPU while it was measured (`max_parallel_starts` > 1 leaves some; they can bias high-batch numbers)."""
    stmt = (
        select(
            ServerInstance.id,
            ServerInstance.label,
            ServerInstance.spec_mode_resolved,
            ServerInstance.startup_s,
            ServerInstance.status,
            ServerInstance.env,
        )
        .where(ServerInstance.run_id == run_id)
        .order_by(ServerInstance.id)
    )
    frame = read_frame(engine, stmt)
    frame["idle_neighbours"] = [
        int((env or {}).get("specbench.co_resident_idle_servers", 0)) for env in frame["env"]
    ]
    # Idle because its v1/v2 partner was up for interleaved windows (paired measurement), not parallel starts.
    frame["pair_colocated"] = [(env or {}).get("specbench.pair") == "colocated" for env in frame["env"]]
    return frame.drop(columns=["env"])


def resolve_run(engine: Engine, ref: str) -> int:
    """A run id from what a user types: an id, a uid (or its unique prefix), `latest` or `latest~N`."""
    ref = ref.strip()
    latest = re.fullmatch(r"latest(?:~(\d{1,9}))?", ref)
    if ref.startswith("latest") and not latest:
        raise QueryError(
            f"{ref[:40]!r}: write `latest` or `latest~N` with N a whole number (latest~1 = the one before)"
        )
    if ref.isdigit() and (len(ref) > 19 or int(ref) > 2**63 - 1):  # beyond any 64-bit id column
        raise QueryError(f"no run with id {ref[:40]}")
    with engine.connect() as c:
        if latest:
            back = int(latest.group(1) or 0)
            rid = c.execute(
                select(Run.id).order_by(Run.started_at.desc(), Run.id.desc()).offset(back).limit(1)
            ).scalar()
            if rid is None:
                raise QueryError(f"{ref}: the database holds fewer than {back + 1} runs")
            return int(rid)
        if ref.isdigit():
            rid = c.execute(select(Run.id).where(Run.id == int(ref))).scalar()
            if rid is None:
                raise QueryError(f"no run with id {ref}")
            return int(rid)
        if len(ref) < 6:
            raise QueryError(
                f"{ref!r}: give a run id, `latest`, `latest~N` or at least 6 characters of a uid"
            )
        found = (
            c.execute(select(Run.id).where(Run.uid.startswith(ref, autoescape=True)).limit(2)).scalars().all()
        )
    if not found:
        raise QueryError(f"no run with uid {ref!r}")
    if len(found) > 1:
        raise QueryError(f"uid prefix {ref!r} matches several runs; give more characters")
    return int(found[0])


def _if_present(engine: Engine, column: InstrumentedAttribute[Any]) -> list[InstrumentedAttribute[Any]]:
    """`[column]`, or `[]` on a database file of an older schema that the dashboard reads without migrating
    (the read-only engine never upgrades it); the frame then lacks that column."""
    table = column.class_.__tablename__
    names = {c["name"] for c in inspect(engine).get_columns(table)}
    return [column] if column.key in names else []


def run_points(engine: Engine, run_id: int, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """All points of a run (every status) with their configuration and the requested metrics."""
    cols = _metrics(metrics or (*FACTOR_METRICS, "accept_length_weighted", "ttft_p50_ms", "e2e_p50_ms"))
    stmt = (
        select(
            Point.id.label("point_id"),
            Point.run_id,
            Point.fingerprint,
            Point.status,
            Point.reason,
            *(getattr(Point, c) for c in SERIES_COLUMNS),
            Point.spec_mode_resolved,
            Point.input_len,
            Point.output_len,
            Point.repeats,
            *(metric_column(m) for m in cols),
            Point.output_throughput_ci_low,
            Point.output_throughput_ci_high,
            *_if_present(engine, Point.accept_length_pinned),
        )
        .where(Point.run_id == run_id)
        .order_by(Point.id)
    )
    return read_frame(engine, stmt)


def run_samples(engine: Engine, run_id: int, metrics: Sequence[str]) -> pd.DataFrame:
    """Every repeat of every point of a run, long by point: point_id, repeat, status and the metrics."""
    cols = _metrics(metrics)
    stmt = (
        select(
            Sample.point_id,
            Sample.repeat,
            Sample.status,
            *_if_present(engine, Sample.order_index),  # set when the run interleaved v1/v2 windows
            *(getattr(Sample, m) for m in cols),
        )
        .join(Point, Point.id == Sample.point_id)
        .where(Point.run_id == run_id)
        .order_by(Sample.point_id, Sample.repeat)
    )
    return read_frame(engine, stmt)
