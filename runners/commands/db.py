"""`specbench db upgrade|current|snapshot`: migrate, show the revision, or copy a SQLite file in use."""

import sqlite3
from typing import Annotated

import typer
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from rich.markup import escape

from db.engine import make_engine, redact, scrub
from db.migrate import alembic_config, upgrade
from db.snapshot import SnapshotError, human_bytes, snapshot
from runners.common import DbOption, console, db_url, fail

db_app = typer.Typer(
    name="db",
    help="Database schema: migrate to the latest revision, or show it; snapshot a SQLite file in use.",
    no_args_is_help=True,
)


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


@db_app.command("snapshot")
def snapshot_cmd(
    src: Annotated[
        str,
        typer.Argument(help="SQLite database to copy: a file path or sqlite:///PATH.", show_default=False),
    ],
    dest: Annotated[str, typer.Argument(help="Where the copy goes (a new file).", show_default=False)],
    drop_token_times: Annotated[
        bool,
        typer.Option(
            "--drop-token-times",
            help="In the copy only, empty every request's per-token times and VACUUM: a small file to commit. "
            "Runs, points and every window's metrics stay.",
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace DEST if it exists.")] = False,
) -> None:
    """Copy a SQLite database consistently while a sweep may write it (SQLite's online backup, not `cp`).

    For a GPU host about to be lost (docs/guide/gpu-hosts.md, "A host lost mid-run"): snapshot its
    evidence.db, put the copy on the next host and resume there with `specbench run SWEEP --resume`. SRC is
    opened read-only and never changed. PostgreSQL: use pg_dump.
    """
    try:
        result = snapshot(src, dest, drop_token_times=drop_token_times, force=force)
    except SnapshotError as e:
        fail(str(e))  # bad input (SRC missing, DEST exists, a PostgreSQL URL): exit 2, as everywhere
    except (OSError, sqlite3.Error) as e:
        # A full disk, no permission to write DEST's directory: the paths and the cause, not a traceback.
        fail(f"cannot snapshot {src} to {dest}: {type(e).__name__}: {e}")
    sizes = human_bytes(result.bytes_before)
    if drop_token_times:
        sizes += f" -> {human_bytes(result.bytes_after)}"
        if result.has_requests:
            sizes += f", {result.thinned:,} requests without token times"
        else:
            sizes += ", no requests table: nothing to thin"
    console.print(f"snapshot: {escape(str(result.src))} -> {escape(str(result.dest))} ({sizes})")


def _current(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
