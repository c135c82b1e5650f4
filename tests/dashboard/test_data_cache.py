"""The dashboard's cached reads: kept until the database changes, never for a fixed time."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from dashboard.services import data
from db.engine import make_readonly_engine
from db.migrate import open_database
from synthetic.history import SMALL_SHAPE
from synthetic.history.seed import seed_history


def _copy(migrated_sqlite: Path, tmp_path: Path) -> str:
    path = tmp_path / "cache.db"
    shutil.copy(migrated_sqlite, path)
    return f"sqlite:///{path}"


def test_sqlite_version_moves_with_writes_not_reads(migrated_sqlite: Path, tmp_path: Path) -> None:
    url = _copy(migrated_sqlite, tmp_path)
    before = data.data_version(url)
    reader = make_readonly_engine(url)
    with reader.connect() as conn:  # the dashboard's own reads must not look like new data
        conn.execute(text("SELECT count(*) FROM runs")).scalar_one()
    assert data.data_version(url) == before
    eng = open_database(url)
    seed_history(eng, 20, shape=SMALL_SHAPE, end=datetime.now(UTC), seed=1)
    assert data.data_version(url) != before
    eng.dispose()
    reader.dispose()
    after = data.data_version(url)
    assert after != before and data.data_version(url) == after  # settled: no write, no new version


def test_cached_reads_see_new_runs_at_once(migrated_sqlite: Path, tmp_path: Path) -> None:
    url = _copy(migrated_sqlite, tmp_path)
    assert data.totals(url).runs == 0
    assert data.totals(url).runs == 0  # answered from the cache
    eng = open_database(url)
    report = seed_history(eng, 20, shape=SMALL_SHAPE, end=datetime.now(UTC), seed=1)
    eng.dispose()
    # A fixed lifetime (the 30 s TTL before) kept showing 0 runs here; the version sees the write.
    assert data.totals(url).runs == report.runs > 0
    assert data.run_choices(url)["id"].nunique() == report.runs


def test_a_server_database_refreshes_by_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql+psycopg://user@db.example/specbench"  # never connected to: the version reads no data
    start = 1_800_000_000 // data.SERVER_REFRESH_S * data.SERVER_REFRESH_S
    versions = []
    for t in (start, start + data.SERVER_REFRESH_S - 1, start + data.SERVER_REFRESH_S):
        monkeypatch.setattr(data.time, "time", lambda t=t: float(t))
        versions.append(data.data_version(url))
    assert versions[0] == versions[1] != versions[2]
