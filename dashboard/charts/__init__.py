"""Altair chart builders: pure functions from DataFrames to charts, testable without a browser.

Frames come from `db.queries` (via the services) and `analysis`; nothing here reads a database or
touches Streamlit. Colours carry meaning consistently: red = regression, green = improvement, orange =
acknowledged, grey = dismissed or no change. One module per view: `trends` (a series over time, commit or
version, with its change points), `sweep` (one run: heatmaps, v2/v1 ratios, throughput lines), `compare`
(two runs); `style` holds the shared colours and types.
"""

from dashboard.charts.compare import compare_forest, compare_grid
from dashboard.charts.style import X_MODES, AnyChart, XMode
from dashboard.charts.sweep import GREY_CELL, heatmap, ratio_heatmap, throughput_frame, throughput_lines
from dashboard.charts.trends import change_rule_frame, trend_chart, trend_frame
