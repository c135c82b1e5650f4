"""The job queue on both dialects: submit checks, claim semantics, guarded transitions, leases, retries."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert, select, update
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from bench.sweep import SweepError
from db.models import Job, Run, Worker
from db.types import utcnow
from runners import queue
from runners.cli import app
from runners.gpus import Gpu

SIM_SWEEP = """\
name: {name}
model: sim-tiny
server: {{backend: sim, sim: {{instant: true, startup_s: 0}}}}
grid: {{batch_sizes: [1], spec_modes: [], baseline: true}}
workload: {{input_len: 8, output_len: 4, num_prompts: 2}}
repeats: 1
"""
GPU_SWEEP = """\
name: gpu-sweep
model: /models/DeepSeek-V3
server: {backend: sglang, attention_backend: flashmla, tp: 2}
grid: {batch_sizes: [1], spec_modes: [v1]}
"""
H100 = [Gpu(0, "NVIDIA H100 80GB HBM3"), Gpu(1, "NVIDIA H100 80GB HBM3")]
NO_BACKOFF = queue.Backoff(base_s=0.0)


def sweep(name: str = "q") -> str:
    return SIM_SWEEP.format(name=name)


def job(engine: Engine, job_id: int) -> Job:
    with Session(engine) as s:
        return s.get_one(Job, job_id)


def status(engine: Engine, job_id: int) -> str:
    with engine.connect() as conn:
        return str(conn.execute(select(Job.status).where(Job.id == job_id)).scalar_one())


def test_submit_validates_the_sweep(engine: Engine) -> None:
    with pytest.raises(SweepError, match="batch_sizes"):
        queue.submit(engine, "name: bad\nmodel: m\ngrid: {batch_sizes: []}\n")
    with pytest.raises(SweepError, match="top level must be a mapping"):
        queue.submit(engine, "- rm -rf /\n")
    job_id = queue.submit(engine, sweep("ok"), label="pr-1", priority=2, max_attempts=5)
    j = job(engine, job_id)
    assert (j.status, j.sweep_name, j.label, j.priority, j.max_attempts, j.attempts) == (
        "queued",
        "ok",
        "pr-1",
        2,
        5,
        0,
    )
    assert j.requires == {}


def test_sglang_jobs_need_tp_gpus_even_unasked(engine: Engine) -> None:
    job_id = queue.submit(engine, GPU_SWEEP, requires={"gpu": "H100"})
    assert job(engine, job_id).requires == {"gpu": "H100", "count": 2}


def test_claim_order_priority_then_age(engine: Engine) -> None:
    a = queue.submit(engine, sweep("a"))
    b = queue.submit(engine, sweep("b"), priority=5)
    c = queue.submit(engine, sweep("c"))
    got = [queue.claim(engine, "w", []) for _ in range(4)]
    assert [g.id if g else None for g in got] == [b, a, c, None]
    assert all(g is None or (g.attempts == 1 and g.run_id is None) for g in got)
    assert status(engine, a) == "claimed"
    assert job(engine, a).worker_id == "w"


def test_claim_respects_requirements(engine: Engine) -> None:
    gpu_job = queue.submit(engine, GPU_SWEEP, requires={"gpu": "H100"})
    labelled = queue.submit(engine, sweep("l"), requires={"labels": ["nightly"]})
    # A GPU-less worker without labels takes neither and leaves them queued.
    assert queue.claim(engine, "cpu", []) is None
    assert queue.has_claimable(engine, []) is None
    # An H200 host does not match gpu=H100, one H100 is too few for tp=2.
    assert queue.claim(engine, "h200", [Gpu(0, "NVIDIA H200"), Gpu(1, "NVIDIA H200")]) is None
    assert queue.claim(engine, "one", H100[:1]) is None
    got = queue.claim(engine, "h100", H100)
    assert got is not None and got.id == gpu_job
    got = queue.claim(engine, "lab", [], labels=["nightly", "x"])
    assert got is not None and got.id == labelled


def test_claim_skips_unmatched_jobs_beyond_a_page(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queue, "SCAN_PAGE", 3)
    for _ in range(7):
        queue.submit(engine, GPU_SWEEP, priority=1)
    last = queue.submit(engine, sweep("cpu-ok"))
    got = queue.claim(engine, "cpu", [])
    assert got is not None and got.id == last


def test_backoff_hides_a_job_until_due(engine: Engine) -> None:
    job_id = queue.submit(engine, sweep())
    with engine.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(not_before=utcnow() + timedelta(hours=1)))
    assert queue.claim(engine, "w", []) is None
    assert queue.has_claimable(engine, []) is not None  # --once keeps waiting for it


def test_lifecycle_and_guards(engine: Engine) -> None:
    job_id = queue.submit(engine, sweep())
    got = queue.claim(engine, "w1", [], lease_s=30)
    assert got is not None
    # Only the owner can move it on, and only from the expected state.
    assert not queue.start(engine, job_id, "w2", lease_s=30)
    assert not queue.finish(engine, job_id, "w1")  # claimed, not running yet
    assert queue.start(engine, job_id, "w1", lease_s=30)
    assert not queue.start(engine, job_id, "w1", lease_s=30)
    assert queue.renew_lease(engine, job_id, "w1", lease_s=30)
    assert not queue.renew_lease(engine, job_id, "w2", lease_s=30)
    assert queue.finish(engine, job_id, "w1", run_id=None)
    assert status(engine, job_id) == "done"
    assert not queue.finish(engine, job_id, "w1")
    assert not queue.cancel(engine, job_id)
    assert queue.fail_attempt(engine, job_id, "w1", "late") is None
    assert not queue.release(engine, job_id, "w1")
    assert not queue.transition(engine, job_id, ["queued"], "claimed")


def test_generic_transition_is_guarded(engine: Engine) -> None:
    job_id = queue.submit(engine, sweep())
    assert not queue.transition(engine, job_id, ["running"], "done")
    assert queue.transition(engine, job_id, ["queued"], "canceled")
    assert status(engine, job_id) == "canceled"


def test_failure_retries_with_backoff_then_fails_keeping_the_error(engine: Engine) -> None:
    job_id = queue.submit(engine, sweep(), max_attempts=2)
    backoff = queue.Backoff(base_s=60.0)
    assert queue.claim(engine, "w", []) is not None
    assert queue.start(engine, job_id, "w", lease_s=30)
    assert queue.fail_attempt(engine, job_id, "w", "boom 1", backoff=backoff) == "queued"
    j = job(engine, job_id)
    assert j.last_error == "boom 1" and j.worker_id is None and j.attempts == 1
    assert j.not_before is not None and j.not_before > utcnow() + timedelta(seconds=50)
    assert queue.claim(engine, "w", []) is None  # still backing off
    with engine.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(not_before=None))
    assert queue.claim(engine, "w", []) is not None
    assert queue.fail_attempt(engine, job_id, "w", "boom 2", backoff=backoff) == "failed"
    j = job(engine, job_id)
    assert (j.status, j.attempts, j.last_error) == ("failed", 2, "boom 2")
    assert j.finished_at is not None


def test_backoff_doubles_and_caps() -> None:
    b = queue.Backoff(base_s=10, cap_s=35)
    assert [b.delay(n).total_seconds() for n in (1, 2, 3, 4)] == [10, 20, 35, 35]


def test_non_retryable_failure(engine: Engine) -> None:
    job_id = queue.submit(engine, sweep(), max_attempts=5)
    assert queue.claim(engine, "w", []) is not None
    assert queue.fail_attempt(engine, job_id, "w", "bad payload", retry=False) == "failed"


def test_release_does_not_use_up_an_attempt(engine: Engine) -> None:
    job_id = queue.submit(engine, sweep())
    assert queue.claim(engine, "w", []) is not None
    assert queue.start(engine, job_id, "w", lease_s=30)
    assert queue.release(engine, job_id, "w", "SIGTERM")
    j = job(engine, job_id)
    assert (j.status, j.attempts, j.worker_id, j.not_before) == ("queued", 0, None, None)
    assert j.last_error == "released: SIGTERM"
    assert queue.claim(engine, "w2", []) is not None  # at once, no backoff


def test_expired_lease_is_requeued_without_using_an_attempt(engine: Engine) -> None:
    job_id = queue.submit(engine, sweep(), max_attempts=2)
    assert queue.claim(engine, "dead", [], lease_s=30) is not None
    assert queue.requeue_expired(engine, backoff=NO_BACKOFF) == []  # lease still valid
    later = utcnow() + timedelta(seconds=31)
    assert queue.requeue_expired(engine, backoff=NO_BACKOFF, now=later) == [job_id]
    j = job(engine, job_id)
    assert j.status == "queued" and "stopped heartbeating" in (j.last_error or "")
    # A kill is not the job's failure: the attempt is given back and the expiry counted on its own.
    assert (j.attempts, j.lease_expiries) == (0, 1)
    # The dead worker cannot come back and finish what is no longer its job.
    assert not queue.renew_lease(engine, job_id, "dead", lease_s=30)
    assert queue.fail_attempt(engine, job_id, "dead", "late") is None
    with engine.begin() as conn:  # the backoff counts from the simulated `later`; skip ahead to it
        conn.execute(update(Job).where(Job.id == job_id).values(not_before=None))
    got = queue.claim(engine, "alive", [], lease_s=30)
    assert got is not None and got.attempts == 1 and got.lease_expiries == 1


def test_kills_never_exhaust_attempts_but_a_job_that_always_kills_its_worker_ends(engine: Engine) -> None:
    policy = queue.RecoveryPolicy(requeue=NO_BACKOFF, max_lease_expiries=4)
    job_id = queue.submit(engine, sweep(), max_attempts=1)
    for n in range(1, 5):
        assert queue.claim(engine, f"dead{n}", [], lease_s=1) is not None
        later = utcnow() + timedelta(seconds=2)
        assert queue.requeue_expired(engine, policy=policy, now=later) == [job_id]
        j = job(engine, job_id)
        assert (j.status, j.attempts, j.lease_expiries) == ("queued", 0, n)
        with engine.begin() as conn:
            conn.execute(update(Job).where(Job.id == job_id).values(not_before=None))
    assert queue.claim(engine, "dead5", [], lease_s=1) is not None
    assert queue.requeue_expired(engine, policy=policy, now=utcnow() + timedelta(seconds=2)) == [job_id]
    j = job(engine, job_id)
    assert j.status == "failed" and "gave up after 5 lease expiries" in (j.last_error or "")


def test_requeue_backoff_grows_with_expiries_and_is_capped(engine: Engine) -> None:
    policy = queue.RecoveryPolicy(requeue=queue.Backoff(base_s=2.0, cap_s=5.0))
    job_id = queue.submit(engine, sweep())
    waits = []
    for n in range(3):
        assert queue.claim(engine, f"w{n}", [], lease_s=1) is not None
        later = utcnow() + timedelta(seconds=2)
        assert queue.requeue_expired(engine, policy=policy, now=later) == [job_id]
        j = job(engine, job_id)
        assert j.not_before is not None
        waits.append(round((j.not_before - later).total_seconds(), 3))
        with engine.begin() as conn:
            conn.execute(update(Job).where(Job.id == job_id).values(not_before=None))
    assert waits == [2.0, 4.0, 5.0]


def test_renewed_lease_is_not_requeued(engine: Engine) -> None:
    job_id = queue.submit(engine, sweep())
    assert queue.claim(engine, "w", [], lease_s=1) is not None
    assert queue.renew_lease(engine, job_id, "w", lease_s=3600)
    assert queue.requeue_expired(engine, now=utcnow() + timedelta(seconds=5)) == []


def test_cancel_queued_and_running(engine: Engine) -> None:
    a = queue.submit(engine, sweep("a"))
    b = queue.submit(engine, sweep("b"))
    assert queue.cancel(engine, b)
    got = queue.claim(engine, "w", [])
    assert got is not None and got.id == a
    assert queue.start(engine, a, "w", lease_s=30)
    assert queue.cancel(engine, a)
    # The worker learns at its next heartbeat, and cannot overwrite the cancel.
    assert not queue.renew_lease(engine, a, "w", lease_s=30)
    assert not queue.finish(engine, a, "w")
    assert status(engine, a) == "canceled"


def test_run_of_a_job_is_found_for_the_retry(engine: Engine) -> None:
    job_id = queue.submit(engine, sweep())
    assert queue.claim(engine, "w", []) is not None
    assert queue.run_for_job(engine, job_id) is None
    with engine.begin() as conn:  # what the executor does when it creates the run
        conn.execute(
            insert(Run).values(
                sweep_name="q", sweep_yaml="", sweep_hash="h", trigger="manual", backend="sim", status="running",
                job_id=job_id, model="m", gpu_name="none", gpu_count=0, simulated=True, provenance={}, uid="u1",
            )
        )  # fmt: skip
    run_id = queue.run_for_job(engine, job_id)
    assert run_id is not None
    # The heartbeat records it on the job while the run is in progress.
    assert queue.renew_lease(engine, job_id, "w", lease_s=30)
    assert job(engine, job_id).run_id == run_id


def test_workers_register_heartbeat_and_stop(engine: Engine) -> None:
    queue.register_worker(engine, "h:1:a", pid=1, gpus=H100, labels=["x"])
    queue.worker_heartbeat(engine, "h:1:a", status="busy", job_id=7)
    with Session(engine) as s:
        w = s.get_one(Worker, "h:1:a")
    assert (w.gpu_name, w.gpu_count, w.status, w.current_job_id) == ("NVIDIA H100 80GB HBM3", 2, "busy", 7)
    assert w.last_heartbeat is not None
    queue.deregister_worker(engine, "h:1:a")
    with engine.connect() as conn:
        assert conn.execute(select(Worker.status).where(Worker.id == "h:1:a")).scalar_one() == "stopped"


def test_concurrent_claims_never_share_a_job(engine: Engine) -> None:
    """Threads with their own connections race for 40 jobs; every job goes to exactly one of them."""
    ids = {queue.submit(engine, sweep(f"c{i}")) for i in range(40)}
    won: dict[str, list[int]] = {f"w{i}": [] for i in range(6)}
    barrier = threading.Barrier(len(won))

    def grab(name: str) -> None:
        barrier.wait()
        while (got := queue.claim(engine, name, [])) is not None:
            won[name].append(got.id)

    threads = [threading.Thread(target=grab, args=(n,)) for n in won]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    claimed = [i for got in won.values() for i in got]
    assert sorted(claimed) == sorted(ids)
    with engine.connect() as conn:
        rows = conn.execute(select(Job.id, Job.worker_id, Job.attempts)).all()
    owner = {i: w for w, got in won.items() for i in got}
    assert all(owner[i] == w and a == 1 for i, w, a in rows)


def test_jobs_and_submit_verbs(sqlite_url: str, tmp_path: Path) -> None:
    cli = CliRunner()
    good = tmp_path / "good.yaml"
    good.write_text(sweep("verb"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmodel: m\ngrid: {batch_sizes: [0]}\n")
    assert cli.invoke(app, ["submit", str(bad), "--db", sqlite_url]).exit_code == 2
    assert cli.invoke(app, ["submit", str(good), "--db", sqlite_url, "--requires", "vram=80"]).exit_code == 2
    done = cli.invoke(app, ["submit", str(good), "--db", sqlite_url, "--label", "pr-1", "--priority", "3"])
    assert done.exit_code == 0 and "job 1 queued" in done.output
    listed = json.loads(cli.invoke(app, ["jobs", "--db", sqlite_url, "--format", "json"]).stdout)
    assert listed["counts"] == {"queued": 1} and listed["jobs"][0]["label"] == "pr-1"
    assert "verb" in cli.invoke(app, ["jobs", "--db", sqlite_url]).output
    assert cli.invoke(app, ["jobs", "--db", sqlite_url, "--cancel", "1"]).exit_code == 0
    assert cli.invoke(app, ["jobs", "--db", sqlite_url, "--cancel", "1"]).exit_code == 2  # no answer
    assert cli.invoke(app, ["jobs", "--db", sqlite_url, "--status", "nope"]).exit_code == 2
    canceled = json.loads(
        cli.invoke(app, ["jobs", "--db", sqlite_url, "--format", "json", "--status", "canceled"]).stdout
    )
    assert [j["id"] for j in canceled["jobs"]] == [1]


def test_an_unclaimable_job_says_why_it_waits(db_url: str, tmp_path: Path) -> None:
    """A job that needs 8 GPUs beside a GPU-less worker: `worker --once` says why it leaves it, `jobs` says
    why it waits (both on the real CLI, on SQLite and PostgreSQL)."""
    from tests.queue_support import run_cli, sim_sweep

    sweep = tmp_path / "big.yaml"
    sweep.write_text(sim_sweep("needs-eight"))
    sub = run_cli("submit", str(sweep), "--db", db_url, "--requires", "count=8")
    assert sub.returncode == 0, sub.stderr
    out = run_cli("worker", "--once", "--db", db_url, "--gpus", "", "--poll-interval", "0.05")
    assert out.returncode == 0, out.stderr
    assert (
        "job 1 (needs-eight) waits for another worker: needs 8 GPU(s), has 0 (this worker: 0 GPU(s))"
        in out.stderr
    )
    assert "no job this worker can run, exiting (--once) (1 job(s) left for other workers)" in out.stderr
    listed = run_cli("jobs", "--db", db_url)
    assert " why" in listed.stdout and "no worker is running" in listed.stdout, listed.stdout
    doc = json.loads(run_cli("jobs", "--db", db_url, "--format", "json").stdout)
    assert doc["jobs"][0]["waits"].startswith("no worker is running")


def test_why_a_job_waits_reads_the_workers() -> None:
    from datetime import UTC, datetime, timedelta

    from analysis.jobs import why_waiting

    now = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    small = {"gpu_name": "NVIDIA H100", "gpu_count": 1, "labels": [], "state": "idle", "current_job_id": None}
    big = {**small, "gpu_count": 8}
    assert why_waiting({"count": 8}, None, [small], now) == (
        "no live worker can run it: needs 8 GPU(s), has 1 (the largest has 1 GPU(s))"
    )
    assert why_waiting({"count": 8}, None, [small, big], now) == ""
    assert why_waiting({"count": 8}, None, [{**big, "current_job_id": 3}], now).startswith("waits for a free")
    assert why_waiting({}, None, [{**big, "state": "lost"}], now).startswith("no worker is running")
    assert why_waiting({}, now + timedelta(seconds=30), [big], now) == "retry backoff until 12:00:30 UTC"
    assert why_waiting({"labels": ["fast"]}, None, [big], now).endswith(
        "needs worker label(s) fast (the largest has 8 GPU(s))"
    )
