"""`specbench submit SWEEP.yaml`: validate a sweep and queue it for any worker whose GPUs fit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.sweep import SweepError, read_sweep_text
from runners import queue
from runners.common import MAX_PRIORITY, DbOption, console, fail, open_db
from runners.gpus import parse_requires


def register(app: typer.Typer) -> None:
    app.command("submit")(submit)


def submit(
    sweep: Annotated[Path, typer.Argument(help="Sweep YAML file; validated now, run later by a worker.")],
    db: DbOption = None,
    label: Annotated[str | None, typer.Option(help="Free-form label, e.g. pr-24640.")] = None,
    requires: Annotated[
        str | None,
        typer.Option(
            help="What a worker needs: gpu=NAME (substring of the GPU name, any case), count=N, "
            "labels=a+b (worker --labels). E.g. gpu=H100,count=8."
        ),
    ] = None,
    priority: Annotated[
        int,
        typer.Option(min=-MAX_PRIORITY, max=MAX_PRIORITY, help="Higher runs first; ties run oldest first."),
    ] = 0,
    max_attempts: Annotated[
        int,
        typer.Option(
            min=1, max=100, help="Give up after this many failed attempts (a killed worker does not count)."
        ),
    ] = 3,
) -> None:
    """Queue a sweep as a job."""
    if not sweep.is_file():
        fail(f"{sweep}: file not found")
    try:
        need = parse_requires(requires)
    except ValueError as e:
        fail(str(e))
    engine = open_db(db)
    try:
        job_id = queue.submit(
            engine,
            read_sweep_text(sweep),
            source=str(sweep),
            label=label,
            requires=need,
            priority=priority,
            max_attempts=max_attempts,
        )
    except SweepError as e:
        fail(str(e))
    console.print(f"job {job_id} queued")
