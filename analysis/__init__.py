"""Shared analysis below `runners` and `dashboard`: labels, verdicts, change scans, sweep grids, reports.

Pure pandas on `bench` and `db`, no Streamlit: the CLI and the dashboard produce the very same tables.
"""
