"""What differs between the emulated SGLang releases (docs/reference/sglang-contract.md) and each one's spec
v1/v2 decision (§1.4, log lines §1.5); the facts specbench relies on come from `bench.server`.
"""

from dataclasses import dataclass
from typing import Literal

from bench.server.known_bugs import flashmla_routes_draft_extend_v2
from bench.server.spec_modes import SpecMode, balanced_routing_switch, env_var_status, release3
from synthetic.server.config import env_flag

# How `--cuda-graph-max-bs` is spelled (contract §1.2).
GraphFlags = Literal["legacy", "decode_with_alias", "decode_only"]

SPEC_V2_REMOVED = (
    "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker. "
    "Use --disable-overlap-schedule to select the non-overlap (synchronous) path."
)
_FAMILY = "eagle/eagle3/standalone speculative decoding"
NON_OVERLAP_V2 = f"Non-overlap (synchronous) spec v2 is used for {_FAMILY}."


@dataclass(frozen=True)
class Release:
    version: str
    graph_flags: GraphFlags
    # Backends that allow topk > 1 with paged KV (page_size > 1).
    paged_topk_backends: tuple[str, ...]
    # 0.5.12-0.5.13 reserve 4 GB more for speculative decoding, which lowers mem_fraction_static's default.
    spec_extra_reserve_gb: float
    ready_endpoint: bool
    flashmla_draft_extend_graph: bool
    # False in 0.5.12: FlashMLA sends spec v2's draft extend down its decode path (bench.server.known_bugs).
    flashmla_draft_extend_v2_routed: bool
    # SGLANG_SIMULATE_UNIFORM_EXPERTS / _ROUND_ROBIN_EXPERTS exist (contract §1.6).
    routing_switches: bool

    @property
    def v1_worker(self) -> bool:
        """Only 0.5.12 still has the v1 worker classes; later releases run the V2 worker synchronously."""
        return release3(self.version) < (0, 5, 13)


def release(version: str) -> Release:
    v = release3(version)
    return Release(
        version=version,
        graph_flags="legacy" if v < (0, 5, 14) else "decode_with_alias" if v < (0, 5, 23) else "decode_only",
        paged_topk_backends=("flashinfer", "fa3") + (("triton",) if v >= (0, 5, 13) else ()),
        spec_extra_reserve_gb=4.0 if v <= (0, 5, 13) else 0.0,
        ready_endpoint=v >= (0, 5, 23),
        flashmla_draft_extend_graph=v >= (0, 5, 23),
        flashmla_draft_extend_v2_routed=flashmla_routes_draft_extend_v2(version),
        routing_switches=balanced_routing_switch(version) is not None,
    )


@dataclass(frozen=True)
class ModeDecision:
    disable_overlap_schedule: bool
    # Which worker generation runs ("v1" only on 0.5.12); None without speculative decoding.
    worker: SpecMode | None
    warnings: tuple[str, ...]

    @property
    def overlap(self) -> bool:
        return not self.disable_overlap_schedule


def env_removal_warning(rel: Release, env_value: str | None) -> str | None:
    """0.5.14-0.5.15 warn whenever the variable is set, with or without speculative decoding."""
    return (
        SPEC_V2_REMOVED if env_value is not None and env_var_status(rel.version) == "removed_warns" else None
    )


def resolve_spec_mode(
    rel: Release, *, speculative: bool, explicit_topk: int | None, disable_overlap_flag: bool, env: str | None
) -> ModeDecision:
    """`explicit_topk` is the flag as given: 0.5.12 tests it before the automatic (steps, topk, draft)."""
    if not speculative:
        return ModeDecision(disable_overlap_flag, None, ())
    env_on = env_flag(env, default=True) if env_var_status(rel.version) == "honoured" else True
    if rel.v1_worker:
        reason = None
        if disable_overlap_flag:
            reason = "overlap schedule is disabled"
        elif explicit_topk is not None and explicit_topk > 1:
            reason = "spec v2 currently only supports topk = 1"
        elif not env_on:
            reason = "SGLANG_ENABLE_SPEC_V2=False"
        if reason:
            return ModeDecision(True, "v1", (f"Spec v1 is used for {_FAMILY} because {reason}.",))
        return ModeDecision(False, "v2", (f"Spec v2 is enabled by default for {_FAMILY}.",))
    if disable_overlap_flag or not env_on:
        return ModeDecision(True, "v2", (NON_OVERLAP_V2,))
    # 0.5.13 announces overlap; from 0.5.14 the flag is the only switch and overlap is silent.
    honoured = env_var_status(rel.version) == "honoured"
    return ModeDecision(
        False, "v2", (f"Overlap spec v2 is enabled by default for {_FAMILY}.",) if honoured else ()
    )
