"""What the worker-process tests share (tests/runners/test_worker_*.py): the claims the workers' logs record, and
counts of what the database holds."""

from __future__ import annotations

import re
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from db.models import Job, Point, Run, Sample

CLAIM = re.compile(r"job (\d+) claimed by (\S+) \(attempt (\d+)/(\d+)\)")
FAST = ["--poll-interval", "0.05", "--lease-s", "10", "--retry-backoff-s", "0"]


def claims(logs: list[Path]) -> list[tuple[int, str, int]]:
    out = []
    for log in logs:
        for m in CLAIM.finditer(log.read_text(errors="replace")):
            out.append((int(m[1]), m[2], int(m[3])))
    return out


def wait_all(ps: list[subprocess.Popen[bytes]], timeout: float, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    for p in ps:
        try:
            code = p.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            tails = "\n".join(log.read_text(errors="replace")[-2000:] for log in logs)
            pytest.fail(f"worker {p.pid} still running after {timeout} s:\n{tails}")
        assert code == 0, "\n".join(log.read_text(errors="replace")[-3000:] for log in logs)


def samples_per_repeat(engine: Engine, run_id: int) -> Counter[tuple[str, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(Point.point_key, Sample.repeat)
            .join(Sample, Sample.point_id == Point.id)
            .where(Point.run_id == run_id)
        ).all()
    return Counter((key, repeat) for key, repeat in rows)


def runs_of(engine: Engine, job_id: int) -> list[tuple[int, str]]:
    with engine.connect() as conn:
        return [(int(i), s) for i, s in conn.execute(select(Run.id, Run.status).where(Run.job_id == job_id))]


def job_row(engine: Engine, job_id: int) -> dict[str, object]:
    with engine.connect() as conn:
        return dict(conn.execute(select(Job.__table__).where(Job.id == job_id)).mappings().one())


def sample_count(engine: Engine, run_id: int | None = None) -> int:
    stmt = select(func.count()).select_from(Sample).join(Point, Point.id == Sample.point_id)
    if run_id is not None:
        stmt = stmt.where(Point.run_id == run_id)
    with engine.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


def wait_for(predicate: object, timeout: float, what: str, poll: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)
