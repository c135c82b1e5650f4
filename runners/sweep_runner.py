"""Executes a sweep, storing every repeat the moment it is measured.

A crash, Ctrl-C, SIGTERM (`stop`) or a passed `deadline` leaves the run `partial` with every finished repeat
stored, so `--resume` (or a retried job) continues where it stopped.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from bench.host import reaper
from bench.host.policy import HostPolicy
from bench.pairing import Pair
from bench.sweep import SweepSpec, expand
from db.models import Point, Run
from db.types import utcnow, uuid7
from runners import correctness, dbretry, pair_runner, parts, preflight, run_checks, store
from runners.correctness import GateSummary
from runners.drift import Drift
from runners.executor import Stopped, SweepExecutor, run_provenance
from runners.parts import PartHost, PartRefused, PartState
from runners.recovery import OutagePolicy
from runners.resume_guard import ResumeRefused, check_resume
from runners.steps import Step, schedule, shared_config, step_points


class Terminated(KeyboardInterrupt):
    """A signal (SIGTERM) ends the run as Ctrl-C does, recorded as what it was."""


@dataclass
class RunOutcome:
    run_id: int
    status: str  # done | unstable | partial | failed (see final_status)
    points_total: int
    points_stored: int
    launches: int = 0
    error: str | None = None
    overhead_s_per_point: float | None = None
    drift: Drift | None = None
    # The correctness gate's verdicts (None: not judged, e.g. interrupted with Ctrl-C).
    correctness: GateSummary | None = None


def final_status(point_statuses: list[str], points_total: int) -> tuple[str, str | None]:
    """`done` (all ok), `unstable` (the rest noisy), `failed` (none measured) or `partial`, with why."""
    measured = sum(1 for s in point_statuses if s in ("ok", "unstable"))
    missing = points_total - len(point_statuses)
    bad = {s: point_statuses.count(s) for s in sorted(set(point_statuses)) if s != "ok"}
    if missing > 0:
        bad["not measured"] = missing
    summary = ", ".join(f"{n} {s}" for s, n in bad.items())
    if measured == 0:
        return "failed", f"no point measured ({summary or 'no points'})"
    if not bad:
        return "done", None
    if set(bad) == {"unstable"}:
        return "unstable", f"{points_total - bad['unstable']}/{points_total} points ok ({summary})"
    return "partial", f"{measured}/{points_total} points measured ({summary})"


def execute_sweep(
    spec: SweepSpec,
    sweep_yaml: str,
    engine: Engine,
    *,
    trigger: str = "manual",
    label: str | None = None,
    job_id: int | None = None,
    resume_run_id: int | None = None,
    gpus: list[int] | None = None,
    deadline: float | None = None,
    stop: threading.Event | None = None,
    log_dir: Path | None = None,
    show_progress: bool = True,
    console: Console | None = None,
    outage: OutagePolicy | None = None,
    policy: HostPolicy | None = None,
    host: PartHost | None = None,
) -> RunOutcome:
    """Run `spec`, storing every repeat as measured; outages shorter than `outage.limit_s` are waited out.

    Before anything is touched: ResumeRefused (a missing or other sweep's run), PartRefused (another SGLang),
    preflight.PreflightError (a launch every server would fail). `policy`: what this host allows.
    """
    console = console or Console(stderr=True)
    outage = outage or OutagePolicy.from_env()
    # A failure every launch would repeat fails once, before a run row exists.
    preflight.check(spec, policy)
    groups = expand(spec)
    opening = functools.partial(
        _open_run,
        spec=spec,
        sweep_yaml=sweep_yaml,
        provenance=run_provenance(spec, gpus=gpus),
        uid=uuid7(),  # names the run before it exists, so a create retried after a lost commit finds it
        resume=resume_run_id,
        job_id=job_id,
        trigger=trigger,
        label=label,
        part=_Part(host or PartHost.here(gpus), preflight.part_sglang(spec, policy), utcnow()),
    )
    run_id, done, notes, part = dbretry.in_session(engine, opening, what="opening the run", policy=outage)
    for note in notes:
        console.print(escape(note))
    logs = (log_dir or Path("logs")) / f"run-{run_id}"
    logs.mkdir(parents=True, exist_ok=True)
    executor = SweepExecutor(spec, engine, run_id, done, gpus, deadline, stop, logs, outage, policy, part)
    steps = schedule(groups, spec)
    total_points = sum(len(g.points) for g in groups)
    status, error = "done", None
    judge = True  # the correctness gate judges what was stored, unless the user interrupted the run
    try:
        with _progress_bar(console, show_progress) as progress:
            executor.progress.bar, executor.progress.console = progress, console
            executor.progress.task = progress.add_task("starting", total=sum(map(step_points, steps)))
            _run_steps(executor, steps, spec)
        statuses = select(Point.status).where(Point.run_id == run_id)
        stored = executor.write(lambda s: list(s.scalars(statuses)), "summing up the run")
        status, error = final_status(stored, total_points)
    except Stopped as e:
        status, error = "partial", str(e)
    except PartRefused as e:  # a server reported another SGLang than the run's earlier parts ran
        status, error = "partial", f"this part was refused: {e}"
        raise
    except Terminated as e:
        status, error = "partial", f"terminated ({e}); stored repeats stay"
    except KeyboardInterrupt:
        status, error = "partial", "interrupted (Ctrl-C)"
        judge = False
    except dbretry.DatabaseUnavailable as e:
        # Stored repeats stay for --resume; one last try to say so on the run row.
        status, error, outage = "failed", f"DatabaseUnavailable: {e}", OutagePolicy(limit_s=0)
        raise
    except Exception as e:  # the run row says why it ended (below), then the caller sees the error too
        status, error = "failed", f"{type(e).__name__}: {e}"
        raise
    finally:
        executor.telemetry.close()
        _finish_run(executor, status, error, outage)
    run_checks.flag_throttled(executor.write, run_id, spec.measure.throttle_fraction)
    verdicts = _judge(spec, run_id, executor, console) if judge else None
    return RunOutcome(
        run_id=run_id,
        status=status,
        points_total=total_points,
        points_stored=executor.progress.points_stored,
        launches=executor.progress.launches,
        error=error,
        overhead_s_per_point=executor.progress.overhead_s_per_point,
        drift=executor.drift.result,
        correctness=verdicts,
    )


def _open_run(
    s: Session,
    *,
    spec: SweepSpec,
    sweep_yaml: str,
    provenance: dict[str, Any],
    uid: str,
    resume: int | None,
    job_id: int | None,
    trigger: str,
    label: str | None,
    part: _Part,
) -> tuple[int, dict[str, set[int]], list[str], PartState]:
    """The run to measure into with its stored repeats, a resume's notes, and this invocation's part."""
    notes: list[str] = []
    if resume is None and job_id is not None:
        # A job has one run, maybe created by a worker that took the job over since: continue it.
        resume = s.scalars(select(func.max(Run.id)).where(Run.job_id == job_id)).one_or_none()
    if resume is not None:
        run = s.get(Run, resume)
        if run is None:
            raise ResumeRefused(f"run {resume} does not exist")
        # Before the run is touched: a refused resume leaves it exactly as it was.
        check = check_resume(run.id, run.sweep_name, run.sweep_yaml, spec)
        earlier = parts.earlier_parts(s, run)
        problem = parts.sglang_conflict(run.id, earlier, part.sglang)
        if problem is not None:
            raise PartRefused(problem)
        if check.edits:
            store.adopt_sweep(run, sweep_yaml, check.edits)
        notes = check.lines(run.id)
        run.status, run.finished_at = "running", None
        run.owner = reaper.owner()  # this process runs it now (runners/host_recovery.py)
    else:
        run = s.scalars(select(Run).where(Run.uid == uid)).one_or_none() or store.create_run(
            s, spec, sweep_yaml, provenance, trigger=trigger, label=label, job_id=job_id, uid=uid
        )
        earlier = parts.earlier_parts(s, run)
    state = parts.open_part(
        s, run, earlier, part.host, part.sglang, spec.measure.part_tolerance, part.started_at
    )
    return run.id, store.stored_repeats(s, run.id), notes, state


@dataclass(frozen=True)
class _Part:
    host: PartHost
    sglang: parts.Sglang
    started_at: datetime


def _progress_bar(console: Console, show: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("points"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=not show,
    )


def _run_steps(executor: SweepExecutor, steps: list[Step], spec: SweepSpec) -> None:
    """Every step of the schedule, then the drift check if none ran it; a chain's shared server stays up."""
    held: pair_runner.Live | None = None
    try:
        for i, step in enumerate(steps):
            following = steps[i + 1] if i + 1 < len(steps) else None
            if held is not None and not (isinstance(step, Pair) and step.holds(held.config)):
                pair_runner.release(executor, held.server, held.row_id)
                held = None
            if isinstance(step, Pair):
                held = pair_runner.run_pair(
                    executor,
                    step,
                    drift_here=spec.drift_check and following is None,
                    held=held,
                    keep=shared_config(step, following),
                )
            else:
                executor.run_batch(step)
    finally:
        if held is not None:
            pair_runner.release(executor, held.server, held.row_id)
    if spec.drift_check and executor.drift.result is None:
        run_checks.drift_check(executor)


def _finish_run(executor: SweepExecutor, status: str, error: str | None, outage: OutagePolicy) -> None:
    """The run's final status and its part's end; a database still away leaves it `running`."""
    drift = executor.drift.result.as_json() if executor.drift.result is not None else None

    def finish(s: Session) -> None:
        run = s.get_one(Run, executor.run_id)
        run.overhead_s = executor.progress.overhead_s
        run.status, run.error, run.finished_at = status, error, utcnow()
        parts.finish_part(s, executor.parts.row_id, status, drift)

    try:
        dbretry.in_session(executor.engine, finish, what="finishing the run", policy=outage)
    except dbretry.DatabaseUnavailable:
        if outage.limit_s > 0:
            raise


def _judge(spec: SweepSpec, run_id: int, executor: SweepExecutor, console: Console) -> GateSummary | None:
    """The run's correctness verdicts onto its points; a failure here costs the verdicts, never the run."""
    try:
        return correctness.gate(spec, run_id, executor.write, say=lambda m: console.print(m, markup=False))
    except dbretry.DatabaseUnavailable:
        console.print(
            "[yellow]correctness: the database went away; judge the run later with `specbench gate`[/]"
        )
    except Exception as e:  # reported; the measured run stays as it is
        console.print(f"[yellow]correctness: the gate failed ({escape(f'{type(e).__name__}: {e}')})[/]")
    return None
