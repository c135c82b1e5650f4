"""Shared analysis below `runners` and `dashboard`: labels, verdicts, change scans, sweep grids, reports.

Pure pandas on top of `bench` (statistics, the metric catalogue) and `db` (queries); no Streamlit, so the CLI
and the dashboard produce the very same tables. Modules:

- labels: how a point, series, GPU or workload reads in tables
- facets: the Trends page's filter facets over the series catalog
- compare: run-vs-run verdicts point by point (with throughput attribution)
- changes: change-point scans of series, with attribution and triage state
- regressions: the one "recent regressions" pipeline (Overview and `specbench regressions`)
- sweep: one run's grid with speedups
- render: every view as CSV, JSON or Markdown from its declared columns; CSV never starts a formula
- report: a compare table as a Markdown PR comment (and its CSV and JSON, through render)
- export: a run's points (CSV with a `#` header, JSON, Markdown)
- v2_vs_v1: the v2/v1 ratio per cell of one run, with intervals and verdicts
- windows: one run's measured windows in order, with their telemetry and the throughput spread
- plain: values as JSON takes them (NaN, inf, NA -> null; datetimes -> ISO), for every export
- profiles: overlap columns (GPU idle per cycle v1→v2, CPU hidden) from stored profiles, joinable to v2-vs-v1
"""
