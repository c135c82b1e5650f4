"""Read queries for the dashboard and the CLI, in one namespace: `from db import queries as q`.

The queries live by job: `db.query_common` (column lists, the metric guard, the frame reader and the rules
that keep reads fast), `db.run_queries` (runs: listing, resolving, one run's points) and
`db.series_queries` (series: catalog, values, history). Triage verdicts, the one write, are in `db.triage`.
"""

from db.query_common import (
    CONFIG_COLUMNS,
    FACTOR_METRICS,
    PROBLEM_STATUSES,
    RUN_COLUMNS,
    SERIES_COLUMNS,
    QueryError,
    checked_metrics,
    metric_column,
    read_frame,
)
from db.run_queries import (
    Totals,
    caption_facts,
    latest_runs,
    list_runs,
    problem_points,
    resolve_run,
    run_choices,
    run_info,
    run_model_facts,
    run_parts,
    run_points,
    run_samples,
    run_servers,
    run_tp_widths,
    run_windows,
    totals,
)
from db.series_queries import (
    RUN_AXIS_COLUMNS,
    fingerprints_of_runs,
    run_axes,
    sample_ranges,
    series_catalog,
    series_describe,
    series_history,
    series_values,
    with_run_axes,
)

__all__ = [
    "CONFIG_COLUMNS",
    "FACTOR_METRICS",
    "PROBLEM_STATUSES",
    "RUN_AXIS_COLUMNS",
    "RUN_COLUMNS",
    "SERIES_COLUMNS",
    "QueryError",
    "Totals",
    "caption_facts",
    "checked_metrics",
    "fingerprints_of_runs",
    "latest_runs",
    "list_runs",
    "metric_column",
    "problem_points",
    "read_frame",
    "resolve_run",
    "run_axes",
    "run_choices",
    "run_info",
    "run_model_facts",
    "run_parts",
    "run_points",
    "run_samples",
    "run_servers",
    "run_tp_widths",
    "run_windows",
    "sample_ranges",
    "series_catalog",
    "series_describe",
    "series_history",
    "series_values",
    "totals",
    "with_run_axes",
]
