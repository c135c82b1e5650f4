"""Merging databases from several hosts: runs are matched by uid, ids are remapped, nothing is duplicated."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from sqlalchemy import func, select

from db.engine import session_scope
from db.merge import merge_runs
from db.migrate import open_database
from db.models import Point, Profile, RequestRow, Run, Sample, ServerInstance
from tests.paths import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "h200-sglang-0.5.13.post1.db"


def _counts(engine) -> tuple[int, ...]:  # type: ignore[no-untyped-def]
    with session_scope(engine) as s:
        return tuple(
            int(s.scalar(select(func.count()).select_from(m)) or 0)
            for m in (Run, ServerInstance, Point, Sample, RequestRow)
        )


def test_merge_the_h200_example_twice(tmp_path: Path, db_url: str) -> None:
    src_file = tmp_path / "src.db"
    shutil.copy(EXAMPLE, src_file)  # never write to the committed example
    src = open_database(f"sqlite:///{src_file}")
    dest = open_database(db_url)
    with session_scope(dest) as s:
        first = merge_runs(src, s)
    with session_scope(dest) as s:
        second = merge_runs(src, s)
    assert len(first.runs_added) == 4 and not first.runs_skipped
    assert not second.runs_added and len(second.runs_skipped) == 4
    assert _counts(dest) == _counts(src)
    with session_scope(dest) as s:
        run = s.scalars(select(Run).where(Run.sweep_name == "h200-smoke")).one()
        assert run.gpu_name == "NVIDIA H200" and run.sglang_version == "0.5.13.post1"
        points = list(s.scalars(select(Point).where(Point.run_id == run.id)))
        assert len(points) == 28
        # every point still points at a server of its own run, and its samples came along
        for p in points:
            si = s.get(ServerInstance, p.server_instance_id)
            assert si is not None and si.run_id == run.id
            assert len(p.samples) == p.repeats
    src.dispose()
    dest.dispose()


def test_h200_example_holds_the_ground_truth() -> None:
    """The committed GPU run: with the agreeing-draft checkpoint, acceptance is steps+1 (per request it
    includes the prefill token: 128 tokens over ceil(127/steps+1) verify steps)."""
    con = sqlite3.connect(f"file:{EXAMPLE}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT p.steps, p.server_accept_length, p.accept_length_weighted, p.status FROM points p "
        "JOIN runs r ON r.id = p.run_id WHERE r.sweep_name IN ('h200-smoke', 'h200-solo') AND p.steps IS NOT NULL"
    ).fetchall()
    con.close()
    assert len(rows) == 28
    for steps, server_al, weighted, status in rows:
        assert status == "ok"
        assert abs(server_al - (steps + 1)) / (steps + 1) < 0.01
        assert abs(weighted - 128 / -(-127 // (steps + 1))) < 1e-6


def test_markdown_export_of_the_h200_run_renders_as_a_table(tmp_path: Path) -> None:
    from markdown_it import MarkdownIt

    from analysis.export import collect, to_markdown

    src_file = tmp_path / "src.db"
    shutil.copy(EXAMPLE, src_file)
    eng = open_database(f"sqlite:///{src_file}")
    with session_scope(eng) as s:
        run_id = s.scalars(select(Run.id).where(Run.sweep_name == "h200-smoke")).one()
        text = to_markdown(collect(s, [run_id], all_status=True))
    eng.dispose()
    tokens = MarkdownIt().enable("table").parse(text)
    assert sum(t.type == "table_open" for t in tokens) == 1
    assert sum(t.type == "tr_open" for t in tokens) == 1 + 28  # header + every point
    assert (
        "NVIDIA H200" in text
        and "sglang 0.5.13.post1" in text
        and "FlashMLA from sglang-kernel 0.4.3" in text
    )


V3_EXAMPLE = REPO_ROOT / "examples" / "h200-v3slice-paired.db"


def _profiles(engine) -> list[tuple[object, ...]]:  # type: ignore[no-untyped-def]
    """Each profile with the run uid and point it hangs on, and whether its run_id agrees with its point's."""
    stmt = (
        select(Run.uid, Point.batch_size, Point.spec_mode, Profile.sha256, Profile.run_id == Point.run_id)
        .join(Point, Profile.point_id == Point.id)
        .join(Run, Point.run_id == Run.id)
    )
    with session_scope(engine) as s:
        return sorted(tuple(r) for r in s.execute(stmt))


def test_merge_carries_profiles_onto_the_copied_points(tmp_path: Path, db_url: str) -> None:
    src_file = tmp_path / "v3.db"
    shutil.copy(V3_EXAMPLE, src_file)
    src = open_database(f"sqlite:///{src_file}")
    dest = open_database(db_url)
    with session_scope(dest) as s:
        report = merge_runs(src, s)
    want, got = _profiles(src), _profiles(dest)
    assert report.profiles == len(want) >= 7 and got == want
    assert all(row[-1] for row in got)
    src.dispose()
    dest.dispose()
