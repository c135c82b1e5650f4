"""Merge runs from another specbench database (a GPU host's SQLite file, an example) into this one.
Runs match by `uid`, so merging is idempotent; every row gets a new id here, foreign keys remapped. A run
already here grows when the source holds more of it (resumed elsewhere): rows match by natural keys (points by
`point_key`, samples by point and `repeat`, servers by `config_key` and `started_at`, profiles by point, rank,
path and `created_at`, parts by number) and only missing ones are copied; a part takes the source's end when
the source holds it further along. A sample here is never replaced, except a `failed` one the source
re-measured in place (runners.store.store_sample), which the source's repeat supersedes with its requests."""

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, insert, inspect, select, text
from sqlalchemy.orm import Session

from db import validate
from db.models import (
    Base,
    CorrectnessOutput,
    Point,
    Profile,
    RequestRow,
    Run,
    RunPart,
    Sample,
    ServerInstance,
)

# What `--resume` or a retried job rewrites on the run row (an edited stopping rule: the sweep too).
RUN_RESUME_COLUMNS = (
    *("status", "error", "finished_at", "overhead_s", "drift", "sweep_yaml", "sweep_hash", "provenance"),
)
# A point's identity within its run: never overwritten when its aggregates are refreshed.
POINT_IDENTITY_COLUMNS = frozenset({"id", "run_id", "point_key", "created_at", "server_instance_id"})
# Repeat statuses that are a measurement (MEASURED_STATUSES) and so supersede a `failed` one here, as
# store_sample does; explicit, so a status added later replaces nothing until decided.
SUPERSEDES_FAILED = frozenset({"ok", "unstable", "invalid", "mode_mismatch"})


@dataclass
class Counts:
    """Rows copied, new ones only; `replaced`: `failed` repeats here that took the source's measurement."""

    points: int = 0
    samples: int = 0
    requests: int = 0
    profiles: int = 0
    servers: int = 0
    replaced: int = 0
    checks: int = 0  # correctness_outputs rows: what a launch answered to the correctness check
    parts: int = 0  # run_parts rows added, or brought up to the source's end (runners.parts)


@dataclass
class MergeReport(Counts):
    """The counts inherited from Counts are those of the imported runs; `grown` those added to runs here."""

    runs_added: list[int] = field(default_factory=list)
    runs_grown: list[int] = field(default_factory=list)  # ids here of runs that got rows
    runs_skipped: list[str] = field(default_factory=list)  # uids of runs with nothing new
    grown: Counts = field(default_factory=Counts)

    def summary(self) -> str:
        """The line `specbench import` prints (tests/test_merge_replace.py), with the replaced repeats."""
        g = self.grown
        replaced = f", +{g.replaced} repeats replaced a failed one" if g.replaced else ""
        grew = (
            f", grew {len(self.runs_grown)} run(s) (+{g.points} points, +{g.samples} repeats{replaced}, "
            f"+{g.requests} requests, +{g.profiles} profiles)"
            if self.runs_grown
            else ""
        )
        return (
            f"imported {len(self.runs_added)} run(s) ({self.points} points, {self.samples} repeats, "
            f"{self.requests} requests, {self.profiles} profiles){grew}; "
            f"{len(self.runs_skipped)} already present"
        )


def _copy(row: Base, model: type[Base], **overrides: Any) -> Any:
    """A detached copy of `row` without its primary key (the database assigns a new one)."""
    values = {c.key: getattr(row, c.key) for c in inspect(model).column_attrs if c.key != "id"}
    values.update(overrides)
    return model(**values)


# A request's columns but its own id and its sample's (both new here).
_REQUEST_COLUMNS = tuple(c for c in RequestRow.__table__.c if c.key not in ("id", "sample_id"))


def _remap(ids: dict[int, int], old: int | None) -> int | None:
    return None if old is None else ids.get(old)


# What `merge_runs` copies, table by table, and the id columns it replaces (not checked).
_RUNS = "SELECT id FROM runs{where}"
_COPIED: tuple[tuple[type[Base], str, tuple[str, ...]], ...] = (
    (Run, "{where_runs}", ("id", "job_id")),
    (ServerInstance, f"WHERE run_id IN ({_RUNS})", ("id", "run_id")),
    (Point, f"WHERE run_id IN ({_RUNS})", ("id", "run_id", "server_instance_id")),
    (
        Sample,
        f"WHERE point_id IN (SELECT id FROM points WHERE run_id IN ({_RUNS}))",
        ("id", "point_id", "server_instance_id"),
    ),
    (
        RequestRow,
        f"WHERE sample_id IN (SELECT id FROM samples WHERE point_id IN (SELECT id FROM points WHERE run_id IN "
        f"({_RUNS})))",
        ("id", "sample_id"),
    ),
    (Profile, f"WHERE run_id IN ({_RUNS})", ("id", "run_id", "point_id")),
    (RunPart, f"WHERE run_id IN ({_RUNS})", ("id", "run_id")),
)


def check_source(source: Engine, *, sweep: str | None = None) -> None:
    """Raise validate.RowProblem (`points row 12: batch_size: ...`) for the first source value that does not
    fit this schema, read as the driver returns it, before the ORM parses anything."""
    where = " WHERE sweep_name = :sweep" if sweep is not None else ""
    params = {"sweep": sweep} if sweep is not None else {}
    with source.connect() as conn:
        for model, clause, skip in _COPIED:
            table = model.__tablename__
            # Table and column names are this schema's own, never input; the one value is a bound parameter.
            sql = f"SELECT * FROM {table} " + clause.format(where=where, where_runs=where.strip())
            result = conn.execute(text(sql), params)
            names = list(result.keys())
            for values in result:
                row = dict(zip(names, values, strict=True))
                validate.check_row(model, row, f"{table} row {row.get('id')!r}", skip=skip)


def merge_runs(source: Engine, dest: Session, *, sweep: str | None = None) -> MergeReport:
    """Copy every run of `source` (or only one sweep's) that `dest` lacks; grow those it has in part."""
    report = MergeReport()
    have: dict[str, int] = {uid: run_id for uid, run_id in dest.execute(select(Run.uid, Run.id))}
    with Session(source) as src:
        q = select(Run).order_by(Run.id)
        if sweep is not None:
            q = q.where(Run.sweep_name == sweep)
        for run in src.scalars(q):
            dest_id = have.get(run.uid)
            if dest_id is None:
                have[run.uid] = _copy_run(src, run, dest, report)
                report.runs_added.append(have[run.uid])
            elif _grow_run(src, run, dest, dest_id, report.grown):
                report.runs_grown.append(dest_id)
            else:
                report.runs_skipped.append(run.uid)
    return report


def _copy_run(src: Session, run: Run, dest: Session, counts: Counts) -> int:
    """Copy a run `dest` does not have, with everything of it; returns its id in `dest`."""
    new_run = _copy(run, Run, job_id=None)  # jobs belong to the other database's queue
    dest.add(new_run)
    dest.flush()
    _merge_contents(src, run, dest, new_run.id, counts)
    return int(new_run.id)


def _grow_run(src: Session, run: Run, dest: Session, dest_id: int, counts: Counts) -> bool:
    """Add what `dest`'s copy of `run` lacks; True if anything was (the run row then follows the source)."""
    before = dataclasses.astuple(counts)
    _merge_contents(src, run, dest, dest_id, counts)
    if dataclasses.astuple(counts) == before:
        return False
    dest_run = dest.get(Run, dest_id)
    assert dest_run is not None
    for name in RUN_RESUME_COLUMNS:
        setattr(dest_run, name, getattr(run, name))
    dest.flush()
    return True


def _merge_contents(src: Session, run: Run, dest: Session, dest_id: int, counts: Counts) -> None:
    """Copy the servers, points, samples (with requests) and profiles of `run` that `dest_id` lacks."""
    server_ids = _merge_servers(src, run, dest, dest_id, counts)
    point_ids = _merge_points(src, run, dest, dest_id, server_ids, counts)
    _merge_profiles(src, run, dest, dest_id, point_ids, counts)
    _merge_checks(src, run, dest, dest_id, server_ids, counts)
    _merge_parts(src, run, dest, dest_id, counts)
    dest.flush()


def _merge_servers(src: Session, run: Run, dest: Session, dest_id: int, counts: Counts) -> dict[int, int]:
    """Source server instance id -> dest id, adding the missing ones (matched by config_key, started_at)."""
    here = {
        (si.config_key, si.started_at): si.id
        for si in dest.scalars(select(ServerInstance).where(ServerInstance.run_id == dest_id))
    }
    ids: dict[int, int] = {}
    for si in src.scalars(
        select(ServerInstance).where(ServerInstance.run_id == run.id).order_by(ServerInstance.id)
    ):
        key = (si.config_key, si.started_at)
        if key not in here:
            new_si = _copy(si, ServerInstance, run_id=dest_id)
            dest.add(new_si)
            dest.flush()
            here[key] = new_si.id
            counts.servers += 1
        ids[si.id] = here[key]
    return ids


def _merge_points(
    src: Session, run: Run, dest: Session, dest_id: int, server_ids: dict[int, int], counts: Counts
) -> dict[int, int]:
    """Source point id -> dest id; missing points and repeats are copied, and a `failed` repeat here replaced
    by the source's measurement (SUPERSEDES_FAILED). A point takes the source's aggregates, status and server
    when the source holds more repeats, or when it replaced a failed one and holds every repeat here."""
    here = {p.point_key: p for p in dest.scalars(select(Point).where(Point.run_id == dest_id))}
    ids: dict[int, int] = {}
    for point in src.scalars(select(Point).where(Point.run_id == run.id).order_by(Point.id)):
        server_id = _remap(server_ids, point.server_instance_id)
        samples = list(src.scalars(select(Sample).where(Sample.point_id == point.id).order_by(Sample.repeat)))
        target = here.get(point.point_key)
        repeats_here: dict[int, Sample] = {}
        existed = target is not None
        if target is None:
            target = _copy(point, Point, run_id=dest_id, server_instance_id=server_id)
            dest.add(target)
            dest.flush()
            counts.points += 1
        else:
            repeats_here = {
                x.repeat: x for x in dest.scalars(select(Sample).where(Sample.point_id == target.id))
            }
        ids[point.id] = target.id
        replaced = False
        for sample in samples:
            mine = repeats_here.get(sample.repeat)
            if mine is None:
                counts.requests += _copy_sample(src, sample, dest, target.id, server_ids)
                counts.samples += 1
            elif mine.status == "failed" and sample.status in SUPERSEDES_FAILED:
                dest.delete(mine)  # its requests go with it (Sample.requests cascades)
                dest.flush()  # before the insert: (point_id, repeat) is unique
                counts.requests += _copy_sample(src, sample, dest, target.id, server_ids)
                counts.replaced += 1
                replaced = True
        if existed and (
            len(samples) > len(repeats_here)
            or (replaced and repeats_here.keys() <= {x.repeat for x in samples})
        ):
            _refresh_point(target, point, server_id)
    return ids


def _refresh_point(target: Point, point: Point, server_id: int | None) -> None:
    for attr in inspect(Point).column_attrs:
        if attr.key not in POINT_IDENTITY_COLUMNS:
            setattr(target, attr.key, getattr(point, attr.key))
    target.server_instance_id = server_id  # a resumed run moves a point to the server that measured it last


def _copy_sample(
    src: Session, sample: Sample, dest: Session, point_id: int, server_ids: dict[int, int]
) -> int:
    """Copy one repeat with its requests (its window telemetry is a column of it); returns requests copied."""
    new_sample = _copy(
        sample, Sample, point_id=point_id, server_instance_id=_remap(server_ids, sample.server_instance_id)
    )
    dest.add(new_sample)
    dest.flush()
    # Requests are most rows (39k in the H200 grid): one bulk insert of plain rows, not ORM objects.
    reqs = [
        {**row, "sample_id": new_sample.id}
        for row in src.execute(select(*_REQUEST_COLUMNS).where(RequestRow.sample_id == sample.id)).mappings()
    ]
    if reqs:
        dest.execute(insert(RequestRow), reqs)
    return len(reqs)


def _merge_profiles(
    src: Session, run: Run, dest: Session, dest_id: int, point_ids: dict[int, int], counts: Counts
) -> None:
    """Copy the profiles `dest` lacks; `host` and `path` stay where the trace was captured."""

    def keyed(run_id: int) -> Any:
        return (
            select(Profile, Point.point_key)
            .join(Point, Profile.point_id == Point.id)
            .where(Profile.run_id == run_id)
            .order_by(Profile.id)
        )

    here = {(key, p.tp_rank, p.path, p.created_at) for p, key in dest.execute(keyed(dest_id))}
    for prof, key in src.execute(keyed(run.id)):
        if (key, prof.tp_rank, prof.path, prof.created_at) not in here:
            dest.add(_copy(prof, Profile, run_id=dest_id, point_id=point_ids[prof.point_id]))
            counts.profiles += 1


def _merge_checks(
    src: Session, run: Run, dest: Session, dest_id: int, server_ids: dict[int, int], counts: Counts
) -> None:
    """Copy the check's raw answers `dest` lacks (by config_key, created_at), to judge points again here."""
    here = {
        (c.config_key, c.created_at)
        for c in dest.scalars(select(CorrectnessOutput).where(CorrectnessOutput.run_id == dest_id))
    }
    for row in src.scalars(
        select(CorrectnessOutput).where(CorrectnessOutput.run_id == run.id).order_by(CorrectnessOutput.id)
    ):
        if (row.config_key, row.created_at) not in here:
            server = _remap(server_ids, row.server_instance_id)
            dest.add(_copy(row, CorrectnessOutput, run_id=dest_id, server_instance_id=server))
            counts.checks += 1


# What a part's end rewrites on its row; the rest (number, invocation, host, start) is fixed when it begins.
PART_END_COLUMNS = ("status", "finished_at", "sglang_version", "sglang_patch", "check", "drift")


def _merge_parts(src: Session, run: Run, dest: Session, dest_id: int, counts: Counts) -> None:
    """Copy the parts `dest` lacks (by number); a part here with the same start takes the source's end when it
    differs; one that began elsewhere stays as it is."""
    here = {p.part: p for p in dest.scalars(select(RunPart).where(RunPart.run_id == dest_id))}
    for part in src.scalars(select(RunPart).where(RunPart.run_id == run.id).order_by(RunPart.part)):
        mine = here.get(part.part)
        if mine is None:
            dest.add(_copy(part, RunPart, run_id=dest_id))
            counts.parts += 1
        elif mine.started_at == part.started_at and any(
            getattr(mine, c) != getattr(part, c) for c in PART_END_COLUMNS
        ):
            for c in PART_END_COLUMNS:
                setattr(mine, c, getattr(part, c))
            counts.parts += 1
