"""A sweep's expansion: server configs (everything that needs a restart) and the points measured on each."""

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from bench.server.spec_modes import SpecMode
from bench.sweep.fields import SIMULATE_ACC_ENV, ArgValue
from bench.sweep.sections import WorkloadSpec
from bench.sweep.spec import SweepSpec


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
    accept_length: float | None = None  # grid.accept_lengths' pin; also in `env` as SGLANG_SIMULATE_ACC_LEN

    @property
    def is_baseline(self) -> bool:
        return self.algorithm is None

    def expected_accept_length(self) -> float | None:
        """What the server should report: SGLang clamps the pinned length to [1, steps + 1]."""
        if self.accept_length is None or self.steps is None:
            return None
        return min(max(self.accept_length, 1.0), float(self.steps + 1))

    def accept_length_note(self) -> str | None:
        """Why the server will report another acceptance than pinned (2.5 on one step, max 2), or None."""
        expected, pinned, steps = self.expected_accept_length(), self.accept_length, self.steps
        if expected is None or pinned is None or steps is None or expected == pinned:
            return None
        return (
            f"accept length {pinned:g} is outside [1, steps + 1] = [1, {steps + 1}] for {steps} draft "
            f"step(s): SGLang clamps it, so this server measures {expected:g}"
            + (" (every draft accepted)" if expected > 1.0 else " (no draft accepted)")
        )

    def pair_key(self) -> str:
        """The config minus its spec mode: the v1 and v2 servers of a pair share it."""
        return dataclasses.replace(self, spec_mode=None).key()

    def to_dict(self) -> dict[str, Any]:
        out = {**dataclasses.asdict(self), "args": dict(self.args), "env": dict(self.env)}
        if self.accept_length is None:  # only when pinned, so the keys of other sweeps stay what they were
            del out["accept_length"]
        return out

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


_NOT_IN_SERIES = ("args", "env", "accept_length")


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
        return {
            # The config's fields but its args, env and pinned acceptance.
            **{k: v for k, v in dataclasses.asdict(self.server).items() if k not in _NOT_IN_SERIES},
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
    for st in g.steps:
        accepts = g.accepts_for(st)
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
