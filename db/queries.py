"""Read queries in one namespace (`from db import queries as q`), living by job in `db.query_common`,
`db.run_queries` and `db.series_queries`; triage, the one write, is `db.triage`."""

from db.query_common import (
    CONFIG_COLUMNS,
    FACTOR_METRICS,
    PROBLEM_STATUSES,
    RUN_COLUMNS,
    QueryError,
    metric_column,
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
    fingerprints_of_runs,
    run_axes,
    sample_ranges,
    series_catalog,
    series_describe,
    series_history,
    series_values,
    with_run_axes,
)
