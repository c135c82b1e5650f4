"""`specbench seed --points N`: SYNTHETIC history for load tests and demos, clearly labelled as such."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from runners.common import DbOption, err_console, open_db
from synthetic.history import SYNTHETIC_TRIGGER
from synthetic.history.seed import delete_synthetic, seed_history


def register(app: typer.Typer) -> None:
    app.command("seed")(seed)


def seed(
    points: Annotated[
        int, typer.Option("--points", help="About how many points to write.", min=1, max=10_000_000)
    ] = 20_000,
    db: DbOption = None,
    seed: Annotated[
        int, typer.Option("--seed", min=0, max=2**32 - 1, help="Random seed (same seed, same history).")
    ] = 0,
    samples: Annotated[
        bool, typer.Option("--samples/--no-samples", help="Also write per-repeat samples.")
    ] = True,
    replace: Annotated[
        bool, typer.Option("--replace", help="Delete earlier synthetic runs first (real runs are kept).")
    ] = False,
) -> None:
    """Write synthetic benchmark history: runs marked trigger=synthetic, sweeps named synthetic-*."""
    engine = open_db(db)
    if replace:
        n = delete_synthetic(engine)
        err_console.print(f"removed {n} earlier synthetic run(s)")
    with Progress(
        TextColumn("[bold]seeding synthetic history[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("seed", total=points)

        def progress(done: int, planned: int) -> None:
            bar.update(task, completed=done, total=planned)

        report = seed_history(engine, points, seed=seed, with_samples=samples, progress=progress)
    err_console.print(
        f"wrote {report.points:,} SYNTHETIC points ({report.samples:,} samples) in {report.runs:,} runs "
        f"in {report.seconds:.1f} s; they are marked trigger={SYNTHETIC_TRIGGER!r} and are not measurements"
    )
