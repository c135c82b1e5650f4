"""Merge runs from another specbench database (a GPU host's SQLite file, an example) into this one.

Runs are matched by their time-sortable `uid`, so merging is idempotent and databases from several hosts
combine without id clashes: every row gets a new id here and its foreign keys are remapped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, inspect, select
from sqlalchemy.orm import Session

from db.models import Base, Point, Profile, RequestRow, Run, Sample, ServerInstance


@dataclass
class MergeReport:
    runs_added: list[int] = field(default_factory=list)
    runs_skipped: list[str] = field(default_factory=list)
    points: int = 0
    samples: int = 0
    requests: int = 0
    profiles: int = 0


def _copy(row: Base, model: type[Base], **overrides: Any) -> Any:
    """A detached copy of `row` without its primary key (the database assigns a new one)."""
    values = {c.key: getattr(row, c.key) for c in inspect(model).column_attrs if c.key != "id"}
    values.update(overrides)
    return model(**values)


def merge_runs(source: Engine, dest: Session, *, sweep: str | None = None) -> MergeReport:
    """Copy every run of `source` (optionally only one sweep's) that `dest` does not have yet."""
    report = MergeReport()
    have = set(dest.scalars(select(Run.uid)))
    with Session(source) as src:
        q = select(Run).order_by(Run.id)
        if sweep is not None:
            q = q.where(Run.sweep_name == sweep)
        for run in src.scalars(q):
            if run.uid in have:
                report.runs_skipped.append(run.uid)
                continue
            new_run = _copy(run, Run, job_id=None)  # jobs belong to the other database's queue
            dest.add(new_run)
            dest.flush()
            server_ids: dict[int, int] = {}
            point_ids: dict[int, int] = {}
            for si in src.scalars(select(ServerInstance).where(ServerInstance.run_id == run.id)):
                new_si = _copy(si, ServerInstance, run_id=new_run.id)
                dest.add(new_si)
                dest.flush()
                server_ids[si.id] = new_si.id
            for point in src.scalars(select(Point).where(Point.run_id == run.id)):
                new_point = _copy(
                    point,
                    Point,
                    run_id=new_run.id,
                    server_instance_id=server_ids.get(point.server_instance_id or -1),
                )
                dest.add(new_point)
                dest.flush()
                point_ids[point.id] = new_point.id
                report.points += 1
                for sample in src.scalars(select(Sample).where(Sample.point_id == point.id)):
                    new_sample = _copy(
                        sample,
                        Sample,
                        point_id=new_point.id,
                        server_instance_id=server_ids.get(sample.server_instance_id or -1),
                    )
                    dest.add(new_sample)
                    dest.flush()
                    report.samples += 1
                    reqs = list(src.scalars(select(RequestRow).where(RequestRow.sample_id == sample.id)))
                    dest.add_all(_copy(r, RequestRow, sample_id=new_sample.id) for r in reqs)
                    report.requests += len(reqs)
            # Profiles keep their `host` and `path`: the trace stays where it was captured (docs/profiles.md).
            for prof in src.scalars(select(Profile).where(Profile.run_id == run.id)):
                dest.add(_copy(prof, Profile, run_id=new_run.id, point_id=point_ids[prof.point_id]))
                report.profiles += 1
            dest.flush()
            report.runs_added.append(new_run.id)
            have.add(run.uid)
    return report
