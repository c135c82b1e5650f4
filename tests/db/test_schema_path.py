"""One schema path (issue 36): every entry point that reads opens the database at the head schema, so the read
queries select head columns without asking which ones the database has. A file written by an older specbench
opens through each entry point: the read verbs (a migrated temporary copy, the file untouched), `specbench
dashboard` (migrates before serving), the dashboard app itself (a migrated copy), and compose's migrate
service on PostgreSQL (the dashboard and read verbs refuse a database behind head until it ran).
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from db.migrate import open_database_readonly, upgrade
from runners.commands import dashboard as dashboard_command
from tests.fixtures.cli import run_cli
from tests.fixtures.dashboard import show
from tests.paths import REPO_ROOT

# The committed paired H200 run, written at revision 2026_12_03_interop: before invocations, floors, expert
# routing and the correctness gate, all of which the v2-vs-v1 reads select.
OLD = REPO_ROOT / "examples" / "h200-v3slice-paired.db"
OLD_REVISION = "2026_12_03_interop"
# Four runs at the first revision of all (0001), two of which compare.
OLDEST = REPO_ROOT / "examples" / "h200-sglang-0.5.13.post1.db"
APP = str(REPO_ROOT / "dashboard" / "app.py")


def _revision(path: Path) -> str:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        return str(c.execute("SELECT version_num FROM alembic_version").fetchone()[0])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def old(tmp_path: Path) -> Path:
    copy = tmp_path / "old.db"
    shutil.copy(OLD, copy)
    assert _revision(copy) == OLD_REVISION
    return copy


@pytest.mark.parametrize(
    ("source", "argv", "shows"),
    [
        (OLD, ["runs", "--format", "csv"], "h200-v3slice-paired"),
        (OLD, ["export", "--run", "1", "--format", "md"], "h200-v3slice-paired"),
        (OLD, ["export", "--run", "1", "--view", "v2-vs-v1", "--format", "csv"], ",faster,5,paired,"),
        (OLD, ["export", "--run", "1", "--view", "windows", "--format", "json"], '"view": "windows"'),
        (OLDEST, ["compare", "2", "3", "--format", "csv"], "EAGLE s3 v2"),
        (OLD, ["regressions"], "output_throughput"),
    ],
)
def test_each_read_verb_reads_an_old_file_from_a_migrated_copy(
    tmp_path: Path, source: Path, argv: list[str], shows: str
) -> None:
    old = tmp_path / "old.db"
    shutil.copy(source, old)
    before, revision = _digest(old), _revision(old)
    res = run_cli(*argv, "--db", f"sqlite:///{old}")
    assert res.returncode in (0, 1), res.stdout + res.stderr  # compare and regressions exit 1 on a finding
    assert "reading a migrated temporary copy" in res.stderr
    assert shows in res.stdout + res.stderr
    assert _digest(old) == before and _revision(old) == revision


def test_the_dashboard_command_migrates_before_it_serves(old: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[dict[str, str]] = []

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:  # Streamlit is not started
        served.append(env)

    monkeypatch.setattr(dashboard_command.os, "execve", execve)
    url = f"sqlite:///{old}"
    res = run_cli("dashboard", "--db", url)
    assert res.returncode == 0, res.stdout + res.stderr
    assert [env["DATABASE_URL"] for env in served] == [url]
    engine, note = open_database_readonly(url)
    engine.dispose()
    assert note is None and _revision(old) != OLD_REVISION  # at head: read as it is, no copy


@pytest.fixture
def app_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An AppTest of the dashboard on a database URL, with the app's cached engine dropped afterwards."""
    from dashboard.services import data

    def start(url: str) -> AppTest:
        monkeypatch.setenv("DATABASE_URL", url)
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        return at

    yield start
    data.engine.clear()


def test_the_dashboard_app_reads_an_old_file_from_a_migrated_copy(old: Path, app_on: Any) -> None:
    """The app started without `specbench dashboard` in front: every page reads head columns (the Sweep page's
    v2/v1 reads invocations and correctness verdicts), from a copy, leaving the file as it was."""
    before = _digest(old)
    at = app_on(f"sqlite:///{old}")
    for page in (
        "pages/overview.py",
        "pages/trends.py",
        "pages/sweep.py",
        "pages/compare.py",
        "pages/jobs.py",
    ):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert not at.error, (page, [e.value for e in at.error])
        if page == "pages/sweep.py":  # the v2/v1 tab read the samples' invocations
            show(at, "sw_tab", "v2 over v1")
            assert any("v2 (overlap) over v1" in m.value for m in at.markdown)
    assert _digest(old) == before and _revision(old) == OLD_REVISION


@pytest.mark.postgres
def test_compose_migrates_postgres_before_the_dashboard_and_read_verbs_use_it(
    pg_url: str, app_on: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]
    upgrade(pg_url, OLD_REVISION)  # a team database an older specbench created
    # Behind head, nothing reads it: a clear refusal naming the fix, on the CLI and on the page.
    refused = run_cli("runs", "--db", pg_url)
    assert refused.returncode == 2 and "specbench db upgrade" in refused.stderr
    at = app_on(pg_url)
    assert not at.exception and "specbench db upgrade" in " ".join(e.value for e in at.error)
    # compose: `migrate` runs first (the others wait for it to complete), then the dashboard serves as it is.
    assert compose["dashboard"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert run_cli(*compose["migrate"]["command"][1:], env={"DATABASE_URL": pg_url}).returncode == 0
    monkeypatch.setattr(dashboard_command.os, "execve", lambda *_: None)
    served = run_cli(*compose["dashboard"]["command"][1:], env={"DATABASE_URL": pg_url})
    assert served.returncode == 0, served.stderr
    assert run_cli("runs", "--db", pg_url).returncode == 0
