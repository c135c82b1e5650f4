"""`specbench export`: a run's points as CSV (with a `#` metadata header) or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from analysis.export import ExportError, collect, to_csv, to_json, to_markdown
from db.engine import session_scope
from runners.common import MAX_ID, DbOption, fail, open_db_readonly


def register(app: typer.Typer) -> None:
    app.command("export")(export)


def export(
    db: DbOption = None,
    run: Annotated[
        list[int] | None,
        typer.Option("--run", min=1, max=MAX_ID, help="Run id (repeatable). Default: the latest run."),
    ] = None,
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
    engine = open_db_readonly(db)
    try:
        with session_scope(engine) as s:
            data = collect(s, run, all_status=all_status)
    except ExportError as e:
        fail(str(e))
    text = {"csv": to_csv, "json": to_json, "md": to_markdown}[format](data)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text)
        typer.echo(f"wrote {len(data.rows)} points to {output}", err=True)
