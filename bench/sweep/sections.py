"""Sweep file sections: strict, bounded pydantic models (docs/reference/sweep-keys.md), joined in spec.py."""

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


# Wrong on purpose (correctness-gate.md): v2's drafts, v2's verify, or the FlashMLA draft-decode issue.
SIM_WRONG_FAULTS = ("v2_draft", "v2_verify", "flashmla_draft_decode_context")
# Faults that strike at the stand-in's N+1-th user request (`name=N`; synthetic/server/config.py's own list).
SIM_COUNTED_FAULTS = ("crash_after", "stall_after", "malformed_after", "hiccup_after")


class SimSettings(Strict):
    """Knobs of the stand-in (`backend: sim`), passed as SPECBENCH_SIM_* variables."""

    version: str = DEFAULT_VERSION
    acceptance_rate: float = Field(0.7, ge=0.0, le=1.0)
    seed: Seed = 0
    time_scale: float = Field(1.0, gt=0.0, le=1000.0)
    instant: bool = False
    startup_s: float = Field(0.2, ge=0.0, le=3600.0)
    fault: str | None = Field(None, max_length=256)
    # One emulated GPU for the run's servers: one that does not fit fails to start, as SGLang's does.
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
    python: PathText | None = None  # interpreter running `-m sglang.launch_server`; None = specbench's own
    # `dummy`: weights from config.json alone (`--load-format dummy`); `auto` passes no flag.
    load_format: LoadFormat = "auto"
    # Dummy-weight MoE routing collapses; `auto` balances it (bench/server/routing.py), `off` warns.
    # YAML 1.1 reads a bare `off` as false: `balanced_routing: off` means "off", not a type error.
    balanced_routing: Annotated[
        Literal["auto", "off"], BeforeValidator(lambda v: "off" if v is False else v)
    ] = "auto"
    # Keep both servers of a v1/v2 pair up and interleave their repeats; falls back to alternating restarts.
    pair_colocate: bool = True
    # Pin the server to these CPUs ("2-7,10" or [2, 3]); None = the runner's (docs/guide/gpu-hosts.md).
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
    # Pinned SGLANG_SIMULATE_ACC_LEN values, a config each ([] = none); a list or a per-steps mapping.
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
        return max(4 * batch_size, 8) if self.num_prompts == "auto" else self.num_prompts

    def key(self) -> str:
        src = self.path or "random"
        return f"{self.dataset}:{src}:in{self.input_len}:out{self.output_len}:seed{self.seed}:t{self.temperature}"


class WarmupSpec(Strict):
    waves: int = Field(1, ge=1, le=100)
    # First point's warmup floor (early H200 windows read 15-20% slow); None = by backend.
    after_start_s: float | None = Field(None, ge=0.0, le=3600.0)


class CorrectnessSpec(Strict):
    """Pre-window check (correctness-gate.md): greedy tokens match the baseline's, v2's acceptance v1's."""

    enabled: bool = True
    prompts: int = Field(16, ge=1, le=256)
    input_len: int = Field(32, ge=2, le=8192)
    output_len: int = Field(64, ge=2, le=4096)
    seed: Seed = 0
    # Prompts whose tokens may differ (batch-shape near-ties) before a launch fails; see `self_check`.
    max_diverging_prompts: int = Field(0, ge=0, le=256)
    # v2's token-weighted acceptance over v1's (or the reference's) below this fails.
    min_acceptance_ratio: float = Field(0.95, gt=0.0, le=1.0)
    self_check: bool = True  # baseline answers batched and one at a time: the floor for max_diverging_prompts


class MeasureSpec(Strict):
    """How long a window lasts and what the run checks around its windows."""

    # A window runs at least this long AND until the prompt budget is sent; None = by backend.
    min_window_s: float | None = Field(None, ge=0.0, le=3600.0)
    # Interleave (ABBA) each v1/v2 pair; false = one server at a time (max_parallel_starts applies to all).
    paired: bool = True
    drift_check: bool | None = None  # re-measure point 1 last (drift); None = on for GPU servers and pairs
    # |reported - pinned| accept length above this marks the repeat invalid (grid.accept_lengths).
    accept_length_tolerance: float = Field(0.15, gt=0.0, le=64.0)
    # A window whose median SM clock is below this fraction of the run's highest is flagged `throttled`.
    throttle_fraction: float = Field(0.9, gt=0.0, le=1.0)
    # Paired points: add ABBA repeats until the v2/v1 95% interval is within ratio x (1 +- this).
    ratio_target: float | None = Field(None, gt=0.0, lt=1.0)
    max_repeats: int | None = Field(None, ge=2, le=1000)  # None with ratio_target: 3 x repeats
    # Batch sizes below this stop at `repeats` (a PR asks about batch >= 8).
    ratio_target_min_batch: int = Field(1, ge=1, le=1_000_000)
    # Modes measured against the baseline repeat by repeat, walked as a chain (bench.pairing); [] = off.
    baseline_pairs: Annotated[list[SpecMode], Field(max_length=2)] = Field(default_factory=list)
    # Resumed on another host/GPU: parts agree within +-part_tolerance (runners/part_check.py).
    part_tolerance: float = Field(0.03, gt=0.0, lt=1.0)
    # Where the host-speed probe runs: `runner` CPUs, or the server's busiest CPU (gpu-hosts.md).
    cpu_probe: Literal["runner", "server"] = "runner"
    # Greedy tokens and acceptance of every launch against the baseline, v1 and the reference.
    correctness: CorrectnessSpec = Field(default_factory=CorrectnessSpec)


class ProfileSpec(Strict):
    """Capture an SGLang profiler trace of chosen points after their windows (docs/reference/profiles.md)."""

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
