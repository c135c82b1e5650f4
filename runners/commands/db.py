"""`specbench db upgrade|current`: apply the Alembic migrations, or show where a database stands."""

from __future__ import annotations

import typer
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from db.engine import make_engine, redact, scrub
from db.migrate import alembic_config, upgrade
from runners.common import DbOption, console, db_url, fail

db_app = typer.Typer(name="db", help="Database schema: migrate to the latest revision, or show it.")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db", no_args_is_help=True)


@db_app.command("upgrade")
def upgrade_cmd(db: DbOption = None) -> None:
    """Migrate the database to the latest schema (idempotent; what docker-compose's `migrate` runs)."""
    url = db_url(db)
    try:
        upgrade(url)
    except Exception as e:  # the user needs the URL and the cause, not a traceback
        fail(f"cannot migrate {redact(url)}: {type(e).__name__}: {scrub(str(e), url)}")
    console.print(f"{redact(url)}: at revision {_current(url) or '-'} (head)")


@db_app.command("current")
def current_cmd(db: DbOption = None) -> None:
    """Print the database's revision and whether it is the latest; exit 1 when it is behind."""
    url = db_url(db)
    try:
        current = _current(url)
    except Exception as e:
        fail(f"cannot read {redact(url)}: {type(e).__name__}: {scrub(str(e), url)}")
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    state = "up to date" if current == head else "behind: run `specbench db upgrade`"
    console.print(f"{redact(url)}: revision {current or '(empty)'}, head {head} ({state})")
    if current != head:
        raise typer.Exit(1)


def _current(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
