"""Stand-in knobs that are not SGLang flags: read once from the environment at start-up.

The launcher writes the sweep's `server.sim` block into `SPECBENCH_SIM_*` variables; the real
SGLang environment variables the stand-in honours (`SGLANG_ENABLE_SPEC_V2`,
`SGLANG_SIMULATE_ACC_LEN`, ...) are read here too, so every module downstream gets plain values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.server.spec_modes import DEFAULT_RELEASE as DEFAULT_VERSION
from bench.server.spec_modes import RELEASES as EMULATED_VERSIONS


class SimConfigError(ValueError):
    """A `SPECBENCH_SIM_*` or `SGLANG_*` value the stand-in cannot use."""


@dataclass(frozen=True)
class PerfParams:
    """Milliseconds per piece of work; see `synthetic.server.perf` for the formula that combines them.

    Chosen to look like a small MLA model (DeepSeek-V2-Lite class) on one H200: a decode step of
    2-5 ms, prefill around 125k tokens/s, and an overlap scheduler that is worth ~15-20% at mid
    batch sizes.
    """

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
# How long `hiccup_after` holds the scheduler's queue: wall time, not scaled by time_scale, so that it lies far
# beyond what a loaded host's stalls (tens to a few hundred ms) explain at any time scale.
HICCUP_S = 3.0


@dataclass(frozen=True)
class Faults:
    """Request numbers are 1-based over user requests; health probes, the warmup and the correctness check's
    requests (rid `specbench-check-*`) do not count.

    `hiccup_after`: when request N+1 arrives the scheduler admits nothing for `HICCUP_S`, a genuinely unstable
    server (the requests that arrive meanwhile get a TTFT of seconds).

    `v2_draft` and `v2_verify` hit every request of an overlap (v2) speculative launch: v2's drafts are computed
    wrongly (acceptance falls, the tokens stay the baseline's), or its verification is (its tokens leave the
    baseline's at a position that depends on the prompt). `flashmla_draft_decode_context` emulates the known
    SGLang issue of that name on the FlashMLA launches it applies to (synthetic.server.wrong)."""

    crash_after: int | None = None
    stall_after: int | None = None
    malformed_after: int | None = None
    hiccup_after: int | None = None
    v2_draft: bool = False
    v2_verify: bool = False
    flashmla_draft_decode_context: bool = False

    def for_request(self, number: int) -> frozenset[str]:
        hits = set()
        if self.crash_after is not None and number == self.crash_after + 1:
            hits.add("crash")
        if self.stall_after is not None and number == self.stall_after + 1:
            hits.add("stall")
        if self.malformed_after is not None and number == self.malformed_after + 1:
            hits.add("malformed")
        if self.hiccup_after is not None and number == self.hiccup_after + 1:
            hits.add("hiccup")
        return frozenset(hits)

    @classmethod
    def parse(cls, text: str) -> Faults:
        values: dict[str, int] = {}
        wrong: dict[str, bool] = {}
        for raw in text.split(","):
            item = raw.strip()
            if not item:
                continue
            if item in WRONG_FAULTS:
                wrong[item] = True
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
        return cls(
            crash_after=values.get("crash_after"),
            stall_after=values.get("stall_after"),
            malformed_after=values.get("malformed_after"),
            hiccup_after=values.get("hiccup_after"),
            v2_draft=wrong.get("v2_draft", False),
            v2_verify=wrong.get("v2_verify", False),
            flashmla_draft_decode_context=wrong.get("flashmla_draft_decode_context", False),
        )


@dataclass(frozen=True)
class SimConfig:
    version: str = DEFAULT_VERSION
    acceptance_rate: float = 0.7
    seed: int = 0
    instant: bool = False
    time_scale: float = 1.0
    startup_s: float = 0.2
    faults: Faults = field(default_factory=Faults)
    perf: PerfParams = field(default_factory=PerfParams)
    # Real SGLang environment variables, kept raw where their meaning depends on the version.
    enable_spec_v2_env: str | None = None
    simulate_acc_len: float | None = None
    simulate_acc_method: str = "match-expected"
    health_generation: bool = True
    health_timeout_s: float = 20.0
    record_step_time: bool = False
    # SGLang's benchmark-only routing switches, as SGLang's EnvBool reads them (honoured from 0.5.13).
    simulate_uniform_experts: bool = False
    simulate_round_robin_experts: bool = False
    # Not knobs, but part of what the stand-in pretends to be; reported for provenance. The GPU name is the one
    # whose memory bandwidth gives the stand-in's points their floor (bench/floor.py).
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
        version = env.get("SPECBENCH_SIM_VERSION", DEFAULT_VERSION).strip()
        if version not in EMULATED_VERSIONS:
            raise SimConfigError(
                f"SPECBENCH_SIM_VERSION={version!r} is not emulated; choose one of {', '.join(EMULATED_VERSIONS)}"
            )
        acceptance = _float(env, "SPECBENCH_SIM_ACCEPTANCE_RATE", 0.7)
        if not 0.0 <= acceptance <= 1.0:
            raise SimConfigError("SPECBENCH_SIM_ACCEPTANCE_RATE must be within [0, 1]")
        time_scale = _float(env, "SPECBENCH_SIM_TIME_SCALE", 1.0)
        if time_scale < 0:
            raise SimConfigError("SPECBENCH_SIM_TIME_SCALE must be >= 0")
        startup_s = _float(env, "SPECBENCH_SIM_STARTUP_S", 0.2)
        if startup_s < 0:
            raise SimConfigError("SPECBENCH_SIM_STARTUP_S must be >= 0")
        acc_len = _float(env, "SGLANG_SIMULATE_ACC_LEN", -1.0)
        return cls(
            version=version,
            acceptance_rate=acceptance,
            seed=_int(env, "SPECBENCH_SIM_SEED", 0),
            instant=env.get("SPECBENCH_SIM_INSTANT", "0").strip() == "1",
            time_scale=time_scale,
            startup_s=startup_s,
            faults=Faults.parse(env.get("SPECBENCH_SIM_FAULT", "")),
            enable_spec_v2_env=env.get("SGLANG_ENABLE_SPEC_V2"),
            simulate_acc_len=acc_len if acc_len > 0 else None,
            simulate_acc_method=env.get("SGLANG_SIMULATE_ACC_METHOD", "match-expected"),
            health_generation=env_flag(env.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"), default=True),
            health_timeout_s=_float(env, "SGLANG_HEALTH_CHECK_TIMEOUT", 20.0),
            record_step_time=env_flag(env.get("SGLANG_RECORD_STEP_TIME"), default=False),
            simulate_uniform_experts=sglang_env_bool(env.get("SGLANG_SIMULATE_UNIFORM_EXPERTS")),
            simulate_round_robin_experts=sglang_env_bool(env.get("SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS")),
        )

    def provenance(self) -> dict[str, Any]:
        """What `/server_info` exposes under `specbench_sim`, so stored numbers can never pass for real ones."""
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
    """SGLang's EnvBool (sglang/srt/environ.py): true/1/yes/y and false/0/no/n, any case; anything else warns
    there and reads as the default, false."""
    return value is not None and value.lower() in ("true", "1", "yes", "y")


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SimConfigError(f"{name} needs a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise SimConfigError(f"{name} must be finite")
    return value


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SimConfigError(f"{name} needs an integer, got {raw!r}") from None
