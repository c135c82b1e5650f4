"""Run reads: totals, the newest runs, filtered listings, pickers, resolving what a user types to a run id,
and one run's servers, points and samples. Per-run reads walk `ix_points_run_id`."""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from sqlalchemy import Engine, and_, case, func, select

from db.models import MAX_ID, UID_LENGTH, UID_PREFIX, Point, Run, RunPart, Sample, ServerInstance
from db.query_common import (
    FACTOR_METRICS,
    PROBLEM_STATUSES,
    RUN_COLUMNS,
    SERIES_COLUMNS,
    QueryError,
    attrs,
    checked_metrics,
    chunks,
    metric_column,
    read_frame,
)

CORRECTNESS_COLUMNS = (
    *attrs(Point, "correctness correctness_reason correctness_diverge_request correctness_diverge_token"),
    Point.acceptance_v2_v1,
)


@dataclass(frozen=True)
class Totals:
    runs: int
    synthetic_runs: int
    last_run_at: datetime | None
    # Measured on the stand-in server (synthetic.server): simulated, but not synthetic history.
    stand_in_runs: int = 0


def totals(engine: Engine) -> Totals:
    """Run counts and the newest start. (Point and series counts come with `series_catalog`.)"""
    with engine.connect() as c:
        runs, synthetic, last, stand_in = c.execute(
            select(
                func.count(Run.id),
                func.coalesce(func.sum(case((Run.trigger == "synthetic", 1), else_=0)), 0),
                func.max(Run.started_at),
                func.coalesce(
                    func.sum(case((and_(Run.simulated.is_(True), Run.trigger != "synthetic"), 1), else_=0)), 0
                ),
            )
        ).one()
    if isinstance(last, str):  # aggregates bypass the column type on SQLite
        last = datetime.fromisoformat(last)
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=UTC)
    return Totals(int(runs), int(synthetic), last, int(stand_in))


def latest_runs(engine: Engine, limit: int = 25, *, include_synthetic: bool = True) -> pd.DataFrame:
    """The newest runs with their provenance, sweep text and counts of points stored / ok / problems."""
    runs = select(
        *(getattr(Run, c) for c in RUN_COLUMNS),
        Run.sweep_yaml,  # the plan: how many points the run set out to measure (analysis.run_counts)
    ).order_by(Run.started_at.desc(), Run.id.desc())
    if not include_synthetic:
        runs = runs.where(Run.trigger != "synthetic")
    frame = read_frame(engine, runs.limit(limit))
    return _with_point_counts(engine, frame, ("points", "points_ok", "points_problem"))


def problem_points(engine: Engine, run_ids: Sequence[int], limit: int = 500) -> pd.DataFrame:
    """Failed, invalid, unstable and mode-mismatch points of the given runs, with their reasons."""
    if not run_ids:
        return pd.DataFrame(columns=["point_id", "run_id", "status", "reason"])
    stmt = (
        select(
            Point.id.label("point_id"),
            *attrs(Point, "run_id status reason"),
            *(getattr(Point, c) for c in SERIES_COLUMNS),
            Point.spec_mode_resolved,
            *attrs(Run, "sglang_version started_at"),
        )
        .join(Run, Run.id == Point.run_id)
        .where(Point.run_id.in_(list(run_ids)), Point.status.in_(PROBLEM_STATUSES))
        .order_by(Point.run_id.desc(), Point.id)
        .limit(limit)
    )
    return read_frame(engine, stmt)


def run_choices(engine: Engine, limit: int = 500) -> pd.DataFrame:
    """Runs for pickers, newest first: id, start, sweep, version, GPU, status, trigger, simulated, model."""
    stmt = (
        select(
            *attrs(Run, "id uid started_at sweep_name label sglang_version sglang_commit gpu_name gpu_count"),
            *attrs(Run, "status trigger simulated model"),
        )
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
    )
    return read_frame(engine, stmt)


def list_runs(
    engine: Engine,
    *,
    name: str | None = None,
    gpu: str | None = None,
    status: str | None = None,
    simulated: bool | None = None,
    limit: int | None = None,
) -> pd.DataFrame:
    """Runs newest first, filtered, with their point counts: what `specbench runs` lists. `name` and `gpu`
    match anywhere in the sweep / GPU name, any case (escaped LIKE patterns: `%` and `_` match as typed)."""
    stmt = select(
        *attrs(Run, "id uid sweep_name label status trigger backend simulated model gpu_name gpu_count"),
        *attrs(Run, "sglang_version started_at finished_at"),
        Run.sweep_yaml,  # the plan: how many points the run set out to measure
        Run.provenance,  # the patch its SGLang carried (bench/server/sglang_patch.py)
    ).order_by(Run.started_at.desc(), Run.id.desc())
    if name:
        stmt = stmt.where(func.lower(Run.sweep_name).contains(name.lower(), autoescape=True))
    if gpu:
        stmt = stmt.where(func.lower(Run.gpu_name).contains(gpu.lower(), autoescape=True))
    if status:
        stmt = stmt.where(Run.status == status)
    if simulated is not None:
        stmt = stmt.where(Run.simulated.is_(simulated))
    if limit is not None:
        stmt = stmt.limit(limit)
    frame = read_frame(engine, stmt)
    return _with_point_counts(engine, frame, ("points", "points_ok")).astype({"simulated": bool})


_POINT_COUNTS = {
    "points": func.count(Point.id),
    "points_ok": func.sum(case((Point.status == "ok", 1), else_=0)),
    "points_problem": func.sum(case((Point.status != "ok", 1), else_=0)),
}


def _with_point_counts(engine: Engine, runs: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """`runs` (an `id` column) with the named point counts of each run (of `_POINT_COUNTS`), 0 where none."""
    ids = [int(i) for i in runs["id"]]
    if not ids:
        return runs.assign(**{n: pd.Series(dtype=int) for n in names})
    per_run = select(Point.run_id, *(_POINT_COUNTS[n].label(n) for n in names)).group_by(Point.run_id)
    frames = [read_frame(engine, per_run.where(Point.run_id.in_(chunk))) for chunk in chunks(ids)]
    counts = pd.concat(frames, ignore_index=True)
    runs = runs.merge(counts, how="left", left_on="id", right_on="run_id").drop(columns=["run_id"])
    return runs.fillna(dict.fromkeys(names, 0)).astype(dict.fromkeys(names, int))


def run_info(engine: Engine, run_id: int) -> dict[str, Any]:
    """The run's columns and sweep, and `sweep_edits`: the stopping-rule edits it was resumed with
    (runners/resume_guard.py), oldest first, each {at, changes: [{field, old, new}]}, no old sweep text."""
    cols = (*(getattr(Run, c) for c in RUN_COLUMNS), Run.sweep_yaml, Run.provenance)
    with engine.connect() as c:
        row = c.execute(select(*cols).where(Run.id == run_id)).mappings().first()
    if row is None:
        raise QueryError(f"no run with id {run_id}")
    info = dict(row)
    provenance = info.pop("provenance") or {}
    info["sweep_edits"] = [
        {"at": e.get("at"), "changes": e.get("changes", [])} for e in provenance.get("sweep_edits", [])
    ]
    info["caption_facts"] = caption_facts(engine, run_id)
    # The patch the run's SGLang carried (bench/server/sglang_patch.py): "none", a name, or None (not probed).
    info["sglang_patch"] = provenance.get("sglang_patch")
    return info


def caption_facts(engine: Engine, run_id: int) -> dict[str, Any]:
    """What a run's numbers are made of, for `analysis.labels.numbers_caption`: dummy weights (a launch with
    `--load-format dummy`; None when the run launched nothing), the pinned acceptances, the expert routings of
    its points, why its points have no floor, and the model with its synthetic-preset summary."""
    with engine.connect() as c:
        argvs = c.execute(select(ServerInstance.argv).where(ServerInstance.run_id == run_id)).scalars().all()
        pinned_and_routing = select(Point.accept_length_pinned, Point.expert_routing).where(
            Point.run_id == run_id
        )
        rows = c.execute(pinned_and_routing.distinct()).mappings().all()
        run = c.execute(select(Run.model, Run.provenance).where(Run.id == run_id)).first()
    launched = [list(a or []) for a in argvs if a]
    dummy = (
        any(a[i + 1] == "dummy" for a in launched for i, x in enumerate(a[:-1]) if x == "--load-format")
        if launched
        else None
    )
    provenance = (run.provenance if run is not None else None) or {}
    return {
        "dummy_weights": dummy,
        "accept_lengths": sorted(
            {float(v) for r in rows if (v := r.get("accept_length_pinned")) is not None}
        ),
        "routings": sorted({str(v) for r in rows if (v := r.get("expert_routing"))}),
        "floor_note": provenance.get("floor_note"),
        "model": run.model if run is not None else None,
        "model_synth": provenance.get("model_synth"),
    }


def run_servers(engine: Engine, run_id: int) -> pd.DataFrame:
    """A run's launches: label, resolved mode, start, status, the idle servers beside it while measured
    (`max_parallel_starts` > 1 leaves some; they bias high-batch numbers) and the CPUs it was pinned to."""
    stmt = (
        select(*attrs(ServerInstance, "id label spec_mode_resolved startup_s status env"))
        .where(ServerInstance.run_id == run_id)
        .order_by(ServerInstance.id)
    )
    frame = read_frame(engine, stmt)
    frame["idle_neighbours"] = [
        int((env or {}).get("specbench.co_resident_idle_servers", 0)) for env in frame["env"]
    ]
    # Idle because its v1/v2 partner was up for interleaved windows (paired measurement), not parallel starts.
    frame["pair_colocated"] = [(env or {}).get("specbench.pair") == "colocated" for env in frame["env"]]
    # The CPUs its threads were pinned to (server.cpu_affinity, docs/guide/gpu-hosts.md); None: not pinned.
    frame["cpu_affinity"] = [(env or {}).get("specbench.cpu_affinity") for env in frame["env"]]
    return frame.drop(columns=["env"])


def resolve_run(engine: Engine, ref: str) -> int:
    """A run id from what a user types: an id, a uid (or its unique prefix), `latest` or `latest~N`. Checked
    before any query: ASCII digits only (`¹²³` passes `str.isdigit`, not `int`), an id within the 32-bit id
    range, a uid prefix of hex digits and dashes no longer than a uid (never a 100,000-character LIKE)."""
    ref = ref.strip()
    latest = re.fullmatch(r"latest(?:~([0-9]{1,9}))?", ref)
    if ref.startswith("latest") and not latest:
        raise QueryError(
            f"{ref[:40]!r}: write `latest` or `latest~N` with N a whole number (latest~1 = the one before)"
        )
    is_id = re.fullmatch(r"[0-9]+", ref) is not None
    if is_id and (len(ref) > 10 or not 1 <= int(ref) <= MAX_ID):  # beyond every id column
        raise QueryError(f"no run with id {ref[:40]} (run ids are 1 to {MAX_ID:,})")
    if not latest and not is_id:
        if len(ref) < 6:
            raise QueryError(
                f"{ref[:40]!r}: give a run id, `latest`, `latest~N` or at least 6 characters of a uid"
            )
        if not UID_PREFIX.fullmatch(ref):
            raise QueryError(f"no run with uid {ref[:40]!r} (a uid is {UID_LENGTH} hex digits and dashes)")
    with engine.connect() as c:
        if latest:
            back = int(latest.group(1) or 0)
            rid = c.execute(
                select(Run.id).order_by(Run.started_at.desc(), Run.id.desc()).offset(back).limit(1)
            ).scalar()
            if rid is None:
                raise QueryError(f"{ref}: the database holds fewer than {back + 1} runs")
            return int(rid)
        if is_id:
            rid = c.execute(select(Run.id).where(Run.id == int(ref))).scalar()
            if rid is None:
                raise QueryError(f"no run with id {ref}")
            return int(rid)
        found = (
            c.execute(select(Run.id).where(Run.uid.startswith(ref.lower(), autoescape=True)).limit(2))
            .scalars()
            .all()
        )
    if not found:
        raise QueryError(f"no run with uid {ref!r}")
    if len(found) > 1:
        raise QueryError(f"uid prefix {ref!r} matches several runs; give more characters")
    return int(found[0])


def run_points(engine: Engine, run_id: int, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """All points of a run (every status) with their configuration and the requested metrics."""
    cols = checked_metrics(
        metrics or (*FACTOR_METRICS, "accept_length_weighted", "ttft_p50_ms", "e2e_p50_ms")
    )
    stmt = (
        select(
            Point.id.label("point_id"),
            *attrs(Point, "run_id fingerprint status reason"),
            *(getattr(Point, c) for c in SERIES_COLUMNS),
            *attrs(Point, "spec_mode_resolved input_len output_len repeats"),
            *(metric_column(m) for m in cols),
            *attrs(Point, "output_throughput_ci_low output_throughput_ci_high accept_length_pinned"),
            *attrs(Point, "expert_routing step_floor_ms floor_fraction"),
            *CORRECTNESS_COLUMNS,  # the correctness gate's verdict (docs/reference/correctness-gate.md)
        )
        .where(Point.run_id == run_id)
        .order_by(Point.id)
    )
    return read_frame(engine, stmt)


def run_windows(engine: Engine, run_id: int, metrics: Sequence[str]) -> pd.DataFrame:
    """Every measured window (sample) of a run, every status, by `order_index`, then those without one by
    point and repeat: point_id, the point's configuration, the window's columns and telemetry, the metrics."""
    cols = checked_metrics(metrics)
    stmt = (
        select(
            Sample.point_id,
            *attrs(Point, "batch_size spec_mode steps topk accept_length_pinned"),
            *attrs(Sample, "repeat status reason order_index invocation server_instance_id"),
            *attrs(Sample, "window_started_at telemetry"),
            *(getattr(Sample, m) for m in cols),
        )
        .join(Point, Point.id == Sample.point_id)
        .where(Point.run_id == run_id)
        .order_by(Sample.order_index.is_(None), Sample.order_index, Sample.point_id, Sample.repeat)
    )
    return read_frame(engine, stmt)


def run_samples(engine: Engine, run_id: int, metrics: Sequence[str]) -> pd.DataFrame:
    """Every repeat of every point of a run, long by point: point_id, repeat, status, order (set when v1/v2
    windows interleaved), invocation (a resumed run has several), link (the comparison it was measured for,
    its repeat there, how the sides took turns) and the metrics."""
    cols = checked_metrics(metrics)
    stmt = (
        select(
            *attrs(Sample, "point_id repeat status order_index invocation link link_repeat link_mode"),
            *(getattr(Sample, m) for m in cols),
        )
        .join(Point, Point.id == Sample.point_id)
        .where(Point.run_id == run_id)
        .order_by(Sample.point_id, Sample.repeat)
    )
    return read_frame(engine, stmt)


# What pairing two runs as a shard and its tensor-parallel deployment reads of a run's provenance.
MODEL_FACT_KEYS: tuple[str, ...] = (
    "model_shape",
    "model_synth",
    "model_path",
    "sim_gpu_name",
    "sim_gpu_count",
)


def run_model_facts(engine: Engine, run_id: int) -> dict[str, Any]:
    """A run's identity, GPUs and model as stored, the provenance's MODEL_FACT_KEYS (None where the run
    predates them), and `tps`: the distinct tensor-parallel widths of its points, ascending."""
    cols = attrs(
        Run, "id uid sweep_name model sglang_version gpu_name gpu_count simulated trigger provenance"
    )
    with engine.connect() as c:
        row = c.execute(select(*cols).where(Run.id == run_id)).mappings().first()
        if row is None:
            raise QueryError(f"no run with id {run_id}")
        tps = c.execute(select(Point.tp).where(Point.run_id == run_id).distinct()).scalars().all()
    facts = dict(row)
    provenance = facts.pop("provenance") or {}
    facts.update({k: provenance.get(k) for k in MODEL_FACT_KEYS})
    facts["tps"] = sorted(int(t) for t in tps if t is not None)
    return facts


def run_tp_widths(engine: Engine, run_ids: Sequence[int]) -> dict[int, list[int]]:
    """run id -> its points' distinct tensor-parallel widths, ascending (a run without points: absent)."""
    out: dict[int, set[int]] = {}
    with engine.connect() as c:
        for part in chunks(list(run_ids)):
            stmt = select(Point.run_id, Point.tp).where(Point.run_id.in_(part)).distinct()
            for run_id, tp in c.execute(stmt):
                if tp is not None:
                    out.setdefault(int(run_id), set()).add(int(tp))
    return {r: sorted(t) for r, t in out.items()}


PART_COLUMNS = attrs(
    RunPart,
    "part invocation host gpu_name gpu_count sglang_version sglang_patch status started_at finished_at check",
)


def run_parts(engine: Engine, run_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """run id -> its parts in order (each invocation: host, GPU, SGLang and patch, status, start and end, the
    drift check against the part before); runs without recorded parts map to []."""
    out: dict[int, list[dict[str, Any]]] = {int(r): [] for r in run_ids}
    if not out:
        return out
    stmt = select(RunPart.run_id, *PART_COLUMNS).order_by(RunPart.run_id, RunPart.part)
    with engine.connect() as c:
        for chunk in chunks(sorted(out)):
            for row in c.execute(stmt.where(RunPart.run_id.in_(chunk))).mappings():
                record = dict(row)
                out[int(record.pop("run_id"))].append(record)
    return out
