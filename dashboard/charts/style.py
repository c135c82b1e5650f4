"""What every chart module shares: the x-axis modes, the chart type, colours with a fixed meaning, and the
one way builders write a conditional value. Encodings are always typed channel objects (`alt.X2("high")`,
`alt.ColorValue(...)`), never a shorthand string, `alt.value` or `alt.condition`: Altair resolves those by
trying each schema they might match, 2-50 ms an encoding (a heatmap took 30-50 ms, 2 ms typed)."""

from collections.abc import Callable
from typing import Literal, TypeVar

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

Channel = TypeVar("Channel", bound=alt.SchemaBase)


def value_if(channel: Callable[..., Channel], test: str, then: object, otherwise: object) -> Channel:
    """`alt.condition(test, then, alt.value(otherwise))` built as the channel it becomes, e.g.
    `value_if(alt.StrokeValue, "datum.wrong", "red", "white")`; `then` is a value or a field channel such as
    `alt.Color("ratio:Q", ...)`."""
    cond = then.to_dict() if isinstance(then, alt.SchemaBase) else {"value": then}
    return channel(otherwise, condition={"test": test, **cond})


def commit_label(version: object, commit: object) -> str:
    """`version@abcdef1`, with `?` for what is unknown."""
    c = str(commit)[:7] if isinstance(commit, str) and commit else "?"
    return f"{version or '?'}@{c}"
