"""What every chart module shares: the x-axis modes, the chart type, colours with a fixed meaning."""

from __future__ import annotations

from typing import Literal

import altair as alt

XMode = Literal["time", "commit", "version"]
AnyChart = alt.Chart | alt.LayerChart | alt.FacetChart
X_MODES: dict[str, str] = {"time": "Run time", "commit": "SGLang commit", "version": "SGLang version"}

VERDICT_COLORS = {
    "regression": "#d62728",
    "improvement": "#2ca02c",
    "no change": "#9e9e9e",
    "insufficient data": "#c7a600",
}
STATE_COLORS = {"acknowledged": "#ff7f0e", "dismissed": "#9e9e9e"}
LINE_COLOR = "#1f77b4"


def commit_label(version: object, commit: object) -> str:
    """`version@abcdef1`, with `?` for what is unknown."""
    c = str(commit)[:7] if isinstance(commit, str) and commit else "?"
    return f"{version or '?'}@{c}"
