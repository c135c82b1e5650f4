"""Finished runs' start-ups, window lengths and time outside windows, for the dry run's estimate.

Nearest first: this host's runs on its GPUs (this sweep's, else the same model and backend, on the stand-in
at the same time scale); only if none, another host's (docs/guide/gpu-hosts.md), the same GPU type first.
Windows count only at the sweep's prompt and output lengths; nothing is borrowed from another model or
workload, and made-up runs (`specbench seed`) never count. `Measured.source` says which runs were read."""

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


def measured(engine: Engine, spec: SweepSpec, gpu_name: str, host: str | None = None) -> Measured | None:
    """What earlier runs tell about `spec`: `host`'s on `gpu_name` first, else another host's; or None."""
    host = host or socket.gethostname()  # the host name runs record (bench/provenance.py)
    with engine.connect() as c:
        rows = c.execute(
            select(Run.id, Run.sweep_name, Run.overhead_s, Run.host, Run.gpu_name).where(
                Run.backend == spec.server.backend,
                Run.model == spec.model,
                Run.trigger != SYNTHETIC_TAG,
                Run.status.in_(FINISHED),
            )
        ).all()
        here = [r for r in rows if r.host == host and r.gpu_name == gpu_name]
        elsewhere = [r for r in rows if not (r.host == host and r.gpu_name == gpu_name)]
        tiers = (here, [r for r in elsewhere if r.gpu_name == gpu_name], elsewhere)
        for runs in tiers:
            mine = [r for r in runs if r.sweep_name == spec.name]
            chosen = mine or [r for r in runs if _same_timing(c, int(r.id), spec)]
            if chosen:
                break
        else:
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
    """Whether a run's launches ran at the stand-in time scale `spec` asks for (always, on a real server)."""
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
    whose = "this sweep's earlier run(s)" if same_sweep else "run(s) of the same model"
    if all(r.host == host and r.gpu_name == gpu_name for r in runs):
        gpu = "no GPU" if gpu_name == "none" else gpu_name
        return f"on this host ({host}, {gpu}) in {whose} {ids}"
    # Another host's figures (or another GPU's of a host of the same name): said plainly, with where they ran.
    where = ", ".join(sorted({f"{r.host}, {'no GPU' if r.gpu_name == 'none' else r.gpu_name}" for r in runs}))
    return f"on another host or GPU ({where}; nothing measured here tells) in {whose} {ids}"
