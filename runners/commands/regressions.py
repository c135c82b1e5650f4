"""`specbench regressions`: change points (E-divisive means) in every series that ran recently."""

from typing import Annotated, Any, Literal

import pandas as pd
import typer

from analysis.regressions import flagged, recent_changes
from analysis.render import json_text, records
from analysis.stats.changepoint import ChangePointParams
from db import queries as q
from runners.common import DbOption, console, failing, open_db_readonly, parse_span
from runners.exit_codes import ExitCode, answered
from runners.tables import Column, print_rows, say

# A flagged change as `--format json` writes it; `kind`: measured, simulated, synthetic, or what a change made
# of several kinds of runs joins (`synthetic+measured`).
JSON_FIELDS = (
    *("series", "kind", "fingerprint", "metric", "direction", "rel_change", "pvalue", "run_id"),
    *("prev_run_id", "started_at", "sglang_version", "sglang_commit", "prev_version", "prev_commit"),
    *("mean_before", "mean_after", "n_before", "n_after", "why", "state", "note"),
)


def regressions(
    db: DbOption = None,
    since: Annotated[
        str, typer.Option(help="Report changes whose first run is this recent (30d, 12h, 2w).")
    ] = "30d",
    format: Annotated[Literal["table", "json"], typer.Option("--format", help="table | json")] = "table",
    metric: Annotated[str, typer.Option(help="Metric to scan.")] = "output_throughput",
    window: Annotated[int, typer.Option(help="E-divisive window, in points.", min=3, max=100_000)] = 50,
    pvalue: Annotated[float, typer.Option("--pvalue", help="Significance level.", min=1e-9, max=0.5)] = 0.001,
    min_magnitude: Annotated[
        float, typer.Option(help="Magnitude floor (0.05 = 5%).", min=0.0, max=100.0)
    ] = 0.05,
    lookback: Annotated[
        str, typer.Option(help="History before --since used as context for detection.")
    ] = "60d",
    include_improvements: Annotated[bool, typer.Option("--include-improvements")] = False,
    include_dismissed: Annotated[bool, typer.Option("--include-dismissed")] = False,
) -> None:
    """List flagged changes: where a series shifted, by how much, why (for throughput), and its triage state.

    Exits 1 when a regression that is not dismissed is listed, 0 when none is. This looks for change points
    along each series' history (E-divisive means); `specbench compare A B` compares two runs point by point
    instead.
    """
    with failing(ValueError, q.QueryError):
        recent, context = parse_span(since), parse_span(lookback, "--lookback")
        q.metric_column(metric)
        params = ChangePointParams(window=window, max_pvalue=pvalue, min_magnitude=min_magnitude)
    engine = open_db_readonly(db)
    changes = recent_changes(engine, metric, params, since=recent, lookback=context)
    changes = flagged(changes, include_improvements=include_improvements, include_dismissed=include_dismissed)
    # A finding: a regression nobody dismissed (acknowledged ones are real, so they still count).
    found = not changes.empty and bool(
        ((changes["direction"] == "regression") & (changes["state"] != "dismissed")).any()
    )
    code = ExitCode.FINDING if found else ExitCode.OK
    with answered(code):
        if format == "json":
            typer.echo(json_text(records(changes.reindex(columns=list(JSON_FIELDS)))), nl=False)
        else:
            _table(changes, metric, since)
    raise typer.Exit(code)


def _table(changes: pd.DataFrame, metric: str, since: str) -> None:
    if changes.empty:
        console.print(f"no flagged {metric} changes in the last {since}")
        say(
            console,
            "This looks for change points along each series' history; to compare two runs point by point: "
            "specbench compare BASELINE CANDIDATE.",
            "dim",
        )
        return
    columns = [
        # The finding (Δ, its first run, why) and whether it was measured at all: never cut or left out.
        Column("Δ", "right", markup=True, cell=_delta),
        Column("kind", cell=lambda r: str(r["kind"])),
        Column("series", shrink=22, fold=True, cell=lambda r: str(r["series"])),
        Column("why", shrink=22, fold=True, cell=lambda r: str(r["why"] or "")),
        Column("from → to", drop=3, shrink=16, cell=_from_to),
        Column("run", "right", cell=lambda r: str(r["run_id"])),
        Column("runs after", "right", drop=4, cell=lambda r: str(r["n_after"])),
        Column("triage", drop=2, cell=lambda r: str(r["state"])),
    ]
    title = f"{len(changes)} flagged change(s) in {metric}, last {since}"
    print_rows(console, columns, changes.to_dict("records"), title=title)
    say(
        console,
        "Change points along each series' history (E-divisive means; run = the first run after the change). "
        "To compare two runs point by point: specbench compare BASELINE CANDIDATE.",
        "dim",
    )


def _delta(r: dict[str, Any]) -> str:
    return f"[{'red' if r['direction'] == 'regression' else 'green'}]{r['rel_change'] * 100:+.1f}%[/]"


def _from_to(r: dict[str, Any]) -> str:
    commits = (str(r["prev_commit"] or "")[:7], str(r["sglang_commit"] or "")[:7])
    return f"{r['prev_version']}@{commits[0]} → {r['sglang_version']}@{commits[1]}"
