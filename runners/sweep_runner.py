"""Executes a sweep: one launch per server config, every repeat stored the moment it is measured.

The runner owns the order of work and the mapping to rows; `bench` measures, `db` stores. A crash, Ctrl-C,
SIGTERM (`stop`) or a passed `deadline` leaves every finished repeat in the database and the run marked
`partial`, so `--resume` (or a retried job) continues where it stopped.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from sqlalchemy import Engine, select

from bench.client import LoadClient
from bench.launcher import LaunchedServer, LaunchError, launch
from bench.measure import Window, measure_windows
from bench.pairing import Pair
from bench.provenance import collect_provenance
from bench.sweep import PointPlan, ServerConfig, ServerGroup, SweepSpec, expand
from bench.telemetry import TelemetrySource
from bench.workload import build_prompts
from db.models import Point, Run, ServerInstance
from db.types import utcnow, uuid7
from runners import dbretry, pair_runner, profiling, run_checks, store
from runners.recovery import OutagePolicy


@dataclass
class RunOutcome:
    run_id: int
    status: str  # done | unstable | partial | failed (see final_status)
    points_total: int
    points_stored: int
    launches: int = 0
    error: str | None = None
    overhead_s_per_point: float | None = None
    drift: dict[str, Any] | None = None


def launch_batches(groups: list[ServerGroup], max_parallel: int) -> list[list[ServerGroup]]:
    """Groups in launch batches. With parallel starts the first server starts alone: it pays the cold JIT
    compile and fills the caches (Triton, flashinfer, inductor) that the servers started together then reuse."""
    if max_parallel <= 1 or len(groups) <= 1:
        return [[g] for g in groups]
    rest = groups[1:]
    return [groups[:1], *(rest[i : i + max_parallel] for i in range(0, len(rest), max_parallel))]


class _Stopped(Exception):
    """The deadline passed or a stop was requested; finish cleanly."""


def final_status(point_statuses: list[str], points_total: int) -> tuple[str, str | None]:
    """The truth about a run that went through every point: `done` when every point is ok, `unstable` when the
    others are only unstable (measured, but noisy), `failed` when no point was measured (none ok or
    unstable), else `partial`; with the error that says why."""
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
) -> RunOutcome:
    """Run `spec`, storing every repeat as measured. Database outages shorter than `outage.limit_s` are waited
    out (each measured repeat is held until it is written); a longer one ends the run with
    dbretry.DatabaseUnavailable."""
    console = console or Console(stderr=True)
    outage = outage or OutagePolicy.from_env()
    groups = expand(spec)
    provenance = _provenance(spec, gpus=gpus)
    uid = uuid7()  # names the run before it exists, so a create retried after a lost commit finds it

    def open_run(s: Any) -> tuple[int, dict[str, set[int]]]:
        if resume_run_id is not None:
            run = s.get(Run, resume_run_id)
            if run is None:
                raise ValueError(f"run {resume_run_id} does not exist")
            if run.sweep_name != spec.name:
                raise ValueError(
                    f"run {resume_run_id} belongs to sweep {run.sweep_name!r}, not {spec.name!r}"
                )
            run.status = "running"
            run.finished_at = None
        else:
            run = s.scalars(select(Run).where(Run.uid == uid)).one_or_none() or store.create_run(
                s, spec, sweep_yaml, provenance, trigger=trigger, label=label, job_id=job_id, uid=uid
            )
        return run.id, store.stored_repeats(s, run.id)

    run_id, done = dbretry.in_session(engine, open_run, what="opening the run", policy=outage)
    logs = (log_dir or Path("logs")) / f"run-{run_id}"
    logs.mkdir(parents=True, exist_ok=True)
    executor = _Executor(spec, engine, run_id, done, gpus, deadline, stop, logs, outage)
    total_points = sum(len(g.points) for g in groups)
    status, error = "done", None
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("points"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=not show_progress,
        transient=False,
    )
    try:
        with progress:
            task = progress.add_task("starting", total=total_points)
            executor.progress, executor.task = progress, task
            steps = pair_runner.schedule(groups, spec)
            for i, step in enumerate(steps):
                # The last pair re-measures the reference point on its still-running server when it holds it.
                executor.drift_due_here = spec.measure.drift_check and i == len(steps) - 1
                if isinstance(step, Pair):
                    pair_runner.run_pair(executor, step)
                else:
                    executor.run_batch(step)
            if spec.measure.drift_check and executor.drift is None:
                run_checks.drift_check(executor)
        status, error = dbretry.in_session(
            engine,
            lambda s: final_status(
                list(s.scalars(select(Point.status).where(Point.run_id == run_id))), total_points
            ),
            what="summing up the run",
            policy=outage,
        )
    except _Stopped as e:
        status, error = "partial", str(e)
    except KeyboardInterrupt:
        status, error = "partial", "interrupted (Ctrl-C)"
    except dbretry.DatabaseUnavailable as e:
        # Nothing measured is lost: stored repeats stay, the rest is measured again by --resume (or the
        # job's retry). One last try to say so on the run row; the database is most likely still away.
        status, error, outage = "failed", f"DatabaseUnavailable: {e}", OutagePolicy(limit_s=0)
        raise
    except Exception as e:  # the run row says why it ended (below), then the caller sees the error too
        status, error = "failed", f"{type(e).__name__}: {e}"
        raise
    finally:

        def finish(s: Any) -> None:
            run = s.get(Run, run_id)
            assert run is not None
            run.overhead_s = executor.overhead_total
            store.finish_run(s, run, status, error)

        try:
            dbretry.in_session(engine, finish, what="finishing the run", policy=outage)
        except dbretry.DatabaseUnavailable:
            if outage.limit_s > 0:
                raise
            # Still away: the run row stays `running` until a resume or the job's retry takes it over.
    run_checks.flag_throttled(executor, spec.measure.throttle_fraction)
    stored = executor.points_stored
    return RunOutcome(
        run_id=run_id,
        status=status,
        points_total=total_points,
        points_stored=stored,
        launches=executor.launches,
        error=error,
        overhead_s_per_point=(executor.overhead_total / executor.points_measured)
        if executor.points_measured
        else None,
        drift=executor.drift,
    )


class _Executor:
    def __init__(
        self,
        spec: SweepSpec,
        engine: Engine,
        run_id: int,
        done: dict[str, set[int]],
        gpus: list[int] | None,
        deadline: float | None,
        stop: threading.Event | None,
        log_dir: Path,
        outage: OutagePolicy,
    ) -> None:
        self.spec, self.engine, self.run_id, self.done = spec, engine, run_id, done
        self.outage = outage
        self.gpus, self.deadline, self.stop, self.log_dir = gpus, deadline, stop, log_dir
        self.progress: Progress | None = None
        self.task: Any = None
        self.launches = 0
        self.points_stored = 0
        self.points_measured = 0
        self.overhead_total = 0.0
        # Measurement order across the run (stored per repeat); continues after a resume.
        self.order_index = sum(len(v) for v in done.values())
        # The first point measured in this invocation: re-measured at the end (drift check).
        self.reference: PointPlan | None = None
        self.drift: dict[str, Any] | None = None
        self.drift_due_here = False  # set while the run's last step runs (see run_checks.drift_check)
        # A pair's second server could not start next to the first: later pairs use alternating restarts.
        self.colocate_failed = False
        self.telemetry = TelemetrySource(gpus, enabled=spec.server.backend != "external")

    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise _Stopped("stop requested (SIGTERM); finished the current point")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _Stopped("deadline reached; finished the current point")

    def _advance(self, description: str | None = None) -> None:
        if self.progress is not None:
            self.progress.update(self.task, advance=1, description=description or "")

    def _pending(self, plan: PointPlan) -> list[int]:
        have = self.done.get(plan.key(), set())
        return [r for r in range(plan.repeats) if r not in have]

    def run_batch(self, groups: list[ServerGroup]) -> None:
        """Start the servers of `groups` together, then measure them one at a time.

        With `server.max_parallel_starts` = 1 (the default) a batch is one group. Larger batches overlap the
        slow part (cold JIT and CUDA-graph capture) while every measurement still runs with no other server
        taking requests; the others sit idle, holding memory, and each is stopped as soon as it is measured.
        """
        pending: list[tuple[ServerGroup, list[PointPlan]]] = []
        for group in groups:
            todo = [p for p in group.points if self._pending(p)]
            for _ in range(len(group.points) - len(todo)):
                self._advance()
            if todo:
                pending.append((group, todo))
        if not pending:
            return
        self._check_stop()
        if self.progress is not None:
            names = ", ".join(g.server.label() for g, _ in pending)
            self.progress.update(self.task, description=f"launching {names}")
        self.launches += len(pending)
        with ThreadPoolExecutor(max_workers=len(pending)) as pool:
            futures = [pool.submit(self._start, g.server) for g, _ in pending]
            started = [f.result() for f in futures]
        try:
            for i, ((group, todo), server) in enumerate(zip(pending, started, strict=True)):
                if isinstance(server, LaunchError):
                    self._record_launch_failure(group, todo, server)
                    continue
                try:
                    self._measure_on(group, todo, server, co_resident=len(pending) - 1 - i)
                finally:
                    server.stop()
        finally:
            for server in started:  # a stop or Ctrl-C mid-batch must not leave idle servers behind
                if isinstance(server, LaunchedServer):
                    server.stop()

    def _start(self, cfg: ServerConfig) -> LaunchedServer | LaunchError:
        try:
            return launch(self.spec.server, cfg, log_dir=self.log_dir, gpus=self.gpus)
        except LaunchError as e:
            return e

    def _write(self, fn: Any, what: str) -> Any:
        """One transaction, retried through a database outage (a measured repeat waits in memory meanwhile)."""
        return dbretry.in_session(self.engine, fn, what=what, policy=self.outage)

    def _record_launch_failure(self, group: ServerGroup, todo: list[PointPlan], err: LaunchError) -> None:
        def write(s: Any) -> None:
            run = s.get(Run, self.run_id)
            assert run is not None
            si = store.record_server(
                s, run, group.server, status="failed", error=str(err), log_path=_str_or_none(err.log_path)
            )
            si.exit_code, si.log_tail = err.exit_code, err.log_tail or None
            for plan in todo:
                store.fail_point(s, run, plan, si.id, f"server failed to start: {_first_line(str(err))}")

        self._write(write, "recording a failed launch")
        for _ in todo:
            self._advance()

    def _measure_on(
        self, group: ServerGroup, todo: list[PointPlan], server: LaunchedServer, co_resident: int
    ) -> None:
        si_id = self._record_server(group.server, server, co_resident)
        try:
            asyncio.run(self._measure_group(todo, server, si_id, group.server.label()))
        finally:
            self.server_ended(si_id, server)

    def server_ended(self, si_id: int, server: LaunchedServer) -> None:
        """Close the server's row: `stopped`, or `crashed` with its exit code and log tail."""
        # Read before stop(): an exit code now means the server died under us, not by our teardown.
        exit_code = server.exit_code

        def close(s: Any) -> None:
            si = s.get(ServerInstance, si_id)
            if si is None or si.status != "ok":
                return
            si.stopped_at = utcnow()
            if exit_code is None:
                si.status = "stopped"
                return
            # The log file stays on this host; the database keeps what a reader elsewhere needs.
            si.status, si.exit_code, si.log_tail = "crashed", exit_code, server.log_tail()
            si.error = f"server exited with code {exit_code} while it was measured"

        self._write(close, "recording the server's end")

    def _record_server(self, cfg: ServerConfig, server: LaunchedServer, co_resident: int) -> int:
        def write(s: Any) -> int:
            run = s.get(Run, self.run_id)
            assert run is not None
            if run.provenance.get("server_version") is None:
                # The server may run another sglang than the local one (external, or another interpreter).
                prov = _provenance(self.spec, server.server_info, self.gpus)
                prov["server_version"] = server.version
                store.apply_provenance(run, prov)
            si = store.record_server(
                s,
                run,
                cfg,
                argv=list(server.argv),
                env=dict(server.env_delta),
                resolved=server.server_info,
                spec_mode_resolved=server.spec_mode_resolved,
                spec_mode_detail=server.resolved.detail if server.resolved else None,
                mismatches=list(server.mismatches),
                version=server.version,
                log_path=str(server.log_path) if server.log_path else None,
                startup_s=server.startup_s,
            )
            # Idle servers sharing the GPU while this one was measured (max_parallel_starts > 1).
            si.env = {**si.env, "specbench.co_resident_idle_servers": str(co_resident)}
            return int(si.id)

        return int(self._write(write, "recording the server"))

    async def _measure_group(
        self, todo: list[PointPlan], server: LaunchedServer, si_id: int, label: str
    ) -> None:
        async with LoadClient(server.base_url) as client:
            for plan in todo:
                self._check_stop()
                if self.progress is not None:
                    self.progress.update(self.task, description=f"{label} bs={plan.batch_size}")
                await self.measure_plan(client, plan, server, si_id, self._pending(plan), warmup=True)
                await profiling.profile_point(self.engine, self.spec, plan, client, self.run_id, si_id)
                self.points_stored += 1
                self._advance()

    async def measure_plan(
        self,
        client: LoadClient,
        plan: PointPlan,
        server: LaunchedServer,
        si_id: int,
        repeats: list[int],
        *,
        warmup: bool,
    ) -> None:
        """Measure `repeats` of `plan` on `server` (warming up first if asked), storing each as it ends."""
        if not repeats:
            return
        prompts = build_prompts(plan.workload, plan.num_prompts)
        t_point = time.perf_counter()
        window = 0.0
        async for sample, win in measure_windows(
            client,
            prompts=prompts,
            batch_size=plan.batch_size,
            repeats=repeats,
            warmup_waves=self.spec.warmup.waves if warmup else 0,
            request_timeout_s=self.spec.request_timeout_s,
            expect_spec=not plan.server.is_baseline,
            temperature=plan.workload.temperature,
            min_window_s=self.spec.min_window_s,
            expected_accept_length=plan.server.expected_accept_length(),
            accept_tolerance=self.spec.measure.accept_length_tolerance,
            telemetry=self.telemetry.window,
            launch_mismatches=server.mismatches,
        ):
            if sample.metrics is not None:
                window += sample.metrics.duration_s
            self._store(plan, sample, si_id, server.spec_mode_resolved, win)
            if self.reference is None and sample.metrics is not None:
                self.reference = plan
        if warmup:
            self.points_measured += 1
        self.overhead_total += max(time.perf_counter() - t_point - window, 0.0)

    def _store(
        self, plan: PointPlan, sample: Any, si_id: int, spec_mode_resolved: str | None, window: Window
    ) -> None:
        """One repeat as one transaction (sample, requests, point refresh), idempotent on (point, repeat): a
        retry after a connection lost mid-commit finds the repeat stored and adds nothing."""
        order = self.order_index
        self.order_index += 1

        def write(s: Any) -> None:
            run = s.get(Run, self.run_id)
            assert run is not None
            point = store.get_or_create_point(s, run, plan, si_id)
            store.store_sample(
                s, point, sample, spec_mode_resolved=spec_mode_resolved, window=window, order_index=order
            )

        self._write(write, f"storing {plan.key()} repeat {sample.repeat}")
        if sample.status != "failed":
            self.done.setdefault(plan.key(), set()).add(sample.repeat)


def _provenance(
    spec: SweepSpec, server_info: dict[str, Any] | None = None, gpus: list[int] | None = None
) -> dict[str, Any]:
    prov = collect_provenance(model_path=spec.model, server_info=server_info, gpus=gpus)
    if spec.server.backend == "sim":
        prov["simulated"] = True
    return prov


def _str_or_none(v: object) -> str | None:
    return None if v is None else str(v)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
