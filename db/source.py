"""A SQLite file someone else wrote, before `import` reads it: specbench's tables and nothing that runs.
A view runs the file's query whenever read (endless recursion, `zeroblob(2e9)`) and a trigger one whenever the
migration writes; a specbench database has neither (issue 35 §6). So the file must hold `runs` and an
`alembic_version` this specbench knows (any other SQLite file is refused, never migrated), no view and no
trigger, and every read is bounded by SQLite itself: MAX_VALUE_BYTES per value (`SQLITE_LIMIT_LENGTH`) and
READ_LIMIT_S (a progress handler). Refusals are one-line SourceErrors."""

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from alembic.script import ScriptDirectory
from sqlalchemy import Engine, event

from db.migrate import MIGRATIONS_DIR

# No specbench value comes near this (a sweep's text is at most 1 MiB); a 2 GB blob is refused before built.
MAX_VALUE_BYTES = 64 << 20
# Reading a GPU host's whole database takes seconds to a minute; an import that reads for longer is stuck.
READ_LIMIT_S = 600.0
# SQLite calls the progress handler every this many virtual-machine instructions.
_PROGRESS_STEPS = 10_000


class SourceError(ValueError):
    """A file `import` will not read; the message says why in one line."""


def known_revisions() -> set[str]:
    """Every schema revision of this specbench's migrations."""
    return {rev.revision for rev in ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions()}


def bound_connection(
    conn: sqlite3.Connection, *, deadline: float, max_value_bytes: int = MAX_VALUE_BYTES
) -> None:
    """Make SQLite refuse values over `max_value_bytes` and interrupt statements at `deadline` (monotonic)."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value_bytes)
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)


def check_sqlite_source(
    path: Path, *, limit_s: float = READ_LIMIT_S, max_value_bytes: int = MAX_VALUE_BYTES
) -> None:
    """Raise SourceError unless `path` is a specbench database with tables only (schema table read only)."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        bound_connection(conn, deadline=time.monotonic() + limit_s, max_value_bytes=max_value_bytes)
        try:
            schema = conn.execute("SELECT type, name FROM sqlite_master").fetchall()
        except sqlite3.Error as e:
            raise SourceError(f"not a readable SQLite database ({e})") from None
        views = sorted(str(name) for kind, name in schema if kind == "view")
        triggers = sorted(str(name) for kind, name in schema if kind == "trigger")
        if views or triggers:
            named = ", ".join(
                [*(f"view {v!r}" for v in views[:3]), *(f"trigger {t!r}" for t in triggers[:3])]
            )
            raise SourceError(
                f"holds {named}: a specbench database has tables only, and reading a view (or writing under a "
                "trigger) runs a query of the file's choosing"
            )
        tables = {str(name) for kind, name in schema if kind == "table"}
        if not {"runs", "alembic_version"} <= tables:
            raise SourceError(
                "not a specbench database (no runs and alembic_version tables): a file of another application"
            )
        try:
            revisions = [str(r) for (r,) in conn.execute("SELECT version_num FROM alembic_version LIMIT 2")]
        except sqlite3.Error as e:
            raise SourceError(f"its schema revision cannot be read ({e})") from None
    if len(revisions) != 1 or revisions[0] not in known_revisions():
        shown = revisions[0][:40] if revisions else "none"
        raise SourceError(
            f"schema revision {shown!r} is not one this specbench knows: not a specbench database, or one "
            "written by a newer specbench (upgrade this one)"
        )


def bound_reads(
    engine: Engine, *, limit_s: float = READ_LIMIT_S, max_value_bytes: int = MAX_VALUE_BYTES
) -> Engine:
    """`engine` with every new connection bounded, deadline `limit_s` from now; pooled ones dropped."""
    deadline = time.monotonic() + limit_s

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        if isinstance(dbapi_conn, sqlite3.Connection):
            bound_connection(dbapi_conn, deadline=deadline, max_value_bytes=max_value_bytes)

    event.listen(engine, "connect", on_connect)
    engine.dispose()
    return engine


def read_error(
    e: BaseException, *, limit_s: float = READ_LIMIT_S, max_value_bytes: int = MAX_VALUE_BYTES
) -> str:
    """One line for a read of the source that failed: a bound it hit, else the driver's first line."""
    lines = str(getattr(e, "orig", None) or e).strip().splitlines()
    text = lines[0] if lines else type(e).__name__
    if "too big" in text:
        return f"it holds a value longer than {max_value_bytes:,} bytes, which no specbench database does"
    if "interrupted" in text:
        return f"reading it took longer than {limit_s:g} s"
    return f"cannot read it ({text[:200]})"
