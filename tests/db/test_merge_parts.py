"""Importing a run measured in parts on several hosts: its parts (host, GPU, SGLang, the drift check against the
part before) travel with it, a snapshot taken while a part ran is brought up to that part's end, and importing
the same file twice adds nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from db.engine import session_scope
from db.merge import merge_runs
from db.migrate import open_database
from db.models import Run, RunPart

UID = "01a23d40-50f0-7c93-8dde-f78e50822bcc"
T0 = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)
T1 = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)


def _run(s: Session) -> Run:
    run = Run(
        uid=UID,
        sweep_name="verdict",
        sweep_yaml="name: verdict\n",
        sweep_hash="0" * 64,
        backend="sglang",
        status="running",
        model="m",
        provenance={},
        started_at=T0,
    )
    s.add(run)
    s.flush()
    return run


def _part(run_id: int, n: int, host: str, started: datetime, **end: object) -> RunPart:
    return RunPart(
        run_id=run_id,
        part=n,
        invocation=40 * (n - 1),
        host=host,
        gpu_name="NVIDIA H200" if host == "gpu-a" else "NVIDIA H100 80GB HBM3",
        gpu_count=1,
        sglang_version="0.5.13.post1",
        sglang_patch="none",
        status=str(end.pop("status", "running")),
        started_at=started,
        **end,
    )


def _merge(src: Engine, dest: Engine) -> list[int]:
    with session_scope(dest) as s:
        report = merge_runs(src, s)
        return [*report.runs_added, *report.runs_grown]


def _parts(engine: Engine) -> list[tuple[object, ...]]:
    with session_scope(engine) as s:
        rows = s.scalars(select(RunPart).join(Run).where(Run.uid == UID).order_by(RunPart.part))
        return [
            (p.part, p.host, p.status, p.finished_at is not None, (p.check or {}).get("agrees")) for p in rows
        ]


def test_a_run_in_parts_imports_with_its_parts_and_grows_with_them(tmp_path: Path, db_url: str) -> None:
    src = open_database(f"sqlite:///{tmp_path / 'gpu.db'}")
    dest = open_database(db_url)
    with session_scope(src) as s:  # the snapshot taken while part 1 ran on gpu-a
        s.add(_part(_run(s).id, 1, "gpu-a", T0))
    assert len(_merge(src, dest)) == 1
    assert _parts(dest) == [(1, "gpu-a", "running", False, None)]
    with session_scope(src) as s:  # part 1 ended, part 2 ran on gpu-b and agreed with it
        run = s.scalars(select(Run)).one()
        first = s.scalars(select(RunPart)).one()
        first.status, first.finished_at = "partial", T1
        check = {"against_part": 1, "agrees": True, "change": 0.012}
        s.add(_part(run.id, 2, "gpu-b", T1, status="done", finished_at=T1, check=check))
        run.status = "done"
    assert len(_merge(src, dest)) == 1  # grown
    assert _parts(dest) == [(1, "gpu-a", "partial", True, None), (2, "gpu-b", "done", True, True)]
    with session_scope(dest) as s:
        assert s.scalars(select(Run.status).where(Run.uid == UID)).one() == "done"
    assert _merge(src, dest) == []  # the same file again: nothing new
    assert len(_parts(dest)) == 2
    src.dispose()
    dest.dispose()
