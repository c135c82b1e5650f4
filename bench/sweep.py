"""Sweep files: the YAML a user writes, validated in full before any server starts, and its expansion.

A sweep expands into server configs (everything that needs a restart) and, under each, the points measured
on that server (batch size x workload). Launches therefore equal the number of distinct server configs.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bench.server_env import ServerEnvError, as_env_value, check_sweep_env
from bench.sglang_flags import check_passthrough_flag

SpecMode = Literal["v1", "v2"]
Backend = Literal["sglang", "sim", "external"]
Algorithm = Literal["EAGLE", "NEXTN", "EAGLE3", "STANDALONE"]

# FlashMLA's multi-step draft backend raises for topk > 1, and its page size of 64 rules out tree drafts.
TOPK1_ONLY_BACKENDS = frozenset({"flashmla"})
_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class SweepError(ValueError):
    """A sweep file that cannot run; `problems` lists every reason at once."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: invalid sweep ({len(problems)} problem(s)):\n{lines}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SimSettings(_Strict):
    """Knobs of the stand-in server (`backend: sim`); the launcher passes them as SPECBENCH_SIM_* variables."""

    version: str = "0.5.13.post1"
    acceptance_rate: float = Field(0.7, ge=0.0, le=1.0)
    seed: int = 0
    time_scale: float = Field(1.0, gt=0.0)
    instant: bool = False
    startup_s: float = Field(0.2, ge=0.0)
    fault: str | None = None

    @field_validator("version")
    @classmethod
    def _known_version(cls, v: str) -> str:
        known = {"0.5.12", "0.5.13", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.23"}
        if v not in known:
            raise ValueError(f"sim version {v!r} is not emulated; choose one of {sorted(known)}")
        return v

    @field_validator("fault")
    @classmethod
    def _fault_syntax(cls, v: str | None) -> str | None:
        if v is None:
            return v
        for part in v.split(","):
            kind, _, n = part.partition("=")
            if kind not in {"crash_after", "stall_after", "malformed_after"} or not n.isdigit():
                raise ValueError(
                    f"fault {part!r}: expected crash_after=N, stall_after=N or malformed_after=N"
                )
        return v


ArgValue = str | int | float | bool | list[int] | list[str]


def _env_scalar(v: Any) -> str:
    # YAML turns `SGLANG_SIMULATE_ACC_LEN: 2.5` into a float; the environment holds strings. `null` or a
    # mapping is a mistake, not the string "None".
    try:
        return as_env_value(v)
    except ServerEnvError as e:
        raise ValueError(str(e)) from None


EnvValue = Annotated[str, BeforeValidator(_env_scalar)]


class ServerSpec(_Strict):
    backend: Backend = "sglang"
    base_url: str | None = None
    attention_backend: str = "flashmla"
    tp: int = Field(1, ge=1, le=64)
    args: dict[str, ArgValue] = Field(default_factory=dict)
    env: dict[str, EnvValue] = Field(default_factory=dict)
    sim: SimSettings = Field(default_factory=SimSettings)
    startup_timeout_s: float = Field(900.0, gt=0)
    # Start up to this many of the sweep's servers together, then measure them one at a time (see README).
    max_parallel_starts: int = Field(1, ge=1, le=16)
    # Interpreter that runs `-m sglang.launch_server`; None = the one running specbench.
    python: str | None = None


class GridSpec(_Strict):
    batch_sizes: list[int] = Field(min_length=1)
    spec_modes: list[SpecMode] = Field(default_factory=lambda: list[SpecMode](["v1", "v2"]))
    algorithm: Algorithm = "EAGLE"
    steps: list[int] = Field(default_factory=lambda: [3])
    topk: list[int] = Field(default_factory=lambda: [1])
    draft_tokens: Literal["auto"] | list[int] = "auto"
    baseline: bool = True

    @field_validator("algorithm", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v


class WorkloadSpec(_Strict):
    dataset: Literal["random", "jsonl"] = "random"
    path: str | None = None
    input_len: int = Field(1024, ge=1, le=1_000_000)
    output_len: int = Field(512, ge=1, le=1_000_000)
    num_prompts: int | Literal["auto"] = "auto"
    seed: int = 1
    temperature: float = Field(0.0, ge=0.0)

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


class SweepSpec(_Strict):
    name: str
    model: str
    draft_model: str | None = None
    server: ServerSpec = Field(default_factory=ServerSpec)
    grid: GridSpec
    workload: WorkloadSpec | list[WorkloadSpec] = Field(default_factory=WorkloadSpec)
    repeats: int = Field(3, ge=1, le=100)
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    request_timeout_s: float = Field(600.0, gt=0)

    @property
    def workloads(self) -> list[WorkloadSpec]:
        return self.workload if isinstance(self.workload, list) else [self.workload]

    @model_validator(mode="after")
    def _check_combinations(self) -> SweepSpec:
        problems = find_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self


def find_problems(spec: SweepSpec) -> list[str]:
    """Every reason the sweep cannot run, so the user fixes them in one go."""
    p: list[str] = []
    g, s = spec.grid, spec.server
    if not _SLUG.match(spec.name):
        p.append(f"name {spec.name!r}: use letters, digits, '.', '_' or '-' (at most 100)")
    for b in g.batch_sizes:
        if b < 1:
            p.append(f"grid.batch_sizes: {b} is not a positive concurrency")
    if len(set(g.batch_sizes)) != len(g.batch_sizes):
        p.append("grid.batch_sizes: duplicate values")
    for st in g.steps:
        if st < 1:
            p.append(f"grid.steps: {st} must be >= 1")
    for k in g.topk:
        if k < 1:
            p.append(f"grid.topk: {k} must be >= 1")
        if k > 1 and s.attention_backend in TOPK1_ONLY_BACKENDS:
            p.append(
                f"grid.topk: {k} is not supported by attention backend {s.attention_backend!r} "
                "(FlashMLA speculative decoding supports topk = 1 only; its page size is 64)"
            )
    if isinstance(g.draft_tokens, list):
        for st in g.steps:
            for k in g.topk:
                for d in g.draft_tokens:
                    if d < 2:
                        p.append(f"grid.draft_tokens: {d} must be >= 2")
                    elif st * k + 1 < d:
                        p.append(
                            f"grid: steps={st} topk={k} draft_tokens={d}: steps*topk+1 = {st * k + 1} < "
                            "draft_tokens (the draft tree cannot hold that many tokens)"
                        )
                    elif k == 1 and d != st + 1:
                        p.append(
                            f"grid: steps={st} topk=1 draft_tokens={d}: with topk 1 SGLang overwrites "
                            f"draft_tokens to steps+1 = {st + 1}; use `draft_tokens: auto`"
                        )
    if not g.spec_modes and not g.baseline:
        p.append("grid: no spec_modes and no baseline, nothing to measure")
    if len(set(g.spec_modes)) != len(g.spec_modes):
        p.append("grid.spec_modes: duplicate values")
    for name, value in s.args.items():
        msg = check_passthrough_flag(name)
        if msg:
            p.append(f"server.args: {msg}")
        if isinstance(value, str) and any(c in value for c in "\n\0"):
            p.append(f"server.args.{name}: value contains a newline or NUL")
    p.extend(check_sweep_env(s.env))
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
        if s.args or s.env:
            p.append("backend external: server.args/env cannot apply to a server specbench does not launch")
    elif s.base_url:
        p.append(f"server.base_url is only for backend: external (backend is {s.backend!r})")
    for i, w in enumerate(spec.workloads):
        where = f"workload[{i}]" if isinstance(spec.workload, list) else "workload"
        if w.dataset == "jsonl" and not w.path:
            p.append(f"{where}.path: required for dataset: jsonl")
        if w.dataset == "random" and w.path:
            p.append(f"{where}.path: only for dataset: jsonl")
        if isinstance(w.num_prompts, int) and w.num_prompts < 1:
            p.append(f"{where}.num_prompts: must be >= 1 or auto")
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

    @property
    def is_baseline(self) -> bool:
        return self.algorithm is None

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
        }

    def key(self) -> str:
        """Stable identity of the config: the same YAML gives the same key on every host."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def label(self) -> str:
        if self.is_baseline:
            return "baseline (no spec)"
        return (
            f"{self.algorithm} steps={self.steps} topk={self.topk} draft={self.draft_tokens} {self.spec_mode}"
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


@dataclass(frozen=True)
class ServerGroup:
    server: ServerConfig
    points: list[PointPlan] = field(default_factory=list)


def expand(spec: SweepSpec) -> list[ServerGroup]:
    """Server configs in launch order (baseline first), each with its points (batch size x workload)."""
    g = spec.grid
    # Lists become tuples so a ServerConfig stays hashable.
    args = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in spec.server.args.items()))
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
    for mode in g.spec_modes:
        for st in g.steps:
            for k in g.topk:
                drafts = [st + 1] if g.draft_tokens == "auto" and k == 1 else g.draft_tokens
                if drafts == "auto":  # topk > 1 and auto: SGLang's own rule of thumb is steps*topk+1
                    drafts = [st * k + 1]
                for d in drafts:
                    configs.append(
                        ServerConfig(
                            draft_model=spec.draft_model,
                            algorithm=g.algorithm,
                            steps=st,
                            topk=k,
                            draft_tokens=d,
                            spec_mode=mode,
                            **common,  # type: ignore[arg-type]
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
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SweepError(source, [f"not valid YAML: {e}"]) from None
    if not isinstance(data, dict):
        raise SweepError(
            source, ["the top level must be a mapping (name, model, server, grid, workload, ...)"]
        )
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        raise SweepError(source, _format_validation(e)) from None


def load_sweep(path: str | Path) -> SweepSpec:
    p = Path(path)
    if not p.is_file():
        raise SweepError(str(p), ["file not found"])
    return parse_sweep(p.read_text(), str(p))


# pydantic names the branch of a union in an error's location. `workload` is one mapping or a list of
# them; a user who wrote one mapping wants to hear what is wrong with it, not that it is not a list.
_UNION_BRANCHES = {"WorkloadSpec": "one workload", "list[WorkloadSpec]": "a list of workloads"}
_WRONG_SHAPE = {"list_type", "model_type", "dict_type", "model_attributes_type"}


def _format_validation(e: ValidationError) -> list[str]:
    out: list[str] = []
    wrong_shape: set[str] = set()  # unions where a branch did not fit the shape at all
    explained: set[str] = set()  # unions where a branch fit and said what is wrong inside it
    for err in e.errors():
        parts = [str(x) for x in err["loc"]]
        branch = next((i for i, part in enumerate(parts) if part in _UNION_BRANCHES), None)
        if branch is not None:
            where = ".".join(parts[:branch])
            if err["type"] in _WRONG_SHAPE and len(parts) == branch + 1:
                wrong_shape.add(where)
                continue
            explained.add(where)
            del parts[branch]
        loc = ".".join(parts)
        msg = err["msg"].removeprefix("Value error, ")
        if not loc:  # the cross-field check joins its problems with "; "
            out.extend(msg.split("\n"))
        else:
            out.append(f"{loc}: {msg}")
    for where in sorted(wrong_shape - explained):  # neither branch fits at all
        out.append(f"{where}: must be {' or '.join(_UNION_BRANCHES.values())} (mappings)")
    return out
