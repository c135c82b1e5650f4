"""Where a stored profile's trace file is on this host, always checked by its sha256.

A profile row keeps the capturing host's path (`/root/ev/artifacts/run-1/...`) after the database moves; the
file may sit in an `artifacts/` folder beside the SQLite file or be shipped under `examples/`. The sha256
keeps a same-named file of another capture from passing as this one.
"""

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from sqlalchemy.engine import make_url

REPOSITORY = Path(__file__).resolve().parents[1]
SHIPPED = REPOSITORY / "examples"
TRACE_SUFFIXES = (".json.gz", ".json")


@dataclass(frozen=True)
class FoundTrace:
    path: Path
    how: str  # "as stored" | "next to the database" | "shipped with specbench: examples/..."


def sha256_file(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def database_dir(url: str | None) -> Path | None:
    """The folder of a SQLite database file; None for other databases."""
    if not url:
        return None
    try:
        u = make_url(url)
    except Exception:  # not a URL at all: nothing to resolve against
        return None
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database).expanduser().resolve().parent


def _matches(path: Path, sha256: str | None, size: int | None) -> bool:
    try:
        if not path.is_file() or (size is not None and path.stat().st_size != size):
            return False
        return sha256 is None or sha256_file(path) == sha256
    except OSError:
        return False


def _beside_database(stored: str, folder: Path) -> list[Path]:
    """Where the stored file would be if its `artifacts/` tree (or the file alone) sits by the database."""
    parts = PurePosixPath(stored).parts
    out = []
    if "artifacts" in parts:
        tail = parts[len(parts) - 1 - parts[::-1].index("artifacts") :]
        out.append(folder.joinpath(*tail))
    if parts:
        out.append(folder / parts[-1])
    return out


@lru_cache(maxsize=8)
def _shipped_index(root: str) -> dict[tuple[int, str], Path]:
    """(size, sha256) -> path of every trace file shipped under `root` (a checkout's examples/)."""
    index: dict[tuple[int, str], Path] = {}
    base = Path(root)
    if not base.is_dir():
        return index
    for path in sorted(base.rglob("*")):
        if path.is_file() and path.name.endswith(TRACE_SUFFIXES) and ".trace." in path.name:
            index[(path.stat().st_size, sha256_file(path))] = path
    return index


def find_trace(
    stored: str | None,
    sha256: str | None,
    size: int | None = None,
    *,
    database: str | None = None,
    shipped: Path = SHIPPED,
) -> FoundTrace | None:
    """A profile row's readable trace: the stored path, else beside the SQLite database, else a shipped trace
    of the same size and sha256 (only with a stored sha256); None when none is."""
    if stored and _matches(Path(stored), sha256, size):
        return FoundTrace(Path(stored), "as stored")
    folder = database_dir(database)
    if stored and folder is not None:
        for candidate in _beside_database(stored, folder):
            if _matches(candidate, sha256, size):
                return FoundTrace(candidate, "next to the database")
    if sha256 is None:
        return None
    for (n, digest), path in _shipped_index(str(shipped)).items():
        if digest == sha256 and (size is None or n == size) and path.is_file():
            where = (path.relative_to(REPOSITORY) if path.is_relative_to(REPOSITORY) else path).as_posix()
            return FoundTrace(path, f"shipped with specbench: {where}")
    return None
