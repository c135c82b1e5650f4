"""Importing a run in parts: the same run (same uid) resumed on another host grows by what the later part adds,
without a second copy, without touching the repeats already here, and idempotently."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from db.engine import session_scope
from db.merge import Counts, merge_runs
from db.migrate import open_database
from db.models import METRIC_FIELDS, Point, Profile, RequestRow, Run, Sample, ServerInstance
from db.snapshot import snapshot
from runners.cli import app
from tests.paths import REPO_ROOT

V3_EXAMPLE = REPO_ROOT / "examples" / "h200-v3slice-paired.db"
UID = "01a23d40-50f0-7c93-8dde-f78e50822bcb"  # the example's paired run: 8 points of 5 repeats, 7 profiled
CUT = "a3c5a06964831f83/bs32/random:random:in256:out256:seed1:t0.0/n128"  # measured in part 2 only
RESUMED = "2bff612da9aafe1f/bs64/random:random:in256:out256:seed1:t0.0/n256"  # repeats 3, 4 in part 2
PROFILED = "2bff612da9aafe1f/bs32/random:random:in256:out256:seed1:t0.0/n128"  # its profile in part 2 only
RESUMED_AT = datetime(2026, 12, 4, 1, 0, tzinfo=UTC)


def _point(s: Session, key: str) -> Point:
    return s.scalars(select(Point).join(Run).where(Run.uid == UID, Point.point_key == key)).one()


def resumed_server(s: Session, point: Point, started_at: datetime) -> ServerInstance:
    """A new server of `point`'s config, as `--resume` on a GPU host launches one (stored, with an id)."""
    old = s.get(ServerInstance, point.server_instance_id)
    assert old is not None
    server = ServerInstance(
        run_id=point.run_id,
        config_key=old.config_key,
        label=old.label,
        requested=old.requested,
        status="stopped",
        started_at=started_at,
    )
    s.add(server)
    s.flush()
    return server


def _parts(tmp_path: Path) -> tuple[Path, Path]:
    """The example as a run measured in two parts: `full` (part 2: the run resumed on a new server that
    measured RESUMED's last repeats, then CUT) and `part1`, that run as the first part left it."""
    full = tmp_path / "full.db"
    shutil.copy(V3_EXAMPLE, full)  # never write to the committed example
    eng = open_database(f"sqlite:///{full}")
    with session_scope(eng) as s:
        point = _point(s, RESUMED)
        server = s.get(ServerInstance, point.server_instance_id)
        assert server is not None
        resumed = resumed_server(s, point, RESUMED_AT)
        point.server_instance_id = resumed.id
        for sample in point.samples:
            sample.server_instance_id = resumed.id if sample.repeat >= 3 else server.id
    eng.dispose()
    part1 = tmp_path / "part1.db"
    snapshot(str(full), str(part1))
    eng = open_database(f"sqlite:///{part1}")
    with session_scope(eng) as s:
        cut = _point(s, CUT)
        s.execute(delete(Profile).where(Profile.point_id.in_([cut.id, _point(s, PROFILED).id])))
        s.delete(cut)  # its samples and requests go with it
        point = _point(s, RESUMED)
        for sample in [x for x in point.samples if x.repeat >= 3]:
            point.samples.remove(sample)
        point.repeats, point.output_throughput, point.status = 3, 1.0, "unstable"  # aggregates of 3 repeats
        point.server_instance_id = next(x.server_instance_id for x in point.samples)
        s.execute(delete(ServerInstance).where(ServerInstance.started_at == RESUMED_AT))
        run = s.scalars(select(Run).where(Run.uid == UID)).one()
        run.status, run.error = "partial", "interrupted (Ctrl-C)"
        run.finished_at = datetime(2026, 12, 3, 19, 0, tzinfo=UTC)
    eng.dispose()
    return part1, full


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
    part1_file, full_file = _parts(tmp_path)
    part1, full = open_database(f"sqlite:///{part1_file}"), open_database(f"sqlite:///{full_file}")
    with session_scope(full) as s:
        want_requests = _requests(s, Point.point_key == CUT) + _requests(
            s, Point.point_key == RESUMED, Sample.repeat >= 3
        )
        src_point = _point(s, RESUMED)
        want_metrics = {f: getattr(src_point, f) for f in (*METRIC_FIELDS, "status", "reason", "repeats")}
        src_run = s.scalars(select(Run).where(Run.uid == UID)).one()
        want_run = (src_run.status, src_run.error, src_run.finished_at)
    dest = open_database(db_url)
    with session_scope(dest) as s:
        first = merge_runs(part1, s)
    assert len(first.runs_added) == 2 and not first.runs_grown and first.points == 7 + 1
    with session_scope(dest) as s:
        kept = _point(s, RESUMED).samples[0]
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
        point = _point(s, RESUMED)
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
    part1, full = _parts(tmp_path)
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
