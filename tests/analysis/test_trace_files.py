"""A stored trace path from another host resolves to the same file next to the database or shipped in
examples/, and only when its sha256 matches."""

from __future__ import annotations

import hashlib
from pathlib import Path

from analysis.trace_files import SHIPPED, find_trace, sha256_file


def _write(path: Path, data: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def test_the_stored_path_wins_when_it_is_the_file(tmp_path: Path) -> None:
    digest = _write(tmp_path / "a.trace.json.gz", b"one")
    found = find_trace(str(tmp_path / "a.trace.json.gz"), digest, 3)
    assert found is not None and found.how == "as stored"
    # Same path, other content: not this capture.
    assert find_trace(str(tmp_path / "a.trace.json.gz"), hashlib.sha256(b"two").hexdigest()) is None


def test_a_copied_artifacts_tree_next_to_the_database(tmp_path: Path) -> None:
    stored = "/root/ev/artifacts/run-1/point-1-20261203T185941/1796324383.1-TP-0.trace.json.gz"
    db = tmp_path / "copy" / "specbench.db"
    digest = _write(db.parent / "artifacts" / "run-1" / "point-1-20261203T185941" / Path(stored).name, b"t")
    found = find_trace(stored, digest, 1, database=f"sqlite:///{db}", shipped=tmp_path / "none")
    assert found is not None and found.how == "next to the database"
    assert found.path == db.parent / "artifacts" / "run-1" / "point-1-20261203T185941" / Path(stored).name
    # Without a database file (PostgreSQL) or with another file's hash, nothing is guessed.
    assert find_trace(stored, digest, 1, database="postgresql://u@h/db", shipped=tmp_path / "none") is None
    other = hashlib.sha256(b"x").hexdigest()
    assert find_trace(stored, other, 1, database=f"sqlite:///{db}", shipped=tmp_path / "none") is None


def test_shipped_traces_are_found_by_sha256_only() -> None:
    shipped = SHIPPED / "h200-v3slice-profiles" / "v1-bs1.trace.json.gz"
    digest, size = sha256_file(shipped), shipped.stat().st_size
    found = find_trace("/root/ev/artifacts/run-1/x-TP-0.trace.json.gz", digest, size)
    assert found is not None and found.path == shipped
    assert found.how == "shipped with specbench: examples/h200-v3slice-profiles/v1-bs1.trace.json.gz"
    assert find_trace("/root/ev/artifacts/run-1/x-TP-0.trace.json.gz", None, size) is None  # unverifiable
    assert find_trace("/nowhere", "0" * 64, size) is None
