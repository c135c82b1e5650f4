"""Series reads: the catalog of series, one series' values, many series' history, the runs' x-axis fields.
A series is every point with one fingerprint; its reads walk `ix_points_fingerprint_created`."""

from collections.abc import Sequence
from datetime import datetime

import pandas as pd
from sqlalchemy import Engine, func, select

from db.models import Point, Run, Sample
from db.query_common import (
    FACTOR_METRICS,
    SERIES_COLUMNS,
    attrs,
    checked_metrics,
    chunks,
    metric_column,
    read_frame,
)


def series_catalog(engine: Engine) -> pd.DataFrame:
    """One row per series: its identity columns, point count and last time seen. Two steps so a million points
    stay cheap: group the covering fingerprint index for count and newest id, then read those rows by key."""
    newest = (
        select(
            Point.fingerprint, func.count(Point.id).label("n_points"), func.max(Point.id).label("newest_id")
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
RUN_AXIS_COLUMNS: tuple[str, ...] = (
    *("started_at", "sglang_version", "sglang_commit", "git_commit", "trigger"),
    "simulated",  # so a chart can say what its numbers are (stand-in, synthetic)
)


def run_axes(engine: Engine) -> pd.DataFrame:
    """Every run's x-axis fields (id, start, version, commits, trigger, simulated): small, cacheable whole."""
    return read_frame(engine, select(Run.id.label("run_id"), *(getattr(Run, c) for c in RUN_AXIS_COLUMNS)))


def series_values(
    engine: Engine,
    fingerprint: str,
    metrics: Sequence[str] = FACTOR_METRICS,
    *,
    since: datetime | None = None,
    statuses: Sequence[str] = ("ok",),
) -> pd.DataFrame:
    """One series' points in time order, points columns only (no join): the Trends page's hot query. Status
    is filtered after the read, so the query stays a walk of the series index (points.status is unindexed)."""
    cols = checked_metrics(metrics)
    stmt = (
        select(
            Point.id.label("point_id"),
            *attrs(Point, "run_id status repeats"),
            *(metric_column(m) for m in cols),
            *attrs(Point, "output_throughput_ci_low output_throughput_ci_high"),
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
    """Per point: min, max and count of one metric over its repeats (the band where no CI is stored)."""
    col = getattr(Sample, metric_column(metric).key)
    if not point_ids:
        return pd.DataFrame(columns=["point_id", "low", "high", "n"])
    stats = (func.min(col).label("low"), func.max(col).label("high"), func.count(col).label("n"))
    per_point = select(Sample.point_id, *stats).group_by(Sample.point_id)
    frames = [read_frame(engine, per_point.where(Sample.point_id.in_(ids))) for ids in chunks(point_ids)]
    return pd.concat(frames, ignore_index=True)


def series_history(
    engine: Engine,
    *,
    since: datetime,
    fingerprints: Sequence[str] | None = None,
    metrics: Sequence[str] = FACTOR_METRICS,
) -> pd.DataFrame:
    """Ok points of many series from runs started since `since`, for change-point scans. Driven by the runs
    (ix_runs_started_at, then ix_points_run_id): a run's points lie together, a few pages per run where a
    per-series walk reads a page per point. Status and series are filtered after reading (`series_values`)."""
    cols = checked_metrics(metrics)
    stmt = (
        select(
            *attrs(Point, "fingerprint status"),
            Point.id.label("point_id"),
            *attrs(Point, "run_id created_at"),
            *(metric_column(m) for m in cols),
            # simulated and trigger: what kind of numbers each point is (analysis.labels.run_kind)
            *attrs(Run, "started_at sglang_version sglang_commit simulated trigger"),
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
