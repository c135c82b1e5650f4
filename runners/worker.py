"""The worker loop: register, claim a job this host's GPUs can run, execute its sweep, report, repeat.

A heartbeat thread keeps the worker row fresh and renews the job's lease. If the renewal fails, the job is no
longer ours (canceled, or our lease lapsed and another worker took it), so the executor is told to stop after
the current point. SIGTERM/SIGINT set the same stop: the executor finishes and stores the current point and
stops its server, then the job is released to the queue (or marked done if that was the last point).

A retried job resumes the run its first attempt created, so repeats already stored are skipped.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine

from bench.sweep import SweepError, SweepSpec, parse_sweep
from runners import queue
from runners.gpus import Gpu

log = logging.getLogger("specbench.worker")


class Outcome(Protocol):
    run_id: int
    status: str  # done | partial | failed
    points_total: int
    points_stored: int
    error: str | None


Executor = Callable[..., Outcome]


def default_executor() -> Executor:
    from runners.sweep_runner import execute_sweep  # heavy imports; only a worker that runs jobs needs them

    return execute_sweep


@dataclass
class WorkerOptions:
    gpus: Sequence[Gpu] = ()
    labels: Sequence[str] = ()
    lease_s: float = 60.0
    poll_s: float = 5.0
    once: bool = False
    backoff: queue.Backoff = field(default_factory=queue.Backoff)
    log_dir: Path | None = None
    show_progress: bool = False

    @property
    def heartbeat_s(self) -> float:
        # Three beats per lease: one lost beat (a slow database, a GC pause) never costs the job.
        return max(self.lease_s / 3.0, 0.05)


class QueueWorker:
    def __init__(self, engine: Engine, options: WorkerOptions, executor: Executor | None = None) -> None:
        self.engine = engine
        self.options = options
        self.executor = executor
        self.id = queue.new_worker_id(os.getpid(), secrets.token_hex(3))
        self.shutdown = threading.Event()
        self._lock = threading.Lock()
        self._job: queue.ClaimedJob | None = None
        self._job_stop: threading.Event | None = None
        self._lost: str | None = None
        self._last_renewal = time.monotonic()
        self._beat_thread: threading.Thread | None = None
        self._beat_stop = threading.Event()
        self.jobs_done = 0

    # --- signals ----------------------------------------------------------------------------------------

    def request_stop(self, reason: str = "SIGTERM") -> None:
        """Safe from a signal handler: only sets events."""
        if not self.shutdown.is_set():
            log.info("worker %s: %s received, stopping after the current point", self.id, reason)
        self.shutdown.set()
        with self._lock:
            if self._job_stop is not None:
                self._job_stop.set()

    # --- main loop --------------------------------------------------------------------------------------

    def run(self) -> int:
        opts = self.options
        queue.register_worker(self.engine, self.id, pid=os.getpid(), gpus=opts.gpus, labels=opts.labels)
        gpu_text = ", ".join(f"{g.index}:{g.name}" for g in opts.gpus) or "none"
        log.info(
            "worker %s registered (gpus: %s; labels: %s)", self.id, gpu_text, ",".join(opts.labels) or "-"
        )
        self._beat_thread = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._beat_thread.start()
        try:
            while not self.shutdown.is_set():
                queue.requeue_expired(self.engine, backoff=opts.backoff)
                job = queue.claim(self.engine, self.id, opts.gpus, labels=opts.labels, lease_s=opts.lease_s)
                if job is None:
                    if opts.once:
                        next_at = queue.has_claimable(self.engine, opts.gpus, opts.labels)
                        if next_at is None:
                            log.info("worker %s: queue empty, exiting (--once)", self.id)
                            break
                    self.shutdown.wait(opts.poll_s)
                    continue
                self._run_job(job)
        finally:
            self.shutdown.set()
            self._beat_stop.set()
            if self._beat_thread is not None:
                self._beat_thread.join(timeout=5)
            queue.deregister_worker(self.engine, self.id)
            log.info("worker %s stopped after %d job(s)", self.id, self.jobs_done)
        return 0

    def _run_job(self, job: queue.ClaimedJob) -> None:
        log.info("job %d claimed by %s (attempt %d/%d)", job.id, self.id, job.attempts, job.max_attempts)
        stop = threading.Event()
        with self._lock:
            self._job, self._job_stop, self._lost = job, stop, None
            self._last_renewal = time.monotonic()
        if self.shutdown.is_set():  # SIGTERM between claim and here: hand it straight back
            stop.set()
        try:
            self._execute(job, stop)
        finally:
            with self._lock:
                self._job, self._job_stop = None, None
            queue.worker_heartbeat(self.engine, self.id, status="idle", job_id=None)

    def _execute(self, job: queue.ClaimedJob, stop: threading.Event) -> None:
        opts = self.options
        try:
            spec = parse_sweep(job.sweep_yaml, f"job {job.id}")
        except SweepError as e:  # validated at submit; a schema change since then cannot be fixed by retrying
            queue.fail(self.engine, job.id, self.id, str(e), retry=False)
            log.error("job %d failed: payload is not a valid sweep", job.id)
            return
        if not queue.start(self.engine, job.id, self.id, lease_s=opts.lease_s):
            log.warning("job %d: no longer ours before it started", job.id)
            return
        queue.worker_heartbeat(self.engine, self.id, status="busy", job_id=job.id)
        resume = queue.run_for_job(self.engine, job.id)
        if stop.is_set():
            queue.release(self.engine, job.id, self.id, "worker shut down before starting")
            log.info("job %d released before starting", job.id)
            return
        log.info(
            "job %d running sweep %s%s", job.id, spec.name, f" (resuming run {resume})" if resume else ""
        )
        try:
            outcome = self._call_executor(spec, job, resume, stop)
        except Exception as e:  # the executor marked its run failed; the job decides about retrying
            self._after_failure(job, f"{type(e).__name__}: {e}")
            return
        queue.set_run(self.engine, job.id, outcome.run_id)
        self._report(job, outcome, stop)

    def _call_executor(
        self, spec: SweepSpec, job: queue.ClaimedJob, resume: int | None, stop: threading.Event
    ) -> Outcome:
        opts = self.options
        executor = self.executor or default_executor()
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
        if outcome.status == "done":
            if queue.finish(self.engine, job.id, self.id, run_id=outcome.run_id):
                self.jobs_done += 1
                log.info("job %d done (%s)", job.id, summary)
            else:
                log.warning("job %d finished but was no longer ours (%s)", job.id, summary)
        elif stop.is_set() and self.shutdown.is_set():
            if queue.release(self.engine, job.id, self.id):
                log.info("job %d released to the queue (%s)", job.id, summary)
        else:
            self._after_failure(job, outcome.error or f"run ended {outcome.status}")

    def _after_failure(self, job: queue.ClaimedJob, error: str) -> None:
        if self._lost is not None:
            log.warning("job %d: %s; its error was: %s", job.id, self._lost, error)
            return
        if self.shutdown.is_set():
            # A point interrupted by our own shutdown is not the job's fault.
            queue.release(self.engine, job.id, self.id, f"worker shut down ({error})")
            log.info("job %d released after: %s", job.id, error)
            return
        status = queue.fail(self.engine, job.id, self.id, error, backoff=self.options.backoff)
        if status == queue.QUEUED:
            log.warning("job %d attempt %d failed, will retry: %s", job.id, job.attempts, error)
        else:
            log.error("job %d failed for good after %d attempt(s): %s", job.id, job.attempts, error)

    # --- heartbeat --------------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        # Runs until the main loop has left its last job, so a SIGTERM'd job keeps its lease while the
        # current point finishes.
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
        except Exception as e:  # the database may come back; the lease tells us when it is too late
            log.warning("heartbeat failed: %s: %s", type(e).__name__, e)
            if job is not None and time.monotonic() - self._last_renewal > opts.lease_s:
                self._lose(job, stop, "lease could not be renewed in time")

    def _lose(self, job: queue.ClaimedJob, stop: threading.Event | None, why: str) -> None:
        with self._lock:
            if self._job is job and self._lost is None:
                self._lost = why
                log.warning("job %d: %s; stopping after the current point", job.id, why)
                if stop is not None:
                    stop.set()


def install_signal_handlers(worker: QueueWorker) -> None:
    import signal

    def handler(signum: int, _frame: Any) -> None:
        worker.request_stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
