"""Shared analysis below `runners` and `dashboard`: labels, verdicts, change scans, sweep grids, reports.

Pure pandas on top of `bench` (statistics, the metric catalogue) and `db` (queries); no Streamlit, so the CLI
and the dashboard produce the very same tables. Each module's docstring says what it answers.
"""
