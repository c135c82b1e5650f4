"""`specbench export`: a run's points as CSV (with a `#` metadata header) or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from sqlalchemy import Engine

from analysis import v2_vs_v1
from analysis.bench_serving_export import bench_serving_lines
from analysis.export import ExportError, collect, latest_run_id, to_csv, to_json, to_markdown
from db.engine import session_scope
from db.models import Run
from runners.common import MAX_ID, DbOption, fail, open_db_readonly, write_output


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
    view: Annotated[
        Literal["points", "v2-vs-v1"],
        typer.Option(
            "--view",
            help="points: every point (default); v2-vs-v1: the v2/v1 ratio per batch size, steps and accept "
            "length with 95% intervals and a verdict (one run).",
        ),
    ] = "points",
) -> None:
    """Export points for PR discussions and spreadsheets."""
    engine = open_db_readonly(db)
    if view == "v2-vs-v1":
        _export_v2_vs_v1(engine, run, format, output)
        return
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
        write_output(output, text)
        typer.echo(f"wrote {len(data.rows)} points to {output}", err=True)


def _export_v2_vs_v1(engine: Engine, run: list[int] | None, fmt: str, output: Path | None) -> None:
    if run is not None and len(run) != 1:
        fail("--view v2-vs-v1 compares the modes inside one run: give one --run")
    with session_scope(engine) as s:
        run_id = run[0] if run else latest_run_id(s)
        found = s.get(Run, run_id) if run_id is not None else None
        if found is None:
            fail("no such run" if run_id is not None else "the database holds no runs")
        assert found is not None
        found_id = found.id
        meta: dict[str, Any] = {
            "run_id": found.id,
            "run_uid": found.uid,
            "sweep": found.sweep_name,
            "sglang_version": found.sglang_version,
            "gpu": f"{found.gpu_count}x {found.gpu_name}" if found.gpu_count else "no GPU",
            "simulated": found.simulated,
        }
    frame = v2_vs_v1.load(engine, found_id)
    title = (
        f"v2 (overlap) over v1 (non-overlap), run #{meta['run_id']} {meta['sweep']}: "
        f"SGLang {meta['sglang_version'] or '?'} on {meta['gpu']}"
        + (" (stand-in server, simulated numbers)" if meta["simulated"] else "")
    )
    text = {
        "csv": lambda: v2_vs_v1.to_csv(frame),
        "json": lambda: v2_vs_v1.to_json(frame, meta),
        "md": lambda: v2_vs_v1.to_markdown(frame, title),
    }[fmt]()
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_output(output, text)
        typer.echo(f"wrote {len(frame)} v2/v1 cells to {output}", err=True)
