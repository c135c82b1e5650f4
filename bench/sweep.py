"""Sweep files: the YAML a user writes, validated in full before any server starts, and its expansion.

A sweep expands into server configs (everything that needs a restart) and, under each, the points measured
on that server (batch size x workload). Launches therefore equal the number of distinct server configs.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)

from bench import safe_yaml
from bench.server_env import ServerEnvError, as_env_value, sweep_name_problem
from bench.sglang_flags import check_passthrough_flag
from bench.sim.versions import DEFAULT_VERSION, EMULATED_VERSIONS
from bench.spec_modes import SpecMode

Activity = Literal["CPU", "GPU"]
Backend = Literal["sglang", "sim", "external"]
Algorithm = Literal["EAGLE", "NEXTN", "EAGLE3", "STANDALONE"]
LoadFormat = Literal["auto", "dummy"]
# SGLang's switch that pins acceptance (contract §1.3); `grid.accept_lengths` sets it per server config.
SIMULATE_ACC_ENV = "SGLANG_SIMULATE_ACC_LEN"
# Window length when `measure.min_window_s` is not given: a GPU step is milliseconds, so 10 s windows hold
# thousands of steps; the stand-in's windows stay as short as the prompt budget makes them.
DEFAULT_MIN_WINDOW_S: dict[str, float] = {"sglang": 10.0, "external": 10.0, "sim": 0.0}
# Repeats when the sweep does not say: v1/v2 pairs need more to put an interval on their ratio.
DEFAULT_REPEATS, DEFAULT_PAIRED_REPEATS = 3, 5

# FlashMLA's multi-step draft backend raises for topk > 1, and its page size of 64 rules out tree drafts.
TOPK1_ONLY_BACKENDS = frozenset({"flashmla"})
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# A sweep larger than this is a typo (or an attack on the queue), not a night of benchmarks.
MAX_SERVER_CONFIGS = 1000
MAX_POINTS = 100_000


class SweepError(ValueError):
    """A sweep file that cannot run; `problems` lists every reason at once."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: invalid sweep ({len(problems)} problem(s)):\n{lines}")


# ---- Field types. Every value a user writes goes through one of these: strict (a string is not a number),
# finite, and bounded, so a new field picks its bounds by picking its type.


def _text(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    if not v.isprintable():
        raise ValueError("contains a newline, tab or other control character")
    return v


def _slug(v: str) -> str:
    if not _SLUG.match(v):
        raise ValueError(
            "use letters, digits, '.', '_' or '-' (at most 100, starting with a letter or digit)"
        )
    return v


def _not_a_flag(v: str) -> str:
    if v.startswith("-"):  # argparse would read it as a flag; no SGLang path or name starts with '-'
        raise ValueError("must not start with '-'")
    return v


# One line of printable text: model paths, names, URLs.
Text = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_text)]
# A model or file path handed to the server's argv.
PathText = Annotated[Text, AfterValidator(_not_a_flag)]
Slug = Annotated[str, AfterValidator(_slug)]
Seconds = Annotated[float, Field(gt=0, le=7 * 24 * 3600)]  # a week: longer is a typo
Seed = Annotated[int, Field(ge=0, le=2**63 - 1)]
BatchSize = Annotated[int, Field(ge=1, le=65_536)]
Steps = Annotated[int, Field(ge=1, le=64)]
TopK = Annotated[int, Field(ge=1, le=64)]
DraftTokens = Annotated[int, Field(ge=2, le=4096)]
Tokens = Annotated[int, Field(ge=1, le=1_000_000)]
MAX_PROMPTS = 1_000_000


def _list_of(item: Any, n: int = 64) -> Any:
    """A non-empty list: an empty one would silently drop every config it multiplies."""
    return Annotated[list[item], Field(min_length=1, max_length=n)]  # type: ignore[valid-type]


def _num_prompts(v: Any) -> int | Literal["auto"]:
    if v == "auto":
        return "auto"
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_PROMPTS:
        raise ValueError(f"must be an integer from 1 to {MAX_PROMPTS:,} or 'auto'")
    return v


def _draft_tokens(v: Any) -> Literal["auto"] | list[int]:
    if v == "auto":
        return "auto"
    if not isinstance(v, list) or not v:
        raise ValueError("must be 'auto' or a non-empty list of integers")
    lo, hi = 2, 4096
    bad = [x for x in v if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= hi]
    if bad or len(v) > 64:
        raise ValueError(
            f"must be 'auto' or a list of up to 64 integers from {lo} to {hi} (got {bad[0]!r})"
            if bad
            else "at most 64 values"
        )
    return list(v)


ArgValue = str | int | float | bool | list[int] | list[str]


def _arg_value(v: Any) -> ArgValue:
    """A flag's value: one scalar or a short list of ints or strings; finite, printable, bounded."""

    def scalar_problem(x: Any) -> str | None:
        if isinstance(x, bool):
            return None
        if isinstance(x, int):
            return None if abs(x) < 2**53 else "integer out of range"
        if isinstance(x, float):
            return None if math.isfinite(x) and abs(x) < 1e15 else f"{x} is not a finite, bounded number"
        if isinstance(x, str):
            if len(x) > 4096:
                return "longer than 4096 characters"
            return None if x.isprintable() else "contains a newline, NUL or other control character"
        return f"must be a string, number, boolean or list of them, not {type(x).__name__}"

    if isinstance(v, list):
        if not v or len(v) > 256:
            raise ValueError("a list value needs 1 to 256 items")
        if not (
            all(isinstance(x, int) and not isinstance(x, bool) for x in v)
            or all(isinstance(x, str) for x in v)
        ):
            raise ValueError("a list value holds integers only or strings only")
        problems = [p for p in map(scalar_problem, v) if p]
    else:
        problems = [p for p in [scalar_problem(v)] if p]
    if problems:
        raise ValueError(problems[0])
    return v  # type: ignore[no-any-return]


def _env_scalar(v: Any) -> str:
    # YAML turns `SGLANG_SIMULATE_ACC_LEN: 2.5` into a float; the environment holds strings. `null` or a
    # mapping is a mistake, not the string "None".
    try:
        return as_env_value(v)
    except ServerEnvError as e:
        raise ValueError(str(e)) from None


def _env_name(v: str) -> str:
    problem = sweep_name_problem(v)
    if problem:
        raise ValueError(problem)
    return v


EnvName = Annotated[str, AfterValidator(_env_name)]
EnvValue = Annotated[str, BeforeValidator(_env_scalar)]


class _Strict(BaseModel):
    # strict: `steps: "3"` is a mistake to report, not to coerce. No inf/nan anywhere.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class SimSettings(_Strict):
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
            kind, _, n = part.partition("=")
            if kind not in {"crash_after", "stall_after", "malformed_after"} or not (
                n.isdigit() and len(n) < 10
            ):
                raise ValueError(
                    f"fault {part!r}: expected crash_after=N, stall_after=N or malformed_after=N"
                )
        return v


class ServerSpec(_Strict):
    backend: Backend = "sglang"
    base_url: Text | None = None
    attention_backend: Slug = "flashmla"
    tp: int = Field(1, ge=1, le=64)
    args: Annotated[dict[str, Annotated[ArgValue, PlainValidator(_arg_value)]], Field(max_length=256)] = (
        Field(default_factory=dict)
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
    # Keep both servers of a v1/v2 pair alive and interleave their repeats (docs/paired-measurement.md).
    # If the second one cannot start (GPU memory), the runner falls back to alternating restarts.
    pair_colocate: bool = True


class GridSpec(_Strict):
    batch_sizes: _list_of(BatchSize, 1024)  # type: ignore[valid-type]
    spec_modes: Annotated[list[SpecMode], Field(max_length=2)] = Field(
        default_factory=lambda: list[SpecMode](["v1", "v2"])
    )
    algorithm: Algorithm = "EAGLE"
    steps: _list_of(Steps) = Field(default_factory=lambda: [3])  # type: ignore[valid-type]
    topk: _list_of(TopK) = Field(default_factory=lambda: [1])  # type: ignore[valid-type]
    draft_tokens: Annotated[Literal["auto"] | list[int], PlainValidator(_draft_tokens)] = "auto"
    baseline: bool = True
    # Pinned acceptance lengths (SGLANG_SIMULATE_ACC_LEN), one server config per value; [] = not pinned.
    accept_lengths: list[float] = Field(default_factory=list)

    @field_validator("algorithm", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v


class WorkloadSpec(_Strict):
    dataset: Literal["random", "jsonl"] = "random"
    path: PathText | None = None
    input_len: Tokens = 1024
    output_len: Tokens = 512
    num_prompts: Annotated[int | Literal["auto"], PlainValidator(_num_prompts)] = "auto"
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


class WarmupSpec(_Strict):
    waves: int = Field(1, ge=1, le=100)


class MeasureSpec(_Strict):
    """How long a window lasts and what the run checks around its windows."""

    # A window runs until at least this long has passed AND the prompt budget is sent (closed loop keeps
    # sending fresh requests until then, and drains). None = by backend (DEFAULT_MIN_WINDOW_S).
    min_window_s: float | None = Field(None, ge=0.0, le=3600.0)
    # Measure each v1/v2 pair interleaved (ABBA) when the grid has both modes; false = one server at a time
    # in launch order (then `server.max_parallel_starts` applies to every config).
    paired: bool = True
    # Re-measure the first point at the end of the run and store the drift (docs/paired-measurement.md).
    drift_check: bool = True
    # |reported - pinned| accept length above this marks the repeat invalid (grid.accept_lengths).
    accept_length_tolerance: float = Field(0.15, gt=0.0)
    # A window whose median SM clock is below this fraction of the run's highest is flagged `throttled`.
    throttle_fraction: float = Field(0.9, gt=0.0, le=1.0)


class ProfileSpec(_Strict):
    """Capture an SGLang profiler trace of chosen points after their measured windows (docs/profiles.md)."""

    steps: int = Field(12, ge=2, le=1000)  # `num_steps` of /start_profile
    activities: list[Activity] = Field(
        default_factory=lambda: list[Activity](["GPU"]), min_length=1, max_length=4
    )
    # Batch sizes to profile; None = every batch size of the grid ([] would silently profile nothing).
    at: _list_of(BatchSize, 1024) | None = None  # type: ignore[valid-type]
    with_stack: bool = False  # SGLang defaults both to true, which slows the CPU side a lot
    record_shapes: bool = False
    settle_s: float = Field(2.0, ge=0.0, le=600.0)  # load runs this long before /start_profile
    timeout_s: float = Field(300.0, gt=0.0, le=3600.0)  # wait at most this long for the trace files
    distortion_threshold: float = Field(1.2, gt=1.0, le=100.0)


class SweepSpec(_Strict):
    name: Slug
    model: PathText
    draft_model: PathText | None = None
    server: ServerSpec = Field(default_factory=ServerSpec)
    grid: GridSpec
    workload: WorkloadSpec | Annotated[list[WorkloadSpec], Field(min_length=1, max_length=64)] = Field(
        default_factory=WorkloadSpec
    )
    repeats: int = Field(3, ge=1, le=100)
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    measure: MeasureSpec = Field(default_factory=MeasureSpec)
    request_timeout_s: Seconds = 600.0
    profile: ProfileSpec | None = None

    @property
    def workloads(self) -> list[WorkloadSpec]:
        return self.workload if isinstance(self.workload, list) else [self.workload]

    @property
    def min_window_s(self) -> float:
        if self.measure.min_window_s is not None:
            return self.measure.min_window_s
        return DEFAULT_MIN_WINDOW_S[self.server.backend]

    @property
    def paired(self) -> bool:
        """Both spec modes present (and pairing not switched off): the sweep measures v1/v2 pairs."""
        return self.measure.paired and {"v1", "v2"} <= set(self.grid.spec_modes)

    @model_validator(mode="before")
    @classmethod
    def _default_repeats(cls, data: Any) -> Any:
        # Pairs default to more repeats; decided on the raw mapping so `repeats` stays a plain int.
        if isinstance(data, dict) and "repeats" not in data:
            grid = data.get("grid")
            modes = grid.get("spec_modes", ["v1", "v2"]) if isinstance(grid, dict) else []
            paired = isinstance(modes, list) and {"v1", "v2"} <= set(modes)
            data = {**data, "repeats": DEFAULT_PAIRED_REPEATS if paired else DEFAULT_REPEATS}
        return data

    @model_validator(mode="after")
    def _check_combinations(self) -> SweepSpec:
        problems = find_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self


def find_problems(spec: SweepSpec) -> list[str]:
    """Every reason a well-typed sweep cannot run (the cross-field checks), so the user fixes them in one go."""
    p: list[str] = []
    g, s = spec.grid, spec.server
    if len(set(g.batch_sizes)) != len(g.batch_sizes):
        p.append("grid.batch_sizes: duplicate values")
    for k in g.topk:
        if k > 1 and s.attention_backend in TOPK1_ONLY_BACKENDS:
            p.append(
                f"grid.topk: {k} is not supported by attention backend {s.attention_backend!r} "
                "(FlashMLA speculative decoding supports topk = 1 only; its page size is 64)"
            )
    if isinstance(g.draft_tokens, list):
        for st in g.steps:
            for k in g.topk:
                for d in g.draft_tokens:
                    if st * k + 1 < d:
                        p.append(
                            f"grid: steps={st} topk={k} draft_tokens={d}: steps*topk+1 = {st * k + 1} < "
                            "draft_tokens (the draft tree cannot hold that many tokens)"
                        )
                    elif k == 1 and d != st + 1:
                        p.append(
                            f"grid: steps={st} topk=1 draft_tokens={d}: with topk 1 SGLang overwrites "
                            f"draft_tokens to steps+1 = {st + 1}; use `draft_tokens: auto`"
                        )
    for a in g.accept_lengths:
        if not 1.0 <= a <= 64.0:
            p.append(f"grid.accept_lengths: {a} must be in [1, 64] (tokens committed per verify step)")
    if len(set(g.accept_lengths)) != len(g.accept_lengths):
        p.append("grid.accept_lengths: duplicate values")
    if g.accept_lengths and SIMULATE_ACC_ENV in s.env:
        p.append(f"server.env.{SIMULATE_ACC_ENV}: set by grid.accept_lengths; remove one of the two")
    if s.load_format != "auto" and "load-format" in s.args:
        p.append("server.args.load-format: set by server.load_format; remove one of the two")
    if not g.spec_modes and not g.baseline:
        p.append("grid: no spec_modes and no baseline, nothing to measure")
    if len(set(g.spec_modes)) != len(g.spec_modes):
        p.append("grid.spec_modes: duplicate values")
    for name in s.args:
        msg = check_passthrough_flag(name)
        if msg:
            p.append(f"server.args: {msg}")
    if s.backend == "external":
        if not s.base_url:
            p.append("server.base_url: required with backend: external (the server someone else launched)")
        elif not re.match(r"^https?://[^\s/]+(:\d+)?/?$", s.base_url):
            p.append(f"server.base_url: {s.base_url!r} is not http(s)://host[:port]")
        multi = [
            n for n, v in (("spec_modes", g.spec_modes), ("steps", g.steps), ("topk", g.topk)) if len(v) > 1
        ]
        if isinstance(g.draft_tokens, list) and len(g.draft_tokens) > 1:
            multi.append("draft_tokens")
        if g.baseline and g.spec_modes:
            multi.append("baseline")

        if multi:
            p.append(
                "backend external: nothing is launched, so server-config dimensions cannot sweep "
                f"({', '.join(multi)} have several values); only batch_sizes and workloads sweep"
            )
        if g.accept_lengths:
            p.append(
                "backend external: grid.accept_lengths sets the server's environment; launch it yourself"
            )
        if s.load_format != "auto":
            p.append(
                "backend external: server.load_format cannot apply to a server specbench does not launch"
            )
        if s.args or s.env:
            p.append("backend external: server.args/env cannot apply to a server specbench does not launch")
    elif s.base_url:
        p.append(f"server.base_url is only for backend: external (backend is {s.backend!r})")
    if spec.profile is not None and spec.profile.at is not None:
        for b in spec.profile.at:
            if b not in g.batch_sizes:
                p.append(f"profile.at: batch size {b} is not in grid.batch_sizes {g.batch_sizes}")
    for i, w in enumerate(spec.workloads):
        where = f"workload[{i}]" if isinstance(spec.workload, list) else "workload"
        if w.dataset == "jsonl" and not w.path:
            p.append(f"{where}.path: required for dataset: jsonl")
        if w.dataset == "random" and w.path:
            p.append(f"{where}.path: only for dataset: jsonl")
    drafts = len(g.draft_tokens) if isinstance(g.draft_tokens, list) else 1
    servers = int(g.baseline) + len(g.spec_modes) * len(g.steps) * len(g.topk) * drafts
    points = servers * len(g.batch_sizes) * len(spec.workloads)
    if servers > MAX_SERVER_CONFIGS or points > MAX_POINTS:
        p.append(
            f"grid: {servers:,} server configs and {points:,} points; at most {MAX_SERVER_CONFIGS:,} and "
            f"{MAX_POINTS:,} (split the sweep)"
        )
    return p


@dataclass(frozen=True)
class ServerConfig:
    """Everything that needs a server restart. Baseline servers have no algorithm and no spec mode."""

    model: str
    draft_model: str | None
    attention_backend: str
    tp: int
    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    spec_mode: SpecMode | None
    args: tuple[tuple[str, ArgValue | tuple[int | str, ...]], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # Pinned acceptance (grid.accept_lengths); also in `env` as SGLANG_SIMULATE_ACC_LEN.
    accept_length: float | None = None

    @property
    def is_baseline(self) -> bool:
        return self.algorithm is None

    def expected_accept_length(self) -> float | None:
        """What the server should report: SGLang clamps the pinned length to [1, steps + 1]."""
        if self.accept_length is None or self.steps is None:
            return None
        return min(max(self.accept_length, 1.0), float(self.steps + 1))

    def pair_key(self) -> str:
        """The config minus its spec mode: the v1 and v2 servers of a pair share it."""
        return dataclasses.replace(self, spec_mode=None).key()

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "draft_model": self.draft_model,
            "attention_backend": self.attention_backend,
            "tp": self.tp,
            "algorithm": self.algorithm,
            "steps": self.steps,
            "topk": self.topk,
            "draft_tokens": self.draft_tokens,
            "spec_mode": self.spec_mode,
            "args": dict(self.args),
            "env": dict(self.env),
            # Only when pinned, so the keys of sweeps without accept_lengths stay what they were.
            **({"accept_length": self.accept_length} if self.accept_length is not None else {}),
        }

    def key(self) -> str:
        """Stable identity of the config: the same YAML gives the same key on every host."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def label(self) -> str:
        if self.is_baseline:
            return "baseline (no spec)"
        acc = f" acc={self.accept_length:g}" if self.accept_length is not None else ""
        return (
            f"{self.algorithm} steps={self.steps} topk={self.topk} draft={self.draft_tokens}{acc} "
            f"{self.spec_mode}"
        )


@dataclass(frozen=True)
class PointPlan:
    server: ServerConfig
    batch_size: int
    workload: WorkloadSpec
    num_prompts: int
    repeats: int

    def key(self) -> str:
        """Identity of the point inside a run; with the repeat index it makes writes idempotent."""
        return f"{self.server.key()}/bs{self.batch_size}/{self.workload.key()}/n{self.num_prompts}"

    def series(self, gpu_name: str, gpu_count: int) -> dict[str, Any]:
        """The series identity of this point on these GPUs: the fields of its fingerprint and its columns."""
        cfg = self.server
        return {
            "model": cfg.model,
            "draft_model": cfg.draft_model,
            "attention_backend": cfg.attention_backend,
            "tp": cfg.tp,
            "algorithm": cfg.algorithm,
            "steps": cfg.steps,
            "topk": cfg.topk,
            "draft_tokens": cfg.draft_tokens,
            "spec_mode": cfg.spec_mode,
            "batch_size": self.batch_size,
            "workload_key": self.workload.key(),
            "gpu_name": gpu_name,
            "gpu_count": gpu_count,
        }


@dataclass(frozen=True)
class ServerGroup:
    server: ServerConfig
    points: list[PointPlan] = field(default_factory=list)


def expand(spec: SweepSpec) -> list[ServerGroup]:
    """Server configs in launch order (baseline first), each with its points (batch size x workload)."""
    g = spec.grid
    # Lists become tuples so a ServerConfig stays hashable.
    raw_args: dict[str, ArgValue] = dict(spec.server.args)
    if spec.server.load_format != "auto":
        raw_args["load-format"] = spec.server.load_format
    args = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in raw_args.items()))
    env = tuple(sorted(spec.server.env.items()))
    common = {
        "model": spec.model,
        "attention_backend": spec.server.attention_backend,
        "tp": spec.server.tp,
        "args": args,
        "env": env,
    }
    configs: list[ServerConfig] = []
    if g.baseline:
        configs.append(
            ServerConfig(
                draft_model=None,
                algorithm=None,
                steps=None,
                topk=None,
                draft_tokens=None,
                spec_mode=None,
                **common,  # type: ignore[arg-type]
            )
        )
    # Mode innermost: the v1 and v2 configs of a pair sit next to each other (the runner pairs them).
    accepts: list[float | None] = list(g.accept_lengths) or [None]
    for st in g.steps:
        for k in g.topk:
            drafts = [st + 1] if g.draft_tokens == "auto" and k == 1 else g.draft_tokens
            if drafts == "auto":  # topk > 1 and auto: SGLang's own rule of thumb is steps*topk+1
                drafts = [st * k + 1]
            for d in drafts:
                for acc in accepts:
                    acc_env = env if acc is None else tuple(sorted((*env, (SIMULATE_ACC_ENV, f"{acc:g}"))))
                    for mode in g.spec_modes:
                        configs.append(
                            ServerConfig(
                                draft_model=spec.draft_model,
                                algorithm=g.algorithm,
                                steps=st,
                                topk=k,
                                draft_tokens=d,
                                spec_mode=mode,
                                accept_length=acc,
                                **{**common, "env": acc_env},  # type: ignore[arg-type]
                            )
                        )
    groups = []
    for cfg in configs:
        points = [
            PointPlan(cfg, b, w, w.prompts_for(b), spec.repeats)
            for w in spec.workloads
            for b in g.batch_sizes
        ]
        groups.append(ServerGroup(cfg, points))
    return groups


def parse_sweep(text: str, source: str = "<sweep>") -> SweepSpec:
    """Validate a sweep's YAML; SweepError lists every problem (YAML, types, ranges, combinations) at once."""
    try:
        data = safe_yaml.load(text)
    except safe_yaml.YAMLLimitError as e:
        raise SweepError(source, [str(e)]) from None
    if not isinstance(data, dict):
        raise SweepError(
            source, ["the top level must be a mapping (name, model, server, grid, workload, ...)"]
        )
    return validate_sweep(data, source)


def read_sweep_text(path: str | Path) -> str:
    """A sweep file's text, or SweepError (missing, unreadable, too large, not UTF-8)."""
    p = Path(path)
    try:
        if not p.is_file():
            raise SweepError(str(p), ["file not found"])
        return safe_yaml.decode(p.read_bytes())
    except safe_yaml.YAMLLimitError as e:
        raise SweepError(str(p), [str(e)]) from None
    except OSError as e:
        raise SweepError(str(p), [f"cannot read: {e.strerror or e}"]) from None


def load_sweep(path: str | Path) -> SweepSpec:
    return parse_sweep(read_sweep_text(path), str(path))


def validate_sweep(data: dict[str, Any], source: str = "<sweep>") -> SweepSpec:
    """The sweep, or SweepError with the field errors and the cross-field problems of the same file.

    pydantic reports every field error at once but runs the cross-field checks only on a well-typed model.
    So after the first round the broken values are taken out (their defaults, or a placeholder for a
    required field, stand in) and validation runs again, to collect the cross-field problems too; those
    that involve a broken field are left out, since they would only repeat it.
    """
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        problems = _format_validation(e)
        broken = {_dotted(_strip_branches(err["loc"])) for err in e.errors() if err["loc"]}
    work = copy.deepcopy(data)
    for _ in range(6):  # each round removes at least one value; a handful is plenty
        try:
            SweepSpec.model_validate(work)
            break
        except ValidationError as e:
            errors = e.errors()
            cross = [err for err in errors if not err["loc"]]
            if cross:
                for line in _format_validation_errors(cross):
                    where = re.sub(r"\[\d+\]", "", re.split(r"[: ]", line, maxsplit=1)[0])
                    if not any(
                        b == where or b.startswith(where + ".") or where.startswith(b + ".") for b in broken
                    ):
                        problems.append(line)
                break
            if not _repair(work, errors):
                break
    raise SweepError(source, problems)


def _strip_branches(loc: tuple[Any, ...]) -> list[Any]:
    return [part for part in loc if part not in _UNION_BRANCHES and part != "[key]"]


def _dotted(parts: list[Any]) -> str:
    return ".".join(str(p) for p in parts if not isinstance(p, int))


# Stand-ins for required values that were broken, so the cross-field checks can still run.
_PLACEHOLDERS: dict[str, Any] = {
    "name": "placeholder",
    "model": "placeholder",
    "grid": {"batch_sizes": [1]},
    "grid.batch_sizes": [1],
}


def _repair(data: dict[str, Any], errors: list[Any]) -> bool:
    """Take the values the errors point at out of `data` (in place); False when nothing could be done."""
    changed = False
    paths = [_strip_branches(err["loc"]) for err in errors if err["type"] != "missing"]
    # Deepest and highest list index first, so removing one item does not shift another still to remove.
    for path in sorted(
        paths,
        key=lambda p: [(isinstance(x, str), x if isinstance(x, int) else 0, str(x)) for x in p],
        reverse=True,
    ):
        changed |= _remove(data, path)
    for err in errors:
        if err["type"] == "missing":
            where = _dotted(_strip_branches(err["loc"]))
            if where not in _PLACEHOLDERS:
                return False
            parent = _walk(data, _strip_branches(err["loc"])[:-1])
            if isinstance(parent, dict):
                parent[err["loc"][-1]] = copy.deepcopy(_PLACEHOLDERS[where])
                changed = True
    return changed


def _walk(data: Any, path: list[Any]) -> Any:
    for part in path:
        if (isinstance(data, dict) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        ):
            data = data[part]
        else:
            return None
    return data


def _remove(data: dict[str, Any], path: list[Any]) -> bool:
    if not path:
        return False
    for depth in range(len(path), 0, -1):  # the value itself, or the nearest container that exists
        parent = _walk(data, path[: depth - 1])
        key = path[depth - 1]
        if isinstance(parent, dict) and key in parent:
            del parent[key]
            return True
        if isinstance(parent, list) and isinstance(key, int) and 0 <= key < len(parent):
            del parent[key]
            return True
        if parent is not None and depth < len(path):
            return False  # already removed with its parent
    return False


# pydantic names the branch of a union in an error's location. `workload` is one mapping or a list of
# them; a user who wrote one mapping wants to hear what is wrong with it, not that it is not a list.
_UNION_BRANCHES = {"WorkloadSpec": "one workload", "list[WorkloadSpec]": "a list of workloads"}
_WRONG_SHAPE = {"list_type", "model_type", "dict_type", "model_attributes_type"}


def _format_validation(e: ValidationError) -> list[str]:
    return _format_validation_errors(e.errors())


def _format_validation_errors(errors: list[Any]) -> list[str]:
    out: list[str] = []
    wrong_shape: set[str] = set()  # unions where a branch did not fit the shape at all
    explained: set[str] = set()  # unions where a branch fit and said what is wrong inside it
    for err in errors:
        parts = [str(x) for x in err["loc"]]
        branch = next((i for i, part in enumerate(parts) if part in _UNION_BRANCHES), None)
        if branch is not None:
            where = ".".join(parts[:branch])
            if err["type"] in _WRONG_SHAPE and len(parts) == branch + 1:
                wrong_shape.add(where)
                continue
            explained.add(where)
            del parts[branch]
        if err["type"] == "extra_forbidden":
            out.append(_unknown_key(err["loc"]))
            continue
        key_error = "[key]" in parts
        loc = _loc_text([x for x in err["loc"] if x not in _UNION_BRANCHES and x != "[key]"])
        msg = _message(err)
        if not loc:  # the cross-field check joins its problems with newlines
            out.extend(msg.split("\n"))
        elif err["type"] == "missing":
            out.append(f"{loc}: required")
        else:
            got = err.get("input")
            shown = "" if key_error or isinstance(got, dict | list) else f" (got {_short(got)})"
            out.append(f"{loc}: {msg}{shown}")
    for where in sorted(wrong_shape - explained):  # neither branch fits at all
        out.append(f"{where}: must be {' or '.join(_UNION_BRANCHES.values())} (mappings)")
    return out


def _loc_text(parts: list[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(err: Any) -> str:
    """pydantic's message in the words of the rest of this module ("must be >= 1")."""
    ctx = err.get("ctx") or {}
    kind = err["type"]
    bounds = {
        "greater_than_equal": ">= {ge}",
        "greater_than": "> {gt}",
        "less_than_equal": "<= {le}",
        "less_than": "< {lt}",
    }
    if kind in bounds:
        return "must be " + bounds[kind].format(**ctx)
    if kind in {"too_short", "string_too_short"} and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind in {"too_long", "string_too_long"}:
        return f"at most {ctx.get('max_length')} {'characters' if kind == 'string_too_long' else 'items'}"
    if kind == "finite_number":
        return "must be a finite number"
    msg = str(err["msg"]).removeprefix("Value error, ")
    msg = re.sub(r"^Input should be a valid ", "must be a ", msg).replace("be a integer", "be an integer")
    return re.sub(r"^Input should be ", "must be ", msg)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _unknown_key(loc: tuple[Any, ...]) -> str:
    parts = _strip_branches(loc)
    where = ".".join(str(p) for p in parts[:-1])
    key = parts[-1]
    fields = _fields_at(parts[:-1])
    label = f"{where}: unknown key {_short(key)}" if where else f"unknown key {_short(key)}"
    if fields is None:
        return label
    close = difflib.get_close_matches(str(key), fields, n=1, cutoff=0.6)
    if close:
        return f"{label} (did you mean {close[0]!r}?)"
    return f"{label} (expected one of: {', '.join(fields)})"


def _fields_at(path: list[Any]) -> list[str] | None:
    """The keys the model at `path` accepts, following nested models through lists and unions."""
    model: type[BaseModel] = SweepSpec
    for part in path:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(str(part))
        if info is None:
            return None
        nested = _model_in(info.annotation)
        if nested is None:
            return None
        model = nested
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
