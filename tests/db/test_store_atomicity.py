"""One transaction per repeat: the sample, its requests and the point refresh commit together or not at all,
on SQLite (SQLAlchemy's pysqlite SAVEPOINT recipe, db/engine.py) as on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from bench.sweep import parse_sweep
from db.engine import session_scope
from db.models import Point, RequestRow, Sample
from runners import store
from runners.sweep_runner import execute_sweep

SWEEP = """
name: atomic
model: sim-tiny
server: {backend: sim, sim: {instant: true, startup_s: 0}}
grid: {batch_sizes: [1, 2], spec_modes: [], baseline: true}
workload: {input_len: 8, output_len: 4, num_prompts: 2}
repeats: 2
"""


def _run(engine: Engine, tmp_path: Path, **kw: Any) -> Any:
    return execute_sweep(
        parse_sweep(SWEEP), SWEEP, engine, log_dir=tmp_path / "logs", show_progress=False, **kw
    )


def _consistent(engine: Engine) -> list[tuple[str, int, int]]:
    """(point, repeats the point counts, samples it holds) for every point."""
    with session_scope(engine) as s:
        rows = s.execute(
            select(Point.point_key, Point.repeats, func.count(Sample.id))
            .outerjoin(Sample, Sample.point_id == Point.id)
            .group_by(Point.id)
        ).all()
    return [(k, int(r), int(n)) for k, r, n in rows]


def test_a_failure_between_sample_and_point_refresh_leaves_neither(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_refresh = store.refresh_point
    calls = {"n": 0}

    def refresh_then_fail_once(session: Any, point: Point) -> None:
        calls["n"] += 1
        # The first point's second repeat: the point row exists already, so before the fix pysqlite had no
        # transaction open and the SAVEPOINT around the sample started (and its RELEASE committed) one.
        if calls["n"] == 2:
            raise RuntimeError("injected failure between the sample and the point refresh")
        real_refresh(session, point)

    monkeypatch.setattr(store, "refresh_point", refresh_then_fail_once)
    with pytest.raises(RuntimeError, match="injected"):
        _run(engine, tmp_path)
    rows = _consistent(engine)
    # Nothing of the failed repeat survived: every point holds exactly the samples it counts.
    assert all(repeats == samples for _, repeats, samples in rows), rows
    assert sum(samples for *_, samples in rows) == 1
    with session_scope(engine) as s:
        orphans = s.scalar(
            select(func.count()).select_from(RequestRow).where(~RequestRow.sample_id.in_(select(Sample.id)))
        )
        assert orphans == 0

    monkeypatch.setattr(store, "refresh_point", real_refresh)
    with session_scope(engine) as s:
        run_id = s.scalar(select(Point.run_id).limit(1))
    again = _run(engine, tmp_path, resume_run_id=run_id)
    # --resume measured the repeat that failed, and only what was missing.
    assert again.status in ("done", "unstable")  # unstable: a busy machine's TTFT outlier
    rows = _consistent(engine)
    assert len(rows) == 2 and all(r == n == 2 for _, r, n in rows), rows
