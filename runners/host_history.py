"""What this host measured before, for the dry run's estimate (runners.estimate): server start-ups, window lengths
and the time a point spends outside its windows, from the runs this database holds of this host and its GPUs.

Nearest first: this sweep's earlier runs here; else runs of the same model on the same backend here (on the
stand-in, at the same time scale), whose windows count only where they ran the sweep's prompt and output
lengths. Start-ups depend on the model (minutes for DeepSeek-V3, a second for the stand-in) and windows on the
model, the batch size and the lengths, so nothing is borrowed from another model or workload. Made-up runs
(`specbench seed`) and another host's runs never count.
"""

from __future__ import annotations

import socket
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, func, select

from analysis.labels import SYNTHETIC_TAG
from bench.sweep import SweepSpec
from db.models import Point, Run, Sample, ServerInstance

FINISHED = ("done", "unstable", "partial")


@dataclass(frozen=True)
class Measured:
    """Medians of what earlier runs here measured; `source` says which runs, for the estimate's notes."""

    source: str
    startup_s: float | None = None
    window_s: dict[int, float] = field(default_factory=dict)  # by batch size
    overhead_s: float | None = None  # outside the windows, per repeat: warm-up, flush, storing


def this_host() -> str:
    """The host name runs record (bench/provenance.py)."""
    return socket.gethostname()


def measured(engine: Engine, spec: SweepSpec, gpu_name: str, host: str | None = None) -> Measured | None:
    """What runs of this host (`host`, default this one) on `gpu_name` ("none": no GPU, the stand-in) measured
    that tells about `spec`; None when there are none."""
    host = host or this_host()
    with engine.connect() as c:
        rows = c.execute(
            select(Run.id, Run.sweep_name, Run.overhead_s).where(
                Run.host == host,
                Run.gpu_name == gpu_name,
                Run.backend == spec.server.backend,
                Run.model == spec.model,
                Run.trigger != SYNTHETIC_TAG,
                Run.status.in_(FINISHED),
            )
        ).all()
        mine = [r for r in rows if r.sweep_name == spec.name]
        chosen = mine or [r for r in rows if _same_timing(c, int(r.id), spec)]
        if not chosen:
            return None
        ids = [int(r.id) for r in chosen]
        starts = [
            float(s or 0.0)
            for (s,) in c.execute(
                select(ServerInstance.startup_s).where(
                    ServerInstance.run_id.in_(ids), ServerInstance.startup_s.is_not(None)
                )
            )
        ]
        lengths = {(w.input_len, w.output_len) for w in spec.workloads}
        by_batch: dict[int, list[float]] = {}
        for bs, d, inp, out in c.execute(
            select(Point.batch_size, Point.duration_s, Point.input_len, Point.output_len).where(
                Point.run_id.in_(ids), Point.status == "ok", Point.duration_s.is_not(None)
            )
        ):
            if (inp, out) in lengths and d is not None:
                by_batch.setdefault(int(bs), []).append(float(d))
        repeats = c.execute(
            select(func.count(Sample.id))
            .join(Point, Point.id == Sample.point_id)
            .where(Point.run_id.in_(ids))
        ).scalar_one()
    outside = [float(r.overhead_s) for r in chosen if r.overhead_s is not None]
    return Measured(
        source=_source(host, gpu_name, chosen, bool(mine)),
        startup_s=statistics.median(starts) if starts else None,
        window_s={bs: statistics.median(v) for bs, v in by_batch.items()},
        overhead_s=sum(outside) / repeats if outside and repeats else None,
    )


def _same_timing(c: Any, run_id: int, spec: SweepSpec) -> bool:
    """Whether a run's launches ran at the stand-in's time scale `spec` asks for (always, on a real server)."""
    if spec.server.backend != "sim":
        return True
    envs = c.execute(select(ServerInstance.env).where(ServerInstance.run_id == run_id)).scalars().all()
    sim = spec.server.sim
    want = {"SPECBENCH_SIM_TIME_SCALE": sim.time_scale, "SPECBENCH_SIM_INSTANT": float(sim.instant)}
    return bool(envs) and all(_number((env or {}).get(k)) == v for env in envs for k, v in want.items())


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _source(host: str, gpu_name: str, runs: Sequence[Any], same_sweep: bool) -> str:
    ids = ", ".join(f"#{int(r.id)}" for r in runs[-5:]) + (
        f" and {len(runs) - 5} more" if len(runs) > 5 else ""
    )
    gpu = "no GPU" if gpu_name == "none" else gpu_name
    whose = "this sweep's earlier run(s)" if same_sweep else "run(s) of the same model"
    return f"on this host ({host}, {gpu}) in {whose} {ids}"
