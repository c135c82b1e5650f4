"""`specbench import SOURCE`: merge the runs of another specbench database into this one (by run uid; a run
already here grows by what the source adds to it)."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from db.engine import ENV_PREFIX, redact, scrub, session_scope
from db.merge import merge_runs
from db.migrate import open_database
from db.snapshot import SnapshotError, snapshot
from runners.common import DbOption, console, db_url, fail, open_db


def register(app: typer.Typer) -> None:
    app.command("import")(import_runs)


def import_runs(
    source: Annotated[
        str,
        typer.Argument(
            help="Database to read: a SQLite file path, a URL without a password, or env:NAME (a URL in $NAME)."
        ),
    ],
    db: DbOption = None,
    sweep: Annotated[str | None, typer.Option(help="Only runs of this sweep.")] = None,
) -> None:
    """Merge runs from another database (e.g. a GPU host's SQLite file); a run already here gets only what it
    lacks (a run resumed on another host grows), never a second copy."""
    with tempfile.TemporaryDirectory() as tmp:
        if "://" in source or source.startswith(ENV_PREFIX):
            url = db_url(source)  # refuses a password in argv, never prints one
        else:
            path = Path(source)
            if not path.is_file():
                fail(f"no database file at {source}")
            # Work on a copy: migrating or WAL-switching the source would change a file we only read. A
            # snapshot, not a file copy: a sweep may still be writing the source, and a plain copy misses
            # what its write-ahead log holds and can tear.
            copy = Path(tmp) / path.name
            url = f"sqlite:///{copy}"
            try:
                snapshot(str(path), str(copy))
            except SnapshotError as e:
                fail(str(e))
            except (OSError, sqlite3.Error) as e:
                # A full disk, a temporary directory it cannot write: the paths and the cause, not a traceback
                # (as `specbench db snapshot` says it).
                fail(
                    f"cannot snapshot {source} to {copy} (a temporary copy; TMPDIR picks its directory): "
                    f"{type(e).__name__}: {e}",
                    code=1,
                )
        try:
            src = open_database(url)  # brings an older file up to this schema first
        except Exception as e:
            shown = redact(url) if "://" in source or source.startswith(ENV_PREFIX) else source
            fail(f"cannot open {shown}: {type(e).__name__}: {scrub(str(e), url)}")
        engine = open_db(db)
        with session_scope(engine) as s:
            report = merge_runs(src, s, sweep=sweep)
        src.dispose()
    console.print(report.summary())
