"""A consistent copy of a SQLite database that may be in use: `specbench db snapshot SRC DEST`, to resume
elsewhere a run of a lost GPU host (docs/guide/gpu-hosts.md). A `cp` of a file being written can tear and the
sqlite3 CLI is often missing, so the copy uses SQLite's online backup API from a read-only connection: one
committed state, SRC never changed. `drop_token_times` thins the copy for committing evidence (examples/):
`requests.chunk_times`/`chunk_tokens` are ~80% of a GPU evidence database; everything else stays."""

import contextlib
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from db.engine import redact

SQLITE_HEADER = b"SQLite format 3\x00"
# Files SQLite keeps next to a database: a stale one beside DEST would be replayed onto the new copy.
SIDECARS = ("-wal", "-shm", "-journal")
EMPTY_JSON_LIST = "[]"  # what SQLAlchemy's JSON type stores for an empty list


class SnapshotError(ValueError):
    """A snapshot that cannot or must not be made; the message names the problem (never a password)."""


@dataclass(frozen=True)
class SnapshotResult:
    src: Path
    dest: Path
    bytes_before: int  # the consistent copy as backed up
    bytes_after: int  # DEST as written (smaller after thinning and VACUUM)
    thinned: int | None  # request rows whose token times were dropped; None = not asked
    has_requests: bool  # False: the copy has no `requests` table with token times (nothing to thin)


def sqlite_path(arg: str, role: str) -> Path:
    """The file that `arg` names: a plain path or a `sqlite:///PATH` URL; any other database is refused."""
    if "://" not in arg:
        return Path(arg)
    try:
        url = make_url(arg)
    except (ArgumentError, ValueError):
        raise SnapshotError(
            f"{role}: the URL cannot be parsed; give a SQLite file path or sqlite:///PATH"
        ) from None
    if url.get_backend_name() != "sqlite":
        raise SnapshotError(
            f"{role} {redact(arg)}: snapshot copies SQLite files only; for PostgreSQL use pg_dump "
            "(e.g. `pg_dump -Fc -f snapshot.dump DBNAME`)"
        )
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        raise SnapshotError(f"{role} {arg}: needs a SQLite file path (sqlite:///PATH)")
    return Path(database)


def snapshot(
    src_arg: str, dest_arg: str, *, drop_token_times: bool = False, force: bool = False
) -> SnapshotResult:
    """Copy SRC to DEST as one committed state of SRC (see the module docstring); SnapshotError on refusal."""
    src, dest = sqlite_path(src_arg, "SRC"), sqlite_path(dest_arg, "DEST")
    _check_source(src)
    _check_dest(src, dest, force=force)

    # Built beside DEST and renamed into place: never a half DEST; --force keeps the old one until then.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".snapshot", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        # mkstemp makes the file 0600; a snapshot is meant to be shared: give it what SQLite gives a new file.
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o644 & ~umask)
        _backup(src, tmp, dest)
        bytes_before = tmp.stat().st_size
        thinned: int | None = None  # stays None unless asked and there is a requests table
        with contextlib.closing(sqlite3.connect(tmp, isolation_level=None)) as copy:
            # One self-contained file (the backup copies SRC's WAL flag; `run` switches it back when writing).
            copy.execute("PRAGMA journal_mode=DELETE")
            has_requests = _has_token_columns(copy)
            if drop_token_times and has_requests:
                thinned = _drop_token_times(copy)
        for suffix in SIDECARS:  # checked empty above unless --force: stale, and dangerous beside a new file
            Path(f"{dest}{suffix}").unlink(missing_ok=True)
        os.replace(tmp, dest)
    except BaseException:
        for leftover in (tmp, *(Path(f"{tmp}{s}") for s in SIDECARS)):
            leftover.unlink(missing_ok=True)
        raise
    return SnapshotResult(src, dest, bytes_before, dest.stat().st_size, thinned, has_requests)


def _check_source(src: Path) -> None:
    if not src.exists():
        raise SnapshotError(f"SRC {src}: no such file")
    if not src.is_file():
        raise SnapshotError(f"SRC {src}: not a file")
    with src.open("rb") as f:
        header = f.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise SnapshotError(f"SRC {src}: not a SQLite database (no SQLite header)")


def _check_dest(src: Path, dest: Path, *, force: bool) -> None:
    src_abs, dest_abs = src.resolve(), dest.resolve()
    # A link to the same file counts too; so do SRC's sidecars, which a running sweep needs intact.
    if dest_abs == src_abs or (dest.exists() and os.path.samefile(src, dest)):
        raise SnapshotError(f"DEST {dest} is SRC: give the snapshot another name")
    if any(dest_abs == Path(f"{src_abs}{s}") for s in SIDECARS):
        raise SnapshotError(f"DEST {dest} is one of SRC's own SQLite files: give the snapshot another name")
    if not dest.parent.is_dir():
        raise SnapshotError(f"DEST {dest}: directory {dest.parent} does not exist")
    if dest.is_dir():
        raise SnapshotError(f"DEST {dest} is a directory: name the snapshot file")
    present = [p for p in (dest, *(Path(f"{dest}{s}") for s in SIDECARS)) if p.exists()]
    if present and not force:
        raise SnapshotError(f"DEST {present[0]} exists: pick another name, or pass --force to replace it")


# SQLite errors of a backup writing its target (full disk, size limit): reported as DEST's, not SRC's.
_WRITE_ERRORS = frozenset(
    {"SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_TRUNCATE", "SQLITE_READONLY"}
)


def _backup(src: Path, tmp: Path, dest: Path) -> None:
    # mode=ro and query_only: the snapshot cannot write SRC; the timeout rides out a rollback-journal writer.
    uri = f"file:{quote(str(src.resolve()))}?mode=ro"
    try:
        source = sqlite3.connect(uri, uri=True, timeout=30.0)
    except sqlite3.Error as e:
        raise SnapshotError(f"SRC {src}: cannot open read-only: {e}") from None
    try:
        source.execute("PRAGMA query_only=ON")
        with contextlib.closing(sqlite3.connect(tmp)) as target:
            # pages=-1: all pages in one step and read transaction (a stepped backup restarts on every write).
            source.backup(target, pages=-1)
    except sqlite3.DatabaseError as e:
        if getattr(e, "sqlite_errorname", None) in _WRITE_ERRORS:
            raise SnapshotError(
                f"DEST {dest}: cannot write the copy in {dest.parent} ({e}; is the disk full?)"
            ) from None
        raise SnapshotError(f"SRC {src}: not a readable SQLite database: {e}") from None
    finally:
        source.close()


def _has_token_columns(copy: sqlite3.Connection) -> bool:
    # A table's columns only: table_info of a view prepares the view's query, which may fail or never end.
    if not copy.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'requests'").fetchone():
        return False
    columns = {row[1] for row in copy.execute("PRAGMA table_info(requests)")}
    return {"chunk_times", "chunk_tokens"} <= columns


def _drop_token_times(copy: sqlite3.Connection) -> int:
    """Empty every request's token times in the copy and VACUUM it; the number of rows that had any."""
    copy.execute("BEGIN")
    # IS NOT: a NULL (never written by specbench, but cheap to cover) becomes '[]' too.
    cur = copy.execute(
        "UPDATE requests SET chunk_times = ?, chunk_tokens = ? WHERE chunk_times IS NOT ? OR chunk_tokens IS NOT ?",
        (EMPTY_JSON_LIST,) * 4,
    )
    thinned = cur.rowcount
    copy.execute("COMMIT")
    # Freed pages stay in the file until VACUUM rewrites it; the small file is the point.
    copy.execute("VACUUM")
    return thinned


def human_bytes(n: int) -> str:
    """1234567 -> '1.2 MB' (decimal units, like `ls --si`)."""
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")
