"""`specbench submit SWEEP.yaml`: validate a sweep and queue it for any worker whose GPUs fit."""

from pathlib import Path
from typing import Annotated

import typer

from bench.sweep import SweepError, parse_sweep, read_sweep_text
from runners import queue
from runners.common import MAX_PRIORITY, DbOption, check_label, console, failing, open_db
from runners.sweep_input import interpreter_offered, sweep_requirements


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
    need = sweep_requirements(sweep, requires)
    with failing(SweepError):
        text = read_sweep_text(sweep)
        spec = parse_sweep(text, str(sweep))
    engine = open_db(db)
    interpreter_offered(engine, spec)
    with failing(SweepError):
        job_id = queue.submit(
            engine,
            text,
            source=str(sweep),
            label=check_label(label),
            requires=need,
            priority=priority,
            max_attempts=max_attempts,
        )
    console.print(f"job {job_id} queued")
