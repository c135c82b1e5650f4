"""A run that grows across GPU hosts: every invocation is a part (host, GPU, SGLang, patch, start, end); a part
on another host first re-measures one point of the part before and stores whether they agree; only parts that
agree combine their pairs; another SGLang release or patch state is refused before anything is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, func, select, update
from typer.testing import CliRunner

from analysis import v2_vs_v1
from bench.host.gpus import Gpu
from bench.pairing import PartRecord
from bench.results import PointStatus, SampleMetrics, SampleResult
from bench.sweep import expand, parse_sweep
from db.engine import session_scope
from db.models import Point, Run, RunPart, Sample, ServerInstance
from runners import store
from runners.cli import app
from runners.parts import PartHost, PartState, host_name
from runners.sweep_runner import execute_sweep
from tests.fixtures.chain import windows

pytestmark = pytest.mark.slow  # sweeps on live stand-in servers: scheduled first (tests/conftest.py)

PAIR = """
name: parts
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {time_scale: 0.05, seed: 3, startup_s: 0.0}
grid: {batch_sizes: [1, 2], spec_modes: [v1, v2], steps: [2], accept_lengths: [2.5], baseline: false}
workload: {input_len: 32, output_len: 16, num_prompts: 8}
measure: {min_window_s: 0.15, drift_check: false}
repeats: 3
"""
H200 = PartHost("gpu-a", "NVIDIA H200", 1)
H100 = PartHost("gpu-b", "NVIDIA H100 80GB HBM3", 1)


def _run(engine: Engine, tmp: Path, host: PartHost, resume: int | None = None) -> int:
    spec = parse_sweep(PAIR)
    out = execute_sweep(spec, PAIR, engine, log_dir=tmp, show_progress=False, host=host, resume_run_id=resume)
    assert out.status in ("done", "unstable"), out
    return out.run_id


def _cut_last_pair_at_batch_2(engine: Engine) -> None:
    """Part 1 as a host lost before the last pair of batch 2: its windows were never stored."""
    with session_scope(engine) as s:
        ids = s.scalars(select(Sample.id).join(Point).where(Point.batch_size == 2, Sample.repeat == 2)).all()
        assert len(ids) == 2
        s.execute(delete(Sample).where(Sample.id.in_(ids)))
        s.execute(update(Run).values(status="partial"))


def _parts(engine: Engine) -> list[RunPart]:
    with session_scope(engine) as s:
        rows = list(s.scalars(select(RunPart).order_by(RunPart.part)))
        s.expunge_all()
    return rows


def _cells(engine: Engine, run_id: int) -> dict[int, dict[str, object]]:
    return {int(r["batch_size"]): r for r in v2_vs_v1.load(engine, run_id, profiles=False).to_dict("records")}


def test_each_invocation_is_a_part_and_parts_on_one_host_combine(engine: Engine, tmp_path: Path) -> None:
    run_id = _run(engine, tmp_path / "a", H200)
    _cut_last_pair_at_batch_2(engine)
    assert _run(engine, tmp_path / "b", H200, resume=run_id) == run_id
    parts = _parts(engine)
    assert [(p.part, p.host, p.gpu_name, p.gpu_count) for p in parts] == [
        (1, "gpu-a", "NVIDIA H200", 1),
        (2, "gpu-a", "NVIDIA H200", 1),
    ]
    assert all(p.sglang_version == "0.5.13.post1" and p.finished_at is not None for p in parts)
    assert parts[0].status == "done" and parts[1].status in ("done", "unstable")
    assert parts[1].started_at >= parts[0].finished_at  # type: ignore[operator]
    assert parts[1].check is None  # same host and GPU: nothing to check
    rows = windows(engine)
    # part 2 measured exactly the lost pair, with its own invocation, after every window of part 1
    resumed = [w for w in rows if w.invocation == parts[1].invocation]
    assert sorted((w.mode, w.batch, w.repeat) for w in resumed) == [("v1", 2, 2), ("v2", 2, 2)]
    assert parts[1].invocation > max(w.order for w in rows if w.invocation == parts[0].invocation)
    cells = _cells(engine, run_id)
    assert cells[1]["parts"] == "1"
    ok = {(w.mode, w.repeat) for w in rows if w.batch == 2 and w.status == "ok"}
    pairs = sum(("v1", r) in ok and ("v2", r) in ok for r in range(3))
    if pairs >= 2:  # a busy host can make a window unstable
        assert (cells[2]["n"], cells[2]["parts"]) == (
            pairs,
            "1+2" if ("v1", 2) in ok and ("v2", 2) in ok else "1",
        )


def test_a_part_on_another_host_rechecks_a_point_and_pairs_combine_only_when_they_agree(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    run_id = _run(engine, tmp_path / "a", H200)
    _cut_last_pair_at_batch_2(engine)
    with session_scope(engine) as s:
        before = int(s.scalar(select(func.count()).select_from(Sample)) or 0)
        servers_before = int(s.scalar(select(func.count()).select_from(ServerInstance)) or 0)
    out = execute_sweep(
        parse_sweep(PAIR),
        PAIR,
        engine,
        log_dir=tmp_path / "b",
        show_progress=False,
        host=H100,
        resume_run_id=run_id,
    )
    parts = _parts(engine)
    assert [(p.part, p.host) for p in parts] == [(1, "gpu-a"), (2, "gpu-b")]
    check = parts[1].check
    assert check is not None, "a part on another host must check against the part before"
    assert (check["against_part"], check["against_host"], check["against_gpu"]) == (
        1,
        "gpu-a",
        "1x NVIDIA H200",
    )
    assert check["tolerance"] == 0.03
    rows = windows(engine)
    earlier = [
        w.throughput
        for w in rows
        if w.invocation == parts[0].invocation
        and w.status == "ok"
        and check["label"].endswith(w.mode)
        and w.batch == check["batch_size"]
    ]
    assert check["earlier"]["windows"] == len(earlier) and check["earlier"]["min"] == min(earlier)  # type: ignore[type-var]
    now = check["now"]["output_throughput"]
    expected = check["earlier"]["min"] <= now <= check["earlier"]["max"] or abs(check["change"]) <= 0.03
    assert check["agrees"] is bool(expected)
    # The check ran on a server this part started anyway: no extra start, and its window is not stored.
    with session_scope(engine) as s:
        assert int(s.scalar(select(func.count()).select_from(Sample)) or 0) == before + 2
        assert (
            int(s.scalar(select(func.count()).select_from(ServerInstance)) or 0)
            == servers_before + out.launches
        )
    ok = {(w.mode, w.repeat) for w in rows if w.batch == 2 and w.status == "ok"}
    if not all(("v1", r) in ok and ("v2", r) in ok for r in range(3)):
        pytest.skip("a busy host made a window of batch 2 unstable: the gating below needs all three pairs")
    # The verdict decides: agreed, the cell combines part 1's two pairs with part 2's; not, part 1's alone.
    for agrees, text, n in ((True, "1+2", 3), (False, "1 (not 2)", 2)):
        with session_scope(engine) as s:
            s.execute(update(RunPart).where(RunPart.part == 2).values(check={**check, "agrees": agrees}))
        cell = _cells(engine, run_id)[2]
        assert (cell["parts"], cell["n"]) == (text, n), (agrees, cell)
    md = (
        CliRunner()
        .invoke(app, ["export", "--db", db_url, "--run", str(run_id), "--view", "v2-vs-v1", "--format", "md"])
        .stdout
    )
    assert "2 parts: gpu-a (H200×1), gpu-b (H100×1, did not agree" in md
    runs = json.loads(CliRunner().invoke(app, ["runs", "--db", db_url, "--format", "json"]).stdout)
    assert (runs[0]["parts"], runs[0]["hosts"]) == (2, "gpu-a, gpu-b")


def _state(parts: list[PartRecord], reference: dict[str, list[float]]) -> PartState:
    return PartState(
        run_id=1,
        number=2,
        row_id=0,
        invocation=40,
        host=H100,
        records=parts,
        tolerance=0.03,
        previous=parts[0],
        reference=reference,
    )


def _result(throughput: float | None, status: PointStatus = "ok") -> SampleResult:
    """A window as the check's measurement returns it."""
    metrics = (
        None
        if throughput is None
        else SampleMetrics(
            10.0, 8, 0, 0, 256, 128, 0.8, 25.6, throughput, throughput + 25.6, tpot_mean_ms=5.0
        )
    )
    reason = None if status == "ok" else "every request failed"
    return SampleResult(repeat=0, status=status, reason=reason, metrics=metrics, requests=[])


def _board(monkeypatch: pytest.MonkeyPatch, uuid: str) -> PartHost:
    """This host as a borrowed one: named `vm` like every other, with one H100 board of its own."""
    monkeypatch.setattr("runners.parts.socket.gethostname", lambda: "vm")
    monkeypatch.setattr("runners.parts.assigned_gpus", lambda gpus=None: [Gpu(0, "NVIDIA H100", "580", uuid)])
    return PartHost.here()


def test_two_hosts_of_one_name_are_told_apart_by_their_boards(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _board(monkeypatch, "GPU-5f1c2a3b-0000-1111-2222-333344445555")
    run_id = _run(engine, tmp_path / "a", first)
    _cut_last_pair_at_batch_2(engine)
    second = _board(monkeypatch, "GPU-9e8d7c6b-0000-1111-2222-333344445555")
    assert _run(engine, tmp_path / "b", second, resume=run_id) == run_id
    parts = _parts(engine)
    assert [p.host for p in parts] == ["vm (GPU-5f1c2a3b)", "vm (GPU-9e8d7c6b)"]
    assert parts[1].check is not None, "another board under the same host name must re-measure a point"
    assert parts[1].check["against_host"] == "vm (GPU-5f1c2a3b)"


def test_a_host_name_carries_its_first_board() -> None:
    assert host_name("vm", []) == "vm"  # the stand-in, or a driver that tells no board id
    assert host_name("vm", ["", ""]) == "vm"
    assert host_name("vm", ["GPU-5f1c2a3b-0000"]) == "vm (GPU-5f1c2a3b)"
    assert host_name("node7", ["GPU-5f1c2a3b-0000", "GPU-9e8d7c6b-0000"]) == "node7 (GPU-5f1c2a3b +1)"


def test_the_check_agrees_within_the_earlier_windows_or_the_tolerance() -> None:
    spec = parse_sweep(PAIR)
    plans = [p for g in expand(spec) for p in g.points]
    v1 = [p for p in plans if p.server.spec_mode == "v1"]
    earlier = [100.0, 104.0, 102.0]
    records = [PartRecord(1, 0, "gpu-a", "1x H200"), PartRecord(2, 40, "gpu-b", "1x H100")]

    def verdict(now: float | None, status: PointStatus = "ok") -> dict[str, object]:
        state = _state(records, {v1[1].key(): earlier})
        stored: list[object] = []
        found = state.check(
            v1[0].server, plans, lambda plan: _result(now, status), lambda fn, what: stored.append(what)
        )
        assert found is not None and stored and state.checked
        assert found["point_key"] == v1[1].key()  # the point the part before measured
        return found

    assert verdict(103.0)["agrees"] is True  # inside the earlier windows
    assert verdict(105.0)["agrees"] is True  # outside them, within 3% of their median (102): +2.9%
    slow = verdict(99.5)
    assert slow["agrees"] is True and slow["change"] == pytest.approx(99.5 / 102 - 1)  # -2.5%
    assert verdict(98.0)["agrees"] is False  # -3.9%
    assert verdict(106.0)["agrees"] is False  # +3.9%
    failed = verdict(None, "failed")
    assert failed["agrees"] is False and "re-measurement failed" in str(failed["error"])
    # No point of that config in the part before: no check yet (a later server's config may have one).
    state = _state(records, {v1[1].key(): earlier})
    v2 = next(p for p in plans if p.server.spec_mode == "v2")
    assert state.check(v2.server, plans, lambda plan: _result(1.0), lambda fn, what: None) is None
    assert state.check_pending
    # Until it agrees, this part's windows do not combine with part 1's; after, they do.
    assert state.combines(40) and not state.combines(0)
    state.check(v1[0].server, plans, lambda plan: _result(101.0), lambda fn, what: None)
    assert state.combines(0) and not state.check_pending


def _refused(res: object, value: str) -> None:
    """Exit 2 and one error line that names the run's SGLang (or patch) and the part that ran it."""
    assert res.exit_code == 2, res.output  # type: ignore[attr-defined]
    # Notes are not errors: every command first stops orphaned servers on this host, and under xdist another
    # test's killed launcher can leave one ("note: stopped server process group ...").
    err = res.stderr.splitlines()  # type: ignore[attr-defined]
    lines = [line for line in err if line.strip() and not line.startswith("note: ")]
    assert len(lines) == 1 and "that is another experiment" in lines[0], lines
    assert "part 1 on gpu-a" in lines[0] and value in lines[0]


def test_resuming_on_another_sglang_release_is_refused_untouched(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    sweep = tmp_path / "parts.yaml"
    sweep.write_text(PAIR)
    run_id = _run(engine, tmp_path / "a", H200)
    with session_scope(engine) as s:  # the run's first part ran on another release than this stand-in's
        s.execute(update(RunPart).values(sglang_version="0.5.12"))
        s.execute(update(Run).values(status="partial"))
    cmd = ["run", str(sweep), "--db", db_url, "--resume-run", str(run_id)]
    _refused(CliRunner().invoke(app, [*cmd, "--no-progress"]), "SGLang 0.5.12")
    _refused(CliRunner().invoke(app, [*cmd, "--dry-run"]), "SGLang 0.5.12")  # as the run would
    parts = _parts(engine)
    assert len(parts) == 1 and parts[0].status == "done"  # untouched: no new part
    with session_scope(engine) as s:
        assert s.scalars(select(Run.status)).one() == "partial"


SGLANG = """
name: patched
model: org/model
server: {backend: sglang, python: PYTHON}
grid: {batch_sizes: [1], spec_modes: [v1, v2], steps: [2]}
"""


def test_resuming_on_another_patch_state_is_refused_before_any_server_starts(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    """A GPU host's SGLang as its interpreter reports it (the launcher's own probe): the run's part 1 ran it
    unpatched, this host's carries the FlashMLA draft fix."""
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.write_text(
        '#!/bin/sh\necho \'{"sglang_patch": "flashmla-draft-decode-context (4f2a)"}\'\necho 0.5.13.post1\n'
    )
    python.chmod(0o755)
    text = SGLANG.replace("PYTHON", str(python))
    sweep = tmp_path / "patched.yaml"
    sweep.write_text(text)
    spec = parse_sweep(text)
    with session_scope(engine) as s:
        run = store.create_run(s, spec, text, {"host": "gpu-a"}, trigger="manual", label=None, job_id=None)
        run.status = "partial"
        s.add(
            RunPart(
                run_id=run.id,
                part=1,
                invocation=0,
                host="gpu-a",
                gpu_name="NVIDIA H200",
                gpu_count=1,
                sglang_version="0.5.13.post1",
                sglang_patch="none",
                status="partial",
            )
        )
        run_id = run.id
    res = CliRunner().invoke(
        app, ["run", str(sweep), "--db", db_url, "--resume-run", str(run_id), "--no-progress"]
    )
    _refused(res, "SGLang patch none")
    assert "flashmla-draft-decode-context (4f2a)" in res.output
    with session_scope(engine) as s:
        assert s.scalar(select(func.count()).select_from(ServerInstance)) == 0  # nothing started
        assert s.scalar(select(func.count()).select_from(RunPart)) == 1


def test_a_point_first_measured_on_another_gpu_belongs_to_that_gpus_series(
    engine: Engine, tmp_path: Path
) -> None:
    """The run keeps its first part's GPU; a point that part never stored is created by the part that measures
    it, in the series of that part's GPU (and with that GPU's floor)."""
    run_id = _run(engine, tmp_path / "a", H200)
    with session_scope(engine) as s:  # part 1 lost its v2 point at batch 2 entirely
        lost = s.scalars(select(Point).where(Point.batch_size == 2, Point.spec_mode == "v2")).one()
        s.delete(lost)
        s.execute(update(Run).values(status="partial"))
    _run(engine, tmp_path / "b", H100, resume=run_id)
    with session_scope(engine) as s:
        gpus = {(p.spec_mode, p.batch_size): (p.gpu_name, p.gpu_count) for p in s.scalars(select(Point))}
        assert s.scalars(select(Run.gpu_name)).one() == "none"  # the stand-in host's own: no GPU
    assert gpus.pop(("v2", 2)) == ("NVIDIA H100 80GB HBM3", 1)
    assert set(gpus.values()) == {("NVIDIA H200", 1)}
