"""Altair chart builders: pure functions from DataFrames (`db.queries` via the services, `analysis`) to
charts, testable without a browser; nothing here reads a database or touches Streamlit. Colours keep one
meaning: red = regression, green = improvement, orange = acknowledged, grey = dismissed or no change. One
module per view: `trends`, `sweep`, `compare`, `speedup`, `tp`; `style` holds the shared colours and types."""

from dashboard.charts.compare import compare_forest, compare_grid
from dashboard.charts.style import X_MODES, AnyChart, XMode
from dashboard.charts.sweep import GREY_CELL, heatmap, ratio_heatmap, throughput_frame, throughput_lines
from dashboard.charts.trends import change_rule_frame, trend_chart, trend_frame
