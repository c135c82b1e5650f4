"""What differs between the emulated SGLang releases (docs/reference/sglang-contract.md), as data.

Every version-dependent branch in the stand-in reads one of these fields, so a new release is a
new table row rather than a hunt through the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bench.server.known_bugs import flashmla_routes_draft_extend_v2
from bench.server.spec_modes import DEFAULT_RELEASE, RELEASES, balanced_routing_switch, release3

_BACKENDS_0_5_12 = (
    "triton",
    "torch_native",
    "flex_attention",
    "nsa",
    "dsv4",
    "compressed",
    "cutlass_mla",
    "fa3",
    "fa4",
    "flashinfer",
    "flashmla",
    "trtllm_mla",
    "tokenspeed_mla",
    "trtllm_mha",
    "dual_chunk_flash_attn",
    "aiter",
    "wave",
    "intel_amx",
    "ascend",
    "intel_xpu",
)
_BACKENDS_0_5_13 = (*_BACKENDS_0_5_12, "dsa", "cutedsl_mla")
_BACKENDS_0_5_23 = (
    *(b for b in _BACKENDS_0_5_13 if b not in ("cutlass_mla", "dual_chunk_flash_attn")),
    "qsa",
    "llada2_cfg_flashinfer",
    "hpc_ops",
    "minicpm_flashattn",
    "minicpm_flashinfer",
)

# The stand-in emulates every release the contract was read from (bench.server.spec_modes.RELEASES).
EMULATED_VERSIONS = RELEASES
DEFAULT_VERSION = DEFAULT_RELEASE

_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH")

# How the release treats SGLANG_ENABLE_SPEC_V2 (contract §1.4).
SpecV2Env = Literal["v1_fallback", "sync_v2", "removed_warn", "ignored"]
# How `--cuda-graph-max-bs` is spelled (contract §1.2).
GraphFlags = Literal["legacy", "decode_with_alias", "decode_only"]


@dataclass(frozen=True)
class VersionTraits:
    version: str
    attention_backends: tuple[str, ...]
    backend_aliases: tuple[tuple[str, str], ...]
    algorithms: tuple[str, ...]
    spec_v2_env: SpecV2Env
    graph_flags: GraphFlags
    # Backends that allow topk > 1 with paged KV (page_size > 1).
    paged_topk_backends: tuple[str, ...]
    spec_alias_keys: bool
    running_waiting_in_meta: bool
    spec_verify_calls_metric: bool
    spec_gauges: bool
    ready_endpoint: bool
    strict_generate_body: bool
    spec_extra_reserve_gb: float
    flashmla_draft_extend_graph: bool
    # False in 0.5.12: FlashMLA sends spec v2's draft extend down its decode path (bench.server.known_bugs).
    flashmla_draft_extend_v2_routed: bool
    top_k_default: int
    graph_memory_per_phase: bool
    kv_events_key: bool
    launch_info_keys: bool
    # SGLANG_SIMULATE_UNIFORM_EXPERTS / _ROUND_ROBIN_EXPERTS exist (bench.server.spec_modes, from 0.5.13).
    routing_switches: bool = False


def traits_for(version: str) -> VersionTraits:
    v = release3(version)
    aliases: tuple[tuple[str, str], ...]
    if v >= (0, 5, 23):
        backends, aliases = _BACKENDS_0_5_23, (("nsa", "dsa"), ("tokenspeed_mla", "cutedsl_mla"))
    elif v >= (0, 5, 13):
        backends, aliases = _BACKENDS_0_5_13, (("nsa", "dsa"),)
    else:
        backends, aliases = _BACKENDS_0_5_12, ()
    spec_v2_env: SpecV2Env
    if v >= (0, 5, 23):
        spec_v2_env = "ignored"
    elif v >= (0, 5, 14):
        spec_v2_env = "removed_warn"
    elif v >= (0, 5, 13):
        spec_v2_env = "sync_v2"
    else:
        spec_v2_env = "v1_fallback"
    graph_flags: GraphFlags
    if v >= (0, 5, 23):
        graph_flags = "decode_only"
    elif v >= (0, 5, 14):
        graph_flags = "decode_with_alias"
    else:
        graph_flags = "legacy"
    return VersionTraits(
        version=version,
        attention_backends=backends,
        backend_aliases=aliases,
        algorithms=(*_ALGORITHMS, "DSPARK", "UNO") if v >= (0, 5, 23) else _ALGORITHMS,
        spec_v2_env=spec_v2_env,
        graph_flags=graph_flags,
        paged_topk_backends=("flashinfer", "fa3") if v < (0, 5, 13) else ("flashinfer", "fa3", "triton"),
        spec_alias_keys=v <= (0, 5, 15),
        running_waiting_in_meta=v == (0, 5, 13),
        spec_verify_calls_metric=v >= (0, 5, 13),
        spec_gauges=v >= (0, 5, 13),
        ready_endpoint=v >= (0, 5, 23),
        strict_generate_body=v >= (0, 5, 23),
        spec_extra_reserve_gb=4.0 if v <= (0, 5, 13) else 0.0,
        flashmla_draft_extend_graph=v >= (0, 5, 23),
        flashmla_draft_extend_v2_routed=flashmla_routes_draft_extend_v2(version),
        top_k_default=-1 if v <= (0, 5, 14) else 1 << 30,
        graph_memory_per_phase=v >= (0, 5, 23),
        kv_events_key=v >= (0, 5, 13),
        launch_info_keys=v >= (0, 5, 23),
        routing_switches=balanced_routing_switch(version) is not None,
    )
