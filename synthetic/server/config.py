"""The stand-in's environment, read once at start-up: `SPECBENCH_SIM_*` (`server.sim`) and SGLang's own."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.server.spec_modes import DEFAULT_RELEASE, RELEASES


class SimConfigError(ValueError):
    """A `SPECBENCH_SIM_*` or `SGLANG_*` value the stand-in cannot use."""


@dataclass(frozen=True)
class PerfParams:
    """Milliseconds per piece of work (`synthetic.server.perf`): a small MLA model on one H200."""

    gpu_base_ms: float = 2.0
    gpu_per_token_ms: float = 0.010
    draft_base_ms: float = 0.35
    draft_per_req_ms: float = 0.004
    cpu_base_ms: float = 0.6
    cpu_per_req_ms: float = 0.015
    overlap_sync_ms: float = 0.1
    no_graph_target_ms: float = 1.2
    no_graph_draft_step_ms: float = 0.25
    # 0.5.12-0.5.15 have no FlashMLA draft-extend backend, so that pass runs without a CUDA graph.
    draft_extend_no_graph_ms: float = 0.3
    prefill_base_ms: float = 3.0
    prefill_per_token_ms: float = 0.008
    prefill_draft_factor: float = 0.1
    tp_comm_ms: float = 0.15


# `SPECBENCH_SIM_FAULT` words that make the stand-in compute wrongly (docs/reference/correctness-gate.md).
WRONG_FAULTS = ("v2_draft", "v2_verify", "flashmla_draft_decode_context")
# `SPECBENCH_SIM_FAULT` items that strike at the N+1-th user request (`name=N`).
COUNTED_FAULTS = ("crash_after", "stall_after", "malformed_after", "hiccup_after")
# How long `hiccup_after` holds the queue: wall time, far beyond what a loaded host's stalls explain.
HICCUP_S = 3.0


@dataclass(frozen=True)
class Faults:
    """Counted faults number user requests from 1 (probes, warm-up and correctness check excluded)."""

    crash_after: int | None = None
    stall_after: int | None = None
    malformed_after: int | None = None
    hiccup_after: int | None = None
    v2_draft: bool = False
    v2_verify: bool = False
    flashmla_draft_decode_context: bool = False

    def for_request(self, number: int) -> frozenset[str]:
        return frozenset(
            name.removesuffix("_after")
            for name in COUNTED_FAULTS
            if getattr(self, name) is not None and number == getattr(self, name) + 1
        )

    @classmethod
    def parse(cls, text: str) -> Faults:
        values: dict[str, int | bool] = {}
        for item in filter(None, (raw.strip() for raw in text.split(","))):
            if item in WRONG_FAULTS:
                values[item] = True
                continue
            name, sep, number = item.partition("=")
            if not sep or name not in COUNTED_FAULTS:
                raise SimConfigError(
                    f"SPECBENCH_SIM_FAULT: bad item {item!r}; expected "
                    + ", ".join(f"{f}=N" for f in COUNTED_FAULTS)
                    + f", {', '.join(WRONG_FAULTS[:-1])} or {WRONG_FAULTS[-1]}"
                )
            try:
                values[name] = int(number)
            except ValueError:
                raise SimConfigError(
                    f"SPECBENCH_SIM_FAULT: {name} needs an integer, got {number!r}"
                ) from None
            if values[name] < 0:
                raise SimConfigError(f"SPECBENCH_SIM_FAULT: {name} must be >= 0")
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SimConfig:
    version: str = DEFAULT_RELEASE
    acceptance_rate: float = 0.7
    seed: int = 0
    instant: bool = False
    time_scale: float = 1.0
    startup_s: float = 0.2
    faults: Faults = field(default_factory=Faults)
    perf: PerfParams = field(default_factory=PerfParams)
    # SGLang's own variables; SGLANG_ENABLE_SPEC_V2 stays raw, its meaning depends on the release.
    enable_spec_v2_env: str | None = None
    simulate_acc_len: float | None = None
    simulate_acc_method: str = "match-expected"
    simulate_uniform_experts: bool = False
    simulate_round_robin_experts: bool = False
    # What the stand-in pretends to be (provenance); the GPU name gives its points a floor (bench/floor.py).
    gpu_name: str = "NVIDIA H200"
    gpu_memory_gb: float = 140.0
    weights_gb: float = 31.4
    kv_bytes_per_token: int = 31_104
    vocab_size: int = 102_400
    eos_token_id: int = 1
    eos_mean_tokens: int = 1024
    radix_max_tokens: int = 262_144

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SimConfig:
        version = env.get("SPECBENCH_SIM_VERSION", DEFAULT_RELEASE).strip()
        if version not in RELEASES:
            raise SimConfigError(
                f"SPECBENCH_SIM_VERSION={version!r} is not emulated; choose one of {', '.join(RELEASES)}"
            )
        acceptance = _number(env, "SPECBENCH_SIM_ACCEPTANCE_RATE", 0.7)
        if not 0.0 <= acceptance <= 1.0:
            raise SimConfigError("SPECBENCH_SIM_ACCEPTANCE_RATE must be within [0, 1]")
        time_scale = _number(env, "SPECBENCH_SIM_TIME_SCALE", 1.0)
        startup_s = _number(env, "SPECBENCH_SIM_STARTUP_S", 0.2)
        for name, value in (("TIME_SCALE", time_scale), ("STARTUP_S", startup_s)):
            if value < 0:
                raise SimConfigError(f"SPECBENCH_SIM_{name} must be >= 0")
        acc_len = _number(env, "SGLANG_SIMULATE_ACC_LEN", -1.0)
        return cls(
            version=version,
            acceptance_rate=acceptance,
            seed=int(_number(env, "SPECBENCH_SIM_SEED", 0, integer=True)),
            instant=env.get("SPECBENCH_SIM_INSTANT", "0").strip() == "1",
            time_scale=time_scale,
            startup_s=startup_s,
            faults=Faults.parse(env.get("SPECBENCH_SIM_FAULT", "")),
            enable_spec_v2_env=env.get("SGLANG_ENABLE_SPEC_V2"),
            simulate_acc_len=acc_len if acc_len > 0 else None,
            simulate_acc_method=env.get("SGLANG_SIMULATE_ACC_METHOD", "match-expected"),
            simulate_uniform_experts=sglang_env_bool(env.get("SGLANG_SIMULATE_UNIFORM_EXPERTS")),
            simulate_round_robin_experts=sglang_env_bool(env.get("SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS")),
        )

    def provenance(self) -> dict[str, Any]:
        """What `/server_info` says under `specbench_sim`, so stored numbers never pass for real ones."""
        out = asdict(self)
        out["stand_in"] = True
        out["faults"] = {k: v for k, v in out["faults"].items() if v is not None and v is not False}
        return out


def env_flag(value: str | None, *, default: bool) -> bool:
    """SGLang's boolean environment parsing: only the usual false spellings turn a flag off."""
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "n", "off")


def sglang_env_bool(value: str | None) -> bool:
    """SGLang's EnvBool (sglang/srt/environ.py): true/1/yes/y in any case; anything else reads as false."""
    return value is not None and value.lower() in ("true", "1", "yes", "y")


def _number(env: Mapping[str, str], name: str, default: float, *, integer: bool = False) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise SimConfigError(f"{name} needs {'an integer' if integer else 'a number'}, got {raw!r}") from None
    if not math.isfinite(value):
        raise SimConfigError(f"{name} must be finite")
    return value
