"""`specbench runs`, run references (`latest~N`) in every verb, `export --all-runs`, tables in narrow consoles
and `run --dry-run`: the CLI a new user meets first."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from analysis.export import read_csv_rows
from bench.sweep import expand, load_sweep, parse_sweep
from db import queries as q
from db.engine import session_scope
from db.migrate import open_database
from db.models import Run, ServerInstance
from runners import estimate
from runners.cli import app
from runners.commands.run import DRY_RUN_PORT
from runners.sweep_runner import execute_sweep
from runners.tables import Column, compact_lines, print_table
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history
from tests.fixtures.db import grid_part1
from tests.paths import REPO_ROOT

ONE_LAUNCH = """
name: dry-one
model: sim-tiny
server:
  backend: sim
  attention_backend: flashmla
  args: {max-running-requests: 8}
  env: {SGLANG_LOG_MS: "1"}
  sim: {time_scale: 0.05, seed: 3, instant: true}
grid: {batch_sizes: [1, 2], spec_modes: [v2], steps: [2], topk: [1], baseline: false}
workload: {input_len: 16, output_len: 8}
repeats: 1
"""


@pytest.fixture
def seeded(db_url: str) -> tuple[str, Engine]:
    eng = open_database(db_url)
    seed_history(eng, 200, shape=SMALL_SHAPE, end=datetime(2026, 11, 30, tzinfo=UTC), seed=5)
    return db_url, eng


def _json(args: list[str]) -> list[dict[str, object]]:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc: list[dict[str, object]] = json.loads(res.stdout)
    return doc


def test_runs_json_lists_every_run_newest_first(seeded: tuple[str, Engine]) -> None:
    url, eng = seeded
    doc = _json(["runs", "--db", url, "--format", "json"])
    with session_scope(eng) as s:
        stored = list(s.scalars(select(Run)))
    assert len(doc) == len(stored) > 2
    assert {r["id"] for r in doc} == {r.id for r in stored}
    for field in ("id", "name", "gpu", "simulated", "status", "started", "points"):
        assert all(field in r for r in doc)
    starts = [str(r["started"]) for r in doc]
    assert starts == sorted(starts, reverse=True)
    by_id = {r.id: r for r in stored}
    for r in doc:
        run = by_id[int(str(r["id"]))]
        assert (r["name"], r["gpu"], r["simulated"], r["status"]) == (
            run.sweep_name,
            run.gpu_name,
            run.simulated,
            run.status,
        )
    assert all(isinstance(r["points"], int) for r in doc) and sum(int(str(r["points"])) for r in doc) > 0


def test_runs_filters(seeded: tuple[str, Engine]) -> None:
    url, _ = seeded
    every = _json(["runs", "--db", url, "--format", "json"])
    h100 = _json(["runs", "--db", url, "--format", "json", "--gpu", "h100"])
    assert h100 and all("H100" in str(r["gpu"]) for r in h100)
    assert len(h100) == sum("H100" in str(r["gpu"]) for r in every)
    name = str(every[0]["name"])
    named = _json(["runs", "--db", url, "--format", "json", "--name", name[-8:].upper()])
    assert {r["id"] for r in named} == {r["id"] for r in every if r["name"] == name}
    done = _json(["runs", "--db", url, "--format", "json", "--status", "done"])
    assert done and all(r["status"] == "done" for r in done)
    assert _json(["runs", "--db", url, "--format", "json", "--real"]) == []  # seeded history is simulated
    assert len(_json(["runs", "--db", url, "--format", "json", "--simulated", "--limit", "3"])) == 3
    # A LIKE wildcard in a filter matches itself only.
    assert _json(["runs", "--db", url, "--format", "json", "--name", "%"]) == []
    res = CliRunner().invoke(app, ["runs", "--db", url, "--status", "nope"])
    assert res.exit_code == 2


def test_runs_csv_and_table(seeded: tuple[str, Engine]) -> None:
    url, _ = seeded
    res = CliRunner().invoke(app, ["runs", "--db", url, "--format", "csv"])
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    assert lines[0].startswith("id,uid,name,")
    every = _json(["runs", "--db", url, "--format", "json"])
    assert len(lines) == len(every) + 1
    # CliRunner's stdout is no terminal: the compact layout, one line per run, no box characters.
    res = CliRunner().invoke(app, ["runs", "--db", url])
    out = res.stdout.splitlines()
    assert out[0].split()[:3] == ["id", "started", "(UTC)"]
    assert len(out) == len(every) + 1
    assert not any(ch in res.stdout for ch in "─│┃━")
    assert out[1].split()[0] == str(every[0]["id"])


def test_runs_with_a_label_on_some_runs_only(seeded: tuple[str, Engine]) -> None:
    # `make demo`'s database: the candidate run has a label, the others none. pandas 3 turned the other
    # labels into NaN, which crashed the table and wrote `NaN` (not JSON) into --format json.
    url, eng = seeded
    with session_scope(eng) as s:
        runs = list(s.scalars(select(Run).order_by(Run.id)))
        for run in runs:
            run.label = None
        runs[-1].label = "candidate"
    res = CliRunner().invoke(app, ["runs", "--db", url, "--format", "json"])
    assert res.exit_code == 0, res.output

    def no_nan(token: str) -> None:
        raise AssertionError(f"{token} is not JSON")

    doc = json.loads(res.stdout, parse_constant=no_nan)
    assert sorted(str(r["label"]) for r in doc) == ["None"] * (len(runs) - 1) + ["candidate"]
    table = CliRunner().invoke(app, ["runs", "--db", url])
    assert table.exit_code == 0, table.output
    assert sum("candidate" in line for line in table.stdout.splitlines()) == 1


def test_runs_counts_a_cut_run_against_its_plan(tmp_path: Path) -> None:
    # The H200 grid's first part: a deadline ended it after 10 of its 52 points (13 server configs x 4 batch
    # sizes), all 10 ok. Out of the stored points it read 10/10, as if complete.
    db = grid_part1(tmp_path / "grid.db")

    def points_cell() -> str:
        res = CliRunner().invoke(app, ["runs", "--db", f"sqlite:///{db}"])
        assert res.exit_code == 0, res.output
        header, row = res.stdout.splitlines()
        return row[header.index("points") :].split()[0]

    with contextlib.closing(sqlite3.connect(db)) as c:
        assert c.execute("SELECT status, error FROM runs").fetchall() == [
            ("partial", "deadline reached; finished the current point")
        ]
        assert c.execute("SELECT count(*), sum(status = 'ok') FROM points").fetchall() == [(10, 10)]
    assert points_cell() == "10/52"
    # A run whose plan is unknown (an imported run keeps a placeholder, not a sweep): ok out of stored.
    with contextlib.closing(sqlite3.connect(db)) as c, c:
        c.execute("UPDATE runs SET sweep_yaml = '# imported from bench_serving results: r.jsonl\n'")
    assert points_cell() == "10/10"


def _rows() -> tuple[list[Column], list[list[str]]]:
    cols = [
        Column("id", "right"),
        Column("name"),
        Column("status", markup=True),
        Column("gpu"),
        Column("sglang", drop=1),
        Column("label", drop=2),
    ]
    rows = [
        [
            str(i),
            f"synthetic-deepseek-v3-h200-{i}",
            "[green]done[/]",
            "8x H200",
            "0.5.13.post1",
            "pr-24640 " * 3,
        ]
        for i in range(5)
    ]
    return cols, rows


def test_tables_fit_a_narrow_terminal() -> None:
    cols, rows = _rows()
    buf = io.StringIO()
    narrow = Console(file=buf, width=80, force_terminal=True, color_system=None)
    print_table(narrow, cols, rows, title="runs")
    lines = buf.getvalue().splitlines()
    assert lines and all(len(line) <= 80 for line in lines)
    body = [line for line in lines if "synthetic-deepseek" in line]
    assert len(body) == 5  # one line per row: no cell folded onto a second line
    footnote = buf.getvalue().split("left out", 1)[1]
    assert "label" in footnote and "pr-24640" not in buf.getvalue()
    # A wide terminal shows every column and no footnote.
    buf = io.StringIO()
    print_table(Console(file=buf, width=200, force_terminal=True, color_system=None), cols, rows)
    assert "left out" not in buf.getvalue() and "pr-24640" in buf.getvalue()


def test_tables_are_compact_in_logs() -> None:
    cols, rows = _rows()
    buf = io.StringIO()
    print_table(Console(file=buf, width=80, force_terminal=False), cols, rows)
    lines = buf.getvalue().splitlines()
    assert lines == compact_lines(cols, rows)
    assert len(lines) == 6 and all("[green]" not in line for line in lines)
    assert lines[1].split()[:3] == ["0", "synthetic-deepseek-v3-h200-0", "done"]


def test_user_text_is_never_markup() -> None:
    cols = [Column("name"), Column("status", markup=True)]
    rows = [["[bold]x[/bold] [link=http://e.vil]y[/link]", "[green]ok[/]"]]
    for terminal in (True, False):
        buf = io.StringIO()
        print_table(Console(file=buf, width=120, force_terminal=terminal, color_system=None), cols, rows)
        out = buf.getvalue()
        assert "[bold]x[/bold] [link=http://e.vil]y[/link]" in out  # shown as typed
        assert "[green]" not in out and "ok" in out


def test_run_references_everywhere(seeded: tuple[str, Engine], tmp_path: Path) -> None:
    url, eng = seeded
    runner = CliRunner()
    newest = _json(["runs", "--db", url, "--format", "json"])
    res = runner.invoke(app, ["export", "--db", url, "--run", "latest~2", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert [r["id"] for r in json.loads(res.stdout)["runs"]] == [newest[2]["id"]]
    # A uid prefix and a plain id resolve too; duplicates collapse.
    uid = str(newest[1]["uid"])
    # The shortest prefix no other run shares (seeded runs start within the same millisecond, so their
    # time-sortable uids can share 13 characters or more).
    others = [str(r["uid"]) for r in newest if r["id"] != newest[1]["id"]]
    n = next(k for k in range(6, len(uid) + 1) if not any(o.startswith(uid[:k]) for o in others))
    res = runner.invoke(
        app, ["export", "--db", url, "--run", uid[:n], "--run", str(newest[1]["id"]), "--format", "json"]
    )
    assert [r["id"] for r in json.loads(res.stdout)["runs"]] == [newest[1]["id"]]
    # No --run: the latest, and stderr says which.
    res = runner.invoke(app, ["export", "--db", url, "--format", "json"])
    assert json.loads(res.stdout)["runs"][0]["id"] == newest[0]["id"]
    assert f"exporting run {newest[0]['id']} (the latest)" in res.stderr
    for bad in ("latest~x", "latest~-1", "99999", "abc", f"latest~{len(newest)}"):
        res = runner.invoke(app, ["export", "--db", url, "--run", bad])
        assert res.exit_code == 2, (bad, res.output)
        assert "error:" in res.output and "Traceback" not in res.output
    assert q.resolve_run(eng, "latest~0") == newest[0]["id"]


def test_export_all_runs(seeded: tuple[str, Engine], tmp_path: Path) -> None:
    url, _ = seeded
    every = _json(["runs", "--db", url, "--format", "json"])
    out = tmp_path / "all.csv"
    res = CliRunner().invoke(app, ["export", "--db", url, "--all-runs", "--all-status", "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = read_csv_rows(out.read_text())
    assert {int(r["run_id"]) for r in rows} == {int(str(r["id"])) for r in every if int(str(r["points"]))}
    assert len(rows) == sum(int(str(r["points"])) for r in every)
    res = CliRunner().invoke(app, ["export", "--db", url, "--all-runs", "--run", "latest"])
    assert res.exit_code == 2


def test_dry_run_prints_the_launchers_argv_and_env(sqlite_url: str, tmp_path: Path) -> None:
    sweep = tmp_path / "one.yaml"
    sweep.write_text(ONE_LAUNCH)
    res = CliRunner().invoke(app, ["run", str(sweep), "--dry-run", "--db", sqlite_url])
    assert res.exit_code == 0, res.output
    argv_lines = [line.split("argv: ", 1)[1] for line in res.stdout.splitlines() if "argv: " in line]
    env = dict(
        line.split("env:  ", 1)[1].split("=", 1) for line in res.stdout.splitlines() if "env:  " in line
    )
    assert len(argv_lines) == 1
    assert "estimated time: about" in res.stdout and "assuming" in res.stdout
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # a dry run creates no database

    # The real launch of the same sweep: the argv and env it recorded are the ones printed.
    spec = parse_sweep(ONE_LAUNCH)
    eng = open_database(sqlite_url)
    out = execute_sweep(spec, ONE_LAUNCH, eng, log_dir=tmp_path / "logs", show_progress=False)
    assert out.status == "done"
    with session_scope(eng) as s:
        server = s.scalars(select(ServerInstance)).one()
        argv, launched_env = list(server.argv), dict(server.env)
    port_at = argv.index("--port") + 1
    argv[port_at] = str(DRY_RUN_PORT)
    assert shlex.split(argv_lines[0]) == argv
    assert {k: v for k, v in launched_env.items() if k in env} == env
    assert env["SGLANG_LOG_MS"] == "1" and env["SGLANG_ENABLE_SPEC_V2"]

    # With history, the estimate uses the measured startup and windows.
    res = CliRunner().invoke(app, ["run", str(sweep), "--dry-run", "--db", sqlite_url])
    said = " ".join(res.stdout.split())
    assert (
        "median of the launches measured on this host" in said and "in this sweep's earlier run(s) #1" in said
    )
    assert "windows of 2/2 points: median duration measured on this host" in said
    assert "per repeat outside the window (warm-up, flush, storing), as measured on this host" in said


def test_dry_run_says_when_a_pinned_acceptance_is_clamped(sqlite_url: str, tmp_path: Path) -> None:
    # The grid crosses steps {1, 2, 3} with two acceptances: 2.5 on one draft step cannot happen.
    text = (REPO_ROOT / "sweeps" / "h200-v3slice-steps2.yaml").read_text()
    sweep = tmp_path / "grid.yaml"
    sweep.write_text(text.replace("steps: [2]", "steps: [1, 2]").replace("[2.5]", "[1.8, 2.5]"))
    res = CliRunner().invoke(app, ["run", str(sweep), "--dry-run", "--db", sqlite_url])
    assert res.exit_code == 2 and "would this run here? no" in res.output, res.output  # no GPU, SGLang, model
    notes = [line for line in res.stdout.splitlines() if "SGLang clamps it" in line]
    # steps 1 x acc 2.5, for v1 and v2; steps 1 x 1.8 and every steps-2 config are reachable
    assert len(notes) == 2 and all("accept length 2.5" in n and "measures 2 (every draft" in n for n in notes)


def test_estimate_counts_the_repeats_a_ratio_target_may_add() -> None:
    spec = load_sweep("sweeps/h200-v3slice-intervals.yaml")
    assert spec.repeats == 6 and spec.measure.ratio_target == 0.05 and spec.max_pair_repeats == 16
    est = estimate.estimate(spec, expand(spec))
    assert est.windows == 6 * 16  # three batch sizes x v1/v2, each up to max_repeats
    assert any("measure.max_repeats (16)" in note for note in est.assumptions)
    plain = spec.model_copy(update={"measure": spec.measure.model_copy(update={"ratio_target": None})})
    assert estimate.estimate(plain, expand(plain)).windows == 6 * 6


def test_estimate_adds_up() -> None:
    spec = parse_sweep(ONE_LAUNCH.replace("instant: true", "instant: false"))
    groups = expand(spec)
    est = estimate.estimate(spec, groups)
    step_s = estimate.SIM_STEP_MS * 0.05 / 1000
    # bs 1: 8 prompts = 8 waves; bs 2: 8 prompts = 4 waves; 8 output tokens each; 1 warmup wave; 1 repeat.
    windows = [8 * 8 * step_s, 4 * 8 * step_s]
    warmups = [w / n for w, n in zip(windows, [8, 4], strict=True)]
    expected_measure = sum(windows) + sum(warmups) + 2 * estimate.POINT_OVERHEAD_S
    startup = 0.2 * 0.05 + estimate.SIM_PROCESS_START_S
    assert est.launches == 1 and est.windows == 2
    assert est.measure_s == pytest.approx(expected_measure)
    assert est.total_s == pytest.approx(expected_measure + startup)
    timed = estimate.estimate(spec, groups, past_startup_s=10.0, past_window_s={1: 2.0, 2: 3.0})
    assert timed.startup_s == 10.0
    assert timed.measure_s == pytest.approx(2.0 + 3.0 + 2.0 / 8 + 3.0 / 4 + 2 * estimate.POINT_OVERHEAD_S)
    # A GPU-sized minimum window outlasts the waves' own duration: the window is that long.
    long = parse_sweep(
        ONE_LAUNCH.replace("instant: true", "instant: false") + "measure: {min_window_s: 10}\n"
    )
    est10 = estimate.estimate(long, expand(long))
    assert est10.measure_s == pytest.approx(2 * 10.0 + sum(warmups) + 2 * estimate.POINT_OVERHEAD_S)


def test_resume_state_counts_missing_and_extra_pair_repeats() -> None:
    spec = load_sweep("sweeps/h200-v3slice-intervals.yaml")  # 6 planned repeats, up to 16 for a pair
    v1 = next(p for g in expand(spec) for p in g.points if p.server.spec_mode == "v1")
    key = v1.key()

    def left(stored: set[int], done: bool = False) -> int:
        state = estimate.ResumeState(1, {key: stored}, frozenset({key} if done else ()))
        return state.remaining(spec, v1)

    assert left(set()) == 16  # nothing stored: the most the pair can take
    assert left({0, 1, 2}) == 3 + 10  # 3 planned repeats missing, then up to repeat 15
    assert left(set(range(6))) == 10  # planned ones stored, interval still too wide
    assert left(set(range(9))) == 7  # an extension the run had begun
    assert left(set(range(16))) == 0  # max_repeats reached
    assert left(set(range(6)), done=True) == 0  # the interval reached the target
    assert left({0, 2, 3, 4, 5}, done=True) == 1  # a planned repeat lost with a host


def test_dry_run_of_a_resumed_grid_counts_only_what_is_missing(tmp_path: Path) -> None:
    # The H200 grid's first part: the baseline is complete; the steps-1 acceptance-1.8 pair met its target at
    # batch 1 and 8 and its cap at 32, and has nothing at 64.
    db = grid_part1(tmp_path / "grid.db")
    url = f"sqlite:///{db}"
    res = CliRunner().invoke(
        app, ["run", "sweeps/h200-v3slice-grid.yaml", "--dry-run", "--resume", "--db", url]
    )
    # No GPU, SGLang or model here: the real run would exit 2, and so does its dry run, estimate and all.
    assert res.exit_code == 2 and "would this run here? no" in res.output, res.output
    out = res.stdout
    assert out.count("complete in run 1: not started again") == 1
    assert out.index("complete in run 1") < out.index("launch 2/13")  # the baseline's launch
    # bs 64 of the first pair: 6 planned + 10 extra per side; 5 untouched pairs x (3 batch sizes x 16, and
    # batch 1, below measure.ratio_target_min_batch, at its 6 planned) x 2
    assert "12 start(s)" in out and f"{2 * 16 + 5 * (3 * 16 + 6) * 2} measured window(s)" in out
    assert "run 1 resumed: 1 of 13 server config(s) complete" in out
    fresh = CliRunner().invoke(app, ["run", "sweeps/h200-v3slice-grid.yaml", "--dry-run", "--db", url])
    assert "13 start(s)" in fresh.stdout and "complete in run" not in fresh.stdout  # no --resume: a new run
    nothing = CliRunner().invoke(
        app,
        [
            "run",
            "sweeps/h200-v3slice-grid.yaml",
            "--dry-run",
            "--resume",
            "--db",
            f"sqlite:///{tmp_path}/no.db",
        ],
    )
    assert nothing.exit_code == 2 and "the estimate is for a new run" in nothing.output
    assert not (tmp_path / "no.db").exists()
