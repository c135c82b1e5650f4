"""Importing a run in parts: the same run (same uid) resumed on another host grows by what the later part adds,
without a second copy, without touching the repeats already here, and idempotently."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from db.engine import session_scope
from db.merge import Counts, merge_runs
from db.migrate import open_database
from db.models import METRIC_FIELDS, Point, Profile, RequestRow, Run, Sample, ServerInstance
from runners.cli import app
from tests.fixtures.run_parts import (
    CUT,
    RESUMED,
    RESUMED_AT,
    UID,
    example_in_parts,
    example_point,
)

pytestmark = pytest.mark.slow  # tests/conftest.py starts the slow files first


def _requests(s: Session, *where: Any) -> int:
    stmt = (
        select(func.count()).select_from(RequestRow).join(Sample).join(Point).join(Run).where(Run.uid == UID)
    )
    return int(s.scalar(stmt.where(*where)) or 0)


def _contents(engine: Engine) -> dict[str, tuple[Any, ...]]:
    """Per point of the run: its repeats, its samples' repeats and servers, requests and profile paths."""
    out: dict[str, tuple[Any, ...]] = {}
    with session_scope(engine) as s:
        for p in s.scalars(select(Point).join(Run).where(Run.uid == UID)):
            servers = []
            for x in p.samples:
                si = s.get(ServerInstance, x.server_instance_id) if x.server_instance_id else None
                servers.append(None if si is None else (si.config_key, si.started_at))
            profiles = sorted(str(x) for x in s.scalars(select(Profile.path).where(Profile.point_id == p.id)))
            reqs = sum(len(x.requests) for x in p.samples)
            out[p.point_key] = (p.repeats, [x.repeat for x in p.samples], servers, reqs, profiles)
    return out


def test_a_run_imported_in_parts_grows_to_the_whole_run(tmp_path: Path, db_url: str) -> None:
    part1_file, full_file = example_in_parts(tmp_path)
    part1, full = open_database(f"sqlite:///{part1_file}"), open_database(f"sqlite:///{full_file}")
    with session_scope(full) as s:
        want_requests = _requests(s, Point.point_key == CUT) + _requests(
            s, Point.point_key == RESUMED, Sample.repeat >= 3
        )
        src_point = example_point(s, RESUMED)
        want_metrics = {f: getattr(src_point, f) for f in (*METRIC_FIELDS, "status", "reason", "repeats")}
        src_run = s.scalars(select(Run).where(Run.uid == UID)).one()
        want_run = (src_run.status, src_run.error, src_run.finished_at)
    dest = open_database(db_url)
    with session_scope(dest) as s:
        first = merge_runs(part1, s)
    assert len(first.runs_added) == 2 and not first.runs_grown and first.points == 7 + 1
    with session_scope(dest) as s:
        kept = example_point(s, RESUMED).samples[0]
        kept.reason, kept.output_throughput = "measured by part 1", 12345.0  # a marker a re-import must keep
        kept_id = kept.id

    with session_scope(dest) as s:
        second = merge_runs(full, s)
    assert not second.runs_added and len(second.runs_skipped) == 1  # the example's other run
    assert len(second.runs_grown) == 1 and second.runs_grown[0] in first.runs_added
    g = second.grown
    assert (g.points, g.samples, g.requests, g.profiles, g.servers) == (1, 5 + 2, want_requests, 2, 1)
    assert want_requests > 0  # the example's requests survive its upgrade (db/migrations/env.py)
    assert (second.points, second.samples, second.requests, second.profiles) == (0, 0, 0, 0)
    with session_scope(dest) as s:
        run = s.scalars(select(Run).where(Run.uid == UID)).one()
        assert (run.status, run.error, run.finished_at) == want_run == ("done", None, want_run[2])
        point = example_point(s, RESUMED)
        assert {f: getattr(point, f) for f in want_metrics} == want_metrics
        server = s.get(ServerInstance, point.server_instance_id)
        assert server is not None and server.run_id == run.id and server.started_at == RESUMED_AT
        kept = s.get(Sample, kept_id)
        assert kept is not None and (kept.reason, kept.output_throughput) == ("measured by part 1", 12345.0)
    assert _contents(dest) == _contents(full)

    with session_scope(dest) as s:
        third = merge_runs(full, s)
    assert not third.runs_added and not third.runs_grown and len(third.runs_skipped) == 2
    assert third.grown == Counts()
    assert _contents(dest) == _contents(full)
    with session_scope(dest) as s:
        again = merge_runs(part1, s)  # an older part adds nothing and rolls nothing back
        assert not again.runs_grown and s.scalars(select(Run.status).where(Run.uid == UID)).one() == "done"
    for eng in (part1, full, dest):
        eng.dispose()


def test_import_says_how_much_a_run_grew(tmp_path: Path) -> None:
    part1, full = example_in_parts(tmp_path)
    db = ["--db", f"sqlite:///{tmp_path / 'team.db'}"]
    lines = []
    for source in (part1, full, full):
        res = CliRunner().invoke(app, ["import", str(source), *db])
        assert res.exit_code == 0, res.output
        lines.append(" ".join(res.output.split()))
    in_part1, in_full = _all_requests(part1), _all_requests(full)
    assert (
        lines[0]
        == f"imported 2 run(s) (8 points, 36 repeats, {in_part1} requests, 5 profiles); 0 already present"
    )
    assert lines[1] == (
        "imported 0 run(s) (0 points, 0 repeats, 0 requests, 0 profiles), grew 1 run(s) "
        f"(+1 points, +7 repeats, +{in_full - in_part1} requests, +2 profiles); 1 already present"
    )
    assert lines[2] == "imported 0 run(s) (0 points, 0 repeats, 0 requests, 0 profiles); 2 already present"


def _all_requests(path: Path) -> int:
    with sqlite3.connect(path) as c:
        return int(c.execute("SELECT count(*) FROM requests").fetchone()[0])
