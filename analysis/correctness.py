"""How the correctness gate's verdicts read: a failed point's speed (a wrong path's) is struck, `wrong`."""

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from analysis import md
from analysis.plain import missing
from analysis.render import Column, md_table

WRONG = "wrong"
# The point columns the gate writes (db.models.Point), in export order.
COLUMNS: tuple[str, ...] = (
    "correctness",
    "correctness_reason",
    "correctness_diverge_request",
    "correctness_diverge_token",
    "acceptance_v2_v1",
)
BADGE = {"pass": "✅ pass", "fail": "🛑 FAIL", "not checked": "➖ not checked"}
_STROKE = "\u0336"  # combining long stroke overlay: struck-through text where no markup reaches (charts, CSV)


def is_wrong(verdict: Any) -> bool:
    return verdict == "fail"


def strike(text: str) -> str:
    """`text` struck through with combining strokes: works in Vega text marks and plain tables alike."""
    return "".join(c + _STROKE for c in text)


def speed_text(value: Any, verdict: Any, fmt: str = ",.0f") -> str:
    """A speed as a plain label: struck through and followed by `wrong` when the gate failed its point."""
    text = "–" if missing(value) else format(float(value), fmt)
    return f"{strike(text)} {WRONG}" if is_wrong(verdict) and text != "–" else text


def speed_md(value: Any, verdict: Any, fmt: str = ",.0f") -> str:
    """A speed for Markdown: `~~1,234~~ **wrong**` when the gate failed its point."""
    text = "–" if missing(value) else format(float(value), fmt)
    return f"~~{text}~~ **{WRONG}**" if is_wrong(verdict) and text != "–" else text


def verdict_md(verdict: Any) -> str:
    return "–" if missing(verdict) else BADGE.get(str(verdict), md.text(verdict))


def position(row: Mapping[str, Any]) -> str:
    """'request 3, token 17', or '' when the tokens did not diverge."""
    req, tok = row.get("correctness_diverge_request"), row.get("correctness_diverge_token")
    if req is None or tok is None or missing(req) or missing(tok):
        return ""
    return f"request {int(req)}, token {int(tok)}"


def failed_launches(points: pd.DataFrame, label: Any) -> list[tuple[str, str]]:
    """(config label, why) of each failed server config in `points` (one entry per config, not per batch)."""
    seen: dict[str, str] = {}
    for row in points[points["correctness"] == "fail"].to_dict("records"):
        seen.setdefault(label(row), str(row.get("correctness_reason") or ""))
    return list(seen.items())


def counts(verdicts: Iterable[Any]) -> dict[str, int]:
    out = {"pass": 0, "fail": 0, "not checked": 0, "not recorded": 0}
    for v in verdicts:
        out[v if v in out and not missing(v) else "not recorded"] += 1
    return out


def banner_md(failed: list[tuple[str, str]], whose: str = "This run") -> list[str]:
    """The loud Markdown block for failed configs (empty when none failed)."""
    if not failed:
        return []
    lines = [
        f"> 🛑 **Correctness gate: {whose} has {len(failed)} server configuration(s) that computed wrong tokens or "
        "acceptance, or whose server died of a known SGLang bug.** Any speed they show was measured on a wrong "
        f"path: it is struck through and labelled **{WRONG}**, not a number to quote.",
    ]
    lines += [f"> - {md.text(name)}: {md.text(why)}" for name, why in failed]
    return [*lines, ""]


def wrong_points_md(points: pd.DataFrame, label: Any) -> list[str]:
    """The failed points' Markdown table: config, batch, struck speed, divergence, acceptance v2/v1."""
    rows = points[points["correctness"] == "fail"]
    if rows.empty:
        return []
    cols = (
        Column("config", text=True, show=lambda r: md.text(label(r))),
        Column("batch_size", "batch", "d"),
        Column(
            "output_throughput", "output tok/s", show=lambda r: speed_md(r.get("output_throughput"), "fail")
        ),
        Column("diverge", "first diverging", text=True, show=lambda r: position(r) or "–"),
        Column("acceptance_v2_v1", "acceptance v2/v1", ".3f"),
    )
    return md_table(rows.to_dict("records"), cols)
