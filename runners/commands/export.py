"""`specbench export`: a run's points as CSV (with a `#` metadata header) or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from analysis.export import ExportError, collect, to_csv, to_json, to_markdown
from db import queries as q
from db.engine import session_scope
from runners.common import RUN_REF_HELP, DbOption, err_console, fail, open_db_readonly, resolve_run_ref


def register(app: typer.Typer) -> None:
    app.command("export")(export)


def export(
    db: DbOption = None,
    run: Annotated[
        list[str] | None,
        typer.Option("--run", help=f"Run (repeatable): {RUN_REF_HELP}. Default: latest.", show_default=False),
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all-runs", help="Every run in the database (oldest first).")
    ] = False,
    format: Annotated[
        Literal["csv", "json", "md"], typer.Option("--format", help="csv, json or md (a PR-ready table)")
    ] = "csv",
    all_status: Annotated[
        bool, typer.Option("--all-status", help="Include failed, invalid, unstable and mode_mismatch points.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Export points for PR discussions and spreadsheets."""
    if all_runs and run:
        fail("give either --run or --all-runs, not both")
    engine = open_db_readonly(db)
    if all_runs:
        run_ids = sorted(int(i) for i in q.list_runs(engine)["id"])
        if not run_ids:
            fail("the database holds no runs yet; run `specbench run SWEEP.yaml` first")
    else:
        run_ids = list(dict.fromkeys(resolve_run_ref(engine, ref) for ref in (run or ["latest"])))
        if not run:
            err_console.print(f"exporting run {run_ids[0]} (the latest); --run picks another, --all-runs all")
    try:
        with session_scope(engine) as s:
            data = collect(s, run_ids, all_status=all_status)
    except ExportError as e:
        fail(str(e))
    text = {"csv": to_csv, "json": to_json, "md": to_markdown}[format](data)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text)
        typer.echo(f"wrote {len(data.rows)} points to {output}", err=True)
