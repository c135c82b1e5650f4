"""A run is resumed only by the sweep it started from (runners/resume_guard.py), and `specbench runs --yaml`
gives that sweep back: real stand-in runs in a real SQLite file, through the CLI a user types."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner, Result

from bench.sweep import parse_sweep
from db.engine import session_scope
from db.migrate import open_database
from db.models import Point, Run, Sample, ServerInstance
from runners.cli import app
from runners.sweep_runner import execute_sweep

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first

# Stored as the run's provenance; the comment's non-ASCII and the missing final newline must survive
# `runs --yaml` byte for byte.
SWEEP = """# resumable: a stand-in sweep (ratio ≥ 1 expected)
name: resumable
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {time_scale: 0.05, seed: 3, instant: true}
grid: {batch_sizes: [1, 2], spec_modes: [v2], steps: [2], topk: [1], baseline: false}
workload: {input_len: 16, output_len: 8}
measure: {min_window_s: 0.1}
repeats: 2"""
REPEATS = 4  # 2 points x 2 repeats

# The same sweep in other words: comments, block style, another key order, a default spelled out.
REWORDED = """# edited by hand since the run started: formatting only
name: resumable
model: sim-tiny
repeats: 2
server:
  attention_backend: flashmla   # the default, written out
  backend: sim
  sim:
    time_scale: 0.05
    seed: 3
    instant: true
grid:
  batch_sizes: [1, 2]
  spec_modes: [v2]
  steps: [2]
  topk: [1]
  baseline: false
workload: {output_len: 8, input_len: 16}
measure:
  min_window_s: 0.10
"""


@pytest.fixture
def restore_signals() -> Iterator[None]:
    """`specbench run` installs a SIGTERM handler; give pytest its own back."""
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)


@pytest.fixture
def cut_run(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, Engine, int]]:
    """A run whose last repeat is missing, as a deadline or a lost host leaves it: a resume has one repeat
    to measure. (url, engine, run id)."""
    engine = open_database(sqlite_url)
    out = execute_sweep(parse_sweep(SWEEP), SWEEP, engine, log_dir=tmp_path / "first", show_progress=False)
    with session_scope(engine) as s:
        last = s.scalars(select(Sample).order_by(Sample.order_index.desc()).limit(1)).one()
        s.delete(last)
        run = s.get(Run, out.run_id)
        assert run is not None
        run.status = "partial"
    yield sqlite_url, engine, out.run_id
    engine.dispose()


def _count(engine: Engine, model: type) -> int:
    with session_scope(engine) as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def _run_cli(sweep: Path, url: str, tmp_path: Path, *extra: str) -> Result:
    args = ["run", str(sweep), "--db", url, "--no-progress", "--log-dir", str(tmp_path / "logs"), *extra]
    return CliRunner().invoke(app, args)


def _words(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines to the console's width


def test_a_resume_with_changed_measurement_settings_is_refused_and_stores_nothing(
    cut_run: tuple[str, Engine, int], tmp_path: Path, restore_signals: None
) -> None:
    url, engine, run_id = cut_run
    changed = tmp_path / "changed.yaml"
    changed.write_text(
        SWEEP.replace("min_window_s: 0.1", "min_window_s: 0.05").replace("repeats: 2", "repeats: 3")
    )
    before = {m: _count(engine, m) for m in (Sample, Point, ServerInstance)}
    assert before[Sample] == REPEATS - 1
    for how in (["--resume"], ["--resume-run", str(run_id)]):
        res = _run_cli(changed, url, tmp_path, *how)
        assert res.exit_code == 2, res.output
        assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)
        err = _words(res.stderr)
        assert f"error: run {run_id} started from a different sweep" in err
        assert "measure.min_window_s: 0.1 -> 0.05" in err and "repeats: 2 -> 3" in err
        assert f"specbench runs --yaml {run_id} > sweep.yaml" in err and "start a new run" in err
    assert {m: _count(engine, m) for m in (Sample, Point, ServerInstance)} == before
    with session_scope(engine) as s:
        run = s.get(Run, run_id)
        assert run is not None and run.status == "partial" and run.sweep_yaml == SWEEP  # left as it was
    # The dry run resolves the same run and refuses the same way, before its estimate.
    dry = CliRunner().invoke(app, ["run", str(changed), "--db", url, "--dry-run", "--resume"])
    assert dry.exit_code == 2 and "Traceback" not in dry.output
    assert "measure.min_window_s: 0.1 -> 0.05" in _words(dry.stderr) and "estimated time" not in dry.stdout


def test_resume_after_a_finished_run_of_an_edited_sweep_starts_a_new_run(
    sqlite_url: str, tmp_path: Path, restore_signals: None
) -> None:
    """`--resume` in a script (make demo, gpu_evidence.sh) after the sweep gained a batch size: the latest run
    is done, so there is nothing of its own procedure to finish; a new run measures the edited sweep. An
    explicit --resume-run of that run is still refused."""
    engine = open_database(sqlite_url)
    first = execute_sweep(parse_sweep(SWEEP), SWEEP, engine, log_dir=tmp_path / "first", show_progress=False)
    with session_scope(engine) as s:
        run = s.get(Run, first.run_id)
        assert run is not None
        run.status = "done"  # finished (the stand-in may call a tiny run unstable)
    edited = tmp_path / "edited.yaml"
    edited.write_text(SWEEP.replace("batch_sizes: [1, 2]", "batch_sizes: [1, 2, 4]"))
    dry = CliRunner().invoke(app, ["run", str(edited), "--db", sqlite_url, "--dry-run", "--resume"])
    assert dry.exit_code == 0, dry.output
    assert f"(#{first.run_id}) is done, from another version of the sweep" in _words(dry.stderr)
    res = _run_cli(edited, sqlite_url, tmp_path, "--resume")
    assert res.exit_code == 0, res.output
    assert "is done, from another version of the sweep; starting a new one" in _words(res.stderr)
    with session_scope(engine) as s:
        runs = list(s.scalars(select(Run).order_by(Run.id)))
        assert len(runs) == 2 and runs[0].id == first.run_id
        assert runs[0].sweep_yaml == SWEEP and "[1, 2, 4]" in runs[1].sweep_yaml
        assert s.scalar(select(func.count()).select_from(Point).where(Point.run_id == first.run_id)) == 2
    explicit = _run_cli(edited, sqlite_url, tmp_path, "--resume-run", str(first.run_id))
    assert explicit.exit_code == 2 and "grid.batch_sizes: [1, 2] -> [1, 2, 4]" in _words(explicit.stderr)
    engine.dispose()


def test_a_resume_of_another_sweeps_run_is_a_one_line_error(
    cut_run: tuple[str, Engine, int], tmp_path: Path, restore_signals: None
) -> None:
    url, engine, run_id = cut_run
    other = tmp_path / "other.yaml"
    other.write_text(SWEEP.replace("name: resumable", "name: another"))
    res = _run_cli(other, url, tmp_path, "--resume-run", str(run_id))
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert f"run {run_id} belongs to sweep 'resumable', not 'another'" in _words(res.stderr)
    assert _count(engine, Sample) == REPEATS - 1


def test_a_resume_with_only_comments_and_formatting_changed_proceeds(
    cut_run: tuple[str, Engine, int], tmp_path: Path, restore_signals: None
) -> None:
    url, engine, run_id = cut_run
    reworded = tmp_path / "reworded.yaml"
    reworded.write_text(REWORDED)
    res = _run_cli(reworded, url, tmp_path, "--resume")
    assert res.exit_code == 0, res.output
    assert "warning" not in res.stderr
    assert _count(engine, Sample) == REPEATS
    with session_scope(engine) as s:
        run = s.scalars(select(Run)).one()
        assert run.id == run_id and run.status in ("done", "unstable")
        assert run.sweep_yaml == SWEEP  # the run keeps the text it started from


def test_runs_yaml_prints_the_stored_sweep_byte_for_byte_and_it_resumes_the_run(
    cut_run: tuple[str, Engine, int], tmp_path: Path, restore_signals: None
) -> None:
    url, engine, run_id = cut_run
    with session_scope(engine) as s:
        uid = s.scalars(select(Run.uid)).one()
    for ref in (str(run_id), uid[:8], "latest"):
        res = CliRunner().invoke(app, ["runs", "--db", url, "--yaml", ref])
        assert res.exit_code == 0, res.output
        assert res.stdout_bytes == SWEEP.encode() and res.stderr == ""
    saved = tmp_path / "sweep.yaml"
    saved.write_bytes(res.stdout_bytes)
    assert parse_sweep(saved.read_text()) == parse_sweep(SWEEP)
    again = _run_cli(saved, url, tmp_path, "--resume-run", str(run_id))
    assert again.exit_code == 0, again.output
    assert _count(engine, Sample) == REPEATS

    for unknown in ("99", "latest~5", "zzzzzzzz"):
        bad = CliRunner().invoke(app, ["runs", "--db", url, "--yaml", unknown])
        assert bad.exit_code == 2 and bad.stdout == "" and "Traceback" not in bad.output, bad.output
        assert bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1, bad.stderr


def test_a_stored_sweep_this_version_cannot_parse_is_resumed_with_a_warning(
    cut_run: tuple[str, Engine, int], tmp_path: Path, restore_signals: None
) -> None:
    url, engine, run_id = cut_run
    with session_scope(engine) as s:  # as an older specbench with a since-removed field would have stored it
        run = s.get(Run, run_id)
        assert run is not None
        run.sweep_yaml = SWEEP + "\nlegacy_knob: 1\n"
    current = tmp_path / "current.yaml"
    current.write_text(SWEEP.replace("min_window_s: 0.1", "min_window_s: 0.05"))  # not compared: cannot be
    dry = CliRunner().invoke(app, ["run", str(current), "--db", url, "--dry-run", "--resume"])
    assert dry.exit_code == 0, dry.output
    assert "estimated time" in dry.stdout
    res = _run_cli(current, url, tmp_path, "--resume")
    assert res.exit_code == 0, res.output
    for out in (dry.stderr, res.stderr):
        warning = _words(out)
        assert f"warning: run {run_id}'s stored sweep does not parse with this specbench" in warning
        assert "legacy_knob" in warning and "without checking" in warning
    assert _count(engine, Sample) == REPEATS


# A colocated v1/v2 pair whose interval can never be that narrow: it grows to measure.max_repeats.
PAIRED = """name: widening
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  sim: {time_scale: 0.05, seed: 3, instant: true}
grid: {batch_sizes: [1, 2], spec_modes: [v1, v2], steps: [2], topk: [1], baseline: false}
workload: {input_len: 16, output_len: 8}
measure: {min_window_s: 0.05, drift_check: false, ratio_target: 0.000000001, max_repeats: 3}
repeats: 2"""


def _repeats(engine: Engine, run_id: int) -> dict[tuple[int, str], list[int]]:
    with session_scope(engine) as s:
        rows = s.execute(
            select(Point.batch_size, Point.spec_mode, Sample.repeat).join(Point).where(Point.run_id == run_id)
        ).all()
    out: dict[tuple[int, str], list[int]] = {}
    for bs, mode, r in rows:
        out.setdefault((bs, mode), []).append(r)
    return {k: sorted(v) for k, v in out.items()}


def test_a_finished_run_resumed_with_a_wider_stopping_rule_grows_and_keeps_its_old_sweep(
    sqlite_url: str, tmp_path: Path, restore_signals: None
) -> None:
    """The stopping rule (measure.ratio_target, max_repeats, ratio_target_min_batch) decides how many pairs a
    point takes, not how a window is measured: raising max_repeats on a finished run adds pairs to it (a
    point left wide gets narrower) instead of being refused or starting over; the run stores the edited
    sweep and keeps the replaced one with the change in its provenance."""
    engine = open_database(sqlite_url)
    first = execute_sweep(parse_sweep(PAIRED), PAIRED, engine, log_dir=tmp_path / "a", show_progress=False)
    assert all(r == [0, 1, 2] for r in _repeats(engine, first.run_id).values())  # grown to max_repeats 3
    with session_scope(engine) as s:
        run = s.get(Run, first.run_id)
        assert run is not None
        run.status = "done"  # finished (the stand-in may call a tiny run unstable)
    wider = PAIRED.replace("max_repeats: 3", "max_repeats: 4, ratio_target_min_batch: 2")
    edited = tmp_path / "wider.yaml"
    edited.write_text(wider)
    dry = CliRunner().invoke(app, ["run", str(edited), "--db", sqlite_url, "--dry-run", "--resume"])
    assert dry.exit_code == 0, dry.output
    note = _words(dry.stderr)
    assert f"note: run {first.run_id} continues with a changed stopping rule" in note
    assert "measure.max_repeats: 3 -> 4" in note and "measure.ratio_target_min_batch: 1 -> 2" in note
    assert " 2 measured window(s)" in _words(dry.stdout)  # only batch 2's fourth pair is left to measure
    team = f"sqlite:///{tmp_path / 'team.db'}"  # a team database that imported the run before the resume
    source = sqlite_url.removeprefix("sqlite:///")
    assert CliRunner().invoke(app, ["import", source, "--db", team]).exit_code == 0
    res = _run_cli(edited, sqlite_url, tmp_path, "--resume")
    assert res.exit_code == 0, res.output
    assert "starting a new one" not in res.stderr
    # batch 1 is below ratio_target_min_batch now: it keeps what it has; batch 2 takes a fourth pair.
    assert _repeats(engine, first.run_id) == {
        (1, "v1"): [0, 1, 2],
        (1, "v2"): [0, 1, 2],
        (2, "v1"): [0, 1, 2, 3],
        (2, "v2"): [0, 1, 2, 3],
    }
    with session_scope(engine) as s:
        runs = list(s.scalars(select(Run)))
        assert [r.id for r in runs] == [first.run_id]
        edits = runs[0].provenance["sweep_edits"]
        assert runs[0].sweep_yaml == wider
        assert len(edits) == 1 and edits[0]["previous_sweep_yaml"] == PAIRED
        assert {c["field"]: (c["old"], c["new"]) for c in edits[0]["changes"]} == {
            "measure.max_repeats": (3, 4),
            "measure.ratio_target_min_batch": (1, 2),
        }
    shown = CliRunner().invoke(app, ["runs", "--db", sqlite_url, "--yaml", str(first.run_id)])
    assert shown.stdout == wider
    # The team's copy grows with the new pairs and takes the edited sweep and its history too.
    grown = CliRunner().invoke(app, ["import", source, "--db", team])
    assert grown.exit_code == 0 and "grew 1 run(s) (+0 points, +2 repeats" in _words(grown.output)
    team_engine = open_database(team)
    with session_scope(team_engine) as s:
        copy = s.scalars(select(Run)).one()
        assert copy.sweep_yaml == wider and copy.provenance["sweep_edits"][0]["previous_sweep_yaml"] == PAIRED
    team_engine.dispose()
    # A stopping-rule edit next to a procedure edit is still refused, naming only the procedure's field.
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(
        wider.replace("max_repeats: 4", "max_repeats: 5").replace("min_window_s: 0.05", "min_window_s: 0.1")
    )
    refused = _run_cli(mixed, sqlite_url, tmp_path, "--resume-run", str(first.run_id))
    assert refused.exit_code == 2, refused.output
    err = _words(refused.stderr)
    assert "measure.min_window_s: 0.05 -> 0.1" in err and "max_repeats" not in err
    engine.dispose()
