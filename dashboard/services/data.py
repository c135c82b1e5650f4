"""Cached reads. Every function takes the database URL first, so caches are per database and hashable.

TTLs are short for what changes while a sweep runs (runs, points) and longer for what is expensive and
slow-moving (the series catalog). Triage writes clear the caches that show triage state.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine, inspect

from analysis import regressions, tp_compare, v2_vs_v1
from analysis.changes import attach_triage, change_points
from analysis.stats.changepoint import ChangePointParams
from analysis.tp_pair import RunSide, default_pair
from db import queries as q
from db import triage as stored_triage
from db.engine import DatabaseMissingError, make_engine, make_readonly_engine, redact, resolve_url


def db_url() -> str:
    """The database the dashboard reads: $DATABASE_URL (`specbench dashboard --db` sets it), else the default
    SQLite file."""
    return resolve_url()


def shown_url(url: str) -> str:
    return redact(url)


@st.cache_resource(show_spinner=False)
def engine(url: str) -> Engine:
    """Reads go through an engine that cannot write: browsing never changes the database file."""
    try:
        return make_readonly_engine(url)
    except DatabaseMissingError:  # nothing to protect; the pages show their empty state
        return make_engine(url)


@st.cache_resource(show_spinner=False)
def writer(url: str) -> Engine:
    """The one write the dashboard makes: a triage verdict a user saves."""
    return make_engine(url)


@st.cache_data(ttl=30, show_spinner=False)
def has_schema(url: str) -> bool:
    return "points" in inspect(engine(url)).get_table_names()


@st.cache_data(ttl=30, show_spinner=False)
def totals(url: str) -> q.Totals:
    return q.totals(engine(url))


@st.cache_data(ttl=300, show_spinner="Reading the series catalog…")
def catalog(url: str) -> pd.DataFrame:
    return q.series_catalog(engine(url))


@st.cache_data(ttl=30, show_spinner=False)
def latest_runs(url: str, limit: int = 25) -> pd.DataFrame:
    return q.latest_runs(engine(url), limit)


@st.cache_data(ttl=30, show_spinner=False)
def problem_points(url: str, run_ids: tuple[int, ...]) -> pd.DataFrame:
    return q.problem_points(engine(url), list(run_ids))


@st.cache_data(ttl=60, show_spinner=False)
def run_axes(url: str) -> pd.DataFrame:
    return q.run_axes(engine(url))


@st.cache_data(ttl=60, show_spinner=False)
def series_points(url: str, fingerprint: str, metric: str) -> pd.DataFrame:
    """One series with its x-axes: the points read alone (no join), the runs' fields from a cached table."""
    metrics = list(dict.fromkeys([metric, *q.FACTOR_METRICS]))
    values = q.series_values(engine(url), fingerprint, metrics)
    axes = run_axes(url)
    if not set(values["run_id"]) <= set(axes["run_id"]):  # a run newer than the cached table
        run_axes.clear()
        axes = run_axes(url)
    return q.with_run_axes(values, axes)


@st.cache_data(ttl=60, show_spinner=False)
def sample_band(url: str, point_ids: tuple[int, ...], metric: str) -> pd.DataFrame:
    return q.sample_ranges(engine(url), list(point_ids), metric)


@st.cache_data(ttl=60, show_spinner=False)
def run_choices(url: str) -> pd.DataFrame:
    return q.run_choices(engine(url))


@st.cache_data(ttl=60, show_spinner=False)
def run_series(url: str, run_id: int) -> set[str]:
    """Series with an ok point in this run (what Compare's default pairing checks)."""
    return set(q.fingerprints_of_runs(engine(url), [run_id]))


@st.cache_data(ttl=60, show_spinner=False)
def run_info(url: str, run_id: int) -> dict[str, Any]:
    return q.run_info(engine(url), run_id)


@st.cache_data(ttl=60, show_spinner=False)
def run_servers(url: str, run_id: int) -> pd.DataFrame:
    return q.run_servers(engine(url), run_id)


@st.cache_data(ttl=60, show_spinner=False)
def run_v2_vs_v1(url: str, run_id: int) -> pd.DataFrame:
    """v2/v1 ratios with 95 % intervals per cell of a run (`analysis.v2_vs_v1`)."""
    return v2_vs_v1.load(engine(url), run_id)


@st.cache_data(ttl=60, show_spinner=False)
def shard_vs_tp(url: str, shard_run: int, tp_run: int) -> tp_compare.Comparison:
    """`analysis.tp_compare.load`, cached; raises analysis.tp_pair.PairRefused for a pair that is not one."""
    return tp_compare.load(engine(url), shard_run, tp_run)


@st.cache_data(ttl=60, show_spinner=False)
def shard_tp_default(url: str, newest_first: tuple[int, ...]) -> tuple[int, int] | None:
    """The newest (shard, TP) pair among these runs (`analysis.tp_pair.default_pair`), or None."""
    eng = engine(url)
    widths = q.run_tp_widths(eng, list(newest_first))
    return default_pair(list(newest_first), widths, lambda r: RunSide.from_facts(q.run_model_facts(eng, r)))


@st.cache_data(ttl=60, show_spinner=False)
def run_points(url: str, run_id: int) -> pd.DataFrame:
    return q.run_points(engine(url), run_id)


@st.cache_data(ttl=60, show_spinner=False)
def run_samples(url: str, run_id: int, metric: str) -> pd.DataFrame:
    return q.run_samples(engine(url), run_id, [metric])


@st.cache_data(ttl=30, show_spinner=False)
def triage(url: str, fingerprints: tuple[str, ...] | None, metric: str | None) -> pd.DataFrame:
    return stored_triage.triage_for(engine(url), None if fingerprints is None else list(fingerprints), metric)


@st.cache_data(ttl=120, show_spinner=False)
def series_changes(url: str, fingerprint: str, metric: str, params: ChangePointParams) -> pd.DataFrame:
    frame = series_points(url, fingerprint, metric).assign(fingerprint=fingerprint)
    changes = change_points(frame, metric, params)
    return attach_triage(changes, triage(url, (fingerprint,), metric))


@st.cache_data(ttl=120, show_spinner="Scanning recent runs for change points…")
def recent_changes(url: str, metric: str, params: ChangePointParams) -> pd.DataFrame:
    """`analysis.regressions.recent_changes` (what `specbench regressions` prints), cached."""
    return regressions.recent_changes(engine(url), metric, params)


def save_triage(url: str, **kwargs: Any) -> int:
    """Store a verdict and drop the cached views that display triage state."""
    row_id = stored_triage.set_triage(writer(url), **kwargs)
    _clear_triage_views()
    return row_id


def save_triage_many(url: str, changes: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    """One verdict for many changes (bulk triage), then drop the cached views that display triage state."""
    ids = stored_triage.set_triage_many(writer(url), changes, **kwargs)
    _clear_triage_views()
    return ids


def _clear_triage_views() -> None:
    for fn in (triage, series_changes, recent_changes):
        fn.clear()
