"""`specbench export`: a run's points as CSV (with a `#` metadata header) or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from analysis.bench_serving_export import bench_serving_lines
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
        Literal["csv", "json", "md", "bench-serving-json"],
        typer.Option(
            "--format",
            help="csv, json, md (a PR-ready table) or bench-serving-json (bench_serving --output-file lines)",
        ),
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
            if format == "bench-serving-json":
                lines = bench_serving_lines(s, [r["id"] for r in data.runs], all_status=all_status)
    except ExportError as e:
        fail(str(e))
    if format == "bench-serving-json":
        text = "".join(line + "\n" for line in lines)
    else:
        text = {"csv": to_csv, "json": to_json, "md": to_markdown}[format](data)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text)
        typer.echo(f"wrote {len(data.rows)} points to {output}", err=True)
