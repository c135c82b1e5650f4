"""Run Alembic migrations from code, so every CLI verb and the test suite see the schema at head."""

import atexit
import shutil
import tempfile
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from db.engine import make_engine, make_readonly_engine, resolve_url

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


def schema_revisions(engine: Engine, url: str) -> tuple[str | None, str | None]:
    """(the database's revision, this code's head), read without writing anything."""
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    return current, head


class SchemaBehindError(RuntimeError):
    """A read-only open of a database whose schema this code cannot read until it is migrated."""


def open_database_readonly(url: str | None = None) -> tuple[Engine, str | None]:
    """An engine that never writes (issue 10 §9), on a database at head, and a note for the user (or None).
    An older SQLite file is migrated as a temporary copy; PostgreSQL behind head raises SchemaBehindError
    (run `specbench db upgrade`); a missing SQLite file raises DatabaseMissingError."""
    resolved = resolve_url(url)
    engine = make_readonly_engine(resolved)
    current, head = schema_revisions(engine, resolved)
    if current == head:
        return engine, None
    engine.dispose()
    parsed = make_url(resolved)
    if parsed.get_backend_name() != "sqlite":
        raise SchemaBehindError(
            f"schema at revision {current or '(empty)'}, this specbench reads {head}: run `specbench db upgrade`"
        )
    tmp = Path(tempfile.mkdtemp(prefix="specbench-ro-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    copy = tmp / Path(parsed.database or "db").name
    shutil.copyfile(parsed.database or "", copy)
    copy_url = parsed.set(database=str(copy)).render_as_string(hide_password=False)
    upgrade(copy_url)
    note = (
        f"{parsed.database} is at schema {current or '(empty)'}; reading a migrated temporary copy "
        "(`specbench db upgrade` migrates the file itself)"
    )
    return make_readonly_engine(copy_url), note
