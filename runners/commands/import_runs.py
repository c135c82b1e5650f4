"""`specbench import SOURCE`: merge the runs of another specbench database into this one, by run uid."""

import sqlite3
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from db.engine import ENV_PREFIX, SQLITE_IMMEDIATE, redact, scrub
from db.merge import check_source, merge_runs
from db.migrate import open_database
from db.snapshot import SnapshotError, snapshot
from db.source import SourceError, bound_reads, check_sqlite_source, read_error
from db.validate import RowProblem
from runners import dbretry
from runners.common import DbOption, check_text, console, db_url, fail, open_db
from runners.recovery import OutagePolicy


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
    lacks (a run resumed on another host grows), never a second copy. Every row is checked first: a value
    this schema cannot hold refuses the whole import, naming its table, row and column."""
    check_text("--sweep", sweep, 100)
    db_url(db)  # a bad or secret-holding --db is refused before the source is touched
    with tempfile.TemporaryDirectory() as tmp:
        url = db_url(source) if "://" in source or source.startswith(ENV_PREFIX) else None
        # A SQLite source is read from a snapshot: never created, migrated or WAL-switched in place.
        local = Path(source) if url is None else _sqlite_file(url)
        if local is not None:
            if not local.is_file():
                fail(f"no database file at {local}")
            # Not a file copy: it would miss the write-ahead log and can tear.
            copy = Path(tmp) / local.name
            url = f"sqlite:///{copy}"
            try:
                snapshot(str(local), str(copy))
            except SnapshotError as e:
                fail(str(e))
            except (OSError, sqlite3.Error) as e:
                fail(
                    f"cannot snapshot {local} to {copy} (a temporary copy; TMPDIR picks its directory): "
                    f"{type(e).__name__}: {e}"
                )
            # Tables only, specbench's, before the migration or anything else reads it (db/source.py).
            try:
                check_sqlite_source(copy)
            except SourceError as e:
                fail(f"{source}: {e}; nothing imported")
        assert url is not None
        try:
            src = open_database(url)  # brings an older file up to this schema first
        except Exception as e:
            shown = redact(url) if "://" in source or source.startswith(ENV_PREFIX) else source
            fail(f"cannot open {shown}: {type(e).__name__}: {scrub(str(e), url)}")
        if local is not None:
            # Every later read of the copy: no value past the size bound, none after the time.
            bound_reads(src)
        try:
            check_source(src, sweep=sweep)
        except RowProblem as e:
            src.dispose()
            fail(f"{source}: {e}; nothing imported")
        except SQLAlchemyError as e:  # a bound it hit, a table it lacks: one line, never a traceback
            src.dispose()
            fail(f"{source}: {scrub(read_error(e), url)}; nothing imported")
        engine = open_db(db)
        try:
            # One transaction, retried whole through an outage: nothing is half imported.
            report = dbretry.in_session(
                engine.execution_options(**{SQLITE_IMMEDIATE: True}),
                lambda s: merge_runs(src, s, sweep=sweep),
                what="importing runs",
                policy=OutagePolicy.from_env(),
            )
        except dbretry.DatabaseUnavailable as e:
            fail(f"{e}; nothing imported")
        except SQLAlchemyError as e:  # a row this schema cannot hold after all: the whole import is undone
            fail(f"{source}: cannot import: {type(e).__name__}: {dbretry.short(e)}; nothing imported")
        finally:
            src.dispose()
    console.print(report.summary())


def _sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; None for another database. An in-memory SQLite source holds nothing."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    if not parsed.database or parsed.database == ":memory:":
        fail("an in-memory SQLite database has no runs to import; give a file (sqlite:///PATH)")
    return Path(parsed.database)
