"""Chart and table builders for profiles: pure functions from summaries and timeline rows (no Streamlit)."""

from typing import Any

import altair as alt
import pandas as pd

PHASE_COLORS = {
    "draft": "#4c78a8",
    "target_verify": "#f58518",
    "draft_extend": "#54a24b",
    "prefill": "#b279a2",
}
ROWS = ["CPU steps", "GPU steps", "GPU kernels"]
# Kernels of one phase closer than this share of the axis (half a pixel at 1000 px) draw as one bar: a bar per
# 1-5 us kernel (~950 a side, 400 kB of names) drew the same picture at several times the browser's work.
MERGE_SHARE = 1 / 2000
# Of a kernel's name in a tooltip: C++ template names run to 5,000 characters (the trace keeps them whole).
NAME_CHARS = 120
COLUMNS = ["row", "kind", "name", "phase", "start_ms", "end_ms", "kernels", "busy_ms"]


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def merge_kernels(rows: list[dict[str, Any]], resolution_ms: float) -> list[dict[str, Any]]:
    """The bars to draw: phases as they are; kernels of one phase within `resolution_ms` of the previous
    one's end merged into one bar named after the longest. Every bar carries `kernels` and `busy_ms`."""
    out = [{**r, "kernels": 1, "busy_ms": r["end_ms"] - r["start_ms"]} for r in rows if r["kind"] != "kernel"]
    kernels = sorted((r for r in rows if r["kind"] == "kernel"), key=lambda r: (r["row"], r["start_ms"]))
    groups: list[tuple[list[dict[str, Any]], float]] = []  # the kernels of a bar, and where it ends
    for k in kernels:
        if groups:
            last, end = groups[-1]
            same_track = k["row"] == last[0]["row"] and k["phase"] == last[0]["phase"]
            if same_track and k["start_ms"] - end < resolution_ms:
                last.append(k)
                groups[-1] = (last, max(end, k["end_ms"]))
                continue
        groups.append(([k], k["end_ms"]))
    for g, end in groups:
        longest = max(g, key=lambda r: r["end_ms"] - r["start_ms"])
        name = _short(longest["name"])
        out.append(
            {
                **g[0],
                "name": name if len(g) == 1 else f"{len(g)} kernels, longest: {name}",
                "end_ms": end,
                "kernels": len(g),
                "busy_ms": sum(r["end_ms"] - r["start_ms"] for r in g),
            }
        )
    return out


def timeline(rows: list[dict[str, Any]], title: str, x_max: float | None = None) -> alt.Chart:
    """Phases and kernels as bars on a time axis (ms from the first cycle shown), one row per track; kernels
    closer together than the chart can show apart are one bar (`merge_kernels`)."""
    span = x_max or max((r["end_ms"] for r in rows), default=0.0)
    f = pd.DataFrame(merge_kernels(rows, span * MERGE_SHARE), columns=COLUMNS)
    f["dur_ms"] = f["end_ms"] - f["start_ms"]
    domain = list(PHASE_COLORS)
    extra = sorted(set(f["phase"]) - set(domain))
    scale = alt.Scale(domain=[0, x_max]) if x_max else alt.Scale()
    x = alt.X("start_ms:Q", title="ms from the first cycle shown", scale=scale)
    return (
        alt.Chart(f, title=title)
        .mark_bar(stroke="white", strokeWidth=0.3)
        .encode(
            x=x,
            x2=alt.X2("end_ms"),
            y=alt.Y("row:N", sort=ROWS, title=None),
            color=alt.Color(
                "phase:N",
                scale=alt.Scale(
                    domain=domain + extra, range=list(PHASE_COLORS.values()) + ["#9e9e9e"] * len(extra)
                ),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            tooltip=[
                alt.Tooltip("name:N"),
                alt.Tooltip("phase:N"),
                alt.Tooltip("start_ms:Q", format=".3f"),
                alt.Tooltip("dur_ms:Q", format=".3f"),
                alt.Tooltip("kernels:Q"),
                alt.Tooltip("busy_ms:Q", title="kernel time ms", format=".3f"),
            ],
        )
        .properties(height=150)
    )


def _ms(st: dict[str, Any] | None, scale: float = 1.0, unit: str = "ms", digits: int = 2) -> str:
    if not st:
        return "–"
    return f"{st['median'] * scale:.{digits}f} {unit}  (IQR {st['p25'] * scale:.{digits}f}–{st['p75'] * scale:.{digits}f})"


def figures_table(summary: dict[str, Any]) -> pd.DataFrame:
    """Per-cycle figures of one profile as (figure, value) rows, medians with their quartiles."""
    rows = [
        ("verify steps found", str(summary.get("cycles", 0))),
        ("cycles timed", str(summary.get("cycles_timed", 0))),
        ("cycle", _ms(summary.get("cycle_ms"))),
        ("GPU busy", _ms(summary.get("gpu_busy_fraction"), 100.0, "%", 1)),
        ("GPU idle per cycle", _ms(summary.get("gpu_idle_ms_per_cycle"))),
        ("largest GPU idle gap", _ms(summary.get("largest_idle_gap_ms"))),
    ]
    for name, ph in (summary.get("phases") or {}).items():
        if ph.get("gpu_ms"):
            rows.append((f"GPU {name.replace('_', ' ')}", _ms(ph["gpu_ms"])))
        if ph.get("cpu_ms"):
            rows.append((f"CPU {name.replace('_', ' ')}", _ms(ph["cpu_ms"])))
    d = summary.get("distortion") or {}
    if d.get("ratio") is not None:
        # Short enough for a half-page column: the caption under the tables says what the two times are.
        distortion = f"×{d['ratio']:.2f} ({d['profiled_cycle_ms']:.2f} vs {d['unprofiled_cycle_ms']:.2f} ms)"
        rows.append(("distortion", distortion))
    return pd.DataFrame(rows, columns=["figure", "value"])
