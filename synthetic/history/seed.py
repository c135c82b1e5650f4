"""SYNTHETIC history into a database (`db.bulk`), every run marked as in `synthetic.history.model`."""

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import Engine, select

from db.bulk import BulkIds, BulkWriter, delete_runs_by_trigger, fix_sequences
from db.fingerprint import point_fingerprint
from db.models import Run
from db.types import uuid7
from synthetic.history.model import DEFAULT_SHAPE, SYNTHETIC_TRIGGER, Shape, build_grid
from synthetic.history.rows import TABLES, Columns, RunContext, one_run, sweep_yaml


@dataclass
class SeedReport:
    runs: int = 0
    points: int = 0
    samples: int = 0
    seconds: float = 0.0


def seed_history(
    engine: Engine,
    points: int,
    *,
    seed: int = 0,
    shape: Shape = DEFAULT_SHAPE,
    end: datetime | None = None,
    interval: timedelta = timedelta(hours=12),
    with_samples: bool = True,
    chunk_runs: int = 200,
    progress: Callable[[int, int], None] | None = None,
) -> SeedReport:
    """Write about `points` synthetic points (whole runs) `interval` apart per lane up to `end`."""
    if points <= 0:
        raise ValueError("points must be positive")
    t0 = time.perf_counter()
    end = end or datetime.now(UTC)
    per_run = shape.points_per_run
    rounds = max(1, math.ceil(points / (per_run * len(shape.lanes))))
    grids = [build_grid(lane, shape, point_fingerprint) for lane in shape.lanes]
    yamls = [sweep_yaml(lane, shape) for lane in shape.lanes]
    rng = np.random.default_rng(seed)
    ids = BulkIds(engine)
    writer = BulkWriter(engine)
    report = SeedReport()
    planned = rounds * len(shape.lanes) * per_run
    commits = [hashlib.sha1(f"sglang-main-{seed}-{r}".encode()).hexdigest() for r in range(rounds)]
    pending = [(r, li) for r in range(rounds) for li in range(len(shape.lanes))]
    for first in range(0, len(pending), chunk_runs):
        cols: dict[str, Columns] = {name: Columns() for name in TABLES}
        for r, li in pending[first : first + chunk_runs]:
            started = end - interval * (rounds - 1 - r) - timedelta(minutes=17 * (len(shape.lanes) - li))
            lane = shape.lanes[li]
            ctx = RunContext(shape, lane, grids[li], yamls[li], r, rounds, commits[r], started, seed, uuid7())
            one_run(cols, ids, rng, ctx, with_samples)
        writer.write({name: c.data for name, c in cols.items()})
        report.runs += cols["runs"].n
        report.points += cols["points"].n
        report.samples += cols["samples"].n
        if progress is not None:
            progress(report.points, planned)
    fix_sequences(engine)
    report.seconds = time.perf_counter() - t0
    return report


def has_synthetic(engine: Engine) -> bool:
    with engine.connect() as c:
        return c.execute(select(Run.id).where(Run.trigger == SYNTHETIC_TRIGGER).limit(1)).first() is not None


def delete_synthetic(engine: Engine) -> int:
    """Remove every synthetic run (real runs are kept). Returns the number of runs removed."""
    return delete_runs_by_trigger(engine, SYNTHETIC_TRIGGER)
