"""The migrations are the schema: upgrade to head on both databases, and they match the models exactly."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect

from db.engine import make_engine
from db.migrate import alembic_config, open_database
from db.models import Base


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
