"""Imports check every field before writing anything (issue 30 §7): `import-results FILE.jsonl` and `import
OTHER.db` refuse a bad file in one line naming the line (or table and row) and the field, import nothing, never
traceback, and wait for a locked database as `run` does. On SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select
from sqlalchemy.exc import SQLAlchemyError
from typer.testing import CliRunner

from bench.results import STATUS_SEVERITY
from db.engine import make_engine
from db.merge import check_source
from db.migrate import open_database
from db.models import Point, Run
from db.source import check_sqlite_source
from db.validate import STATUSES
from runners.cli import app
from tests.fixtures.bad_imports import DB_CASES, EXAMPLE, JSONL_CASES, RESULTS, with_change
from tests.fixtures.db import copy_sqlite

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first


def invoke(*argv: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(argv))
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def runs_in(url: str) -> int:
    """The runs stored at `url`: none where nothing ever wrote (no runs table: a refusal before the database
    was opened), which is not migrated to find out (a fresh SQLite file took ~0.1 s of CPU to migrate)."""
    engine = make_engine(url)
    try:
        if not inspect(engine).has_table("runs"):
            return 0
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(Run)).scalar_one())
    finally:
        engine.dispose()


_AT_HEAD: list[Path] = []  # the example database as `example_at_head` migrated it, which `_source` copies


@pytest.fixture(scope="module", autouse=True)
def example_at_head(tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("example") / "source.db"
    shutil.copy(EXAMPLE, path)
    open_database(f"sqlite:///{path}").dispose()
    _AT_HEAD[:] = [path]


# What PostgreSQL itself would refuse halfway (a value wider than its column, a NUL): checked there too.
PG_CASES = {
    "model NUL",
    "version too long",
    "backend too long",
    "model too long",
    "completed 10**30",
    "lone surrogate",
}


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
    path.write_text(with_change({"completed": "abc"}, line=2))
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
    """A copy of a real example database (migrated to this schema once per module, `example_at_head`), changed
    by `sql` behind the ORM's back."""
    path = tmp_path / "source.db"
    copy_sqlite(_AT_HEAD[0], path)
    with sqlite3.connect(path) as conn:
        for statement in sql:
            conn.execute(statement)
    return path


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


# Issue 35 §6: a hostile SQLite file hung `import` (a recursive view in the source check) or traced back (a view
# over a missing table, a zeroblob(2e9) column); another application's file was imported as nothing, exit 0.
HOSTILE_SQLITE = [
    (
        "recursive view",
        "DROP TABLE requests",
        "CREATE VIEW requests AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
        "SELECT x AS id, x AS sample_id FROM r",
        "view 'requests'",
    ),
    (
        "view over a missing table",
        "DROP TABLE requests",
        "CREATE VIEW requests AS SELECT * FROM nowhere",
        "view",
    ),
    (
        "zeroblob column",
        "DROP TABLE requests",
        "CREATE VIEW requests AS SELECT 1 AS id, 1 AS sample_id, zeroblob(2000000000) AS chunk_times",
        "view",
    ),
    (
        "trigger",
        "SELECT 1",
        "CREATE TRIGGER t AFTER UPDATE ON runs BEGIN DELETE FROM points; END",
        "trigger 't'",
    ),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("drop", "create", "needle"), [c[1:] for c in HOSTILE_SQLITE], ids=[c[0] for c in HOSTILE_SQLITE]
)
def test_import_of_a_hostile_sqlite_file_never_hangs_nor_traces_back(
    db_url: str, tmp_path: Path, drop: str, create: str, needle: str
) -> None:
    source = _source(tmp_path, drop, create)
    started = time.monotonic()
    code, out = invoke("import", str(source), "--db", db_url)
    assert code == 2, out
    assert needle in out and "tables only" in out and "nothing imported" in out.replace("\n", " "), out
    assert len(out.strip().splitlines()) == 1, out
    assert time.monotonic() - started < 60
    assert runs_in(db_url) == 0


def test_import_refuses_a_file_of_another_application(db_url: str, tmp_path: Path) -> None:
    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('groceries')")
    code, out = invoke("import", str(other), "--db", db_url)
    assert code == 2 and "not a specbench database" in out and "another application" in out, out
    assert runs_in(db_url) == 0
    # A specbench file from a newer (or made-up) schema is refused too, not half-read.
    code, out = invoke(
        "import", str(_source(tmp_path, "UPDATE alembic_version SET version_num = 'zz99'")), "--db", db_url
    )
    assert code == 2 and "schema revision 'zz99'" in out, out


def test_import_reads_under_a_size_and_time_bound(tmp_path: Path) -> None:
    """The bounds themselves, small: a value past the size bound and a read past the time bound each end in
    one line, and a file within both reads whole."""
    from db.source import bound_reads, read_error

    source = _source(tmp_path, "UPDATE runs SET error = printf('%.5000c', 'e') WHERE id = 1")
    check_sqlite_source(source)  # a specbench file with tables only
    engine = bound_reads(open_database(f"sqlite:///{source}"), max_value_bytes=1000)
    with pytest.raises(SQLAlchemyError) as big:
        check_source(engine)
    assert "longer than 1,000 bytes" in read_error(big.value, max_value_bytes=1000)
    engine = bound_reads(open_database(f"sqlite:///{source}"), limit_s=0.0)
    with pytest.raises(SQLAlchemyError) as slow:
        check_source(engine)
    assert "took longer than 0 s" in read_error(slow.value, limit_s=0.0)
    check_source(bound_reads(open_database(f"sqlite:///{source}")))


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
