"""`specbench db snapshot`: a consistent, read-only-sourced copy of a SQLite database that a sweep may be writing,
optionally without per-token times (docs/guide/gpu-hosts.md, "A host lost mid-run"). Real files, the real CLI."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from db.engine import make_engine, session_scope
from db.migrate import upgrade
from db.models import Point, RequestRow, Run, Sample
from runners.cli import app
from tests.fixtures.db import grid_part1
from tests.paths import REPO_ROOT

TOKENS = 200  # per request: enough token times that dropping them shrinks the file visibly


def _build(path: Path, *, samples: int = 2, requests: int = 50) -> None:
    """A migrated specbench database with one run, one point, its samples and their requests."""
    url = f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    try:
        with session_scope(engine) as s:
            point = Point(
                point_key="bs=4",
                fingerprint="f" * 64,
                status="ok",
                model="m",
                attention_backend="flashmla",
                batch_size=4,
                dataset="random",
                input_len=128,
                output_len=TOKENS,
                num_prompts=requests,
                workload_key="random-128-200",
                output_throughput=1234.5,
                samples=[
                    Sample(
                        repeat=repeat,
                        status="ok",
                        output_throughput=1000.0 + repeat,
                        tpot_p50_ms=7.25,
                        requests=[
                            RequestRow(
                                idx=i,
                                prompt_len=128,
                                max_new_tokens=TOKENS,
                                start_s=0.01 * i,
                                ttft_s=0.05,
                                e2e_s=1.5,
                                completion_tokens=TOKENS,
                                chunk_times=[0.05 + 0.007 * t + 1e-6 * i for t in range(TOKENS)],
                                chunk_tokens=[1] * TOKENS,
                            )
                            for i in range(requests)
                        ],
                    )
                    for repeat in range(samples)
                ],
            )
            s.add(
                Run(
                    sweep_name="snap",
                    sweep_yaml="name: snap",
                    sweep_hash="0" * 64,
                    backend="sim",
                    model="m",
                    points=[point],
                )
            )
    finally:
        engine.dispose()  # the last connection closes: WAL checkpointed, SRC is one file again


def _rows(path: Path, table: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as c:
        return c.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()


def _snapshot(*argv: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["db", "snapshot", *argv])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, " ".join(result.output.split())  # rich may fold a long path onto two lines


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "evidence.db"
    _build(path)
    return path


def test_the_copy_holds_the_same_rows(src: Path, tmp_path: Path) -> None:
    dest = tmp_path / "copy.db"
    code, out = _snapshot(f"sqlite:///{src}", str(dest))  # the URL form, as --db takes it
    assert code == 0, out
    assert out.startswith("snapshot: ") and str(dest) in out
    for table in ("runs", "points", "samples", "requests"):
        assert _rows(dest, table) == _rows(src, table), table
    assert len(_rows(dest, "requests")) == 100
    # One self-contained file (rollback journal, like the committed examples), not a WAL-mode file.
    with contextlib.closing(sqlite3.connect(dest)) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_drop_token_times_thins_only_the_copy(src: Path, tmp_path: Path) -> None:
    dest = tmp_path / "small.db"
    code, out = _snapshot(str(src), str(dest), "--drop-token-times")
    assert code == 0, out
    assert "100 requests without token times" in out and " -> " in out
    thinned = _rows(dest, "requests")
    assert len(thinned) == 100
    with contextlib.closing(sqlite3.connect(dest)) as c:
        arrays = c.execute("SELECT chunk_times, chunk_tokens FROM requests").fetchall()
    assert all(json.loads(t) == [] and json.loads(k) == [] for t, k in arrays)
    # Every window's metrics and every point stay; so do the other request columns.
    assert _rows(dest, "samples") == _rows(src, "samples")
    assert _rows(dest, "points") == _rows(src, "points")
    assert _rows(dest, "runs") == _rows(src, "runs")
    with contextlib.closing(sqlite3.connect(dest)) as c:
        assert c.execute("SELECT output_throughput, tpot_p50_ms FROM samples ORDER BY id").fetchall() == [
            (1000.0, 7.25),
            (1001.0, 7.25),
        ]
        assert c.execute("SELECT count(*) FROM requests WHERE e2e_s = 1.5").fetchone()[0] == 100
    assert dest.stat().st_size < src.stat().st_size / 2
    # SRC keeps its token times.
    with contextlib.closing(sqlite3.connect(f"file:{src}?mode=ro", uri=True)) as c:
        assert c.execute("SELECT count(*) FROM requests WHERE chunk_times != '[]'").fetchone()[0] == 100
    # The ORM reads the thinned copy: empty lists, metrics intact.
    engine = make_engine(f"sqlite:///{dest}")
    try:
        with session_scope(engine) as s:
            sample = s.query(Sample).order_by(Sample.id).first()
            assert sample is not None
            assert all(r.chunk_times == [] and r.chunk_tokens == [] for r in sample.requests)
            assert (sample.output_throughput, sample.tpot_p50_ms) == (1000.0, 7.25)
    finally:
        engine.dispose()


def test_a_database_without_requests_is_just_copied(tmp_path: Path) -> None:
    src = tmp_path / "plain.db"
    with contextlib.closing(sqlite3.connect(src)) as c:
        c.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        c.execute("INSERT INTO notes (body) VALUES ('kept')")
        c.commit()
    dest = tmp_path / "plain-copy.db"
    code, out = _snapshot(str(src), str(dest), "--drop-token-times")
    assert code == 0, out
    assert "no requests table" in out
    assert _rows(dest, "notes") == [(1, "kept")]


def test_consistent_while_a_writer_holds_uncommitted_rows(src: Path, tmp_path: Path) -> None:
    """What a running sweep looks like: WAL mode, committed windows, and a window being written right now."""
    writer = sqlite3.connect(src, isolation_level=None)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        # Committed after the build, so it sits in the WAL, not in the main file: a `cp` would miss it.
        writer.execute(
            "INSERT INTO samples (point_id, repeat, status, output_throughput, created_at) "
            "VALUES (1, 7, 'ok', 777.0, CURRENT_TIMESTAMP)"
        )
        writer.execute("BEGIN IMMEDIATE")
        writer.execute(
            "INSERT INTO samples (point_id, repeat, status, output_throughput, created_at) "
            "VALUES (1, 8, 'ok', 888.0, CURRENT_TIMESTAMP)"
        )
        writer.execute("UPDATE points SET repeats = 99")
        dest = tmp_path / "mid-run.db"
        code, out = _snapshot(str(src), str(dest))
        assert code == 0, out
        with contextlib.closing(sqlite3.connect(dest)) as c:
            repeats = [r for (r,) in c.execute("SELECT repeat FROM samples ORDER BY repeat")]
            assert repeats == [0, 1, 7]  # the committed window is there, the uncommitted one is not
            assert c.execute("SELECT repeats FROM points").fetchone()[0] != 99
        writer.execute("COMMIT")  # the writer was never blocked or disturbed
    finally:
        writer.close()
    with contextlib.closing(sqlite3.connect(src)) as c:
        assert [r for (r,) in c.execute("SELECT repeat FROM samples ORDER BY repeat")] == [0, 1, 7, 8]


def test_src_is_not_modified(src: Path, tmp_path: Path) -> None:
    before, stat = src.read_bytes(), src.stat()
    assert _snapshot(str(src), str(tmp_path / "a.db"))[0] == 0
    assert _snapshot(str(src), str(tmp_path / "b.db"), "--drop-token-times")[0] == 0
    assert src.read_bytes() == before
    assert src.stat().st_mtime_ns == stat.st_mtime_ns
    assert src.stat().st_size == stat.st_size


def test_force_replaces_dest(src: Path, tmp_path: Path) -> None:
    dest = tmp_path / "old.db"
    dest.write_bytes(b"an older snapshot")
    stale_wal = Path(f"{dest}-wal")
    stale_wal.write_bytes(b"stale")  # would be replayed onto the new copy if it stayed
    code, out = _snapshot(str(src), str(dest))
    assert code == 2 and "exists" in out and "--force" in out
    assert dest.read_bytes() == b"an older snapshot"
    code, out = _snapshot(str(src), str(dest), "--force")
    assert code == 0, out
    assert not stale_wal.exists()
    assert _rows(dest, "samples") == _rows(src, "samples")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["missing.db", "out.db"], "no such file"),
        (["notes.txt", "out.db"], "not a SQLite database"),
        (["evidence.db", "evidence.db"], "is SRC"),
        (["evidence.db", "./sub/../evidence.db"], "is SRC"),
        (["evidence.db", "evidence.db-wal"], "SRC's own SQLite files"),
        (["postgresql://u@db.example/specbench", "out.db"], "pg_dump"),
        (["evidence.db", "postgresql://u@db.example/specbench"], "pg_dump"),
        (["evidence.db", "nodir/out.db"], "does not exist"),
    ],
)
def test_refusals(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], needle: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a database")
    (tmp_path / "sub").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out = _snapshot(*argv)
    assert code == 2, out
    assert out.startswith("error:") and needle in out, out
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, nothing left behind


def test_a_password_in_a_refused_url_is_never_printed() -> None:
    code, out = _snapshot("postgresql://specbench:Sup3r-s3cret@db.example/specbench", "out.db")
    assert code == 2 and "pg_dump" in out
    assert "Sup3r-s3cret" not in out


def test_import_reads_what_a_running_sweep_has_committed_to_its_write_ahead_log(tmp_path: Path) -> None:
    # A GPU host's evidence.db while its sweep runs: WAL mode, the latest commits still in the -wal file.
    src = grid_part1(tmp_path / "evidence.db")
    writer = sqlite3.connect(src, isolation_level=None)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")  # keep the commit in the log, as a busy writer does
        writer.execute("UPDATE runs SET label = 'committed-in-wal'")
        assert Path(f"{src}-wal").stat().st_size > 0
        dest = tmp_path / "team.db"
        res = CliRunner().invoke(app, ["import", str(src), "--db", f"sqlite:///{dest}"])
        assert res.exit_code == 0, res.output
        assert "imported 1 run(s)" in res.output
        with contextlib.closing(sqlite3.connect(dest)) as c:
            assert c.execute("SELECT label FROM runs").fetchall() == [("committed-in-wal",)]
    finally:
        writer.close()
    not_a_db = tmp_path / "notes.db"
    not_a_db.write_text("not a database")
    res = CliRunner().invoke(app, ["import", str(not_a_db), "--db", f"sqlite:///{tmp_path}/x.db"])
    assert res.exit_code == 2 and "error:" in res.output


def test_import_says_why_its_snapshot_failed(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The disk that holds the temporary copy fills up mid-copy: one error line with the paths and the cause,
    # a non-zero exit, no traceback and nothing imported.
    def disk_full(_src: Path, tmp: Path, _dest: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))

    monkeypatch.setattr("db.snapshot._backup", disk_full)
    dest = tmp_path / "team.db"
    res = CliRunner().invoke(app, ["import", str(src), "--db", f"sqlite:///{dest}"])
    assert isinstance(res.exception, SystemExit) and res.exit_code == 2, repr(res.exception)
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output
    assert lines[0].startswith(f"error: cannot snapshot {src} to ")
    assert "OSError: [Errno 28] No space left on device" in lines[0]
    assert not dest.exists()


FILL_UP = """
import resource, signal, sys
from db.snapshot import SnapshotError, snapshot
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, like a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
try:
    snapshot(sys.argv[1], sys.argv[2])
except SnapshotError as e:
    print(e)
"""


def test_a_copy_that_cannot_be_written_blames_dest_not_src(src: Path, tmp_path: Path) -> None:
    # A file-size limit stands in for a disk that fills during the copy: SQLite reports it from the backup
    # call, which used to name SRC "not a readable SQLite database".
    # The limit covers every file the process writes, a WAL source's shared-memory index too (a failure on
    # SRC's side, rightly blamed on SRC): a rollback-journal source keeps the failure on the copy's side.
    with contextlib.closing(sqlite3.connect(src)) as c:
        assert c.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    dest = tmp_path / "copy.db"
    root = REPO_ROOT
    done = subprocess.run(
        [sys.executable, "-c", FILL_UP, str(src), str(dest)],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    message = done.stdout.strip()
    assert message.startswith(f"DEST {dest}: cannot write the copy in {tmp_path}"), message
    assert "is the disk full?" in message and "not a readable" not in message
    assert not dest.exists() and not list(tmp_path.glob(".copy.db.*"))  # nothing half-written left behind
