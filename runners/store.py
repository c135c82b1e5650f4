"""Maps bench results onto db rows, idempotent on (run, point_key, repeat): a resume never doubles one."""

import hashlib
from collections import defaultdict
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bench import floor
from bench.host import reaper
from bench.measure import Window
from bench.pairing import WindowLink
from bench.results import STATUS_SEVERITY, RequestRecord, SampleResult
from bench.stats.summary import MEASURED_STATUSES, Repeat, summarize_repeats
from bench.sweep import FieldChange, PointPlan, ServerConfig, SweepSpec
from db.fingerprint import point_fingerprint
from db.models import METRIC_FIELDS, PROVENANCE_COLUMNS, Point, RequestRow, Run, Sample, ServerInstance
from db.types import utcnow


def create_run(
    session: Session,
    spec: SweepSpec,
    sweep_yaml: str,
    provenance: dict[str, Any],
    *,
    trigger: str,
    label: str | None,
    job_id: int | None,
    uid: str | None = None,
) -> Run:
    run = Run(
        **({"uid": uid} if uid else {}),
        sweep_name=spec.name,
        sweep_yaml=sweep_yaml,
        sweep_hash=_sweep_hash(sweep_yaml),
        trigger=trigger,
        label=label,
        backend=spec.server.backend,
        status="running",
        job_id=job_id,
        model=spec.model,
        provenance={},
        owner=reaper.owner(),  # while it runs: a later process on this host notices if this one dies
    )
    apply_provenance(run, provenance)
    session.add(run)
    session.flush()
    return run


def adopt_sweep(run: Run, sweep_yaml: str, edits: list[FieldChange]) -> None:
    """The edited sweep becomes the run's; the one replaced is kept in `provenance.sweep_edits`."""
    entry = {
        "at": utcnow().isoformat(),
        "changes": [{"field": c.path, "old": c.old, "new": c.new} for c in edits],
        "previous_sweep_yaml": run.sweep_yaml,
        "previous_sweep_hash": run.sweep_hash,
    }
    provenance = dict(run.provenance or {})
    provenance["sweep_edits"] = [*provenance.get("sweep_edits", []), entry]
    run.provenance = provenance  # a new dict: the JSON column sees the change
    run.sweep_yaml = sweep_yaml
    run.sweep_hash = _sweep_hash(sweep_yaml)


def _sweep_hash(sweep_yaml: str) -> str:
    """runs.sweep_hash: derived from the stored text, whoever stores it."""
    return hashlib.sha256(sweep_yaml.encode()).hexdigest()


def apply_provenance(run: Run, provenance: dict[str, Any]) -> None:
    for key in PROVENANCE_COLUMNS:
        if key in provenance and provenance[key] is not None:
            setattr(run, key, provenance[key])
    run.simulated = bool(provenance.get("simulated", run.simulated))
    run.provenance = {**(run.provenance or {}), **provenance}


def record_server(
    session: Session,
    run: Run,
    config: ServerConfig,
    *,
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
    resolved: dict[str, Any] | None = None,
    spec_mode_resolved: str | None = None,
    spec_mode_detail: str | None = None,
    mismatches: list[str] | None = None,
    version: str | None = None,
    log_path: str | None = None,
    startup_s: float | None = None,
    status: str = "ok",
    error: str | None = None,
) -> ServerInstance:
    si = ServerInstance(
        run_id=run.id,
        config_key=config.key(),
        label=config.label(),
        requested=config.to_dict(),
        resolved=resolved or {},
        argv=argv or [],
        env=env or {},
        spec_mode_requested=config.spec_mode,
        spec_mode_resolved=spec_mode_resolved,
        spec_mode_detail=spec_mode_detail,
        mismatches=mismatches or [],
        sglang_version=version,
        log_path=log_path,
        startup_s=startup_s,
        status=status,
        error=error,
        owner=reaper.owner(),  # the launcher: this process (runners/host_recovery.py closes what it leaves)
    )
    session.add(si)
    session.flush()
    return si


def stored_repeats(session: Session, run_id: int) -> dict[str, set[int]]:
    """point_key -> repeat indices already measured (not `failed`: those are measured again)."""
    rows = session.execute(
        select(Point.point_key, Sample.repeat)
        .join(Sample, Sample.point_id == Point.id)
        .where(Point.run_id == run_id, Sample.status != "failed")
    )
    done: dict[str, set[int]] = defaultdict(set)
    for key, repeat in rows:
        done[key].add(repeat)
    return dict(done)


def ok_values(
    session: Session, run_id: int, point_key: str, metric: str = "output_throughput"
) -> dict[int, tuple[float, int | None]]:
    """repeat -> (`metric`, invocation) of the point's `ok` repeats, for the v2-vs-v1 interval."""
    column = getattr(Sample, metric)
    rows = session.execute(
        select(Sample.repeat, column, Sample.invocation)
        .join(Point, Sample.point_id == Point.id)
        .where(
            Point.run_id == run_id, Point.point_key == point_key, Sample.status == "ok", column.is_not(None)
        )
    )
    return {int(r): (float(v), inv) for r, v, inv in rows if v > 0}


def get_or_create_point(
    session: Session,
    run: Run,
    plan: PointPlan,
    server_instance_id: int | None,
    *,
    expert_routing: str | None = None,
    step_floor_ms: float | None = None,
    gpu: tuple[str, int] | None = None,
) -> Point:
    """The run's row for `plan`, created on first use; routing and floor are its latest server's."""
    point = session.scalars(
        select(Point).where(Point.run_id == run.id, Point.point_key == plan.key())
    ).one_or_none()
    if point is not None:
        if server_instance_id is not None:
            point.server_instance_id = server_instance_id
        if expert_routing is not None:
            point.expert_routing = expert_routing
        if step_floor_ms is not None:
            point.step_floor_ms = step_floor_ms
        return point
    series = plan.series(*(gpu if gpu is not None else (run.gpu_name, run.gpu_count)))
    w = plan.workload
    point = Point(
        run_id=run.id,
        server_instance_id=server_instance_id,
        point_key=plan.key(),
        fingerprint=point_fingerprint(
            **series, accept_length=plan.server.accept_length, expert_routing=expert_routing
        ),
        accept_length_pinned=plan.server.accept_length,
        expert_routing=expert_routing,
        step_floor_ms=step_floor_ms,
        status="failed",
        reason="no repeat stored yet",
        dataset=w.dataset,
        input_len=w.input_len,
        output_len=w.output_len,
        num_prompts=plan.num_prompts,
        repeats=0,
        repeats_planned=plan.repeats,
        **series,
    )
    session.add(point)
    session.flush()
    return point


def store_sample(
    session: Session,
    point: Point,
    result: SampleResult,
    *,
    spec_mode_resolved: str | None,
    window: Window | None = None,
    order_index: int | None = None,
    invocation: int | None = None,
    server_instance_id: int | None = None,
    link: WindowLink | None = None,
) -> bool:
    """Insert one repeat with its requests in the caller's transaction; False if stored (unless `failed`)."""
    existing = session.scalars(
        select(Sample).where(Sample.point_id == point.id, Sample.repeat == result.repeat)
    ).first()
    if existing is not None:
        if existing.status != "failed" or result.status == "failed":
            return False
        session.delete(existing)
        session.flush()
    sample = Sample(
        point_id=point.id,
        repeat=result.repeat,
        status=result.status,
        reason=result.reason,
        overhead_s=result.overhead_s,
        order_index=order_index,
        invocation=invocation,
        server_instance_id=server_instance_id,
    )
    if link is not None:  # the comparison it was measured for, and its repeat there (bench.pairing)
        sample.link, sample.link_repeat = link.name, link.slot.link_repeat(result.repeat)
        sample.link_mode = link.turns
    if window is not None:
        # The window's context: GPU telemetry, plus the warmup that preceded it (run cost accounting).
        sample.telemetry = (
            {**(window.telemetry or {}), "warmup_s": round(window.warmup_s, 4)}
            if window.telemetry is not None or window.warmup_s
            else None
        )
        if window.started_at is not None:
            sample.window_started_at = datetime.fromtimestamp(window.started_at, tz=UTC)
    if result.metrics is not None:
        for name, value in asdict(result.metrics).items():
            if name in METRIC_FIELDS:
                setattr(sample, name, value)
    try:
        with session.begin_nested():
            session.add(sample)
            session.flush()
            if result.requests:  # one bulk INSERT: a RequestRow object each took 4x the CPU
                session.execute(insert(RequestRow), [_request_row(sample.id, r) for r in result.requests])
    except IntegrityError:  # another writer stored this repeat between our check and insert
        return False
    point.spec_mode_resolved = spec_mode_resolved
    refresh_point(session, point)
    return True


# The request fields (bench.results.RequestRecord) stored in a column of the same name.
_SAME_NAMED = (
    *("prompt_len", "max_new_tokens", "completion_tokens", "prompt_tokens", "cached_tokens"),
    *("spec_verify_ct", "spec_accept_length", "finish_reason", "error"),
)


def _request_row(sample_id: int, r: RequestRecord) -> dict[str, Any]:
    return {
        **{name: getattr(r, name) for name in _SAME_NAMED},
        **{"sample_id": sample_id, "idx": r.index, "start_s": r.start, "ttft_s": r.ttft, "e2e_s": r.e2e},
        # 10 µs is far below any latency we report and keeps the JSON small.
        "chunk_times": [round(t, 5) for t in r.chunk_times],
        "chunk_tokens": list(r.chunk_tokens),
    }


def refresh_point(session: Session, point: Point) -> None:
    """Rewrite the point from its stored repeats (`bench.stats.summary.summarize_repeats`)."""
    samples = list(session.scalars(select(Sample).where(Sample.point_id == point.id).order_by(Sample.repeat)))
    point.repeats = len(samples)
    if not samples:
        return
    repeats = [
        Repeat(s.repeat, s.status, s.reason, {n: getattr(s, n) for n in METRIC_FIELDS}) for s in samples
    ]
    summary = summarize_repeats(repeats)
    point.status, point.reason = summary.status, summary.reason
    for name, value in summary.metrics.items():
        setattr(point, name, value)
    point.output_throughput_ci_low = summary.output_throughput_ci_low
    point.output_throughput_ci_high = summary.output_throughput_ci_high
    point.overhead_s = sum(s.overhead_s or 0.0 for s in samples)
    apply_floor(point)


def apply_floor(point: Point) -> None:
    """floor_fraction (bench/floor.py); a point faster than its floor is flagged `invalid`."""
    speculative = point.algorithm is not None
    accept = point.accept_length_weighted if point.accept_length_weighted is not None else point.accept_length
    step = floor.measured_step_ms(point.tpot_mean_ms, accept, speculative)
    point.floor_fraction = floor.floor_fraction(point.step_floor_ms, step)
    if (
        point.floor_fraction is not None
        and step is not None
        and point.step_floor_ms is not None
        and point.floor_fraction > floor.FLOOR_TOLERANCE
        and point.status in MEASURED_STATUSES
    ):
        why = floor.below_floor_reason(point.step_floor_ms, step)
        if STATUS_SEVERITY.get(point.status, 99) < STATUS_SEVERITY["invalid"]:
            point.status = "invalid"  # a worse status (mode_mismatch) stays
        point.reason = f"{why}; {point.reason}" if point.reason else why


def fail_point(
    session: Session, run: Run, plan: PointPlan, server_instance_id: int | None, reason: str
) -> Point:
    """A point never measured (its server never came up) still gets a row and a reason."""
    point = get_or_create_point(session, run, plan, server_instance_id)
    if point.repeats == 0:
        point.status, point.reason = "failed", reason
    return point
