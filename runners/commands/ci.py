"""`specbench ci SWEEP`: the PR check: a baseline and a candidate run of one sweep (reused or run), compared,
the short PR comment written to a file. Exits as runners/exit_codes.py says: 0 no regression, 1 a
regression, 2 a side's run failed or stopped short, or no answer.

A side is a run (`--base-run`) or a label (`--base`) whose newest finished run is reused, else SWEEP runs now
under it on the SGLang installed here. See docs/guide/ci.md.
"""

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.markup import escape
from sqlalchemy import Engine, select

from analysis.stats.compare import DEFAULT_CONFIDENCE, DEFAULT_THRESHOLD
from bench.sweep import SweepError, load_sweep
from db.engine import session_scope
from db.models import Point, Run
from runners.cli import load_verb
from runners.common import (
    RUN_REF_HELP,
    ConfidenceOption,
    DbOption,
    ThresholdOption,
    err_console,
    fail,
    failing,
    open_db,
    resolve_run_ref,
)
from runners.comparison import compare_result, render
from runners.exit_codes import ExitCode

REUSABLE = ("done", "unstable", "partial")
DEFAULT_COMMENT = Path("specbench-comment.md")


def ci(
    sweep: Annotated[Path, typer.Argument(help="Sweep YAML both runs measure.")],
    base: Annotated[
        str | None,
        typer.Option("--base", help="Baseline label: reuse its newest run of SWEEP, else run SWEEP now."),
    ] = None,
    base_run: Annotated[str | None, typer.Option("--base-run", help=f"Baseline run: {RUN_REF_HELP}.")] = None,
    head: Annotated[
        str | None,
        typer.Option("--head", help="Candidate label: reuse its newest run of SWEEP, else run SWEEP now."),
    ] = None,
    head_run: Annotated[
        str | None, typer.Option("--head-run", help=f"Candidate run: {RUN_REF_HELP}.")
    ] = None,
    db: DbOption = None,
    comment: Annotated[
        Path, typer.Option("--comment", "-o", help="Where the PR comment (Markdown) is written.")
    ] = DEFAULT_COMMENT,
    format: Annotated[
        Literal["comment", "md"], typer.Option("--format", help="comment (short) or md (every row)")
    ] = "comment",
    metric: Annotated[str, typer.Option(help="Metric the verdicts are on.")] = "output_throughput",
    threshold: ThresholdOption = DEFAULT_THRESHOLD,
    confidence: ConfidenceOption = DEFAULT_CONFIDENCE,
    gpus: Annotated[str | None, typer.Option(help="GPU indices for runs started here, e.g. 0,1.")] = None,
    log_dir: Annotated[Path, typer.Option(help="Where server logs of runs started here go.")] = Path("logs"),
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = False,
    base_only: Annotated[
        bool,
        typer.Option(
            "--base-only",
            help="Only make sure the baseline run exists (reuse or run it), e.g. while the base SGLang is installed.",
        ),
    ] = False,
) -> None:
    """Compare a PR's run against its base run; write the PR comment; exit 1 on a regression, 2 when a run
    or the tool failed."""
    if (base is None) == (base_run is None):
        fail("give the baseline as --base LABEL or --base-run RUN (one of them)")
    if not base_only and (head is None) == (head_run is None):
        fail("give the candidate as --head LABEL or --head-run RUN (one of them)")
    with failing(SweepError):
        spec = load_sweep(sweep)
    engine = open_db(db)
    # A side's run is the `run` verb itself, as a user runs it (same checks, progress, summary, exit codes).
    run_args = [str(sweep), "--trigger", "pr", "--log-dir", str(log_dir), *(["--db", db] if db else [])]
    run_args += (["--gpus", gpus] if gpus else []) + ([] if progress else ["--no-progress"])
    a = _side(engine, "baseline", spec.name, base, base_run, run_args)
    if base_only:
        err_console.print(f"baseline: run {a}")
        return
    b = _side(engine, "candidate", spec.name, head, head_run, run_args)
    if a == b:
        fail(f"baseline and candidate are the same run ({a})")
    result = compare_result(engine, a, b, metric=metric, threshold=threshold, confidence=confidence)
    if result.refused is not None:
        fail(f"runs {a} and {b} do not compare. {result.refused.text()}")
    text, counts = render(result, format, threshold=threshold, confidence=confidence)
    comment.parent.mkdir(parents=True, exist_ok=True)
    comment.write_text(text)
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "no shared points"
    err_console.print(f"run {b} vs baseline {a}: {summary} ({metric}); PR comment in {comment}")
    wrong = _wrong_configs(engine, b)
    if wrong:
        err_console.print(
            f"[bold red]WRONG: the candidate run {b} failed the correctness gate in {len(wrong)} configuration(s) "
            f"({escape(', '.join(wrong))}); the PR comment says why[/]"
        )
    if counts["regression"] or wrong:  # a regression or a wrong path: both are findings
        raise typer.Exit(ExitCode.FINDING)


def _wrong_configs(engine: Engine, run_id: int) -> list[str]:
    """The server configs of a run whose points the correctness gate failed."""
    with session_scope(engine) as s:
        rows = s.execute(
            select(Point.algorithm, Point.steps, Point.spec_mode)
            .where(Point.run_id == run_id, Point.correctness == "fail")
            .distinct()
        ).all()
    return sorted(f"{alg or 'baseline'} s{steps} {mode}" if alg else "baseline" for alg, steps, mode in rows)


def labelled_run(engine: Engine, sweep_name: str, label: str) -> int | None:
    """The newest finished (done, unstable or partial) run of this sweep with this label."""
    with session_scope(engine) as s:
        return s.scalars(
            select(Run.id)
            .where(Run.sweep_name == sweep_name, Run.label == label, Run.status.in_(REUSABLE))
            .order_by(Run.started_at.desc(), Run.id.desc())
            .limit(1)
        ).first()


def _side(
    engine: Engine, role: str, sweep_name: str, label: str | None, ref: str | None, run_args: list[str]
) -> int:
    if ref is not None:
        return resolve_run_ref(engine, ref)
    assert label is not None
    found = labelled_run(engine, sweep_name, label)
    if found is not None:
        err_console.print(f"{role}: reusing run {found} ({sweep_name}, label {label!r})")
        return found
    err_console.print(f"{role}: no finished run of {sweep_name} labelled {label!r}; running it now")
    args = [*run_args, "--label", label]
    code = load_verb("run").main(args, prog_name="specbench run", standalone_mode=False)
    # A run that failed the correctness gate (a finding) is still compared: the PR comment says why.
    if code not in (None, ExitCode.OK, ExitCode.FINDING):
        raise typer.Exit(code)
    made = labelled_run(engine, sweep_name, label)
    if made is None:
        fail(f"the {role} run of {sweep_name} (label {label!r}) did not finish")
    return made
