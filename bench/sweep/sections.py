"""The sections of a sweep file (server, grid, workload, warmup, measure, profile, sim): strict, bounded
pydantic models. bench/sweep/spec.py puts them together into the whole sweep and checks them across fields."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, field_validator

from bench.server.spec_modes import DEFAULT_RELEASE as DEFAULT_VERSION
from bench.server.spec_modes import RELEASES as EMULATED_VERSIONS
from bench.server.spec_modes import SpecMode
from bench.sweep.fields import (
    AcceptLength,
    Activity,
    Algorithm,
    ArgValue,
    Backend,
    BatchSize,
    CpuList,
    EnvName,
    EnvValue,
    LoadFormat,
    PathText,
    Seconds,
    Seed,
    Slug,
    Steps,
    Text,
    Tokens,
    TopK,
    arg_value,
    draft_tokens_value,
    list_of,
    num_prompts_value,
)


class Strict(BaseModel):
    # strict: `steps: "3"` is a mistake to report, not to coerce. No inf/nan anywhere.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


# The stand-in computing wrongly on purpose (synthetic/server, docs/reference/correctness-gate.md): v2's drafts
# (acceptance falls, tokens stay right), v2's verification (its tokens leave the baseline's), or the known SGLang
# issue flashmla-draft-decode-context on the FlashMLA launches it applies to (acceptance falls from 3 steps on).
SIM_WRONG_FAULTS = ("v2_draft", "v2_verify", "flashmla_draft_decode_context")
# Faults that strike at the stand-in's N+1-th user request (`name=N`; synthetic/server/config.py's own list).
SIM_COUNTED_FAULTS = ("crash_after", "stall_after", "malformed_after", "hiccup_after")


class SimSettings(Strict):
    """Knobs of the stand-in server (`backend: sim`); the launcher passes them as SPECBENCH_SIM_* variables."""

    version: str = DEFAULT_VERSION
    acceptance_rate: float = Field(0.7, ge=0.0, le=1.0)
    seed: Seed = 0
    time_scale: float = Field(1.0, gt=0.0, le=1000.0)
    instant: bool = False
    startup_s: float = Field(0.2, ge=0.0, le=3600.0)
    fault: str | None = Field(None, max_length=256)
    # Emulate one GPU shared by the run's servers: a server whose mem-fraction-static does not fit next to the
    # live ones fails to start, as SGLang's does (tests the paired runner's fallback).
    shared_gpu: bool = False

    @field_validator("version")
    @classmethod
    def _known_version(cls, v: str) -> str:
        if v not in EMULATED_VERSIONS:
            raise ValueError(f"sim version {v!r} is not emulated; choose one of {list(EMULATED_VERSIONS)}")
        return v

    @field_validator("fault")
    @classmethod
    def _fault_syntax(cls, v: str | None) -> str | None:
        if v is None:
            return v
        for part in v.split(","):
            if part in SIM_WRONG_FAULTS:
                continue
            kind, _, n = part.partition("=")
            if kind not in SIM_COUNTED_FAULTS or not (n.isdigit() and len(n) < 10):
                raise ValueError(
                    f"fault {part!r}: expected "
                    + ", ".join(f"{f}=N" for f in SIM_COUNTED_FAULTS)
                    + f", {', '.join(SIM_WRONG_FAULTS[:-1])} or {SIM_WRONG_FAULTS[-1]}"
                )
        return v


def _yaml_off(v: Any) -> Any:
    """YAML 1.1 reads a bare `off` as false: `balanced_routing: off` means "off", not a type error."""
    return "off" if v is False else v


class ServerSpec(Strict):
    backend: Backend = "sglang"
    base_url: Text | None = None
    attention_backend: Slug = "flashmla"
    tp: int = Field(1, ge=1, le=64)
    args: Annotated[dict[str, Annotated[ArgValue, PlainValidator(arg_value)]], Field(max_length=256)] = Field(
        default_factory=dict
    )
    env: Annotated[dict[EnvName, EnvValue], Field(max_length=256)] = Field(default_factory=dict)
    sim: SimSettings = Field(default_factory=SimSettings)
    startup_timeout_s: Seconds = 900.0
    # Start up to this many of the sweep's servers together, then measure them one at a time (see README).
    max_parallel_starts: int = Field(1, ge=1, le=16)
    # Interpreter that runs `-m sglang.launch_server`; None = the one running specbench.
    python: PathText | None = None
    # `dummy`: SGLang initialises weights from config.json alone (`--load-format dummy`), for the
    # config-only checkpoints of `specbench synth-model --preset ...`. `auto` passes no flag.
    load_format: LoadFormat = "auto"
    # With dummy weights a MoE model's routing collapses onto a few experts; `auto` sets the release's
    # balanced-routing switch (SGLANG_SIMULATE_UNIFORM_EXPERTS, bench/server/routing.py), `off` leaves routing
    # as the dummy weights make it (warned about, and labelled "routing collapsed" on every point).
    balanced_routing: Annotated[Literal["auto", "off"], BeforeValidator(_yaml_off)] = "auto"
    # Keep both servers of a v1/v2 pair alive and interleave their repeats (docs/reference/paired-measurement.md).
    # If the second one cannot start (GPU memory), the runner falls back to alternating restarts.
    pair_colocate: bool = True
    # Pin the server's processes and threads to these CPUs ("2-7,10" or [2, 3]); None = wherever the runner
    # may run. Its scheduler is bound by one host core on an H200, so which core matters (docs/guide/gpu-hosts.md).
    cpu_affinity: CpuList | None = None


class GridSpec(Strict):
    batch_sizes: list_of(BatchSize, 1024)  # type: ignore[valid-type]
    spec_modes: Annotated[list[SpecMode], Field(max_length=2)] = Field(
        default_factory=lambda: list[SpecMode](["v1", "v2"])
    )
    algorithm: Algorithm = "EAGLE"
    steps: list_of(Steps) = Field(default_factory=lambda: [3])  # type: ignore[valid-type]
    topk: list_of(TopK) = Field(default_factory=lambda: [1])  # type: ignore[valid-type]
    draft_tokens: Annotated[Literal["auto"] | list[int], PlainValidator(draft_tokens_value)] = "auto"
    baseline: bool = True
    # Pinned acceptance lengths (SGLANG_SIMULATE_ACC_LEN), one server config per value; [] = not pinned. A list
    # crosses every steps value; a mapping pins per steps value (`{1: [1.8], 3: [2.5]}`: steps 1 at 1.8, steps 3
    # at 2.5), for grids where a length only fits some steps (one draft step accepts at most 2 tokens).
    accept_lengths: (
        Annotated[list[AcceptLength], Field(max_length=64)]
        | Annotated[
            dict[Steps, Annotated[list[AcceptLength], Field(min_length=1, max_length=64)]],
            Field(max_length=64),
        ]
    ) = Field(default_factory=list)

    @field_validator("algorithm", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    def accepts_for(self, steps: int) -> list[float | None]:
        """The pinned lengths of `steps` draft steps; [None] when acceptance is not pinned."""
        if isinstance(self.accept_lengths, dict):
            return list(self.accept_lengths.get(steps, [])) or [None]
        return list(self.accept_lengths) or [None]


class WorkloadSpec(Strict):
    dataset: Literal["random", "jsonl"] = "random"
    path: PathText | None = None
    input_len: Tokens = 1024
    output_len: Tokens = 512
    num_prompts: Annotated[int | Literal["auto"], PlainValidator(num_prompts_value)] = "auto"
    seed: Seed = 1
    temperature: float = Field(0.0, ge=0.0, le=10.0)

    def prompts_for(self, batch_size: int) -> int:
        """`auto` sends four full waves so the closed loop reaches steady state, and at least 8 requests."""
        if self.num_prompts == "auto":
            return max(4 * batch_size, 8)
        return self.num_prompts

    def key(self) -> str:
        src = self.path or "random"
        return f"{self.dataset}:{src}:in{self.input_len}:out{self.output_len}:seed{self.seed}:t{self.temperature}"


class WarmupSpec(Strict):
    waves: int = Field(1, ge=1, le=100)
    # A server's first point after its start keeps warming up (whole waves) until this long has passed: the
    # first windows after an H200 start read 15-20% slow with one wave (docs/results/2026-12-04-h200-v3-slice-intervals.md). None = by
    # backend: the GPU's min_window_s for servers specbench starts, 0 for the stand-in and external servers.
    after_start_s: float | None = Field(None, ge=0.0, le=3600.0)


class CorrectnessSpec(Strict):
    """The correctness check every launched server gets (docs/reference/correctness-gate.md).

    A fixed, seeded prompt set goes to each server with greedy decoding before its windows. A speculative
    launch must reproduce the baseline's tokens and v2's per-request acceptance must match v1's; with a
    specbench synthetic checkpoint both are also compared with the pure-torch reference.
    """

    enabled: bool = True
    prompts: int = Field(16, ge=1, le=256)
    input_len: int = Field(32, ge=2, le=8192)
    output_len: int = Field(64, ge=2, le=4096)
    seed: Seed = 0
    # Prompts whose tokens may differ (numerical near-ties: a verify step computes logits in another batch
    # shape than a decode step) before a launch fails. 0 suits a checkpoint with clear margins (mirror);
    # set it from the baseline's own spread, which `self_check` measures (the guide says how).
    max_diverging_prompts: int = Field(0, ge=0, le=256)
    # v2's token-weighted acceptance over v1's (and a launch's over the reference's) below this fails. One
    # draft flipped by a near-tie moves it by ~1/(prompts x verify steps) (~0.4% at 16 x 64 tokens).
    min_acceptance_ratio: float = Field(0.95, gt=0.0, le=1.0)
    # The baseline answers the prompts twice, batched and one at a time: how often two batch shapes of the
    # same greedy decoding disagree, i.e. the floor for max_diverging_prompts.
    self_check: bool = True


class MeasureSpec(Strict):
    """How long a window lasts and what the run checks around its windows."""

    # A window runs until at least this long has passed AND the prompt budget is sent (closed loop keeps
    # sending fresh requests until then, and drains). None = by backend (DEFAULT_MIN_WINDOW_S).
    min_window_s: float | None = Field(None, ge=0.0, le=3600.0)
    # Measure each v1/v2 pair interleaved (ABBA) when the grid has both modes; false = one server at a time
    # in launch order (then `server.max_parallel_starts` applies to every config).
    paired: bool = True
    # Re-measure the first point at the end of the run and store the drift (docs/reference/paired-measurement.md).
    # None = on for GPU servers and for v1/v2 pairs; off for unpaired stand-in sweeps, where it would only
    # restart a stand-in (seconds per job on a busy queue) to measure a performance model.
    drift_check: bool | None = None
    # |reported - pinned| accept length above this marks the repeat invalid (grid.accept_lengths).
    accept_length_tolerance: float = Field(0.15, gt=0.0, le=64.0)
    # A window whose median SM clock is below this fraction of the run's highest is flagged `throttled`.
    throttle_fraction: float = Field(0.9, gt=0.0, le=1.0)
    # Paired v1/v2 points (both servers up, ABBA): after `repeats`, keep adding ABBA repeats until the v2/v1
    # output-throughput 95% interval lies within ratio x (1 +- ratio_target), or `max_repeats` is reached.
    # GPU time goes where the spread is: a quiet point stops at `repeats`, a noisy one gets more.
    ratio_target: float | None = Field(None, gt=0.0, lt=1.0)
    max_repeats: int | None = Field(None, ge=2, le=1000)  # None with ratio_target: 3 x repeats
    # Batch sizes below this stop at `repeats`: the target is for the batches the question is about (a PR
    # asks about batch >= 8; batch 1 is light and its extra pairs cost as much GPU time as any other).
    ratio_target_min_batch: int = Field(1, ge=1, le=1_000_000)
    # Speculative modes whose points are each measured against the baseline's at the same batch size, repeat by
    # repeat (ABBA with both servers up, else in blocks), so speculation over plain decoding carries a paired
    # interval like v2/v1. The runner walks the comparisons as a chain that swaps one server per step
    # (bench.pairing.chain); [] = off: the baseline is measured on its own.
    baseline_pairs: Annotated[list[SpecMode], Field(max_length=2)] = Field(default_factory=list)
    # A run resumed on another host or GPU first re-measures one point of the part before; the parts agree when
    # that window lies within the earlier part's windows of the point, or within +-part_tolerance of their
    # median. Only parts that agree combine their pairs in a cell's interval (runners/part_check.py).
    part_tolerance: float = Field(0.03, gt=0.0, lt=1.0)
    # Where the host-speed probe (bench/host/cpu_probe.py) runs during a window. `runner`: on the runner's CPUs, as
    # a child of the benchmark client. `server`: moved, at every telemetry sample, onto the CPU the launched
    # server's busiest process (SGLang's scheduler) is on, so it times the core that bounds a host-bound
    # speculative server; on a VM that vCPU's speed moves on its own (another tenant on its host sibling).
    # Cost: the probe then takes ~1-3% of that core from the scheduler, the same for v1 and v2, so ratios hold
    # and absolute throughput reads slightly lower. Read cpu_probe_cpu_ms then (docs/guide/gpu-hosts.md). Needs a
    # server specbench launches (refused with backend: external).
    cpu_probe: Literal["runner", "server"] = "runner"
    # Greedy tokens and acceptance of every launch against the baseline, v1 and the reference.
    correctness: CorrectnessSpec = Field(default_factory=CorrectnessSpec)


class ProfileSpec(Strict):
    """Capture an SGLang profiler trace of chosen points after their measured windows (docs/reference/profiles.md)."""

    steps: int = Field(12, ge=2, le=1000)  # `num_steps` of /start_profile
    activities: list[Activity] = Field(
        default_factory=lambda: list[Activity](["GPU"]), min_length=1, max_length=4
    )
    # Batch sizes to profile; None = every batch size of the grid ([] would silently profile nothing).
    at: list_of(BatchSize, 1024) | None = None  # type: ignore[valid-type]
    with_stack: bool = False  # SGLang defaults both to true, which slows the CPU side a lot
    record_shapes: bool = False
    settle_s: float = Field(2.0, ge=0.0, le=600.0)  # load runs this long before /start_profile
    timeout_s: float = Field(300.0, gt=0.0, le=3600.0)  # wait at most this long for the trace files
    distortion_threshold: float = Field(1.2, gt=1.0, le=100.0)
