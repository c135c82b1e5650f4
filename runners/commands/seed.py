"""`specbench seed --points N`: SYNTHETIC history for load tests and demos, clearly labelled as such."""

from typing import Annotated, Literal

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from runners.common import DbOption, err_console, open_db
from synthetic.history import DEFAULT_SHAPE, SMALL_SHAPE, SYNTHETIC_TRIGGER
from synthetic.history.seed import delete_synthetic, has_synthetic, seed_history


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
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="Write nothing when the database already holds synthetic history (`make demo` runs this "
            "every time).",
        ),
    ] = False,
    shape: Annotated[
        Literal["full", "small"],
        typer.Option(
            "--shape",
            help="full: 4 lanes x 90 points per run (load tests); small: 2 lanes (DeepSeek-V3 on H200 and H100) "
            "x 10 points per run, so a few hundred points make weeks of nightly history (the demo).",
        ),
    ] = "full",
) -> None:
    """Write synthetic benchmark history: runs marked trigger=synthetic, sweeps named synthetic-*."""
    engine = open_db(db)
    if once and has_synthetic(engine):
        err_console.print("synthetic history already present; nothing written (--once)")
        return
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
        report = seed_history(
            engine,
            points,
            seed=seed,
            shape=SMALL_SHAPE if shape == "small" else DEFAULT_SHAPE,
            with_samples=samples,
            progress=lambda done, planned: bar.update(task, completed=done, total=planned),
        )
    err_console.print(
        f"wrote {report.points:,} SYNTHETIC points ({report.samples:,} samples) in {report.runs:,} runs "
        f"in {report.seconds:.1f} s; they are marked trigger={SYNTHETIC_TRIGGER!r} and are not measurements"
    )
