"""Reading never changes the database file (issue 10 §9: `export` switched the committed example to WAL)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from db.engine import make_readonly_engine
from runners.cli import app
from tests.paths import REPO_ROOT

ROOT = REPO_ROOT
EXAMPLE = ROOT / "examples" / "h200-sglang-0.5.13.post1.db"
APP = str(ROOT / "dashboard" / "app.py")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def example(tmp_path: Path) -> Path:
    copy = tmp_path / "example.db"
    shutil.copy(EXAMPLE, copy)
    return copy


def assert_untouched(path: Path, before: str) -> None:
    assert digest(path) == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no -wal, no -shm, no journal
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


@pytest.mark.parametrize(
    "argv",
    [
        ["export"],
        ["export", "--format", "json", "--all-status"],
        ["compare", "latest~1", "latest", "--format", "md"],
        ["regressions"],
    ],
)
def test_read_verbs_leave_the_file_byte_identical(example: Path, argv: list[str]) -> None:
    before = digest(example)
    result = CliRunner().invoke(app, [*argv, "--db", f"sqlite:///{example}"])
    assert result.exit_code in (0, 1), result.output  # compare/regressions exit 1 on a regression
    assert_untouched(example, before)


def test_a_read_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    result = CliRunner().invoke(app, ["export", "--db", f"sqlite:///{missing}"])
    assert result.exit_code == 2 and "no database file at" in result.output
    assert not missing.exists()


def test_an_older_schema_is_read_from_a_migrated_copy(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    sqlite3.connect(old).close()  # a SQLite file with no schema at all: the oldest there is
    before = digest(old)
    result = CliRunner().invoke(app, ["export", "--db", f"sqlite:///{old}"])
    assert result.exit_code == 2, result.output  # no runs in it; the point is that it was read
    assert "reading a migrated temporary copy" in result.output
    assert_untouched(old, before)


def test_the_readonly_engine_refuses_writes(example: Path) -> None:
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    engine = make_readonly_engine(f"sqlite:///{example}")
    with engine.connect() as c, pytest.raises(OperationalError, match="readonly"):
        c.execute(text("DELETE FROM points"))
    engine.dispose()


def test_browsing_the_dashboard_leaves_the_file_byte_identical(
    example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = digest(example)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{example}")
    from dashboard.services import data

    assert data.db_url() == f"sqlite:///{example}"  # the app reads this copy, not some other database
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    for page in ["pages/trends.py", "pages/sweep.py", "pages/compare.py", "pages/jobs.py"]:
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
    assert_untouched(example, before)


def test_postgres_reads_run_in_read_only_transactions(pg_url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.exc import InternalError

    from db.migrate import open_database, open_database_readonly

    open_database(pg_url).dispose()
    engine, note = open_database_readonly(pg_url)
    assert note is None
    with engine.connect() as c, pytest.raises(InternalError, match="read-only transaction"):
        c.execute(text("DELETE FROM runs"))
    engine.dispose()
