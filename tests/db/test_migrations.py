"""The migrations are the schema: upgrade to head on both databases, and they match the models exactly."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, event, inspect

from db.engine import make_engine
from db.migrate import alembic_config, open_database
from db.models import Base
from tests.paths import REPO_ROOT


def test_upgrade_head_creates_every_table(engine: Engine) -> None:
    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    assert "alembic_version" in tables


def test_models_match_migrations(engine: Engine) -> None:
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"db/models.py and the migrations disagree; write a migration: {diff}"


def test_upgrade_is_idempotent_and_downgrade_works(db_url: str) -> None:
    open_database(db_url).dispose()
    open_database(db_url).dispose()  # a second open must be a no-op
    command.downgrade(alembic_config(db_url), "base")
    eng = make_engine(db_url)
    assert set(inspect(eng).get_table_names()) <= {"alembic_version"}
    eng.dispose()


def test_sqlite_pragmas(sqlite_url: str) -> None:
    eng = open_database(sqlite_url)
    with eng.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    eng.dispose()


def test_upgrading_an_older_sqlite_file_keeps_every_row(tmp_path: Path) -> None:
    """Batch mode rebuilds a SQLite table by copy and drop; with foreign keys on, the drop cascaded, and
    upgrading a file from before 2026_12_04_invocation (which rebuilds `samples`) deleted every request row.
    A real file from that time: the committed H200 pair, 6,281 requests."""
    old = tmp_path / "old.db"
    shutil.copy(REPO_ROOT / "examples" / "h200-v3slice-paired.db", old)
    with sqlite3.connect(old) as c:
        (revision,) = c.execute("SELECT version_num FROM alembic_version").fetchone()
        before = {
            t: _rows(c, t) for t in ("runs", "server_instances", "points", "samples", "requests", "profiles")
        }
    assert revision < "2026_12_04_invocation" and before["requests"] > 0  # the upgrade must rebuild `samples`
    open_database(f"sqlite:///{old}").dispose()
    with sqlite3.connect(old) as c:
        assert {t: _rows(c, t) for t in before} == before
        assert c.execute("PRAGMA foreign_key_check").fetchall() == []
        assert c.execute("SELECT version_num FROM alembic_version").fetchone()[0] > revision


def _rows(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # table names are ours, not input


def test_a_migration_waits_for_another_writer_on_sqlite(tmp_path: Path) -> None:
    """Two processes opening one file behind head: the second's migration waits for the other's write and
    then runs, instead of failing with "database is locked" (a deferred transaction whose snapshot went stale
    when the other committed cannot become a writer). The other writer lets go only once the migration's
    transaction has begun, so the two overlap every time."""
    db = tmp_path / "shared.db"
    url = f"sqlite:///{db}"
    open_database(url).dispose()
    command.downgrade(alembic_config(url), "-1")
    holder = sqlite3.connect(db, isolation_level=None, timeout=30, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE another_writer (x INTEGER)")
    began = threading.Event()

    def on_begin(_conn: object) -> None:
        began.set()

    def let_go() -> None:
        assert began.wait(60)
        time.sleep(1.0)  # the migration has read the version by now, or waits to begin at all
        holder.execute("COMMIT")

    event.listen(Engine, "begin", on_begin)
    other = threading.Thread(target=let_go)
    other.start()
    try:
        open_database(url).dispose()
    finally:
        event.remove(Engine, "begin", on_begin)
        other.join()
        holder.close()
    assert began.is_set()
    with sqlite3.connect(db) as c:
        (revision,) = c.execute("SELECT version_num FROM alembic_version").fetchone()
        tables = {name for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    heads = ScriptDirectory.from_config(alembic_config(url)).get_heads()
    assert [revision] == heads and "another_writer" in tables
