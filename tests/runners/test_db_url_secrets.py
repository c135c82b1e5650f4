"""A database secret never reaches argv or a message (issue 30 §4), and `--db` cannot point somewhere by
accident: an empty `--db`, a SQLite `file:` URI and a missing import source are refused in one line, and none
of them creates a file. Real CLI, real SQLite, real PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest
from typer.testing import CliRunner

from db.engine import resolve_url
from runners.cli import app
from tests.fixtures.db import _require_pg

SECRET = "Hunter2-tr0ub4dor"
UNREACHABLE = "postgresql://specbench@127.0.0.1:1/specbench"
# Every form of a secret in a URL: the userinfo password and libpq's secret parameters, in any case.
FORMS = {
    "userinfo": f"postgresql://specbench:{SECRET}@127.0.0.1:1/specbench",
    "password": f"{UNREACHABLE}?password={SECRET}",
    "Password": f"{UNREACHABLE}?sslmode=disable&Password={SECRET}",
    "sslpassword": f"{UNREACHABLE}?sslpassword={SECRET}",
    "SSLPASSWORD": f"{UNREACHABLE}?SSLPASSWORD={SECRET}",
    "passfile": f"{UNREACHABLE}?passfile=/home/{SECRET}/.pgpass",
    "sslkey": f"{UNREACHABLE}?sslkey=/keys/{SECRET}.key",
}


def invoke(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(argv), env=env)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("verb", [["jobs"], ["runs"], ["db", "current"], ["import", "x.db"]])
def test_a_secret_in_db_is_refused_and_masked(form: str, verb: list[str], tmp_path: Path) -> None:
    code, out = invoke(*verb, "--db", FORMS[form])
    assert code == 2, out
    assert SECRET not in out
    assert "***" in out and "env:NAME" in out and "on the command line" in out
    assert out.strip().count("\n") <= 2  # one message (a long line may wrap once or twice)


@pytest.mark.parametrize("form", FORMS)
def test_an_import_source_with_a_secret_is_refused(form: str, tmp_path: Path) -> None:
    code, out = invoke("import", FORMS[form], "--db", f"sqlite:///{tmp_path}/x.db")
    assert code == 2 and SECRET not in out and "on the command line" in out


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    "verb", [["jobs"], ["runs"], ["db", "current"], ["db", "upgrade"], ["import", "env:SRC"]]
)
def test_a_failing_database_url_is_masked_in_the_error(form: str, verb: list[str], tmp_path: Path) -> None:
    # Through the environment a secret is fine; the unreachable server's error must still not show it.
    env = {"DATABASE_URL": FORMS[form], "SRC": FORMS[form]}
    if verb[0] == "import":
        env["DATABASE_URL"] = f"sqlite:///{tmp_path}/x.db"
    code, out = invoke(*verb, env=env)
    assert code == 2, out
    assert SECRET not in out, out
    assert "***" in out and "127.0.0.1:1" in out


@pytest.mark.postgres
@pytest.mark.parametrize("param", ["password", "sslpassword", "PASSWORD"])
def test_a_real_postgresql_error_never_shows_the_secret(param: str) -> None:
    """The server is up; the database is not: PostgreSQL's own FATAL message, masked (libpq refuses the
    upper-case spelling as an unknown option before it connects; that error is masked too)."""
    base = resolve_url(_require_pg()).rsplit("/", 1)[0]
    sep = "&" if "?" in base else "?"
    url = f"{base}/no_such_db_{os.getpid()}{sep}{param}={quote(SECRET)}"
    code, out = invoke("jobs", env={"DATABASE_URL": url})
    assert code == 2, out
    assert "does not exist" in out or 'invalid connection option "PASSWORD"' in out, out
    assert SECRET not in out and "***" in out


@pytest.mark.parametrize(
    ("db", "needle"),
    [
        ("", "--db is empty"),
        ("   ", "--db is empty"),
        ("sqlite:///file:specbench.db?mode=ro&uri=true", "SQLite URI filenames"),
        ("sqlite:///file:specbench.db", "SQLite URI filenames"),
    ],
)
@pytest.mark.parametrize("verb", [["jobs"], ["db", "upgrade"], ["runs"]])
def test_empty_and_file_uri_db_are_refused_and_create_nothing(
    db: str, needle: str, verb: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke(*verb, "--db", db)
    assert code == 2, out
    assert needle in out and out.strip().count("\n") <= 2
    assert list(tmp_path.iterdir()) == []  # no ./specbench.db, no ./file:...


@pytest.mark.parametrize(
    "source", ["sqlite:///{d}/missing.db", "{d}/missing.db", "sqlite:///{d}/sub/missing.db"]
)
def test_import_never_creates_its_source(source: str, tmp_path: Path) -> None:
    src = source.format(d=tmp_path)
    code, out = invoke("import", src, "--db", f"sqlite:///{tmp_path}/target.db")
    assert code == 2, out
    assert "no database file at" in out
    assert not (tmp_path / "missing.db").exists() and not (tmp_path / "sub").exists()


def test_import_from_a_sqlite_url_reads_a_snapshot(tmp_path: Path) -> None:
    """A SQLite source named by URL is read like one named by path: from a snapshot, never migrated in place."""
    from db.migrate import open_database

    src = tmp_path / "src.db"
    open_database(f"sqlite:///{src}").dispose()
    before = src.read_bytes()
    code, out = invoke("import", f"sqlite:///{src}", "--db", f"sqlite:///{tmp_path}/target.db")
    assert code == 0, out
    assert src.read_bytes() == before
