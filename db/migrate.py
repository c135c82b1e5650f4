"""Run Alembic migrations from code, so every CLI verb and the test suite see the schema at head."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, inspect

from db.engine import make_engine, resolve_url

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # '%' must be doubled for configparser; URLs can carry %-escapes in passwords.
    cfg.set_main_option("sqlalchemy.url", resolve_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str | None = None, revision: str = "head") -> None:
    command.upgrade(alembic_config(resolve_url(url)), revision)


def open_database(url: str | None = None) -> Engine:
    """An engine on a database migrated to head (idempotent; cheap when already current)."""
    resolved = resolve_url(url)
    upgrade(resolved)
    return make_engine(resolved)


def current_tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())
