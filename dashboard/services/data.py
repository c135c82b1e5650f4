"""Cached reads. Every function takes the database URL first, so caches are per database and hashable. A
result is kept until the database changes (`data_version`), not for a fixed time: a dashboard over a nightly
database answers from memory all day, and the server computes every page once as it starts
(`dashboard.warmup`) without that work expiring a minute later. Triage writes clear triage caches at once."""

import functools
import os
import time
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import pandas as pd
import streamlit as st
from sqlalchemy import Engine, inspect
from sqlalchemy.engine import make_url

from analysis import regressions, report, spec_vs_baseline, tp_compare, v2_vs_v1
from analysis.changes import attach_triage, change_points
from analysis.compare import compare_runs
from analysis.facets import annotate_catalog
from analysis.stats.changepoint import ChangePointParams
from analysis.tp_pair import RunSide, default_pair
from db import profile_queries as pq
from db import queries as q
from db import triage as stored_triage
from db.engine import DatabaseMissingError, make_engine, redact, resolve_url
from db.migrate import open_database_readonly

P = ParamSpec("P")
R = TypeVar("R")
Version = tuple[int, ...]
# A database server gives no cheap sign of change: its results live this long, in clock-aligned windows.
SERVER_REFRESH_S = 30
MAX_ENTRIES = 64  # results per function: runs, series and selections a team browses, not a crawl's worth


@functools.lru_cache(maxsize=16)
def _sqlite_file(url: str) -> str | None:
    """The file an SQLite URL names (None for another database or an in-memory one), parsed once per URL."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return parsed.database


def data_version(url: str) -> Version:
    """Changes whenever the database's contents may have: an SQLite file's and its write-ahead log's size and
    mtime (an empty log counts as none), or a server's current `SERVER_REFRESH_S` window."""
    path = _sqlite_file(url)
    if path is None:
        return (int(time.time() // SERVER_REFRESH_S),)
    out: list[int] = []
    for name in (path, f"{path}-wal"):
        try:
            info = os.stat(name)
        except OSError:
            out.extend((0, 0))
            continue
        out.extend((info.st_mtime_ns, info.st_size) if info.st_size else (0, 0))
    return tuple(out)


class Versioned(Generic[P, R]):
    """A read cached per database URL and `data_version`: call it like the function it wraps."""

    def __init__(self, cached: Callable[..., R]) -> None:
        self._cached = cached

    def __call__(self, url: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._cached(url, data_version(url), *args, **kwargs)

    def clear(self) -> None:
        self._cached.clear()  # type: ignore[attr-defined]


def cached(
    *,
    show_spinner: bool | str = False,
    max_entries: int = MAX_ENTRIES,
    ttl: float | None = None,
    shared: bool = False,
) -> Callable[[Callable[Concatenate[str, P], R]], Versioned[P, R]]:
    """`st.cache_data` keyed on the database's `data_version` as well as the arguments; `ttl` only for a
    result that also depends on the clock; `shared`: every caller gets the same object, never changed."""

    def wrap(fn: Callable[Concatenate[str, P], R]) -> Versioned[P, R]:
        @functools.wraps(fn)
        def keyed(url: str, version: Version, *args: Any, **kwargs: Any) -> R:
            return fn(url, *args, **kwargs)

        # Streamlit names a cache by module and qualified name (copied from `fn`); without __wrapped__ it
        # reads the arguments from `keyed`'s own signature, where `version` is one of them.
        del keyed.__wrapped__  # type: ignore[attr-defined]
        cache = st.cache_resource if shared else st.cache_data
        return Versioned(cache(show_spinner=show_spinner, max_entries=max_entries, ttl=ttl)(keyed))

    return wrap


def db_url() -> str:
    """$DATABASE_URL (`specbench dashboard --db` sets it), else the default SQLite file."""
    return resolve_url()


def shown_url(url: str) -> str:
    return redact(url)


@st.cache_resource(show_spinner=False)
def engine(url: str) -> Engine:
    """An engine that cannot write, at the head schema (db.migrate.open_database_readonly): browsing never
    changes the database file."""
    try:
        return open_database_readonly(url)[0]
    except DatabaseMissingError:  # nothing to protect; the pages show their empty state
        return make_engine(url)


@st.cache_resource(show_spinner=False)
def writer(url: str) -> Engine:
    """The one write the dashboard makes: a triage verdict a user saves."""
    return make_engine(url)


@cached()
def has_schema(url: str) -> bool:
    """False for a database nothing has created the tables of (the dashboard started on a new URL)."""
    return "points" in inspect(engine(url)).get_table_names()


def _query(query: Callable[Concatenate[Engine, P], R]) -> Versioned[P, R]:
    """`query` of the database at a URL, as it is (no argument to convert, nothing to add), `cached`."""

    def read(url: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return query(engine(url), *args, **kwargs)

    # Streamlit names a cache by it: one per query.
    read.__name__, read.__qualname__ = query.__name__, f"{query.__module__}.{query.__qualname__}"
    return cached()(read)


totals = _query(q.totals)
latest_runs = _query(q.latest_runs)
run_axes = _query(q.run_axes)
run_choices = _query(q.run_choices)
run_info = _query(q.run_info)
run_servers = _query(q.run_servers)
run_profiles = _query(pq.run_profiles)
run_points = _query(q.run_points)
problem_points = _query(q.problem_points)
sample_band = _query(q.sample_ranges)
run_v2_vs_v1 = _query(v2_vs_v1.load)
run_spec_vs_baseline = _query(spec_vs_baseline.load)
# Raises analysis.tp_pair.PairRefused for a pair that is not one.
shard_vs_tp = _query(tp_compare.load)
runs_with_profiles = _query(pq.runs_with_profiles)
triage = _query(stored_triage.triage_for)


@cached(show_spinner="Reading the series catalog…")
def catalog(url: str) -> pd.DataFrame:
    return q.series_catalog(engine(url))


@cached()
def annotated_catalog(url: str) -> pd.DataFrame:
    """The series catalog with the facets the pickers filter on (`analysis.facets.annotate_catalog`)."""
    return annotate_catalog(catalog(url))


@cached()
def series_points(url: str, fingerprint: str, metric: str) -> pd.DataFrame:
    """One series with its x-axes: the points read alone (no join), the runs' fields from a cached table."""
    metrics = list(dict.fromkeys([metric, *q.FACTOR_METRICS]))
    values = q.series_values(engine(url), fingerprint, metrics)
    axes = run_axes(url)
    if not set(values["run_id"]) <= set(axes["run_id"]):  # a run newer than the cached table
        run_axes.clear()
        axes = run_axes(url)
    return q.with_run_axes(values, axes)


@cached()
def run_series(url: str, run_id: int) -> set[str]:
    """Series with an ok point in this run (what Compare's default pairing checks)."""
    return set(q.fingerprints_of_runs(engine(url), [run_id]))


@cached()
def run_parts(url: str, run_id: int) -> list[dict[str, Any]]:
    """The run's parts: where each invocation ran, its drift check against the part before."""
    return q.run_parts(engine(url), [run_id])[run_id]


@cached()
def shard_tp_default(url: str, newest_first: tuple[int, ...]) -> tuple[int, int] | None:
    """The newest (shard, TP) pair among these runs (`analysis.tp_pair.default_pair`), or None."""
    eng = engine(url)
    widths = q.run_tp_widths(eng, list(newest_first))
    return default_pair(list(newest_first), widths, lambda r: RunSide.from_facts(q.run_model_facts(eng, r)))


@cached()
def run_samples(url: str, run_id: int, metric: str) -> pd.DataFrame:
    return q.run_samples(engine(url), run_id, [metric])


@cached()
def comparison(url: str, a: int, b: int, metric: str, threshold: float, confidence: float) -> pd.DataFrame:
    """Run B (candidate) against run A (baseline), point by point: `analysis.compare.compare_runs`."""
    sides = (run_points(url, a), run_samples(url, a, metric), run_points(url, b), run_samples(url, b, metric))
    return compare_runs(*sides, metric=metric, threshold=threshold, confidence=confidence)


@cached()
def comparison_files(
    url: str, a: int, b: int, metric: str, threshold: float, confidence: float
) -> tuple[str, str]:
    """The comparison as CSV and as the short Markdown of a PR comment (what Compare offers to download)."""
    doc = report.document(
        comparison(url, a, b, metric, threshold, confidence),
        run_info(url, a),
        run_info(url, b),
        metric=metric,
        threshold=threshold,
        confidence=confidence,
        short=True,  # changed rows, the rest as counts, sweep files folded (the CSV has all)
    )
    return doc.text("csv"), doc.text("md")


@cached()
def series_changes(url: str, fingerprint: str, metric: str, params: ChangePointParams) -> pd.DataFrame:
    frame = series_points(url, fingerprint, metric).assign(fingerprint=fingerprint)
    changes = change_points(frame, metric, params)
    return attach_triage(changes, triage(url, (fingerprint,), metric))


# The scan covers the last 30 days from now: an hour's drift of that window changes nothing a reader sees.
@cached(show_spinner="Scanning recent runs for change points…", ttl=3600)
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


# Caches whose results show triage state; a saved verdict clears them (views built on them add theirs).
TRIAGE_VIEWS: list[Versioned[..., Any]] = [triage, series_changes, recent_changes]


def _clear_triage_views() -> None:
    for fn in TRIAGE_VIEWS:
        fn.clear()
