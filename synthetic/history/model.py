"""SYNTHETIC benchmark history for load tests, demos and dashboard tests. These numbers were never measured.

Every run, in the runner's tables, is marked `trigger = "synthetic"`, `sweep_name` "synthetic-..." and
`provenance["synthetic"]`. Lanes (model x GPU) run nightly sweeps over releases and commits, following the
speculative-decoding identity the dashboard's attribution relies on:
    acceptance length L = (1 - a^(steps+1)) / (1 - a)  for per-token acceptance a (topk 1 chain),
    verify-step time S = forward(bs) · (1 + verify cost · steps) + steps · draft cost · forward(bs),
    TPOT = S / L,  E2E = TTFT + (output_len - 1) · TPOT,  throughput = bs · output_len / E2E.
Known steps are injected (`INJECTED_STEPS`) for change-point detection to find, with a few failed,
invalid and mode_mismatch points as in real history.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.sweep import PointPlan, ServerConfig, WorkloadSpec

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


V3 = "deepseek-ai/DeepSeek-V3-0324"
V2_LITE, V2_LITE_EAGLE = "deepseek-ai/DeepSeek-V2-Lite-Chat", "synthetic/EAGLE-DeepSeek-V2-Lite"
H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
LANES: tuple[Lane, ...] = (
    Lane(V3, None, "NEXTN", 8, H200, 8, 0.80, 21.0, 0.22),
    Lane(V3, None, "NEXTN", 8, H100, 8, 0.80, 26.0, 0.30),
    Lane(V2_LITE, V2_LITE_EAGLE, "EAGLE", 1, H200, 1, 0.68, 6.5, 0.07),
    Lane(V2_LITE, V2_LITE_EAGLE, "EAGLE", 1, H100, 1, 0.68, 8.0, 0.09),
)


@dataclass(frozen=True)
class Shape:
    """The grid every synthetic run measures."""

    batch_sizes: tuple[int, ...] = (1, 4, 16, 32, 64)
    steps: tuple[int, ...] = (1, 2, 3, 4)
    spec_modes: tuple[str, ...] = ("v1", "v2")
    workloads: tuple[WorkloadSpec, ...] = (
        WorkloadSpec(input_len=1024, output_len=512),
        WorkloadSpec(input_len=4096, output_len=1024),
    )
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
    workloads=(WorkloadSpec(input_len=1024, output_len=512),),
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
        gpu=H200,
        model=V3,
        spec_mode="v2",
        description="v2 overlap drafts from a stale KV slot: acceptance -8% (DeepSeek-V3, H200)",
    ),
    InjectedStep(
        0.60,
        1.06,
        "step_time",
        gpu=H100,
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
        gpu=H100,
        model=V2_LITE,
        description="draft head loaded in fp8 by default: acceptance -6% (DeepSeek-V2-Lite EAGLE, H100)",
    ),
    InjectedStep(
        0.90,
        1 / 0.92,
        "acceptance",
        gpu=H200,
        model=V3,
        spec_mode="v2",
        description="stale-KV fix: acceptance back to normal (DeepSeek-V3, H200, v2)",
    ),
)


def server_config(lane: Lane, steps: int | None, spec_mode: str | None) -> ServerConfig:
    """The lane's server config for `steps` in `spec_mode` (None, None: baseline), as a sweep expands it."""
    spec = steps is not None
    return ServerConfig(
        model=lane.model,
        draft_model=lane.draft_model if spec else None,
        attention_backend="flashmla",
        tp=lane.tp,
        algorithm=lane.algorithm if spec else None,
        steps=steps,
        topk=1 if spec else None,
        draft_tokens=steps + 1 if steps is not None else None,
        spec_mode=spec_mode,  # type: ignore[arg-type]
    )


@dataclass
class Grid:
    """The static part of a lane's points, as arrays of the same length (one entry per point of a run)."""

    configs: list[ServerConfig]
    config_index: np.ndarray
    batch: np.ndarray
    steps: np.ndarray  # 0 for baseline
    is_spec: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    num_prompts: np.ndarray
    fingerprints: list[str]
    point_keys: list[str]
    workload_keys: list[str]
    base_accept: np.ndarray
    base_step_ms: np.ndarray


def build_grid(lane: Lane, shape: Shape, fingerprint: Callable[..., str]) -> Grid:
    """A lane's points for one run with modelled acceptance and step time; `fingerprint`: the store's."""
    configs = [server_config(lane, None, None)] + [
        server_config(lane, s, m) for m in shape.spec_modes for s in shape.steps
    ]
    rows: list[tuple[int, int, WorkloadSpec]] = [
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
    # Verifying steps+1 tokens costs a little more than one; overlap (v2) hides the CPU gap between steps.
    step_ms = np.where(is_spec, forward * (1 + 0.045 * steps) + steps * 0.11 * forward, forward)
    step_ms = np.where(is_v2, step_ms * 0.93, step_ms)
    fingerprints, point_keys, wkeys, nprompts = [], [], [], []
    for ci, bs, w in rows:
        plan = PointPlan(configs[ci], bs, w, w.prompts_for(bs), shape.repeats)
        nprompts.append(plan.num_prompts)
        wkeys.append(w.key())
        point_keys.append(plan.key())
        fingerprints.append(fingerprint(**plan.series(lane.gpu_name, lane.gpu_count)))
    return Grid(
        configs=configs,
        config_index=ci_arr,
        batch=batch,
        steps=steps,
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
