"""The spine end to end: sweep file -> launched stand-in servers over loopback HTTP -> every point in SQL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

from analysis.export import collect, document, read_csv_rows
from bench.sweep import expand, parse_sweep
from db.engine import session_scope
from db.migrate import open_database
from db.models import Point, RequestRow, Run, Sample, ServerInstance
from runners.cli import app
from runners.steps import launch_batches
from runners.sweep_runner import execute_sweep
from tests.fixtures.db import sqlite_only
from tests.fixtures.runs import FinishedRun, finished_run
from tests.fixtures.sim import DEFAULT_MODEL
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # whole sweeps on live stand-in servers: scheduled first (tests/conftest.py)
# TINY's run, its export and resumes, a stop and its resume, and a failure's rollback run on both databases; how
# the executor orders starts, what a failed start, a crash or a deadline leaves, on SQLite (`sqlite_only`).

REPO = REPO_ROOT
# A finished run: `unstable` when a repeat's p99 TTFT strays (a busy test machine does that to the stand-in).
FINISHED = ("done", "unstable")

TINY = """
name: tiny
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {time_scale: 0.05, seed: 3}
grid: {batch_sizes: [1, 4], spec_modes: [v1, v2], steps: [1, 3], topk: [1], baseline: true}
workload: {input_len: 32, output_len: 24}
repeats: 2
"""


def _run(text: str, engine: Engine, tmp_path: Path, **kw: Any) -> Any:
    spec = parse_sweep(text)
    return execute_sweep(spec, text, engine, log_dir=tmp_path / "logs", show_progress=False, **kw)


def _count(engine: Engine, model: Any, *where: Any) -> int:
    with session_scope(engine) as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


# The points of TINY as each database stored them, by backend: `tiny_run` keeps them before a test resumes it.
TINY_ROWS: dict[str, list[tuple[Any, ...]]] = {}


@pytest.fixture(scope="module")
def tiny_run(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FinishedRun]:
    """TINY run once per database (5 stand-in servers, 20 windows); the tests below read it, and the two that
    resume it come after those that only read it."""
    with finished_run(module_db_url, TINY, tmp_path_factory.mktemp("tiny")) as run:
        TINY_ROWS[run.engine.dialect.name] = _identity(run.engine)
        yield run


def test_sweep_stores_every_point_with_resolved_config(tiny_run: FinishedRun) -> None:
    engine, out = tiny_run.engine, tiny_run.outcome
    assert out.status in FINISHED
    # baseline + {v1, v2} x {1, 3} steps: one launch per distinct server config
    assert out.launches == 5
    assert _count(engine, ServerInstance) == 5
    assert _count(engine, Point) == 10
    assert _count(engine, Sample) == 20
    with session_scope(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.simulated and run.gpu_name == "none" and run.gpu_count == 0
        assert run.sglang_version == "0.5.13.post1"  # what the (stand-in) server reported
        assert run.specbench_version
        points = list(s.scalars(select(Point)))
        assert {p.status for p in points} <= {"ok", "unstable"}, [(p.status, p.reason) for p in points]
        for p in points:
            assert p.repeats == 2
            assert p.output_throughput and p.output_throughput > 0
            assert p.spec_mode_resolved == p.spec_mode
            if p.algorithm is None:
                assert p.accept_length is None
            else:
                assert 1.0 < p.accept_length <= p.steps + 1
        servers = list(s.scalars(select(ServerInstance)))
        assert all(si.resolved.get("attention_backend") == "flashmla" for si in servers)
        assert all(si.resolved.get("page_size") == 64 for si in servers)
        assert {si.spec_mode_resolved for si in servers} == {None, "v1", "v2"}
        assert all(si.status == "stopped" and si.log_path and Path(si.log_path).exists() for si in servers)
        n_requests = s.scalar(select(func.count()).select_from(RequestRow))
        assert n_requests == sum(p.num_prompts * 2 for p in points)
        req = s.scalars(select(RequestRow)).first()
        assert req is not None and req.completion_tokens == 24 and len(req.chunk_times) >= 1
    assert not _probe_children()  # the host-speed probe (bench/host/cpu_probe.py) ended with the run


def _probe_children() -> list[psutil.Process]:
    out = []
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any("cpu_probe" in part for part in proc.cmdline()):
                out.append(proc)
    return out


def test_launch_batches_start_the_first_server_alone() -> None:
    groups = expand(parse_sweep(TINY))
    assert [len(b) for b in launch_batches(groups, 1)] == [1, 1, 1, 1, 1]
    assert [len(b) for b in launch_batches(groups, 3)] == [1, 3, 1]
    assert [g for b in launch_batches(groups, 3) for g in b] == groups


@sqlite_only
def test_parallel_starts_measure_one_server_at_a_time(engine: Engine, tmp_path: Path) -> None:
    text = TINY.replace(
        "attention_backend: flashmla", "attention_backend: flashmla\n  max_parallel_starts: 3"
    )
    text += "measure: {paired: false}\n"  # paired v1/v2 servers start one after the other by design
    out = _run(text, engine, tmp_path)
    assert out.status in FINISHED and out.launches == 5
    with session_scope(engine) as s:
        servers = list(s.scalars(select(ServerInstance).order_by(ServerInstance.id)))
        assert [si.env["specbench.co_resident_idle_servers"] for si in servers] == ["0", "2", "1", "0", "0"]
        assert {p.status for p in s.scalars(select(Point))} <= {"ok", "unstable"}
        # every sample's window lies inside its own server's lifetime: nothing measured two servers at once
        assert all(si.status == "stopped" for si in servers)


@sqlite_only
def test_a_passed_deadline_launches_nothing_and_leaves_the_run_partial(
    engine: Engine, tmp_path: Path
) -> None:
    out = _run(TINY, engine, tmp_path, deadline=time.monotonic())
    assert out.status == "partial" and "deadline" in (out.error or "")
    assert out.launches == 0 and _count(engine, Sample) == 0


def test_stop_mid_sweep_leaves_a_partial_run_that_resumes_without_duplicates(
    engine: Engine, tmp_path: Path
) -> None:
    # Stop as soon as the first repeat is stored: the runner finishes the point in hand and ends there.
    # Tied to the store, not to the clock, so a fast or a slow machine gives the same shape.
    stop = threading.Event()

    def stop_after_first_sample() -> None:
        while not stop.is_set():
            if _count(engine, Sample) >= 1:
                stop.set()
            time.sleep(0.005)

    watcher = threading.Thread(target=stop_after_first_sample, daemon=True)
    watcher.start()
    partial = _run(TINY, engine, tmp_path, stop=stop)
    stop.set()
    watcher.join()
    assert partial.status == "partial"
    stored = _count(engine, Sample)
    assert 0 < stored < 20
    done = _run(TINY, engine, tmp_path, resume_run_id=partial.run_id)
    assert done.status in FINISHED
    assert _count(engine, Sample) == 20
    with session_scope(engine) as s:
        run = s.get(Run, partial.run_id)
        assert run is not None and run.status in FINISHED
        # one sample per (point, repeat): the resumed run measured only what was missing
        keys = [(smp.point_id, smp.repeat) for smp in s.scalars(select(Sample))]
        assert len(keys) == len(set(keys)) == 20
    assert _count(engine, Point) == 10


@sqlite_only
def test_mode_mismatch_is_never_reported_as_requested_mode(engine: Engine, tmp_path: Path) -> None:
    # 0.5.12 silently falls back to v1 when topk > 1 (contract §1.4); fa3 allows topk 2.
    text = """
name: fallback
model: sim-tiny
server: {backend: sim, attention_backend: fa3, sim: {version: "0.5.12", time_scale: 0.05}}
grid: {batch_sizes: [2], spec_modes: [v2], steps: [2], topk: [2], draft_tokens: [4], baseline: false}
workload: {input_len: 16, output_len: 16}
repeats: 1
"""
    _run(text, engine, tmp_path)
    with session_scope(engine) as s:
        p = s.scalars(select(Point)).one()
        assert p.status == "mode_mismatch"
        assert p.spec_mode == "v2" and p.spec_mode_resolved == "v1"
        assert "v1" in (p.reason or "")
        assert collect(s).rows == []  # the default export shows ok points only
        assert len(collect(s, all_status=True).rows) == 1


@sqlite_only
def test_crash_and_stall_give_failed_points_and_the_sweep_goes_on(engine: Engine, tmp_path: Path) -> None:
    crash = """
name: faults
model: sim-tiny
server: {backend: sim, sim: {time_scale: 0.05, fault: "crash_after=3"}}
grid: {batch_sizes: [2], spec_modes: [v2], steps: [2], baseline: true}
workload: {input_len: 16, output_len: 16, num_prompts: 4}
repeats: 2
"""
    out = _run(crash, engine, tmp_path)
    assert out.launches == 2  # the crash of the first server did not stop the sweep
    assert out.status == "failed" and "no point measured" in (out.error or "")
    with session_scope(engine) as s:
        points = list(s.scalars(select(Point)))
        assert len(points) == 2
        assert all(p.status == "failed" for p in points), [(p.status, p.reason) for p in points]
        assert all(p.reason for p in points)

    stall = crash.replace("crash_after=3", "stall_after=3").replace("name: faults", "name: stall")
    stall += "request_timeout_s: 1.0\n"
    _run(stall, engine, tmp_path)
    with session_scope(engine) as s:
        points = list(s.scalars(select(Point).join(Run).where(Run.sweep_name == "stall")))
        assert {p.status for p in points} <= {"invalid", "failed"}
        assert any("stall" in (p.reason or "") for p in points), [p.reason for p in points]


@sqlite_only
def test_server_that_cannot_start_fails_its_points_with_the_log(engine: Engine, tmp_path: Path) -> None:
    # The stand-in refuses an unknown attention backend like SGLang does; the other config still runs.
    text = """
name: badstart
model: sim-tiny
server: {backend: sim, attention_backend: no-such-backend, sim: {time_scale: 0.05}}
grid: {batch_sizes: [1], spec_modes: [v2], steps: [1], baseline: false}
workload: {input_len: 8, output_len: 8}
repeats: 1
"""
    out = _run(text, engine, tmp_path)
    assert out.status == "failed"  # its only point has no measurement
    with session_scope(engine) as s:
        si = s.scalars(select(ServerInstance)).one()
        assert si.status == "failed" and si.error
        p = s.scalars(select(Point)).one()
        assert p.status == "failed" and "server failed to start" in (p.reason or "")


@sqlite_only
def test_external_server_is_measured_not_launched(engine: Engine, tmp_path: Path, sim_server: Any) -> None:
    sim = sim_server.start(
        "--speculative-algorithm",
        "NEXTN",
        "--attention-backend",
        "flashmla",
        env={"SPECBENCH_SIM_TIME_SCALE": "0.05"},
    )
    # The sweep's model must be what the server runs: the fixture's default model path.
    text = f"""
name: ext
model: {DEFAULT_MODEL}
server: {{backend: external, base_url: "{sim.base_url}"}}
grid: {{batch_sizes: [1, 2], spec_modes: [v2], steps: [3], baseline: false}}
workload: {{input_len: 8, output_len: 8}}
repeats: 1
"""
    # An external server is measured with the GPU's 10 s windows by default; this run needs no such length.
    assert parse_sweep(text).min_window_s == 10.0
    _run(text + "measure: {min_window_s: 0.5}\n", engine, tmp_path)
    with session_scope(engine) as s:
        si = s.scalars(select(ServerInstance)).one()
        assert si.resolved["speculative_algorithm"] == "EAGLE"  # NEXTN is an alias
        assert si.argv == []  # nothing launched
        points = list(s.scalars(select(Point)))
        assert len(points) == 2 and {p.status for p in points} <= {"ok", "unstable"}
        assert all(p.spec_mode_resolved == "v2" for p in points)
    assert sim.proc.poll() is None  # specbench did not stop someone else's server


def test_csv_export_round_trips(tiny_run: FinishedRun) -> None:
    engine = tiny_run.engine
    with session_scope(engine) as s:
        text = document(collect(s)).text("csv")
    assert text.startswith("# run 1")
    assert "#   simulated: True" in text
    rows = read_csv_rows(text)
    with session_scope(engine) as s:
        # a loaded CI box can make a sub-millisecond TTFT p99 spike 10x: such points are `unstable`, not exported
        n_ok = s.scalar(select(func.count()).select_from(Point).where(Point.status == "ok"))
    assert n_ok and len(rows) == n_ok
    for col in (
        "run_id",
        "status",
        "batch_size",
        "algorithm",
        "steps",
        "topk",
        "draft_tokens",
        "spec_mode",
        "spec_mode_resolved",
        "server_instance",
        "output_throughput",
        "accept_length",
        "accept_length_weighted",
        "ttft_p50_ms",
        "tpot_p50_ms",
        "itl_p50_ms",
        "e2e_p50_ms",
        "repeats",
    ):
        assert col in rows[0]
    assert {r["status"] for r in rows} == {"ok"}
    # Every cell is the stored value of the point it names (floats at 6 significant digits).
    with session_scope(engine) as s:
        for r in rows:
            point = s.get(Point, int(r["point_id"]))
            assert point is not None and point.status == "ok"
            assert int(r["server_instance"]) == point.server_instance_id
            assert int(r["batch_size"]) == point.batch_size
            for col in ("spec_mode", "steps"):  # NULL (a baseline point) is an empty cell
                stored = getattr(point, col)
                assert r[col] == ("" if stored is None else str(stored))
            assert float(r["output_throughput"]) == pytest.approx(point.output_throughput, rel=1e-5)
            assert float(r["ttft_p50_ms"]) == pytest.approx(point.ttft_p50_ms, rel=1e-5)


def _identity(engine: Engine) -> list[tuple[Any, ...]]:
    with session_scope(engine) as s:
        return [
            (
                p.point_key,
                p.fingerprint,
                p.status,
                p.algorithm,
                p.steps,
                p.topk,
                p.draft_tokens,
                p.spec_mode,
                p.spec_mode_resolved,
                p.batch_size,
                p.repeats,
                p.completed,
                p.total_output_tokens,
                p.num_prompts,
            )
            for p in s.scalars(select(Point).order_by(Point.point_key))
        ]


@pytest.mark.postgres
def test_same_sweep_same_rows_in_sqlite_and_postgres(sqlite_url: str, pg_url: str, tmp_path: Path) -> None:
    # The two runs of TINY that `tiny_run` made (pytest runs its tests first); a database without one, as when
    # this test runs alone, gets a run of its own.
    for backend, url in (("sqlite", sqlite_url), ("postgresql", pg_url)):
        if backend not in TINY_ROWS:
            eng = open_database(url)
            _run(TINY, eng, tmp_path)
            TINY_ROWS[backend] = _identity(eng)
            eng.dispose()
    rows = [TINY_ROWS["sqlite"], TINY_ROWS["postgresql"]]
    assert rows[0] == rows[1]
    assert len(rows[0]) == 10


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_leaves_the_database_consistent(tmp_path: Path) -> None:
    sweep = tmp_path / "slow.yaml"
    # Long enough (50 repeats, about 20 s on a quiet host) that the interrupt lands mid-run even when this
    # poll sees the third sample late on a busy CI host (the 20-repeat run once finished before it).
    sweep.write_text(
        TINY.replace("time_scale: 0.05", "time_scale: 0.5")
        .replace("name: tiny", "name: slow")
        .replace("repeats: 2", "repeats: 5")
    )
    url = f"sqlite:///{tmp_path / 'c.db'}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runners.cli",
            "run",
            str(sweep),
            "--db",
            url,
            "--log-dir",
            str(tmp_path / "l"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # Ctrl-C as a terminal delivers it: a test suite started in the background (`make test &`) runs with
        # SIGINT ignored, which the child would inherit, and Python then never raises KeyboardInterrupt.
        preexec_fn=_default_sigint,
    )
    eng = open_database(url)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _count(eng, Sample) < 3:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out.decode(errors="replace")  # partial: no full answer
    with session_scope(eng) as s:
        run = s.scalars(select(Run)).one()
        assert run.status == "partial" and "interrupted" in (run.error or "")
        for sample in s.scalars(select(Sample)):
            assert len(sample.requests) == sample.point.num_prompts  # no half-written repeat
    stored = _count(eng, Sample)
    # The resume needs no signal of its own: in-process, without a second interpreter's start-up.
    done = CliRunner().invoke(
        app, ["run", str(sweep), "--db", url, "--resume", "--no-progress", "--log-dir", str(tmp_path / "l")]
    )
    assert done.exit_code == 0, done.output
    assert _count(eng, Sample) == 50 > stored
    eng.dispose()


def test_an_unexpected_error_marks_the_run_failed_and_propagates(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runners.executor import SweepExecutor

    def boom(self: Any, groups: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(SweepExecutor, "run_batch", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        _run(TINY, engine, tmp_path)
    with session_scope(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.status == "failed" and run.error == "RuntimeError: disk full"
        assert run.finished_at is not None


# The two tests below resume the shared run, so they come after every test that only reads it.
def test_resume_skips_stored_repeats(tiny_run: FinishedRun) -> None:
    engine, tmp_path, first = tiny_run.engine, tiny_run.tmp_path, tiny_run.outcome
    again = _run(TINY, engine, tmp_path, resume_run_id=first.run_id)
    assert again.status in FINISHED and again.launches == 0
    assert _count(engine, Sample) == 20


def test_a_resumed_run_checks_drift_against_its_own_first_window(tiny_run: FinishedRun) -> None:
    engine, tmp_path, first = tiny_run.engine, tiny_run.tmp_path, tiny_run.outcome
    with session_scope(engine) as s:  # the first point measured loses all but its first repeat
        head = s.scalars(select(Sample).where(Sample.order_index == 0)).one()
        for later in s.scalars(select(Sample).where(Sample.point_id == head.point_id, Sample.repeat > 0)):
            s.delete(later)
    kept = _count(engine, Sample)
    again = _run(TINY, engine, tmp_path, resume_run_id=first.run_id)
    assert again.status in FINISHED and _count(engine, Sample) == 20
    with session_scope(engine) as s:
        run = s.get(Run, first.run_id)
        assert run is not None and run.drift is not None
        # The resumed invocation measured that point first, so it is the reference; its repeat 0 ran on the
        # first invocation's server (on a GPU, perhaps a lost host): the drift is against this invocation's.
        assert run.drift["point_key"] == s.get(Point, head.point_id).point_key  # type: ignore[union-attr]
        assert run.drift["first"]["repeat"] > 0 and run.drift["first"]["order_index"] >= kept
