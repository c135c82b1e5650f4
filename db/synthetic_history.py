"""SYNTHETIC benchmark history for load tests, demos and dashboard tests. These numbers were never measured.

Every run this module writes is marked three ways, so nobody mistakes it for a measurement: `trigger =
"synthetic"`, `sweep_name` starting with "synthetic-", and `provenance["synthetic"] = True` (plus
`simulated = True`, `backend = "sim"`). It writes the same tables the runner writes (runs with provenance,
server_instances, points with their per-repeat samples) so every query and page sees realistic rows.

The shape: a few lanes (model x GPU) each run a nightly sweep over SGLang releases and main-branch commits;
every run covers batch size x spec steps x spec mode (v1, v2) plus a no-spec baseline, for two workloads.
The numbers follow the speculative-decoding identity the dashboard's attribution relies on:
    acceptance length L = (1 - a^(steps+1)) / (1 - a)  for per-token acceptance a (topk 1 chain),
    verify-step time S = forward(bs) · (1 + verify cost · steps) + steps · draft cost · forward(bs),
    TPOT = S / L,  E2E = TTFT + (output_len - 1) · TPOT,  throughput = bs · output_len / E2E.
A few known steps are injected (`INJECTED_STEPS`), so change-point detection has something to find and the
tests know where: an acceptance drop and its fix, a verify-kernel slowdown, an overlap-scheduler speed-up.
A handful of failed, invalid and mode_mismatch points show up too, as they do in real history.

Bulk inserts with pre-assigned ids, in chunks, through SQLAlchemy Core executemany: 1M points (and 3M
samples) land in SQLite in a couple of minutes. Ids are assigned from max(id)+1, so do not seed while a
worker writes to the same database; on PostgreSQL the id sequences are moved past the new rows afterwards.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import numpy as np
from sqlalchemy import Engine, Table, func, insert, select

from db.fingerprint import point_fingerprint
from db.models import Point, Run, Sample, ServerInstance, Triage
from db.types import uuid7

SYNTHETIC_TRIGGER = "synthetic"
SYNTHETIC_PREFIX = "synthetic-"
SYNTHETIC_LABEL = "SYNTHETIC history (load test; not a measurement)"

# Releases in order, with the kernel/flashinfer/torch they shipped with; commits step through them.
RELEASES: tuple[tuple[str, str, str, str], ...] = (
    ("0.5.12", "0.3.21", "0.5.3", "2.8.0"),
    ("0.5.13", "0.4.1", "0.6.1", "2.9.1"),
    ("0.5.13.post1", "0.4.3", "0.6.12", "2.9.1"),
    ("0.5.14", "0.4.5", "0.6.14", "2.9.1"),
    ("0.5.15", "0.4.7", "0.7.1", "2.9.1"),
    ("0.5.23", "0.5.2", "0.7.6", "2.10.0"),
)


@dataclass(frozen=True)
class Lane:
    """One machine running one model's nightly sweep."""

    model: str
    draft_model: str | None
    algorithm: str
    tp: int
    gpu_name: str
    gpu_count: int
    acceptance: float  # per-token acceptance probability of the draft
    forward_ms: float  # decode forward at batch 1
    forward_ms_per_req: float  # added per request in the batch


LANES: tuple[Lane, ...] = (
    Lane("deepseek-ai/DeepSeek-V3-0324", None, "NEXTN", 8, "NVIDIA H200", 8, 0.80, 21.0, 0.22),
    Lane("deepseek-ai/DeepSeek-V3-0324", None, "NEXTN", 8, "NVIDIA H100 80GB HBM3", 8, 0.80, 26.0, 0.30),
    Lane(
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
        "synthetic/EAGLE-DeepSeek-V2-Lite",
        "EAGLE",
        1,
        "NVIDIA H200",
        1,
        0.68,
        6.5,
        0.07,
    ),
    Lane(
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
        "synthetic/EAGLE-DeepSeek-V2-Lite",
        "EAGLE",
        1,
        "NVIDIA H100 80GB HBM3",
        1,
        0.68,
        8.0,
        0.09,
    ),
)


@dataclass(frozen=True)
class Workload:
    input_len: int
    output_len: int

    @property
    def key(self) -> str:
        # The same format as bench.sweep.WorkloadSpec.key(), so synthetic series look like real ones.
        return f"random:random:in{self.input_len}:out{self.output_len}:seed1:t0.0"


@dataclass(frozen=True)
class Shape:
    """The grid every synthetic run measures."""

    batch_sizes: tuple[int, ...] = (1, 4, 16, 32, 64)
    steps: tuple[int, ...] = (1, 2, 3, 4)
    spec_modes: tuple[str, ...] = ("v1", "v2")
    workloads: tuple[Workload, ...] = (Workload(1024, 512), Workload(4096, 1024))
    lanes: tuple[Lane, ...] = LANES
    repeats: int = 3

    @property
    def points_per_run(self) -> int:
        per_workload = len(self.batch_sizes) * (len(self.steps) * len(self.spec_modes) + 1)
        return per_workload * len(self.workloads)


DEFAULT_SHAPE = Shape()
# A grid small enough for unit and page tests: 10 points per run, 2 lanes.
SMALL_SHAPE = Shape(
    batch_sizes=(1, 16),
    steps=(1, 3),
    spec_modes=("v1", "v2"),
    workloads=(Workload(1024, 512),),
    lanes=LANES[:2],
)


@dataclass(frozen=True)
class InjectedStep:
    """A level shift the generator puts into history from `at` (fraction of the runs of a lane) onward."""

    at: float
    factor: float  # multiplies acceptance length ("acceptance") or verify-step time ("step_time")
    kind: str  # acceptance | step_time
    gpu: str | None = None  # None = every lane
    model: str | None = None
    spec_mode: str | None = None
    min_steps: int = 1
    description: str = ""

    def applies(self, lane: Lane, spec_mode: str | None, steps: int | None) -> bool:
        if spec_mode is None or steps is None:  # the no-spec baseline has no draft or verify to break
            return False
        return (
            (self.gpu is None or self.gpu == lane.gpu_name)
            and (self.model is None or self.model == lane.model)
            and (self.spec_mode is None or self.spec_mode == spec_mode)
            and steps >= self.min_steps
        )


INJECTED_STEPS: tuple[InjectedStep, ...] = (
    InjectedStep(
        0.35,
        0.92,
        "acceptance",
        gpu="NVIDIA H200",
        model="deepseek-ai/DeepSeek-V3-0324",
        spec_mode="v2",
        description="v2 overlap drafts from a stale KV slot: acceptance -8% (DeepSeek-V3, H200)",
    ),
    InjectedStep(
        0.60,
        1.06,
        "step_time",
        gpu="NVIDIA H100 80GB HBM3",
        min_steps=3,
        description="FlashMLA verify kernel retuned for H200: verify steps +6% slower on H100 for steps >= 3",
    ),
    InjectedStep(
        0.80,
        0.90,
        "step_time",
        spec_mode="v2",
        description="overlap scheduler hides draft launch: v2 verify steps -10%",
    ),
    InjectedStep(
        0.93,
        0.94,
        "acceptance",
        gpu="NVIDIA H100 80GB HBM3",
        model="deepseek-ai/DeepSeek-V2-Lite-Chat",
        description="draft head loaded in fp8 by default: acceptance -6% (DeepSeek-V2-Lite EAGLE, H100)",
    ),
    InjectedStep(
        0.90,
        1 / 0.92,
        "acceptance",
        gpu="NVIDIA H200",
        model="deepseek-ai/DeepSeek-V3-0324",
        spec_mode="v2",
        description="stale-KV fix: acceptance back to normal (DeepSeek-V3, H200, v2)",
    ),
)


@dataclass
class SeedReport:
    runs: int = 0
    points: int = 0
    samples: int = 0
    server_instances: int = 0
    seconds: float = 0.0
    run_ids: list[int] = field(default_factory=list)
    steps: tuple[InjectedStep, ...] = INJECTED_STEPS

    @property
    def points_per_second(self) -> float:
        return self.points / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class _Config:
    """One server config of a lane's grid (baseline: algorithm None)."""

    steps: int | None
    spec_mode: str | None

    def key(self, lane: Lane) -> str:
        blob = json.dumps([lane.model, lane.draft_model, lane.algorithm, lane.tp, self.steps, self.spec_mode])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def label(self, lane: Lane) -> str:
        if self.steps is None:
            return "baseline (no spec)"
        return f"{lane.algorithm} steps={self.steps} topk=1 draft={self.steps + 1} {self.spec_mode}"


@dataclass
class _Grid:
    """The static part of a lane's points, as arrays of the same length (one entry per point of a run)."""

    configs: list[_Config]
    config_index: np.ndarray
    batch: np.ndarray
    steps: np.ndarray  # 0 for baseline
    is_v2: np.ndarray
    is_spec: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    num_prompts: np.ndarray
    fingerprints: list[str]
    point_keys: list[str]
    workload_keys: list[str]
    base_accept: np.ndarray
    base_step_ms: np.ndarray


def _grid(lane: Lane, shape: Shape) -> _Grid:
    configs = [_Config(None, None)] + [_Config(s, m) for m in shape.spec_modes for s in shape.steps]
    rows: list[tuple[int, int, Workload]] = [
        (ci, bs, w) for w in shape.workloads for ci in range(len(configs)) for bs in shape.batch_sizes
    ]
    ci_arr = np.array([r[0] for r in rows])
    batch = np.array([r[1] for r in rows], dtype=np.float64)
    steps = np.array([configs[r[0]].steps or 0 for r in rows], dtype=np.float64)
    is_v2 = np.array([configs[r[0]].spec_mode == "v2" for r in rows])
    is_spec = steps > 0
    a = lane.acceptance
    accept = np.where(is_spec, (1 - a ** (steps + 1)) / (1 - a), 1.0)
    forward = lane.forward_ms + lane.forward_ms_per_req * batch
    # Verifying steps+1 tokens per request costs a little more than one decode token; each draft step is a
    # small forward of the draft head. Overlap (v2) hides the CPU scheduling gap between steps.
    step_ms = np.where(is_spec, forward * (1 + 0.045 * steps) + steps * 0.11 * forward, forward)
    step_ms = np.where(is_v2, step_ms * 0.93, step_ms)
    fingerprints, point_keys, wkeys, nprompts = [], [], [], []
    for ci, bs, w in rows:
        cfg = configs[ci]
        n = max(4 * bs, 8)
        nprompts.append(n)
        wkeys.append(w.key)
        point_keys.append(f"{cfg.key(lane)}/bs{bs}/{w.key}/n{n}")
        fingerprints.append(
            point_fingerprint(
                model=lane.model,
                draft_model=lane.draft_model if cfg.steps else None,
                attention_backend="flashmla",
                tp=lane.tp,
                algorithm=lane.algorithm if cfg.steps else None,
                steps=cfg.steps,
                topk=1 if cfg.steps else None,
                draft_tokens=cfg.steps + 1 if cfg.steps else None,
                spec_mode=cfg.spec_mode,
                batch_size=bs,
                workload_key=w.key,
                gpu_name=lane.gpu_name,
                gpu_count=lane.gpu_count,
            )
        )
    return _Grid(
        configs=configs,
        config_index=ci_arr,
        batch=batch,
        steps=steps,
        is_v2=is_v2,
        is_spec=is_spec,
        input_len=np.array([r[2].input_len for r in rows], dtype=np.float64),
        output_len=np.array([r[2].output_len for r in rows], dtype=np.float64),
        num_prompts=np.array(nprompts),
        fingerprints=fingerprints,
        point_keys=point_keys,
        workload_keys=wkeys,
        base_accept=accept,
        base_step_ms=step_ms,
    )


def _release_at(fraction: float) -> tuple[str, str, str, str]:
    return RELEASES[min(len(RELEASES) - 1, int(fraction * len(RELEASES)))]


def _sweep_name(lane: Lane) -> str:
    return f"{SYNTHETIC_PREFIX}{lane.model.split('/')[-1].lower()}-{lane.gpu_name.split()[1].lower()}"


def _sweep_yaml(lane: Lane, shape: Shape) -> str:
    # Written as the runner would store it, so "reproduce" commands have something to show; never run.
    doc = {
        "name": _sweep_name(lane),
        "model": lane.model,
        "draft_model": lane.draft_model,
        "server": {"backend": "sim", "attention_backend": "flashmla", "tp": lane.tp},
        "grid": {
            "batch_sizes": list(shape.batch_sizes),
            "spec_modes": list(shape.spec_modes),
            "algorithm": lane.algorithm,
            "steps": list(shape.steps),
            "topk": [1],
            "draft_tokens": "auto",
            "baseline": True,
        },
        "workload": [
            {"dataset": "random", "input_len": w.input_len, "output_len": w.output_len}
            for w in shape.workloads
        ],
        "repeats": shape.repeats,
    }
    return "# SYNTHETIC history generated by db.synthetic_history; not a real sweep.\n" + json.dumps(
        doc, indent=2
    )


class _Ids:
    """Pre-assigned primary keys (one executemany per table, no RETURNING round-trips)."""

    def __init__(self, engine: Engine):
        with engine.connect() as c:
            self.next = {
                t: (c.execute(select(func.coalesce(func.max(col), 0))).scalar_one() or 0) + 1
                for t, col in (
                    ("runs", Run.id),
                    ("server_instances", ServerInstance.id),
                    ("points", Point.id),
                    ("samples", Sample.id),
                )
            }

    def take(self, table: str, n: int) -> int:
        first = self.next[table]
        self.next[table] += n
        return first


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
    """Write about `points` synthetic points (whole runs, so rounded up) and return what was written.

    Runs are spread `interval` apart per lane, ending at `end` (default: now). `progress`, if given, is
    called with (points written, points planned) after each chunk of `chunk_runs` runs.
    """
    if points <= 0:
        raise ValueError("points must be positive")
    t0 = time.perf_counter()
    end = end or datetime.now(UTC)
    per_run = shape.points_per_run
    rounds = max(1, math.ceil(points / (per_run * len(shape.lanes))))
    grids = [_grid(lane, shape) for lane in shape.lanes]
    yamls = [_sweep_yaml(lane, shape) for lane in shape.lanes]
    rng = np.random.default_rng(seed)
    ids = _Ids(engine)
    writer = _Writer(engine)
    report = SeedReport()
    planned = rounds * len(shape.lanes) * per_run
    commits = [hashlib.sha1(f"sglang-main-{seed}-{r}".encode()).hexdigest() for r in range(rounds)]
    pending = [(r, li) for r in range(rounds) for li in range(len(shape.lanes))]
    for first in range(0, len(pending), chunk_runs):
        cols: dict[str, _Columns] = {name: _Columns() for name, _ in _TABLES}
        for r, li in pending[first : first + chunk_runs]:
            started = end - interval * (rounds - 1 - r) - timedelta(minutes=17 * (len(shape.lanes) - li))
            ctx = _RunContext(
                shape, shape.lanes[li], grids[li], yamls[li], r, rounds, commits[r], started, seed
            )
            _one_run(cols, ids, rng, ctx, with_samples)
        writer.write(cols)
        report.runs += len(cols["runs"])
        report.points += len(cols["points"])
        report.samples += len(cols["samples"])
        report.server_instances += len(cols["server_instances"])
        report.run_ids.extend(cols["runs"].data["id"])
        if progress is not None:
            progress(report.points, planned)
    _fix_sequences(engine)
    report.seconds = time.perf_counter() - t0
    return report


class _Columns:
    """Rows of one table, stored column-wise: cheap to build from NumPy and to hand to executemany."""

    def __init__(self) -> None:
        self.data: dict[str, list[Any]] = {}
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def add(self, n: int, values: dict[str, Any]) -> None:
        """Append n rows; each value is a list of n items or a scalar repeated n times."""
        if self.n and set(values) != set(self.data):
            raise ValueError("every batch of a table must set the same columns")
        for k, v in values.items():
            col = self.data.setdefault(k, [])
            if isinstance(v, list):
                if len(v) != n:
                    raise ValueError(f"column {k}: {len(v)} values for {n} rows")
                col.extend(v)
            else:
                col.extend([v] * n)
        self.n += n


@dataclass(frozen=True)
class _RunContext:
    shape: Shape
    lane: Lane
    grid: _Grid
    sweep_yaml: str
    round: int
    rounds: int
    commit: str
    started: datetime
    seed: int

    @property
    def fraction(self) -> float:
        return self.round / (self.rounds - 1) if self.rounds > 1 else 1.0


def _none_for_nan(a: np.ndarray) -> list[float | None]:
    return [None if x != x else x for x in a.tolist()]


def _one_run(
    cols: dict[str, _Columns], ids: _Ids, rng: np.random.Generator, ctx: _RunContext, samples: bool
) -> None:
    lane, g = ctx.lane, ctx.grid
    version, kernel, flashinfer, torch = _release_at(ctx.fraction)
    run_id = ids.take("runs", 1)
    n_points = len(g.batch)
    failed_run = rng.random() < 0.004  # a server that never came up: the run has no points at all
    status = "failed" if failed_run else ("partial" if rng.random() < 0.01 else "done")
    started = ctx.started
    duration = timedelta(seconds=int(25 * n_points + rng.integers(0, 300)))
    cols["runs"].add(
        1,
        {
            "id": run_id,
            "uid": uuid7(),
            "sweep_name": _sweep_name(lane),
            "sweep_yaml": ctx.sweep_yaml,
            "sweep_hash": hashlib.sha256(ctx.sweep_yaml.encode()).hexdigest(),
            "trigger": SYNTHETIC_TRIGGER,
            "label": SYNTHETIC_LABEL,
            "backend": "sim",
            "status": status,
            "error": "synthetic: server exited during CUDA graph capture (out of memory)"
            if failed_run
            else None,
            "started_at": started,
            "finished_at": started + duration,
            "job_id": None,
            "model": lane.model,
            "model_identity": f"synthetic:{hashlib.sha1(lane.model.encode()).hexdigest()[:12]}",
            "sglang_version": version,
            "sglang_commit": ctx.commit,
            "sgl_kernel_version": kernel,
            "flashinfer_version": flashinfer,
            "flash_mla_source": "sgl-kernel",
            "torch_version": torch,
            "cuda_version": "12.9",
            "driver_version": "580.95.05",
            "gpu_name": lane.gpu_name,
            "gpu_count": lane.gpu_count,
            "host": f"synthetic-{lane.gpu_name.split()[1].lower()}-{lane.gpu_count}x",
            "specbench_version": "0.1.0",
            "git_commit": None,
            "simulated": True,
            "provenance": {
                "synthetic": True,
                "generator": "db.synthetic_history",
                "seed": ctx.seed,
                "round": ctx.round,
            },
            "overhead_s": None,
        },
    )
    if failed_run:
        return
    n = n_points if status == "done" else int(n_points * rng.uniform(0.3, 0.9))

    # Level shifts in force at this point of history, then run-level and repeat-level noise.
    accept = g.base_accept.copy()
    step_ms = g.base_step_ms.copy()
    for step in INJECTED_STEPS:
        if ctx.fraction >= step.at:
            mask = np.array(
                [step.applies(lane, g.configs[ci].spec_mode, g.configs[ci].steps) for ci in g.config_index]
            )
            if step.kind == "acceptance":
                accept = np.where(mask, np.maximum(1.0, accept * step.factor), accept)
            else:
                step_ms = np.where(mask, step_ms * step.factor, step_ms)
    step_ms = step_ms * rng.normal(1.0, 0.004)  # this host tonight
    reps = ctx.shape.repeats
    acc_s = np.maximum(1.0, accept[:, None] * rng.normal(1.0, 0.006, (n_points, reps)))
    acc_s = np.where(g.is_spec[:, None], acc_s, np.nan)
    step_s = step_ms[:, None] * rng.normal(1.0, 0.009, (n_points, reps))
    tpot = step_s / np.where(np.isnan(acc_s), 1.0, acc_s)
    ttft = (35.0 + 0.011 * g.input_len * (1 + g.batch / 8.0))[:, None] * rng.normal(
        1.0, 0.03, (n_points, reps)
    )
    out = g.output_len[:, None]
    e2e = ttft + (out - 1) * tpot
    nprom = g.num_prompts[:, None].astype(np.float64)
    duration_s = nprom * e2e / g.batch[:, None] / 1000.0
    thr = nprom * out / duration_s
    metrics = {
        "output_throughput": thr,
        "input_throughput": thr * g.input_len[:, None] / out,
        "total_throughput": thr * (1 + g.input_len[:, None] / out),
        "request_throughput": nprom / duration_s,
        "ttft_mean_ms": ttft,
        "ttft_p50_ms": ttft * 0.97,
        "ttft_p90_ms": ttft * 1.35,
        "ttft_p99_ms": ttft * 1.9,
        "tpot_mean_ms": tpot,
        "tpot_p50_ms": tpot * 0.99,
        "tpot_p90_ms": tpot * 1.06,
        "tpot_p99_ms": tpot * 1.14,
        "itl_mean_ms": tpot,
        "itl_p50_ms": tpot * 0.9,
        "itl_p90_ms": step_s * 1.02,
        "itl_p99_ms": step_s * 1.25,
        "e2e_mean_ms": e2e,
        "e2e_p50_ms": e2e * 0.99,
        "e2e_p90_ms": e2e * 1.05,
        "e2e_p99_ms": e2e * 1.12,
        "accept_length": acc_s,
        "accept_length_weighted": acc_s * 0.996,
        "server_accept_length": acc_s * 1.002,
        "concurrency": np.repeat(g.batch[:, None] * 0.985, reps, axis=1),
        "max_output_tokens_per_s": thr * 1.18,
        "duration_s": duration_s,
    }

    # Rare problems, as real history has them.
    statuses = np.full(n_points, "ok", dtype=object)
    reasons = np.full(n_points, None, dtype=object)
    is_v1 = np.array([g.configs[ci].spec_mode == "v1" for ci in g.config_index])
    mismatch_run = version == "0.5.14" and lane.gpu_name.startswith("NVIDIA H100") and rng.random() < 0.25
    invalid = rng.random(n_points) < 0.002
    oom = (g.batch >= 64) & (g.steps >= 4) & (rng.random(n_points) < 0.03)
    statuses[invalid] = "invalid"
    reasons[invalid] = "wrong_length: 3 of 64 completions stopped early (ignore_eos off?)"
    if mismatch_run:
        statuses[is_v1] = "mode_mismatch"
        reasons[is_v1] = (
            "requested v1 (non-overlap) via SGLANG_ENABLE_SPEC_V2=false, server resolved v2 (overlap): "
            "the variable was removed in 0.5.14"
        )
    statuses[oom] = "failed"
    reasons[oom] = "server crashed: CUDA out of memory during cuda graph capture (bs=64)"
    ok = statuses[:n] != "failed"

    si_first = ids.take("server_instances", len(g.configs))
    nc = len(g.configs)
    spec_cfg = [c.steps is not None for c in g.configs]
    v1_mismatch = [c.spec_mode == "v1" and mismatch_run for c in g.configs]
    cols["server_instances"].add(
        nc,
        {
            "id": list(range(si_first, si_first + nc)),
            "run_id": run_id,
            "config_key": [c.key(lane) for c in g.configs],
            "label": [c.label(lane) for c in g.configs],
            "requested": [
                {
                    "algorithm": lane.algorithm if sp else None,
                    "steps": c.steps,
                    "spec_mode": c.spec_mode,
                    "tp": lane.tp,
                }
                for c, sp in zip(g.configs, spec_cfg, strict=True)
            ],
            "resolved": [
                {
                    "version": version,
                    "attention_backend": "flashmla",
                    "page_size": 64,
                    "disable_overlap_schedule": c.spec_mode == "v1" and not mm,
                }
                for c, mm in zip(g.configs, v1_mismatch, strict=True)
            ],
            "argv": [[] for _ in range(nc)],
            "env": [{} for _ in range(nc)],
            "spec_mode_requested": [c.spec_mode for c in g.configs],
            "spec_mode_resolved": [
                "v2" if mm else c.spec_mode for c, mm in zip(g.configs, v1_mismatch, strict=True)
            ],
            "spec_mode_detail": "synthetic",
            "mismatches": [["spec_mode"] if mm else [] for mm in v1_mismatch],
            "sglang_version": version,
            "log_path": None,
            "startup_s": rng.uniform(60, 240, nc).tolist(),
            "status": "ok",
            "error": None,
            "started_at": started,
            "stopped_at": started + duration,
        },
    )

    p_first = ids.take("points", n)
    ci = g.config_index[:n]
    cfgs = [g.configs[c] for c in ci]
    spec = [c.steps is not None for c in cfgs]
    nprompts = g.num_prompts[:n]
    st = statuses[:n].tolist()
    okl = ok.tolist()
    point_cols: dict[str, Any] = {
        "id": list(range(p_first, p_first + n)),
        "run_id": run_id,
        "server_instance_id": (si_first + ci).tolist(),
        "point_key": g.point_keys[:n],
        "fingerprint": g.fingerprints[:n],
        "status": st,
        "reason": reasons[:n].tolist(),
        "model": lane.model,
        "draft_model": [lane.draft_model if sp else None for sp in spec],
        "attention_backend": "flashmla",
        "tp": lane.tp,
        "algorithm": [lane.algorithm if sp else None for sp in spec],
        "steps": [c.steps for c in cfgs],
        "topk": [1 if sp else None for sp in spec],
        "draft_tokens": [c.steps + 1 if c.steps else None for c in cfgs],
        "spec_mode": [c.spec_mode for c in cfgs],
        "spec_mode_resolved": [
            "v2" if s == "mode_mismatch" else c.spec_mode for s, c in zip(st, cfgs, strict=True)
        ],
        "batch_size": g.batch[:n].astype(int).tolist(),
        "dataset": "random",
        "input_len": g.input_len[:n].astype(int).tolist(),
        "output_len": g.output_len[:n].astype(int).tolist(),
        "num_prompts": nprompts.tolist(),
        "workload_key": g.workload_keys[:n],
        "gpu_name": lane.gpu_name,
        "gpu_count": lane.gpu_count,
        "repeats": np.where(ok, reps, 0).tolist(),
        "repeats_planned": reps,
        "overhead_s": None,
        "created_at": [started + timedelta(seconds=25 * i) for i in range(n)],
        "completed": [int(x) if o else None for x, o in zip(nprompts.tolist(), okl, strict=True)],
        "failed": np.where(ok, 0, nprompts).tolist(),
        "incomplete": [0 if o else None for o in okl],
        "wrong_length": [(3 if s == "invalid" else 0) if o else None for s, o in zip(st, okl, strict=True)],
        "total_input_tokens": _none_for_nan(np.where(ok, nprompts * g.input_len[:n], np.nan)),
        "total_output_tokens": _none_for_nan(np.where(ok, nprompts * g.output_len[:n], np.nan)),
    }
    thr_n = metrics["output_throughput"][:n]
    # n = 3 repeats: [min, max] is the order-statistic interval of the median (75 % coverage).
    point_cols["output_throughput_ci_low"] = _none_for_nan(np.where(ok, thr_n.min(axis=1), np.nan))
    point_cols["output_throughput_ci_high"] = _none_for_nan(np.where(ok, thr_n.max(axis=1), np.nan))
    for k, v in metrics.items():
        point_cols[k] = _none_for_nan(np.where(ok, np.median(v[:n], axis=1), np.nan))
    for k in ("total_input_tokens", "total_output_tokens"):
        point_cols[k] = [None if x is None else int(x) for x in point_cols[k]]
    cols["points"].add(n, point_cols)
    if not samples:
        return

    keep = np.flatnonzero(ok)
    m = len(keep) * reps
    s_first = ids.take("samples", m)
    rep_idx = np.tile(np.arange(reps), len(keep))
    pt_idx = np.repeat(keep, reps)
    sample_cols: dict[str, Any] = {
        "id": list(range(s_first, s_first + m)),
        "point_id": (p_first + pt_idx).tolist(),
        "repeat": rep_idx.tolist(),
        "status": statuses[pt_idx].tolist(),
        "reason": reasons[pt_idx].tolist(),
        "overhead_s": None,
        "created_at": [
            started + timedelta(seconds=25 * int(i) + 8 * int(r))
            for i, r in zip(pt_idx, rep_idx, strict=True)
        ],
        "completed": nprompts[pt_idx].tolist(),
        "failed": 0,
        "incomplete": 0,
        "wrong_length": [3 if s == "invalid" else 0 for s in statuses[pt_idx].tolist()],
        "total_input_tokens": (nprompts * g.input_len[:n]).astype(int)[pt_idx].tolist(),
        "total_output_tokens": (nprompts * g.output_len[:n]).astype(int)[pt_idx].tolist(),
    }
    for k, v in metrics.items():
        sample_cols[k] = _none_for_nan(v[:n][keep].reshape(-1))
    cols["samples"].add(m, sample_cols)


_TABLES: tuple[tuple[str, Table], ...] = (
    ("runs", cast(Table, Run.__table__)),
    ("server_instances", cast(Table, ServerInstance.__table__)),
    ("points", cast(Table, Point.__table__)),
    ("samples", cast(Table, Sample.__table__)),
)


class _Writer:
    """executemany of a compiled (parameterised) INSERT, with each column's bind processor applied once per
    column rather than SQLAlchemy's per-row parameter dictionaries: the difference between 3k and 15k+ points
    per second. The SQL text is SQLAlchemy's own compilation of `insert(table)`, never assembled by hand."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.dialect = engine.dialect

    def write(self, cols: dict[str, _Columns]) -> None:
        with self.engine.begin() as conn:
            if self.dialect.name == "sqlite":
                # 256 MiB of page cache for this connection: index inserts in fingerprint order touch pages all
                # over the file, and the 2 MiB default turns that into disk reads. A constant pragma, no input.
                conn.exec_driver_sql("PRAGMA cache_size = -262144")
            for name, table in _TABLES:
                c = cols[name]
                if not len(c):
                    continue
                keys = list(c.data)
                compiled = insert(table).compile(dialect=self.dialect, column_keys=keys)
                processed = {k: self._process(table, k, c.data[k]) for k in keys}
                if self.dialect.positional:
                    order = list(compiled.positiontup or [])
                    rows: list[Any] = list(zip(*(processed[k] for k in order), strict=True))
                else:
                    rows = [
                        dict(zip(keys, vals, strict=True))
                        for vals in zip(*(processed[k] for k in keys), strict=True)
                    ]
                for i in range(0, len(rows), 50_000):
                    conn.exec_driver_sql(str(compiled), rows[i : i + 50_000])

    def _process(self, table: Table, key: str, values: list[Any]) -> list[Any]:
        # dialect_impl: the dialect's own variant of the type (psycopg wraps JSON values, SQLite dumps them).
        proc = table.c[key].type.dialect_impl(self.dialect).bind_processor(self.dialect)
        if proc is None:
            return values
        return [None if v is None else proc(v) for v in values]


def _fix_sequences(engine: Engine) -> None:
    """PostgreSQL: explicit ids do not advance SERIAL sequences; move them past what we wrote."""
    if engine.dialect.name != "postgresql":
        return
    with engine.begin() as conn:
        for name, table in _TABLES:
            top = select(func.coalesce(func.max(table.c.id), 1)).scalar_subquery()
            conn.execute(select(func.setval(func.pg_get_serial_sequence(name, "id"), top)))


def delete_synthetic(engine: Engine) -> int:
    """Remove every synthetic run (its points, samples and server instances cascade). Returns runs removed."""
    with engine.begin() as conn:
        ids = conn.execute(select(Run.id).where(Run.trigger == SYNTHETIC_TRIGGER)).scalars().all()
        for part in range(0, len(ids), 500):
            chunk = ids[part : part + 500]
            # SQLite cascades only with foreign_keys=ON (db.engine sets it); delete children explicitly anyway.
            point_ids = select(Point.id).where(Point.run_id.in_(chunk))
            conn.execute(Triage.__table__.delete().where(Triage.run_id.in_(chunk)))  # type: ignore[attr-defined]
            conn.execute(Sample.__table__.delete().where(Sample.point_id.in_(point_ids)))  # type: ignore[attr-defined]
            conn.execute(Point.__table__.delete().where(Point.run_id.in_(chunk)))  # type: ignore[attr-defined]
            conn.execute(ServerInstance.__table__.delete().where(ServerInstance.run_id.in_(chunk)))  # type: ignore[attr-defined]
            conn.execute(Run.__table__.delete().where(Run.id.in_(chunk)))  # type: ignore[attr-defined]
    return len(ids)


__all__ = [
    "INJECTED_STEPS",
    "LANES",
    "SMALL_SHAPE",
    "SYNTHETIC_LABEL",
    "SYNTHETIC_PREFIX",
    "SYNTHETIC_TRIGGER",
    "InjectedStep",
    "Lane",
    "SeedReport",
    "Shape",
    "Workload",
    "delete_synthetic",
    "seed_history",
]
