"""What every verb shares: the --db option and friendly failure on bad input."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer
from rich.console import Console
from sqlalchemy import Engine

from db import queries as q
from db.engine import DEFAULT_URL, redact, resolve_url
from db.migrate import open_database

console = Console()
err_console = Console(stderr=True)
# Logs and pipes have no width: Rich's default of 80 columns would fold every long line there.
for _c in (console, err_console):
    _c.soft_wrap = not _c.is_terminal

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help=f"Database URL (SQLite file or postgresql://...). Default: $DATABASE_URL, else {DEFAULT_URL}",
        show_default=False,
    ),
]


def open_db(url: str | None) -> Engine:
    """The migrated database, or a clear message and exit 2 when it cannot be reached."""
    resolved = resolve_url(url)
    try:
        return open_database(resolved)
    except Exception as e:  # driver errors vary by backend; the user needs the URL and the cause
        fail(f"cannot open database {redact(resolved)}: {type(e).__name__}: {e}")


def fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


RUN_REF_HELP = "id, uid (or 6+ of its first characters), `latest` or `latest~N` (N runs before the latest)"


def resolve_run_ref(engine: Engine, ref: str) -> int:
    """The run id a user means (see `db.queries.resolve_run`), or a clear message and exit 2."""
    try:
        return q.resolve_run(engine, ref)
    except q.QueryError as e:
        fail(str(e))
