"""`specbench gate [RUN]`: judge a stored run's correctness check again, e.g. with another tolerance.

The launches' answers are stored (`correctness_outputs`), so verdicts are recomputed without a GPU, with the
run's settings or `--max-diverging-prompts` / `--min-acceptance-ratio` (docs/reference/correctness-gate.md).
Nothing is written unless `--write`. Exits 1 when a launch fails, like `run`.
"""

from collections.abc import Callable
from typing import Annotated, TypeVar

import typer
from sqlalchemy.orm import Session

from analysis.labels import KIND_TAG, MEASURED, run_kind
from bench.sweep import SweepError, parse_sweep
from db import queries as q
from runners import correctness
from runners.common import RUN_REF_HELP, DbOption, console, err_console, fail, open_db, resolve_run_ref
from runners.dbretry import in_session
from runners.exit_codes import ExitCode
from runners.recovery import OutagePolicy

T = TypeVar("T")


def gate(
    run: Annotated[str, typer.Argument(help=f"The run to judge: {RUN_REF_HELP}.")] = "latest",
    db: DbOption = None,
    max_diverging_prompts: Annotated[
        int | None, typer.Option(help="Prompts whose tokens may differ (default: the run's sweep).", min=0)
    ] = None,
    min_acceptance_ratio: Annotated[
        float | None,
        typer.Option(
            help="Least v2/v1 (and launch/reference) acceptance ratio (default: the run's sweep).",
            min=0.0,
            max=1.0,
        ),
    ] = None,
    write: Annotated[
        bool,
        typer.Option("--write", help="Store the new verdicts on the run's points (default: only print)."),
    ] = False,
    against: Annotated[
        str | None,
        typer.Option(
            "--against",
            help="Another run of the same check: how many prompts its baseline launch answers differently "
            "(two launches of the same greedy decoding; the floor for --max-diverging-prompts).",
        ),
    ] = None,
) -> None:
    """Judge a run's stored correctness answers again and print each launch's verdict."""
    engine = open_db(db)
    run_id = resolve_run_ref(engine, run)
    info = q.run_info(engine, run_id)
    try:
        spec = parse_sweep(info["sweep_yaml"])
    except SweepError as e:
        fail(f"run {run_id}'s stored sweep no longer validates: {e}")
    given = {"max_diverging_prompts": max_diverging_prompts, "min_acceptance_ratio": min_acceptance_ratio}
    settings = spec.measure.correctness.model_copy(update={k: v for k, v in given.items() if v is not None})
    if settings.max_diverging_prompts >= settings.prompts:
        fail(f"--max-diverging-prompts must stay below the check's {settings.prompts} prompts")
    policy = OutagePolicy.from_env()

    def write_fn(fn: Callable[[Session], T], what: str) -> T:
        return in_session(engine, fn, what=what, policy=policy)

    summary = correctness.gate(
        spec, run_id, write_fn, settings=settings, store=write, say=lambda m: console.print(m, markup=False)
    )
    kind = run_kind(info.get("simulated"), info.get("trigger"))
    made_up = f", {KIND_TAG[kind]}" if kind != MEASURED else ""  # the stand-in's answers are not a GPU's
    console.print(
        f"run {run_id} ({info['sweep_name']}{made_up}){' - verdicts stored' if write else ''}", markup=False
    )
    if against is not None:
        other = resolve_run_ref(engine, against)
        mine, theirs = correctness.run_baseline(write_fn, run_id), correctness.run_baseline(write_fn, other)
        found = correctness.baseline_agreement(theirs, mine) if mine and theirs else None
        if found is None:
            said = "not comparable (a baseline missing, failed, or another prompt set)"
        else:
            said = f"{found[1] - found[0]}/{found[1]} prompts agree ({found[0]} differ)"
        console.print(f"baseline of run {other} vs run {run_id}: {said}", markup=False)
    if all(v.verdict.why == correctness.NO_ANSWERS for v in summary.launches):
        console.print(
            "no launch of this run answered the check (a run made before the gate, or none started)"
        )
    if correctness.print_correctness(summary, console, err_console):
        raise typer.Exit(ExitCode.FINDING)
