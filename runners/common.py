"""What every verb shares: the --db option and friendly failure on bad input."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer
from rich.console import Console
from sqlalchemy import Engine

from db.engine import DEFAULT_URL, redact, resolve_url
from db.migrate import open_database

console = Console()
err_console = Console(stderr=True)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help=f"Database URL (SQLite file or postgresql://...). Default: $DATABASE_URL, else {DEFAULT_URL}",
        show_default=False,
    ),
]


OutageOption = Annotated[
    float | None,
    typer.Option(
        "--db-outage-limit-s",
        min=0.0,
        help="How long to wait out an unreachable (or, on SQLite, locked) database before giving up. "
        "Default: $SPECBENCH_DB_OUTAGE_LIMIT_S, else 900.",
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
