"""The specbench schema: typed SQLAlchemy 2.0 models, mirrored by the Alembic migrations in db/migrations.
Portable types only (JSON, not JSONB or ARRAY), so SQLite and PostgreSQL hold the same data."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from db.types import UTCDateTime, uuid7

# Ids are INTEGER (32-bit SERIAL on PostgreSQL): a bigger one is a typo that would fail there.
MAX_ID = 2**31 - 1
# A run's uid (db.types.uuid7): 36 characters; a prefix of it, as users type one, is hex digits and dashes.
UID_LENGTH = 36
UID_PREFIX = re.compile(r"[0-9a-fA-F-]{1,36}")
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON,
        list[Any]: JSON,
        datetime: UTCDateTime,
    }


def _created() -> Mapped[datetime]:
    return mapped_column(UTCDateTime, server_default=func.now(), nullable=False)


class MetricColumns:
    """bench_serving's metrics (see bench/results.py SampleMetrics); shared by points and samples."""

    output_throughput: Mapped[float | None] = mapped_column(Float)
    input_throughput: Mapped[float | None] = mapped_column(Float)
    total_throughput: Mapped[float | None] = mapped_column(Float)
    request_throughput: Mapped[float | None] = mapped_column(Float)
    ttft_mean_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p50_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p90_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p99_ms: Mapped[float | None] = mapped_column(Float)
    tpot_mean_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p50_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p90_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p99_ms: Mapped[float | None] = mapped_column(Float)
    itl_mean_ms: Mapped[float | None] = mapped_column(Float)
    itl_p50_ms: Mapped[float | None] = mapped_column(Float)
    itl_p90_ms: Mapped[float | None] = mapped_column(Float)
    itl_p99_ms: Mapped[float | None] = mapped_column(Float)
    e2e_mean_ms: Mapped[float | None] = mapped_column(Float)
    e2e_p50_ms: Mapped[float | None] = mapped_column(Float)
    e2e_p90_ms: Mapped[float | None] = mapped_column(Float)
    e2e_p99_ms: Mapped[float | None] = mapped_column(Float)
    accept_length: Mapped[float | None] = mapped_column(Float)
    accept_length_weighted: Mapped[float | None] = mapped_column(Float)
    server_accept_length: Mapped[float | None] = mapped_column(Float)
    concurrency: Mapped[float | None] = mapped_column(Float)
    max_output_tokens_per_s: Mapped[float | None] = mapped_column(Float)
    duration_s: Mapped[float | None] = mapped_column(Float)
    completed: Mapped[int | None] = mapped_column(Integer)
    failed: Mapped[int | None] = mapped_column(Integer)
    incomplete: Mapped[int | None] = mapped_column(Integer)
    wrong_length: Mapped[int | None] = mapped_column(Integer)
    total_input_tokens: Mapped[int | None] = mapped_column(Integer)
    total_output_tokens: Mapped[int | None] = mapped_column(Integer)
    ttft_std_ms: Mapped[float | None] = mapped_column(Float)
    tpot_std_ms: Mapped[float | None] = mapped_column(Float)
    itl_std_ms: Mapped[float | None] = mapped_column(Float)
    e2e_std_ms: Mapped[float | None] = mapped_column(Float)
    itl_p95_ms: Mapped[float | None] = mapped_column(Float)
    itl_max_ms: Mapped[float | None] = mapped_column(Float)


METRIC_FIELDS: tuple[str, ...] = tuple(MetricColumns.__annotations__)
# Run columns saying where the numbers came from (bench.provenance; the full dict is in runs.provenance too).
PROVENANCE_COLUMNS: tuple[str, ...] = (
    *("model_identity", "sglang_version", "sglang_commit", "sgl_kernel_version", "flashinfer_version"),
    *("flash_mla_source", "torch_version", "cuda_version", "driver_version", "gpu_name", "gpu_count", "host"),
    *("specbench_version", "git_commit"),
)


class Run(Base):
    __tablename__ = "runs"
    # Newest-first listings (dashboard overview, run pickers, `latest~N`) walk this instead of every run.
    __table_args__ = (Index("ix_runs_started_at", "started_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    uid: Mapped[str] = mapped_column(String(36), unique=True, default=uuid7)
    sweep_name: Mapped[str] = mapped_column(String(100), index=True)
    sweep_yaml: Mapped[str] = mapped_column(Text)
    sweep_hash: Mapped[str] = mapped_column(String(64))
    trigger: Mapped[str] = mapped_column(String(16), default="manual")  # manual | schedule | pr
    label: Mapped[str | None] = mapped_column(String(200))
    backend: Mapped[str] = mapped_column(String(16))  # sglang | sim | external
    # running | done | partial (deadline or Ctrl-C) | failed
    status: Mapped[str] = mapped_column(String(16), default="running", index=True)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = _created()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"), index=True)
    # Provenance: what produced these numbers. "none" marks an absent GPU, never NULL-as-unknown.
    model: Mapped[str] = mapped_column(String(500))
    model_identity: Mapped[str | None] = mapped_column(String(200))
    sglang_version: Mapped[str | None] = mapped_column(String(64), index=True)
    sglang_commit: Mapped[str | None] = mapped_column(String(64))
    sgl_kernel_version: Mapped[str | None] = mapped_column(String(64))
    flashinfer_version: Mapped[str | None] = mapped_column(String(64))
    flash_mla_source: Mapped[str | None] = mapped_column(String(100))
    torch_version: Mapped[str | None] = mapped_column(String(64))
    cuda_version: Mapped[str | None] = mapped_column(String(32))
    driver_version: Mapped[str | None] = mapped_column(String(32))
    gpu_name: Mapped[str] = mapped_column(String(100), default="none")
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    host: Mapped[str | None] = mapped_column(String(200))
    specbench_version: Mapped[str | None] = mapped_column(String(32))
    git_commit: Mapped[str | None] = mapped_column(String(64))
    simulated: Mapped[bool] = mapped_column(Boolean, default=False)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    overhead_s: Mapped[float | None] = mapped_column(Float)
    # The reference point re-measured at the end (measure.drift_check), against its first measurement.
    drift: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Its process while `running` ({"host", "pid", "start"}); gone, it is marked `partial` (host_recovery.py).
    owner: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    servers: Mapped[list[ServerInstance]] = relationship(back_populates="run", cascade="all, delete-orphan")
    points: Mapped[list[Point]] = relationship(back_populates="run", cascade="all, delete-orphan")


class ServerInstance(Base):
    """One launch (or one attachment to an external server) and what it really resolved to."""

    __tablename__ = "server_instances"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    config_key: Mapped[str] = mapped_column(String(32))
    label: Mapped[str] = mapped_column(String(200))
    requested: Mapped[dict[str, Any]] = mapped_column(JSON)
    resolved: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # /server_info, as the server said
    argv: Mapped[list[Any]] = mapped_column(JSON, default=list)
    env: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # only what specbench set
    spec_mode_requested: Mapped[str | None] = mapped_column(String(8))
    spec_mode_resolved: Mapped[str | None] = mapped_column(String(8))
    spec_mode_detail: Mapped[str | None] = mapped_column(String(200))
    mismatches: Mapped[list[Any]] = mapped_column(JSON, default=list)
    sglang_version: Mapped[str | None] = mapped_column(String(64))
    log_path: Mapped[str | None] = mapped_column(String(500))
    startup_s: Mapped[float | None] = mapped_column(Float)
    # starting | ok | failed (never up) | crashed (died while measured) | stopped | reaped (launcher died)
    status: Mapped[str] = mapped_column(String(16), default="starting")
    error: Mapped[str | None] = mapped_column(Text)
    # A dead server's exit code (negative: signal) and log tail: its log lives on the worker host only.
    exit_code: Mapped[int | None] = mapped_column(Integer)
    log_tail: Mapped[str | None] = mapped_column(Text)
    # The known SGLang bug its failed launch's log showed (bench.server.known_bugs): the gate's `fail`.
    known_bug: Mapped[str | None] = mapped_column(String(64))
    started_at: Mapped[datetime] = _created()
    stopped_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Its launcher, like runs.owner: a row left `ok` by a dead launcher is closed as `reaped` on that host.
    owner: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    run: Mapped[Run] = relationship(back_populates="servers")


class Point(MetricColumns, Base):
    """One (server config, batch size, workload) of a run; metrics are medians over its repeats."""

    __tablename__ = "points"
    __table_args__ = (
        UniqueConstraint("run_id", "point_key", name="uq_points_run_key"),
        Index("ix_points_fingerprint_created", "fingerprint", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    server_instance_id: Mapped[int | None] = mapped_column(
        ForeignKey("server_instances.id", ondelete="SET NULL"), index=True
    )
    point_key: Mapped[str] = mapped_column(String(300))
    # Series identity: model, draft, backend, server config, batch size, workload, GPU type and count.
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    # ok | invalid | failed | mode_mismatch | unstable; unindexed (SQLite's planner would walk the index).
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(500))
    draft_model: Mapped[str | None] = mapped_column(String(500))
    attention_backend: Mapped[str] = mapped_column(String(32))
    tp: Mapped[int] = mapped_column(Integer, default=1)
    algorithm: Mapped[str | None] = mapped_column(String(16))  # NULL = no-spec baseline
    steps: Mapped[int | None] = mapped_column(Integer)
    topk: Mapped[int | None] = mapped_column(Integer)
    draft_tokens: Mapped[int | None] = mapped_column(Integer)
    spec_mode: Mapped[str | None] = mapped_column(String(8))
    spec_mode_resolved: Mapped[str | None] = mapped_column(String(8))
    batch_size: Mapped[int] = mapped_column(Integer)
    dataset: Mapped[str] = mapped_column(String(16))
    input_len: Mapped[int] = mapped_column(Integer)
    output_len: Mapped[int] = mapped_column(Integer)
    num_prompts: Mapped[int] = mapped_column(Integer)
    workload_key: Mapped[str] = mapped_column(String(300))
    gpu_name: Mapped[str] = mapped_column(String(100), default="none")
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    repeats: Mapped[int] = mapped_column(Integer, default=0)  # samples stored so far
    repeats_planned: Mapped[int] = mapped_column(Integer, default=1)
    output_throughput_ci_low: Mapped[float | None] = mapped_column(Float)
    output_throughput_ci_high: Mapped[float | None] = mapped_column(Float)
    # SGLANG_SIMULATE_ACC_LEN of the point's server (grid.accept_lengths); None = acceptance not pinned.
    accept_length_pinned: Mapped[float | None] = mapped_column(Float)
    overhead_s: Mapped[float | None] = mapped_column(Float)
    # balanced | collapsed: dummy-weight MoE routing (bench/server/routing.py); NULL: real weights or dense.
    expert_routing: Mapped[str | None] = mapped_column(String(16))
    # The least time a step or cycle can take here (bench/floor.py), and floor / measured (> 1: invalid).
    step_floor_ms: Mapped[float | None] = mapped_column(Float)
    floor_fraction: Mapped[float | None] = mapped_column(Float)
    # The correctness gate's verdict (correctness-gate.md): pass | fail | not checked; NULL: older run.
    correctness: Mapped[str | None] = mapped_column(String(16))
    correctness_reason: Mapped[str | None] = mapped_column(Text)
    # Where its tokens first left the baseline's (or the reference's): request index, token index.
    correctness_diverge_request: Mapped[int | None] = mapped_column(Integer)
    correctness_diverge_token: Mapped[int | None] = mapped_column(Integer)
    # Token-weighted acceptance of v2 over v1 on the check's prompts (set on both points of a pair).
    acceptance_v2_v1: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = _created()

    run: Mapped[Run] = relationship(back_populates="points")
    samples: Mapped[list[Sample]] = relationship(
        back_populates="point", cascade="all, delete-orphan", order_by="Sample.repeat"
    )


class Sample(MetricColumns, Base):
    """One repeat of a point."""

    __tablename__ = "samples"
    __table_args__ = (UniqueConstraint("point_id", "repeat", name="uq_samples_point_repeat"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    point_id: Mapped[int] = mapped_column(ForeignKey("points.id", ondelete="CASCADE"), index=True)
    repeat: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    overhead_s: Mapped[float | None] = mapped_column(Float)
    # Position in the run's measurement order (paired v1/v2: A B B A ...) and when the window began.
    order_index: Mapped[int | None] = mapped_column(Integer)
    # The order_index where the invocation that measured it began (bench.pairing.paired_repeats).
    invocation: Mapped[int | None] = mapped_column(Integer)
    # The server that measured it (the point's server_instance_id is its latest: a resumed run moves it).
    server_instance_id: Mapped[int | None] = mapped_column(
        ForeignKey("server_instances.id", ondelete="SET NULL"), index=True
    )
    window_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The link measured (bench.pairing, A~B), its repeat there, its turns (abba | blocks); NULL: none.
    link: Mapped[str | None] = mapped_column(String(40))
    link_repeat: Mapped[int | None] = mapped_column(Integer)
    link_mode: Mapped[str | None] = mapped_column(String(8))
    # SM clock, power, temperature and host load during the window (bench.host.telemetry.gpu.summarize).
    telemetry: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = _created()

    point: Mapped[Point] = relationship(back_populates="samples")
    requests: Mapped[list[RequestRow]] = relationship(
        back_populates="sample", cascade="all, delete-orphan", order_by="RequestRow.idx"
    )


class RunPart(Base):
    """One invocation of a run (`run`, `--resume-run`, a job attempt): where, on which SGLang, and whether its
    re-measured point agreed with the part before (`check`; analysis.pairs)."""

    __tablename__ = "run_parts"
    __table_args__ = (UniqueConstraint("run_id", "part", name="uq_run_parts_run_part"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    part: Mapped[int] = mapped_column(Integer)  # 1, 2, ... in the order the parts ran
    # samples.invocation of the windows it measured (the run's order_index where it began).
    invocation: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(200))
    gpu_name: Mapped[str] = mapped_column(String(100), default="none")
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    # The SGLang its servers ran and the specbench patch it carried ("none"); NULL until a server reported it.
    sglang_version: Mapped[str | None] = mapped_column(String(64))
    sglang_patch: Mapped[str | None] = mapped_column(String(200))
    # running, then the run's status when the part ended (done | unstable | partial | failed)
    status: Mapped[str] = mapped_column(String(16), default="running")
    started_at: Mapped[datetime] = _created()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The drift check against the part before on another host/GPU (part_check.PartCheck); NULL: none.
    check: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # This part's end-of-run drift check (runs.drift holds the latest part's).
    drift: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class RequestRow(Base):
    """One request as the client saw it; chunk times are seconds since the request was sent."""

    __tablename__ = "requests"
    __table_args__ = (UniqueConstraint("sample_id", "idx", name="uq_requests_sample_idx"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sample_id: Mapped[int] = mapped_column(ForeignKey("samples.id", ondelete="CASCADE"), index=True)
    idx: Mapped[int] = mapped_column(Integer)
    prompt_len: Mapped[int] = mapped_column(Integer)
    max_new_tokens: Mapped[int] = mapped_column(Integer)
    start_s: Mapped[float] = mapped_column(Float)
    ttft_s: Mapped[float | None] = mapped_column(Float)
    e2e_s: Mapped[float | None] = mapped_column(Float)
    completion_tokens: Mapped[int] = mapped_column(Integer)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    cached_tokens: Mapped[int | None] = mapped_column(Integer)
    spec_verify_ct: Mapped[int | None] = mapped_column(Integer)
    spec_accept_length: Mapped[float | None] = mapped_column(Float)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)
    chunk_times: Mapped[list[Any]] = mapped_column(JSON, default=list)
    chunk_tokens: Mapped[list[Any]] = mapped_column(JSON, default=list)

    sample: Mapped[Sample] = relationship(back_populates="requests")


class CorrectnessOutput(Base):
    """A launch's answers to the correctness prompts (bench.correctness.LaunchOutputs), or the reference's
    (`config_key` = "reference"), kept to judge the points again (`specbench gate`)."""

    __tablename__ = "correctness_outputs"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    server_instance_id: Mapped[int | None] = mapped_column(
        ForeignKey("server_instances.id", ondelete="SET NULL")
    )
    config_key: Mapped[str] = mapped_column(String(32))
    spec_mode: Mapped[str | None] = mapped_column(String(8))
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = _created()


class Triage(Base):
    """A human's verdict on a flagged change (change point or run-vs-baseline), shown on the charts."""

    __tablename__ = "triage"
    __table_args__ = (UniqueConstraint("fingerprint", "metric", "run_id", name="uq_triage_change"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    metric: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16), default="change_point")  # change_point | compare
    state: Mapped[str] = mapped_column(String(16), default="open")  # open | acknowledged | dismissed
    note: Mapped[str | None] = mapped_column(Text)
    magnitude: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Job(Base):
    """A sweep waiting for (or run by) a worker. The payload is a validated sweep, never a command."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("schedule_id", "fire_time", name="uq_jobs_schedule_fire"),
        Index("ix_jobs_claim", "status", "priority", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    sweep_name: Mapped[str] = mapped_column(String(100))
    sweep_yaml: Mapped[str] = mapped_column(Text)
    label: Mapped[str | None] = mapped_column(String(200))
    trigger: Mapped[str] = mapped_column(String(16), default="manual")
    requires: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # {"gpu": "H100", "count": 8}
    priority: Mapped[int] = mapped_column(Integer, default=0)
    # queued -> claimed -> running -> done | failed | canceled
    status: Mapped[str] = mapped_column(String(16), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    # Leases that expired (worker killed, host lost): counted apart from attempts, which count failures.
    lease_expiries: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    worker_id: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    not_before: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[int | None] = mapped_column(Integer)
    schedule_id: Mapped[int | None] = mapped_column(ForeignKey("schedules.id", ondelete="SET NULL"))
    fire_time: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = _created()
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Worker(Base):
    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)  # host:pid:random
    host: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int] = mapped_column(Integer)
    gpus: Mapped[list[Any]] = mapped_column(JSON, default=list)
    gpu_name: Mapped[str] = mapped_column(String(100), default="none")
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    labels: Mapped[list[Any]] = mapped_column(JSON, default=list)
    # What its operator lets jobs use, by name, never paths (bench/host/policy.py).
    offers: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="idle")  # idle | busy | stopped
    current_job_id: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[datetime] = _created()
    last_heartbeat: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Schedule(Base):
    __tablename__ = "schedules"

    id: Mapped[int] = mapped_column(primary_key=True)
    cron: Mapped[str] = mapped_column(String(100))
    sweep_path: Mapped[str | None] = mapped_column(String(500))
    sweep_yaml: Mapped[str] = mapped_column(Text)
    label: Mapped[str | None] = mapped_column(String(200))
    requires: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    last_fire_time: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = _created()
    # Why the scheduler cannot fire it (an impossible cron, a sweep that no longer validates); NULL: it fires.
    broken: Mapped[str | None] = mapped_column(Text)


class Profile(Base):
    """One SGLang profiler trace of a point (one row per TP rank), captured after its windows: `path` on
    `host` (docs/reference/profiles.md); `summary`: `bench.profile.summary.summarize` plus the distortion."""

    __tablename__ = "profiles"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    point_id: Mapped[int] = mapped_column(ForeignKey("points.id", ondelete="CASCADE"), index=True)
    spec_mode: Mapped[str | None] = mapped_column(String(8))
    batch_size: Mapped[int] = mapped_column(Integer)
    activities: Mapped[list[Any]] = mapped_column(JSON, default=list)
    num_steps: Mapped[int] = mapped_column(Integer)
    tp_rank: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16))  # ok | failed
    error: Mapped[str | None] = mapped_column(Text)
    host: Mapped[str] = mapped_column(String(200))
    path: Mapped[str | None] = mapped_column(String(1000))
    sha256: Mapped[str | None] = mapped_column(String(64))
    size_bytes: Mapped[int | None] = mapped_column(Integer)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = _created()
