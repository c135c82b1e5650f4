"""`specbench run SWEEP.yaml`: validate, launch each server config once, measure, store every repeat."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from sqlalchemy import Engine, select

from bench import reaper
from bench.gpus import parse_gpu_list
from bench.sweep import SweepError, expand, load_sweep
from db.engine import session_scope
from db.models import Point, Run
from runners.common import MAX_ID, DbOption, OutageOption, console, err_console, fail, open_db
from runners.dbretry import DatabaseUnavailable
from runners.recovery import OutagePolicy
from runners.sweep_runner import RunOutcome, execute_sweep

EXIT_FAILED = (
    1  # no point measured (none ok or unstable), or the run could not go on (the database stayed away)
)
EXIT_PARTIAL = 3  # any other status named in --fail-on: partial (stopped, or some points not ok), unstable
RUN_STATUSES = ("done", "unstable", "partial", "failed")
DEFAULT_FAIL_ON = "failed,partial"


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run(
    sweep: Annotated[Path, typer.Argument(help="Sweep YAML file (see sweeps/).")],
    db: DbOption = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the latest run of this sweep, skipping stored repeats.")
    ] = False,
    resume_run: Annotated[
        int | None, typer.Option("--resume-run", min=1, max=MAX_ID, help="Continue this run id.")
    ] = None,
    deadline_s: Annotated[
        float | None,
        typer.Option(
            "--deadline-s", help="Stop cleanly after the current point once this many seconds passed."
        ),
    ] = None,
    label: Annotated[str | None, typer.Option(help="Free-form label, e.g. pr-24640.")] = None,
    trigger: Annotated[str, typer.Option(help="manual | schedule | pr")] = "manual",
    gpus: Annotated[str | None, typer.Option(help="GPU indices for CUDA_VISIBLE_DEVICES, e.g. 0,1.")] = None,
    log_dir: Annotated[Path, typer.Option(help="Where server logs go.")] = Path("logs"),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate and list the launches, run nothing.")
    ] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    fail_on: Annotated[
        str,
        typer.Option(
            "--fail-on",
            help="Run statuses that exit non-zero (comma-separated, of done, unstable, partial, failed): "
            f"failed exits {EXIT_FAILED}, the others {EXIT_PARTIAL}. CI that also rejects noisy points: "
            "--fail-on failed,partial,unstable.",
        ),
    ] = DEFAULT_FAIL_ON,
    db_outage_limit_s: OutageOption = None,
) -> None:
    """Run a sweep against a live SGLang server (or the stand-in) and store every point."""
    failing = _parse_fail_on(fail_on)
    try:
        spec = load_sweep(sweep)
    except SweepError as e:
        fail(str(e))
    if trigger not in {"manual", "schedule", "pr"}:
        fail(f"--trigger must be manual, schedule or pr, not {trigger!r}")
    gpu_list = _parse_gpus(gpus)
    groups = expand(spec)
    n_points = sum(len(g.points) for g in groups)
    console.print(
        f"[bold]{spec.name}[/]: {len(groups)} server launch(es), {n_points} points x {spec.repeats} repeats "
        f"on backend [cyan]{spec.server.backend}[/]"
    )
    if dry_run:
        for g in groups:
            console.print(f"  {g.server.label()}: batch sizes {[p.batch_size for p in g.points]}")
        return
    engine = open_db(db)
    for pgid in reaper.reap_orphans():  # servers of a run or worker that was killed on this host
        err_console.print(f"[yellow]stopped server process group {pgid} left by a dead launcher[/]")
    resume_id = resume_run
    if resume and resume_id is None:
        resume_id = _latest_run_of(engine, spec.name)
        if resume_id is None:
            err_console.print(f"no earlier run of {spec.name!r} to resume; starting a new one")
    deadline = time.monotonic() + deadline_s if deadline_s is not None else None
    # SIGTERM (a scheduler, `timeout`, a container stop) ends the run like Ctrl-C: stored repeats stay, the
    # servers are torn down, the run is marked partial. Python's default would skip all cleanup.
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        outcome = execute_sweep(
            spec,
            sweep.read_text(),
            engine,
            trigger=trigger,
            label=label,
            resume_run_id=resume_id,
            gpus=gpu_list,
            deadline=deadline,
            log_dir=log_dir,
            show_progress=progress,
            console=err_console,
            outage=OutagePolicy.from_env(db_outage_limit_s),
        )
    except DatabaseUnavailable as e:
        fail(
            f"{e}; every repeat measured before it is stored; continue with: specbench run {sweep} --resume",
            1,
        )
    _summary(engine, outcome, time.monotonic() - started)
    if outcome.status in ("partial", "failed") and outcome.error:
        colour = "red" if outcome.status == "failed" else "yellow"
        err_console.print(
            f"[{colour}]run {outcome.run_id} is {outcome.status} ({outcome.error}); "
            f"measure what is missing with: specbench run {sweep} --resume-run {outcome.run_id}[/]"
        )
    if outcome.status in failing:
        raise typer.Exit(EXIT_FAILED if outcome.status == "failed" else EXIT_PARTIAL)


def _parse_fail_on(text: str) -> set[str]:
    chosen = {x.strip() for x in text.split(",") if x.strip()}
    unknown = sorted(chosen - set(RUN_STATUSES))
    if unknown:
        fail(f"--fail-on: unknown status(es) {', '.join(unknown)}; choose from {', '.join(RUN_STATUSES)}")
    return chosen


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _parse_gpus(gpus: str | None) -> list[int] | None:
    try:
        return parse_gpu_list(gpus)
    except ValueError as e:
        fail(str(e))


def _latest_run_of(engine: Engine, sweep_name: str) -> int | None:
    with session_scope(engine) as s:
        return s.scalars(
            select(Run.id).where(Run.sweep_name == sweep_name).order_by(Run.id.desc()).limit(1)
        ).first()


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _summary(engine: Engine, outcome: RunOutcome, elapsed_s: float) -> None:
    with session_scope(engine) as s:
        points = list(s.scalars(select(Point).where(Point.run_id == outcome.run_id).order_by(Point.id)))
    table = Table(title=f"run {outcome.run_id}: {outcome.status}", show_lines=False)
    for col in (
        "config",
        "bs",
        "status",
        "out tok/s",
        "95% CI",
        "accept len",
        "TTFT p50",
        "TPOT p50",
        "ITL p50",
    ):
        table.add_column(col, justify="right" if col not in ("config", "status") else "left")
    for p in points:
        cfg = (
            "baseline"
            if p.algorithm is None
            else f"{p.algorithm} s{p.steps} k{p.topk} d{p.draft_tokens}"
            + (f" acc{p.accept_length_pinned:g}" if p.accept_length_pinned is not None else "")
            + f" {p.spec_mode}"
        )
        style = {"ok": "green", "unstable": "yellow"}.get(p.status, "red")
        ci = (
            f"{_fmt(p.output_throughput_ci_low, 0)}-{_fmt(p.output_throughput_ci_high, 0)}"
            if p.output_throughput_ci_low is not None
            else "-"
        )
        table.add_row(
            cfg,
            str(p.batch_size),
            f"[{style}]{p.status}[/]",
            _fmt(p.output_throughput),
            ci,
            _fmt(p.accept_length, 2),
            _fmt(p.ttft_p50_ms),
            _fmt(p.tpot_p50_ms, 2),
            _fmt(p.itl_p50_ms, 2),
        )
    # Piped output (CI logs, `| tee`) gets 80 columns by default, which folds every row; use a log width.
    if not console.is_terminal:
        console.width = max(console.width, 140)
    console.print(table)
    bad = [p for p in points if p.status != "ok"]
    for p in bad[:20]:
        console.print(f"[red]{p.status}[/] point {p.id} (bs={p.batch_size}): {p.reason}")
    overhead = "-" if outcome.overhead_s_per_point is None else f"{outcome.overhead_s_per_point:.2f} s"
    console.print(
        f"{outcome.points_stored}/{outcome.points_total} points measured this session, "
        f"{outcome.launches} launch(es), {elapsed_s:.1f} s, per-point overhead outside the window {overhead}"
    )
    _print_drift(outcome.drift)


def _print_drift(drift: dict[str, Any] | None) -> None:
    if drift is None:
        return
    where = f"{drift.get('label')} bs={drift.get('batch_size')}"
    if drift.get("error"):
        console.print(f"[yellow]drift check ({where}): {drift['error']}[/]")
        return
    tput, tpot = drift.get("output_throughput_change"), drift.get("tpot_change")
    first, last = drift.get("first") or {}, drift.get("last") or {}

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1%}"

    console.print(
        f"drift check ({where}, re-measured at the end; {drift.get('note')}): output throughput "
        f"{_fmt(first.get('output_throughput'))} -> {_fmt(last.get('output_throughput'))} tok/s ({pct(tput)}), "
        f"TPOT {_fmt(first.get('tpot_mean_ms'), 2)} -> {_fmt(last.get('tpot_mean_ms'), 2)} ms ({pct(tpot)})"
    )
