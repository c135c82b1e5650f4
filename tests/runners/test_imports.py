"""Imports check every field before writing anything (issue 30 §7): `import-results FILE.jsonl` and `import
OTHER.db` refuse a bad file in one line naming the line (or table and row) and the field, import nothing, never
traceback, and wait for a locked database as `run` does. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from bench.results import STATUS_SEVERITY
from db.migrate import open_database
from db.models import Point, Run
from db.validate import STATUSES
from runners.cli import app
from tests.paths import FIXTURES, REPO_ROOT

RESULTS = FIXTURES / "bench_serving_results.jsonl"
EXAMPLE = REPO_ROOT / "examples" / "h200-sglang-0.5.13.post1.db"


def invoke(*argv: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(argv))
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def runs_in(url: str) -> int:
    engine = open_database(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(Run)).scalar_one())
    finally:
        engine.dispose()


def _lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in RESULTS.read_text().splitlines()]


def _with(change: dict[str, Any], *, line: int = 1, server: bool = False) -> str:
    """The fixture's two lines with `change` applied to line `line` (1-based; to its server_info if asked)."""
    lines = _lines()
    target = lines[line - 1]["server_info"] if server else lines[line - 1]
    target.update(change)
    return "\n".join(json.dumps(x) for x in lines) + "\n"


JSONL_CASES: list[tuple[str, str, str]] = [
    # (case, the file's text, the field the message must name)
    ("completed text", _with({"completed": "abc"}), "completed"),
    ("completed NaN", _with({"completed": float("nan")}), "completed"),
    ("completed Infinity", _with({"completed": float("inf")}), "completed"),
    ("completed list", _with({"completed": [1]}), "completed"),
    ("completed bool", _with({"completed": True}), "completed"),
    ("completed 1e30", _with({"completed": 1e30}), "completed"),
    ("completed 10**30", _with({"completed": 10**30}), "completed"),
    ("completed zero", _with({"completed": 0}), "completed"),
    ("completed missing", _with({"completed": None}), "completed"),
    (
        "null token totals",
        _with({"dataset_name": "sharegpt", "total_input_tokens": None}),
        "total_input_tokens",
    ),
    ("negative input len", _with({"random_input_len": -5}), "random_input_len"),
    ("huge output len", _with({"random_output_len": 2**31}), "random_output_len"),
    ("throughput NaN", _with({"output_throughput": float("nan")}), "output_throughput"),
    ("throughput negative", _with({"output_throughput": -1.0}), "output_throughput"),
    ("throughput text", _with({"output_throughput": "fast"}), "output_throughput"),
    ("latency 1e30", _with({"median_ttft_ms": 1e30}), "median_ttft_ms"),
    ("concurrency huge", _with({"max_concurrency": 10**30}), "max_concurrency"),
    ("concurrency text", _with({"max_concurrency": "8"}), "max_concurrency"),
    ("dataset list", _with({"dataset_name": ["random"]}), "dataset_name"),
    ("server_info list", _with({"server_info": [1, 2]}), "server_info"),
    ("tp zero", _with({"tp_size": 0}, server=True), "server_info.tp_size"),
    (
        "steps negative",
        _with({"speculative_num_steps": -3}, server=True),
        "server_info.speculative_num_steps",
    ),
    ("model NUL", _with({"model_path": "/models/a\x00b"}, server=True), "server_info.model_path"),
    ("model number", _with({"model_path": 7}, server=True), "server_info.model_path"),
    ("version too long", _with({"version": "0.5." + "9" * 80}, server=True), "sglang_version"),
    ("backend too long", _with({"attention_backend": "f" * 40}, server=True), "attention_backend"),
    ("model too long", _with({"model_path": "/m/" + "x" * 600}, server=True), "model"),
    ("second line bad", _with({"completed": -1}, line=2), "completed"),
    ("100,000-deep array", "[" * 100_000 + "]" * 100_000 + "\n", "nested too deep"),
    ("deep inside a result", _with({"tag": json.loads("[" * 500 + "]" * 500)}), "tag"),
    ("not JSON", RESULTS.read_text() + "{oops\n", "not JSON"),
]


# What PostgreSQL itself would refuse halfway (a value wider than its column, a NUL): checked there too.
PG_CASES = {"model NUL", "version too long", "backend too long", "model too long", "completed 10**30"}


@pytest.mark.parametrize(("text", "field"), [c[1:] for c in JSONL_CASES], ids=[c[0] for c in JSONL_CASES])
def test_import_results_refuses_a_bad_file(sqlite_url: str, tmp_path: Path, text: str, field: str) -> None:
    _refused(sqlite_url, tmp_path, text, field)


@pytest.mark.parametrize(
    ("text", "field"),
    [c[1:] for c in JSONL_CASES if c[0] in PG_CASES],
    ids=[c[0] for c in JSONL_CASES if c[0] in PG_CASES],
)
def test_import_results_refuses_a_bad_file_on_postgresql(
    pg_url: str, tmp_path: Path, text: str, field: str
) -> None:
    _refused(pg_url, tmp_path, text, field)


def _refused(db_url: str, tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(text)
    code, out = invoke("import-results", str(path), "--db", db_url)
    assert code == 2, out
    assert (field in out and "nothing imported" in out.replace("\n", " ")) or "nested too deep" in out, out
    first = out.strip().splitlines()[0]
    assert first.startswith("error: ") and str(path) in out.replace("\n", "")
    assert runs_in(db_url) == 0  # no partial import


def test_import_results_names_the_line(sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_with({"completed": "abc"}, line=2))
    code, out = invoke("import-results", str(path), "--db", sqlite_url)
    assert code == 2 and f"{path}:2: completed: must be a whole number" in out.replace("\n", ""), out


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--model", "m" * 501),
        ("--model", "a\x00b"),
        ("--gpu", "NVIDIA H200 " + "x" * 100),
        ("--gpu", "H200\x00"),
        ("--name", "n" * 101),
        ("--name", "a\nb"),
    ],
)
def test_import_results_options_fit_their_columns(db_url: str, option: str, value: str) -> None:
    code, out = invoke("import-results", str(RESULTS), "--db", db_url, option, value)
    assert code == 2 and option in out and "at most" in out, out
    assert len(out.strip().splitlines()) == 1
    assert runs_in(db_url) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "sweeps/demo-sim.yaml", "--dry-run", "--label", "l" * 201],
        ["run", "sweeps/demo-sim.yaml", "--dry-run", "--label", "a\x00b"],
        ["submit", "sweeps/demo-sim.yaml", "--label", "a\x00b"],
        ["schedule", "add", "sweeps/demo-sim.yaml", "--cron", "0 2 * * *", "--label", "x" * 300],
    ],
)
def test_labels_fit_their_column(db_url: str, argv: list[str]) -> None:
    code, out = invoke(*argv, "--db", db_url)
    assert code == 2 and "--label" in out, out
    assert len(out.strip().splitlines()) == 1


def test_a_good_file_still_imports(db_url: str) -> None:
    code, out = invoke("import-results", str(RESULTS), "--db", db_url, "--model", "m", "--gpu", "NVIDIA H200")
    assert code == 0, out
    assert runs_in(db_url) == 1


# ---- `specbench import OTHER.db`: a source database written by anyone


def _source(tmp_path: Path, *sql: str) -> Path:
    """A copy of a real example database (migrated to this schema), changed by `sql` behind the ORM's back."""
    path = tmp_path / "source.db"
    shutil.copy(EXAMPLE, path)
    open_database(f"sqlite:///{path}").dispose()
    with sqlite3.connect(path) as conn:
        for statement in sql:
            conn.execute(statement)
    return path


DB_CASES: list[tuple[str, str, str]] = [
    # (case, the change, what the message must name)
    ("uid path", "UPDATE runs SET uid = '../../etc/passwd' WHERE id = 2", "runs row 2: uid: not a run uid"),
    ("uid empty", "UPDATE runs SET uid = '' WHERE id = 1", "runs row 1: uid"),
    (
        "provenance",
        "UPDATE runs SET provenance = '{\"a\": [1, 2' WHERE id = 3",
        "runs row 3: provenance: not JSON",
    ),
    (
        "started_at",
        "UPDATE runs SET started_at = 'last tuesday' WHERE id = 1",
        "runs row 1: started_at: not an ISO",
    ),
    (
        "status",
        "UPDATE runs SET status = '[link=x]ok' WHERE id = 1",
        "runs row 1: status: must be one of",
    ),
    (
        "gpu_count",
        "UPDATE runs SET gpu_count = 'eight' WHERE id = 1",
        "runs row 1: gpu_count: must be a whole",
    ),
    (
        "model long",
        "UPDATE runs SET model = printf('%.600c', 'm') WHERE id = 1",
        "runs row 1: model: longer than 500",
    ),
    (
        "host NUL",
        "UPDATE runs SET host = 'h' || char(0) || 'x' WHERE id = 1",
        "runs row 1: host: holds a NUL",
    ),
    (
        "batch negative",
        "UPDATE points SET batch_size = -5 WHERE id = 3",
        "points row 3: batch_size: must be a whole",
    ),
    ("batch huge", "UPDATE points SET batch_size = 2147483648 WHERE id = 3", "points row 3: batch_size"),
    ("batch 1e30", "UPDATE points SET batch_size = 1e30 WHERE id = 3", "points row 3: batch_size"),
    ("prompts text", "UPDATE points SET num_prompts = 'many' WHERE id = 4", "points row 4: num_prompts"),
    (
        "throughput inf",
        "UPDATE points SET output_throughput = 9e999 WHERE id = 5",
        "points row 5: output_throughput",
    ),
    (
        "throughput 1e300",
        "UPDATE samples SET output_throughput = 1e300 WHERE id = 7",
        "samples row 7: output_throughput",
    ),
    ("tp zero", "UPDATE points SET tp = 0 WHERE id = 2", "points row 2: tp: must be at least 1"),
    (
        "reason NUL",
        "UPDATE samples SET reason = 'a' || char(0) WHERE id = 2",
        "samples row 2: reason: holds a NUL",
    ),
    ("sample status", "UPDATE samples SET status = 'great' WHERE id = 2", "samples row 2: status"),
    (
        "deep chunks",
        "UPDATE requests SET chunk_times = printf('%.100000c', '[') WHERE id = 5",
        "requests row 5: chunk_times",
    ),
    ("NaN chunks", "UPDATE requests SET chunk_times = '[NaN]' WHERE id = 6", "requests row 6: chunk_times"),
    ("request idx", "UPDATE requests SET idx = -1 WHERE id = 8", "requests row 8: idx"),
    (
        "server config",
        "UPDATE server_instances SET requested = 'nope' WHERE id = 1",
        "server_instances row 1: requested",
    ),
    (
        "server time",
        "UPDATE server_instances SET started_at = '2026-13-45' WHERE id = 1",
        "server_instances row 1: started_at",
    ),
]


@pytest.mark.parametrize(("sql", "needle"), [c[1:] for c in DB_CASES], ids=[c[0] for c in DB_CASES])
def test_import_refuses_a_bad_database(sqlite_url: str, tmp_path: Path, sql: str, needle: str) -> None:
    source = _source(tmp_path, sql)
    code, out = invoke("import", str(source), "--db", sqlite_url)
    assert code == 2, out
    assert needle in out.replace("\n", ""), out
    assert "nothing imported" in out.replace("\n", " ")
    assert runs_in(sqlite_url) == 0


def test_import_into_postgresql_refuses_what_it_cannot_hold(pg_url: str, tmp_path: Path) -> None:
    """PostgreSQL refuses over-long text and NUL mid-transaction; the check refuses them first, in one line."""
    source = _source(
        tmp_path,
        "UPDATE points SET model = printf('%.700c', 'm') WHERE id = 9",
        "UPDATE runs SET label = 'a' || char(0) || 'b' WHERE id = 4",
    )
    code, out = invoke("import", str(source), "--db", pg_url)
    assert code == 2 and "runs row 4: label: holds a NUL" in out.replace("\n", ""), out
    assert runs_in(pg_url) == 0
    clean = tmp_path / "clean"
    clean.mkdir()
    code, out = invoke("import", str(_source(clean, "SELECT 1")), "--db", pg_url)
    assert code == 0, out
    assert runs_in(pg_url) == 4


def test_statuses_are_the_ones_the_code_writes() -> None:
    assert set(STATUS_SEVERITY) == STATUSES["points"] == STATUSES["samples"]


# ---- a locked database is waited for, as `run`, `worker` and `submit` wait


def _hold_lock(path: Path, seconds: float, held: threading.Event) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE workers SET labels = labels")
    held.set()
    time.sleep(seconds)
    conn.execute("ROLLBACK")
    conn.close()


@pytest.mark.parametrize("verb", ["import", "import-results"])
def test_imports_wait_for_a_locked_database(tmp_path: Path, verb: str) -> None:
    dest = tmp_path / "dest.db"
    url = f"sqlite:///{dest}"
    open_database(url).dispose()
    source = str(_source(tmp_path, "SELECT 1")) if verb == "import" else str(RESULTS)
    held = threading.Event()
    # Longer than SQLite's own busy wait would last if the import did not retry (the old ~3 s traceback).
    holder = threading.Thread(target=_hold_lock, args=(dest, 6.0, held), daemon=True)
    holder.start()
    assert held.wait(30)
    code, out = invoke(verb, source, "--db", url)
    holder.join(timeout=30)
    assert code == 0, out  # it finished once the lock went, instead of failing with "database is locked"
    assert "imported" in out
    engine = open_database(url)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Point)).scalar_one() > 0
    engine.dispose()
