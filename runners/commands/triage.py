"""`specbench triage RUN --state STATE`: one verdict for every flagged change that starts at a run.

One cause (a new draft model) often moves dozens of series: this records one verdict and note for all, or
those whose main cause matches `--cause`; the changes are `specbench regressions`' in any direction and state.
"""

from typing import Annotated, Literal

import typer

from analysis.changes import changes_of_run, main_cause
from analysis.regressions import recent_changes
from analysis.stats.changepoint import ChangePointParams
from db import queries as q
from db import triage as stored_triage
from runners.common import (
    RUN_REF_HELP,
    DbOption,
    console,
    err_console,
    fail,
    failing,
    open_db,
    parse_span,
    resolve_run_ref,
)
from runners.tables import Column, print_table


def triage(
    run: Annotated[str, typer.Argument(help=f"The run where the changes start: {RUN_REF_HELP}.")],
    state: Annotated[
        Literal["acknowledged", "dismissed", "open"],
        typer.Option("--state", help="acknowledged (real, expected), dismissed (not a real change) or open."),
    ],
    note: Annotated[
        str | None, typer.Option(help="Why, e.g. 'expected: PR #24640 changes the draft'.")
    ] = None,
    cause: Annotated[
        str | None,
        typer.Option(
            help="Only changes whose main cause is this (e.g. 'acceptance dropped'); see --dry-run."
        ),
    ] = None,
    metric: Annotated[str, typer.Option(help="Metric whose changes are triaged.")] = "output_throughput",
    since: Annotated[
        str, typer.Option(help="Changes whose first run is this recent (30d, 12h, 2w).")
    ] = "30d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the changes, store nothing.")] = False,
    db: DbOption = None,
) -> None:
    """Acknowledge or dismiss every change of a run that shares one cause, in one go."""
    with failing(ValueError, q.QueryError):
        span = parse_span(since)
        q.metric_column(metric)
    engine = open_db(db)
    run_id = resolve_run_ref(engine, run)
    changes = recent_changes(engine, metric, ChangePointParams(), since=span)
    of_run = changes_of_run(changes, run_id) if not changes.empty else changes
    if of_run.empty:
        fail(f"no flagged change of {metric} starts at run {run_id} (within {since})")
    causes = main_cause(of_run["why"])
    chosen = changes_of_run(changes, run_id, cause) if cause else of_run
    if chosen.empty:
        known = ", ".join(sorted({c for c in causes if c})) or "none"
        fail(f"no change of run {run_id} has main cause {cause!r}; its causes: {known}")
    rows = [
        [str(r["series"]), f"{r['rel_change'] * 100:+.1f}%", str(r["kind"]), c or "-", str(r["state"])]
        for r, c in zip(chosen.to_dict("records"), main_cause(chosen["why"]), strict=True)
    ]
    columns = [
        Column("series"),
        Column("Δ", "right"),
        Column("kind"),
        Column("cause", drop=1),
        Column("was", drop=2),
    ]
    print_table(console, columns, rows, title=f"{len(chosen)} change(s) of run {run_id} ({metric})")
    if dry_run:
        err_console.print("dry run: nothing stored")
        return
    stored_triage.set_triage_many(
        engine,
        [
            {"fingerprint": fp, "run_id": run_id, "magnitude": float(m)}
            for fp, m in zip(chosen["fingerprint"], chosen["rel_change"], strict=True)
        ],
        metric=metric,
        state=state,
        note=note,
    )
    err_console.print(f"{len(chosen)} change(s) of run {run_id} marked {state}")
