"""The worker loop in-process, with a stand-in executor: what it does with each way a run can end."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, insert, select, update

from db.models import Job, Run
from runners import queue
from runners.worker import QueueWorker, WorkerOptions
from tests.queue_support import sim_sweep

FAST = WorkerOptions(lease_s=0.6, poll_s=0.02, once=True, backoff=queue.Backoff(base_s=0.0))


@dataclass
class Outcome:
    run_id: int
    status: str
    points_total: int = 1
    points_stored: int = 1
    error: str | None = None


def make_run(engine: Engine, job_id: int) -> int:
    with engine.begin() as conn:
        return int(
            conn.execute(
                insert(Run)
                .values(
                    sweep_name="w", sweep_yaml="", sweep_hash="h", trigger="manual", backend="sim",
                    status="running", job_id=job_id, model="m", gpu_name="none", gpu_count=0,
                    simulated=True, provenance={}, uid=f"u{job_id}-{time.monotonic_ns()}",
                )
                .returning(Run.id)
            ).scalar_one()
        )  # fmt: skip


class Recorder:
    """An executor that records its calls and does what `script` says for each attempt."""

    def __init__(self, engine: Engine, script: list[str]) -> None:
        self.engine = engine
        self.script = script
        self.calls: list[dict[str, Any]] = []

    def __call__(self, spec: Any, sweep_yaml: str, engine: Engine, **kw: Any) -> Outcome:
        self.calls.append(kw)
        action = self.script[len(self.calls) - 1]
        run_id = kw["resume_run_id"] or make_run(engine, kw["job_id"])
        if action == "raise":
            raise RuntimeError("server exploded")
        if action == "wait_stop":  # a long point: until the worker asks us to stop
            assert kw["stop"].wait(10), "stop was never set"
            return Outcome(run_id, "partial", error="stop requested")
        return Outcome(run_id, action, error="measurement failed" if action == "failed" else None)


def wait_until_executing(ex: Recorder) -> None:
    deadline = time.monotonic() + 10
    while not ex.calls:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def job(engine: Engine, job_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(select(Job.__table__).where(Job.id == job_id)).mappings().one())


def test_failures_retry_resuming_the_same_run_then_succeed(engine: Engine) -> None:
    job_id = queue.submit(engine, sim_sweep(), max_attempts=3, label="pr-7")
    ex = Recorder(engine, ["raise", "failed", "done"])
    assert QueueWorker(engine, FAST, ex).run() == 0
    j = job(engine, job_id)
    assert (j["status"], j["attempts"], j["last_error"]) == ("done", 3, "measurement failed")
    first_run = j["run_id"]
    assert [c["resume_run_id"] for c in ex.calls] == [None, first_run, first_run]
    assert {c["label"] for c in ex.calls} == {"pr-7"} and {c["job_id"] for c in ex.calls} == {job_id}
    with engine.connect() as conn:
        assert conn.execute(select(Run.id).where(Run.job_id == job_id)).scalars().all() == [first_run]


def test_out_of_attempts_keeps_the_last_error(engine: Engine) -> None:
    job_id = queue.submit(engine, sim_sweep(), max_attempts=2)
    QueueWorker(engine, FAST, Recorder(engine, ["raise", "raise"])).run()
    j = job(engine, job_id)
    assert (j["status"], j["attempts"]) == ("failed", 2)
    assert j["last_error"] == "RuntimeError: server exploded"


def test_invalid_payload_fails_without_retry(engine: Engine) -> None:
    job_id = queue.submit(engine, sim_sweep(), max_attempts=5)
    with engine.begin() as conn:  # e.g. the sweep schema tightened between submit and claim
        conn.execute(update(Job).values(sweep_yaml="name: x\nmodel: m\ngrid: {batch_sizes: []}\n"))
    ex = Recorder(engine, [])
    QueueWorker(engine, FAST, ex).run()
    j = job(engine, job_id)
    assert (j["status"], j["attempts"]) == ("failed", 1) and "batch_sizes" in j["last_error"]
    assert ex.calls == []


def test_stop_request_releases_the_job(engine: Engine) -> None:
    job_id = queue.submit(engine, sim_sweep())
    ex = Recorder(engine, ["wait_stop"])
    worker = QueueWorker(engine, FAST, ex)
    t = threading.Thread(target=worker.run)
    t.start()
    wait_until_executing(ex)
    worker.request_stop("SIGTERM")
    t.join(10)
    j = job(engine, job_id)
    assert (j["status"], j["attempts"], j["worker_id"]) == ("queued", 0, None)
    assert j["run_id"] is not None


def test_cancel_reaches_a_running_worker_through_its_heartbeat(engine: Engine) -> None:
    job_id = queue.submit(engine, sim_sweep())
    ex = Recorder(engine, ["wait_stop"])
    worker = QueueWorker(engine, FAST, ex)
    t = threading.Thread(target=worker.run)
    t.start()
    wait_until_executing(ex)
    assert queue.cancel(engine, job_id)
    t.join(10)  # the heartbeat fails, the executor is stopped, the cancel stands
    assert not t.is_alive()
    assert job(engine, job_id)["status"] == "canceled"


def test_heartbeat_keeps_a_long_job_leased(engine: Engine) -> None:
    """A run much longer than the lease is not taken over while its worker lives."""
    job_id = queue.submit(engine, sim_sweep())

    class Slow(Recorder):
        def __call__(self, spec: Any, sweep_yaml: str, engine: Engine, **kw: Any) -> Outcome:
            run_id = make_run(engine, kw["job_id"])
            time.sleep(FAST.lease_s * 4)
            assert queue.requeue_expired(engine) == []
            return Outcome(run_id, "done")

    QueueWorker(engine, FAST, Slow(engine, [])).run()
    j = job(engine, job_id)
    assert (j["status"], j["attempts"]) == ("done", 1)
