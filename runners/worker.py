"""The worker loop: register, claim a job this host's GPUs can run, execute its sweep, report, repeat.

A heartbeat renews the worker row and the job's lease; a lost lease (canceled, taken over) or SIGTERM/SIGINT
stops the executor after the current point. A retried job resumes its first attempt's run; a failed attempt
is retried with backoff unless it cannot succeed (no interpreter, SGLang or model here; analysis.jobs).
A job is data, checked against the host policy (bench/host/policy.py) before anything runs. Database outages
are waited out up to the limit (runners/dbretry.py), then the worker exits 2 (docs/reference/reliability.md).
"""

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine

from analysis.jobs import cannot_succeed, failure_cause
from bench.host import reaper
from bench.host.policy import HostPolicy
from bench.sweep import SweepError, SweepSpec, parse_sweep
from bench.workload import workload_file_problem
from db import queue_queries
from runners import dbretry, queue
from runners.exit_codes import ExitCode
from runners.gpus import Gpu
from runners.preflight import PreflightError
from runners.recovery import OutagePolicy, RecoveryPolicy

log = logging.getLogger("specbench.worker")


# Run statuses that finish a job; any other one fails the attempt (retried while attempts remain).
SUCCESS = ("done", "unstable")


class Outcome(Protocol):
    run_id: int
    status: str  # done | unstable | partial | failed
    points_total: int
    points_stored: int
    error: str | None


Executor = Callable[..., Outcome]


@dataclass
class WorkerOptions:
    gpus: Sequence[Gpu] = ()
    labels: Sequence[str] = ()
    lease_s: float = 60.0
    poll_s: float = 5.0
    once: bool = False
    backoff: queue.Backoff = field(default_factory=queue.Backoff)  # before a failed attempt is retried
    recovery: RecoveryPolicy = field(default_factory=RecoveryPolicy)  # requeue of dead workers' jobs, outages
    log_dir: Path | None = None
    show_progress: bool = False
    # What this host lets a job use: always confined, by default to ids and the worker's own interpreter.
    policy: HostPolicy = field(default_factory=HostPolicy.worker)

    @property
    def heartbeat_s(self) -> float:
        # Three beats per lease: one lost beat (a slow database, a GC pause) never costs the job.
        return max(self.lease_s / 3.0, 0.05)


class QueueWorker:
    def __init__(self, engine: Engine, options: WorkerOptions, executor: Executor | None = None) -> None:
        self.engine, self.options, self.executor = engine, options, executor
        self.id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.shutdown = threading.Event()
        self._lock = threading.Lock()
        self._job: queue.ClaimedJob | None = None
        self._job_stop: threading.Event | None = None
        self._lost: str | None = None
        self._last_renewal = time.monotonic()
        self._beat_thread: threading.Thread | None = None
        self._beat_stop = threading.Event()
        self.jobs_done = 0
        # Queued jobs this worker cannot run, as last logged (logged again only when the list changes).
        self._waiting: list[tuple[int, str, str]] = []

    def request_stop(self, reason: str = "SIGTERM") -> None:
        """Safe from a signal handler: only sets events."""
        if not self.shutdown.is_set():
            log.info("worker %s: %s received, stopping after the current point", self.id, reason)
        self.shutdown.set()
        with self._lock:
            if self._job_stop is not None:
                self._job_stop.set()

    def _db(self, fn: Callable[[], Any], what: str, *, stop: threading.Event | None = None) -> Any:
        return dbretry.retry(fn, what=what, policy=self.options.recovery.outage, stop=stop)

    def run(self) -> int:
        opts = self.options
        # Servers a killed predecessor on this host left behind (its watchdogs normally took them down).
        for pgid in reaper.reap_orphans():
            log.warning("worker %s: stopped server process group %d left by a dead launcher", self.id, pgid)
        try:
            self._db(
                lambda: queue.register_worker(
                    self.engine,
                    self.id,
                    pid=os.getpid(),
                    gpus=opts.gpus,
                    labels=opts.labels,
                    offers=opts.policy.offered(),
                ),
                "registering the worker",
                stop=self.shutdown,
            )
        except dbretry.DatabaseUnavailable as e:
            log.error("worker %s: %s; exiting", self.id, e)
            return ExitCode.ERROR
        gpu_text = ", ".join(f"{g.index}:{g.name}" for g in opts.gpus) or "none"
        offers = opts.policy.offered()
        log.info(
            "worker %s registered (gpus: %s; labels: %s)", self.id, gpu_text, ",".join(opts.labels) or "-"
        )
        self._beat_thread = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._beat_thread.start()
        code: int = ExitCode.OK
        try:
            while not self.shutdown.is_set():
                try:
                    job = self._db(self._next_job, "claiming a job", stop=self.shutdown)
                except dbretry.DatabaseUnavailable as e:
                    if not self.shutdown.is_set():
                        log.error("worker %s: %s; exiting", self.id, e)
                        code = ExitCode.ERROR
                    break
                if job is None:
                    self._say_why_jobs_wait()
                    if opts.once and self._db(
                        lambda: queue.has_claimable(self.engine, opts.gpus, opts.labels, offers) is None,
                        "looking at the queue",
                    ):
                        waiting = (
                            f" ({len(self._waiting)} job(s) left for other workers)" if self._waiting else ""
                        )
                        log.info(
                            "worker %s: no job this worker can run, exiting (--once)%s", self.id, waiting
                        )
                        break
                    self.shutdown.wait(opts.poll_s)
                    continue
                self._run_job(job)
        finally:
            self.shutdown.set()
            self._beat_stop.set()
            if self._beat_thread is not None:
                self._beat_thread.join(timeout=5)
            try:  # a short wait only: the row goes stale by itself (heartbeat age) if the database is away
                dbretry.retry(
                    lambda: queue.deregister_worker(self.engine, self.id),
                    what="deregistering",
                    policy=OutagePolicy(limit_s=min(10.0, opts.recovery.outage.limit_s)),
                )
            except dbretry.DatabaseUnavailable as e:
                log.warning("worker %s: not deregistered: %s", self.id, e)
            log.info("worker %s stopped after %d job(s)", self.id, self.jobs_done)
        return code

    def _say_why_jobs_wait(self) -> None:
        """Log, once per change, queued jobs this worker can never run and why ("needs 8 GPU(s), has 1")."""
        opts = self.options
        try:
            waiting = self._db(
                lambda: queue.unclaimable(self.engine, opts.gpus, opts.labels, opts.policy.offered()),
                "looking at the queue",
            )
        except dbretry.DatabaseUnavailable:
            return
        if waiting != self._waiting:
            this = f"{len(opts.gpus)} GPU(s)" + (f", labels {','.join(opts.labels)}" if opts.labels else "")
            for job_id, name, why in waiting[:10]:
                waits = f"job {job_id} ({name}) waits for another worker: {why} (this worker: {this})"
                log.info("worker %s: %s", self.id, waits)
            if len(waiting) > 10:
                log.info("worker %s: and %d more job(s) it cannot run", self.id, len(waiting) - 10)
        self._waiting = waiting

    def _next_job(self) -> queue.ClaimedJob | None:
        o = self.options
        queue.requeue_expired(self.engine, policy=o.recovery)
        return queue.claim(
            self.engine, self.id, o.gpus, labels=o.labels, offers=o.policy.offered(), lease_s=o.lease_s
        )

    def _run_job(self, job: queue.ClaimedJob) -> None:
        expiries = f"; {job.lease_expiries} earlier lease expiries" if job.lease_expiries else ""
        attempt = f"attempt {job.attempts}/{job.max_attempts}"
        log.info("job %d claimed by %s (%s)%s", job.id, self.id, attempt, expiries)
        stop = threading.Event()
        with self._lock:
            self._job, self._job_stop, self._lost = job, stop, None
            self._last_renewal = time.monotonic()
        if self.shutdown.is_set():  # SIGTERM between claim and here: hand it straight back
            stop.set()
        try:
            self._execute(job, stop)
        except dbretry.DatabaseUnavailable as e:
            # Measured repeats are stored; the lease lapses, requeueing the job uncounted once the db is back.
            log.error("job %d: %s; leaving it to its lease", job.id, e)
        finally:
            with self._lock:
                self._job, self._job_stop = None, None
            # If the database stays away, the heartbeat thread reports the worker's state once it is back.
            with contextlib.suppress(dbretry.DatabaseUnavailable):
                self._db(
                    lambda: queue.worker_heartbeat(self.engine, self.id, status="idle", job_id=None),
                    "heartbeat",
                    stop=self.shutdown,
                )

    def _execute(self, job: queue.ClaimedJob, stop: threading.Event) -> None:
        opts = self.options
        try:
            spec = parse_sweep(job.sweep_yaml, f"job {job.id}")
        except SweepError as e:  # validated at submit; a schema change since then cannot be fixed by retrying
            self._give_up(job, str(e), "failed: payload is not a valid sweep")
            return
        refusal = self._refusal(spec)
        if refusal is not None:
            # Nothing ran. Failed for good: the submitter fixes the sweep (jobs submitted today reach only
            # workers offering what they name, so this is mostly a job stored without those checks).
            self._give_up(job, refusal, f"refused: {refusal}")
            return
        if not self._db(lambda: queue.start(self.engine, job.id, self.id, lease_s=opts.lease_s), "starting"):
            log.warning("job %d: no longer ours before it started", job.id)
            return
        self._db(
            lambda: queue.worker_heartbeat(self.engine, self.id, status="busy", job_id=job.id), "heartbeat"
        )
        resume = self._db(lambda: queue.run_for_job(self.engine, job.id), "finding the job's run")
        if stop.is_set():
            self._release(job, "worker shut down before starting")
            log.info("job %d released before starting", job.id)
            return
        log.info(
            "job %d running sweep %s%s", job.id, spec.name, f" (resuming run {resume})" if resume else ""
        )
        try:
            outcome = self._call_executor(spec, job, resume, stop)
        except dbretry.DatabaseUnavailable:
            raise
        except PreflightError as e:  # no interpreter, SGLang or model here: another attempt would fail alike
            self._give_up(job, f"{e} (not retried: every attempt would fail the same way)")
            return
        except Exception as e:  # the executor marked its run failed; the job decides about retrying
            self._after_failure(job, f"{type(e).__name__}: {e}")
            return
        self._db(lambda: queue.set_run(self.engine, job.id, outcome.run_id), "recording the job's run")
        self._report(job, outcome, stop)

    def _refusal(self, spec: SweepSpec) -> str | None:
        """Why this worker will not run `spec` (its host policy, its workload files), or None."""
        problems = self.options.policy.problems(spec) or [
            f"workload.path: {p}"
            for w in spec.workloads
            if w.path is not None and (p := workload_file_problem(w.path))
        ]
        if not problems:
            return None
        return f"refused by worker {self.id}, nothing ran: " + "; ".join(problems)

    def _call_executor(
        self, spec: SweepSpec, job: queue.ClaimedJob, resume: int | None, stop: threading.Event
    ) -> Outcome:
        from runners.sweep_runner import execute_sweep  # heavy: only a worker that runs a job needs it

        opts = self.options
        executor = self.executor or execute_sweep
        kwargs: dict[str, Any] = {
            "trigger": job.trigger,
            "label": job.label,
            "job_id": job.id,
            "resume_run_id": resume,
            # The server sees exactly these GPUs (CUDA_VISIBLE_DEVICES); None lets it see the host's.
            "gpus": [g.index for g in opts.gpus] or None,
            "stop": stop,
            "log_dir": opts.log_dir,
            "show_progress": opts.show_progress,
            "outage": opts.recovery.outage,
            "policy": opts.policy,
        }
        return executor(spec, job.sweep_yaml, self.engine, **kwargs)

    def _report(self, job: queue.ClaimedJob, outcome: Outcome, stop: threading.Event) -> None:
        lost = self._lost
        summary = (
            f"run {outcome.run_id}: {outcome.status}, {outcome.points_stored}/{outcome.points_total} points"
        )
        if lost is not None:
            log.warning("job %d: %s; left as is (%s)", job.id, lost, summary)
            return
        if outcome.status in SUCCESS:
            if self._db(
                lambda: queue.finish(self.engine, job.id, self.id, run_id=outcome.run_id), "finishing a job"
            ):
                self.jobs_done += 1
                log.info("job %d done (%s)", job.id, summary)
            else:
                log.warning("job %d finished but was no longer ours (%s)", job.id, summary)
        elif stop.is_set() and self.shutdown.is_set():
            if self._release(job):
                log.info("job %d released to the queue (%s)", job.id, summary)
        else:
            error = outcome.error or f"run ended {outcome.status}"
            failures = self._db(
                lambda: queue_queries.run_failures(self.engine, outcome.run_id), "reading why"
            )
            cause = failure_cause(failures)
            if cause:  # what the Overview says of the run's points, on the job
                error = f"{error}: {cause}"
            if cannot_succeed(failures) and not stop.is_set():
                self._give_up(job, f"{error} (not retried: another attempt would fail the same way)")
                return
            self._after_failure(job, error)

    def _release(self, job: queue.ClaimedJob, reason: str = "worker shut down") -> bool:
        """Hand `job` back to the queue, the attempt not counted (our shutdown is not the job's fault)."""
        return bool(self._db(lambda: queue.release(self.engine, job.id, self.id, reason), "releasing a job"))

    def _give_up(self, job: queue.ClaimedJob, error: str, logged: str | None = None) -> None:
        """Fail `job` without a retry (no attempt could succeed); the log says `logged`, by default why."""
        self._db(
            lambda: queue.fail_attempt(self.engine, job.id, self.id, error, retry=False), "failing a job"
        )
        log.error("job %d %s", job.id, logged or f"failed for good: {error}")

    def _after_failure(self, job: queue.ClaimedJob, error: str) -> None:
        if self._lost is not None:
            log.warning("job %d: %s; its error was: %s", job.id, self._lost, error)
            return
        if self.shutdown.is_set():
            # A point interrupted by our own shutdown is not the job's fault.
            self._release(job, f"worker shut down ({error})")
            log.info("job %d released after: %s", job.id, error)
            return
        status = self._db(
            lambda: queue.fail_attempt(self.engine, job.id, self.id, error, backoff=self.options.backoff),
            "failing a job",
        )
        if status == queue.QUEUED:
            log.warning("job %d attempt %d failed, will retry: %s", job.id, job.attempts, error)
        else:
            log.error("job %d failed for good after %d attempt(s): %s", job.id, job.attempts, error)

    def _heartbeat_loop(self) -> None:
        """Runs until the main loop left its last job: a SIGTERM'd job keeps its lease to finish its point."""
        while not self._beat_stop.wait(self.options.heartbeat_s):
            self._beat()

    def _beat(self) -> None:
        opts = self.options
        with self._lock:
            job, stop = self._job, self._job_stop
        try:
            queue.worker_heartbeat(
                self.engine, self.id, status="busy" if job else "idle", job_id=job.id if job else None
            )
            if job is None:
                return
            if queue.renew_lease(self.engine, job.id, self.id, lease_s=opts.lease_s):
                self._last_renewal = time.monotonic()
                return
            self._lose(job, stop, "job is no longer ours (canceled, or its lease was taken over)")
        except Exception as e:
            # Keep measuring (the executor waits to write); the first renewal after the outage says if the job
            # is still ours, and a taker's writes are idempotent per repeat, so nothing is doubled.
            if dbretry.is_transient(e):
                away = time.monotonic() - self._last_renewal
                log.warning("heartbeat: database unavailable for %.0f s: %s", away, type(e).__name__)
            else:
                log.warning("heartbeat failed: %s: %s", type(e).__name__, e)

    def _lose(self, job: queue.ClaimedJob, stop: threading.Event | None, why: str) -> None:
        with self._lock:
            if self._job is job and self._lost is None:
                self._lost = why
                log.warning("job %d: %s; stopping after the current point", job.id, why)
                if stop is not None:
                    stop.set()


def install_signal_handlers(worker: QueueWorker) -> None:
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: worker.request_stop(signal.Signals(signum).name))
