"""SGLang's launch flags and their post-processing, for the emulated release.

`build_parser` accepts the flag names SGLang uses (argparse with `allow_abbrev=True`, so `--tp 2`
works and a prefix matching two flags fails exactly as in SGLang). `resolve` then applies the
server-argument rules of contract §1.2-1.4 in SGLang's order and returns the resolved arguments,
the warnings SGLang would log, and the derived capacities the scheduler needs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from synthetic.server.config import SimConfig
from synthetic.server.modes import ModeDecision, env_removal_warning, resolve_spec_mode
from synthetic.server.versions import VersionTraits

EMULATED_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE")
DEFAULT_CONTEXT_LEN = 163_840  # DeepSeek-V3 family, the architecture the stand-in pretends to serve
MODEL_ARCHITECTURE = "DeepseekV3ForCausalLM"
MODEL_TYPE = "deepseek_v3"
DRAFT_WEIGHTS_GB = 1.0


class ServerArgsError(Exception):
    """A launch SGLang would refuse; the message is what SGLang raises (type name included)."""


@dataclass
class ServerArgs:
    """The resolved arguments. Graph-flag names are version-specific, see `flat()`."""

    model_path: str
    tokenizer_path: str
    served_model_name: str
    host: str
    port: int
    skip_tokenizer_init: bool
    trust_remote_code: bool
    context_length: int | None
    mem_fraction_static: float
    max_running_requests: int | None
    chunked_prefill_size: int
    page_size: int
    tp_size: int
    random_seed: int
    log_level: str
    stream_interval: int
    decode_log_interval: int
    enable_metrics: bool
    disable_radix_cache: bool
    attention_backend: str
    prefill_attention_backend: str | None
    decode_attention_backend: str | None
    grammar_backend: str
    disable_cuda_graph: bool
    cuda_graph_max_bs: int | None
    cuda_graph_bs: list[int] | None
    disable_overlap_schedule: bool
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    speculative_attention_mode: str
    enable_multi_layer_eagle: bool = False
    # `dummy` in SGLang initialises weights from config.json; the stand-in has no weights either way.
    load_format: str = "auto"

    def flat(self, traits: VersionTraits) -> dict[str, Any]:
        """The `/server_info` / `ServerArgs(...)` view, with the release's graph-flag names."""
        out: dict[str, Any] = {}
        for name, value in vars(self).items():
            if name == "cuda_graph_max_bs" and traits.graph_flags != "legacy":
                if traits.graph_flags == "decode_with_alias":
                    out["cuda_graph_max_bs"] = None  # the deprecated field survives, always unset
                out["cuda_graph_max_bs_decode"] = value
                out["cuda_graph_max_bs_prefill"] = None
            elif name == "cuda_graph_bs" and traits.graph_flags != "legacy":
                if traits.graph_flags == "decode_with_alias":
                    out["cuda_graph_bs"] = None
                out["cuda_graph_bs_decode"] = value
                out["cuda_graph_bs_prefill"] = None
            else:
                out[name] = value
            if name == "disable_cuda_graph" and traits.graph_flags != "legacy":
                out["disable_decode_cuda_graph"] = value
        return out

    def dump(self, traits: VersionTraits) -> str:
        body = ", ".join(f"{key}={value!r}" for key, value in self.flat(traits).items())
        return f"ServerArgs({body})"

    @property
    def speculative(self) -> bool:
        return self.speculative_algorithm is not None


@dataclass
class Resolved:
    args: ServerArgs
    mode: ModeDecision
    warnings: list[str]
    # Lines a real server logs later, while building the model runner and the draft worker.
    runtime_notes: list[str]
    context_len: int
    max_total_num_tokens: int
    effective_max_running_requests: int
    # The largest batch a captured CUDA graph covers; 0 when graphs are off.
    graph_max_bs: int
    kv_cache_gb: float


def build_parser(traits: VersionTraits) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m synthetic.server",
        description=f"specbench stand-in for an SGLang {traits.version} server (CPU only, simulated).",
        allow_abbrev=True,
    )
    p.add_argument("--model-path", required=True)
    p.add_argument("--tokenizer-path")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    backends = traits.attention_backends
    p.add_argument("--attention-backend", choices=backends)
    p.add_argument("--prefill-attention-backend", choices=backends)
    p.add_argument("--decode-attention-backend", choices=backends)
    p.add_argument("--speculative-algorithm", type=str)
    p.add_argument(
        "--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path"
    )
    p.add_argument("--speculative-num-steps", type=int)
    p.add_argument("--speculative-eagle-topk", type=int)
    p.add_argument("--speculative-num-draft-tokens", type=int)
    p.add_argument("--speculative-attention-mode", choices=["prefill", "decode"], default="prefill")
    p.add_argument("--disable-overlap-schedule", action="store_true")
    p.add_argument("--max-running-requests", type=int)
    if traits.graph_flags == "legacy":
        p.add_argument("--cuda-graph-max-bs", type=int)
        p.add_argument("--cuda-graph-bs", type=int, nargs="+")
    else:
        p.add_argument("--cuda-graph-max-bs-decode", dest="cuda_graph_max_bs", type=int)
        p.add_argument("--cuda-graph-max-bs-prefill", type=int)
        p.add_argument("--cuda-graph-bs-decode", dest="cuda_graph_bs", type=int, nargs="+")
        p.add_argument("--cuda-graph-bs-prefill", type=int, nargs="+")
        p.add_argument("--disable-decode-cuda-graph", action="store_true")
        p.add_argument("--disable-prefill-cuda-graph", action="store_true")
        if traits.graph_flags == "decode_with_alias":
            # Deprecated spellings: exact matches, so they win over the prefix rule.
            p.add_argument("--cuda-graph-max-bs", dest="legacy_cuda_graph_max_bs", type=int)
            p.add_argument("--cuda-graph-bs", dest="legacy_cuda_graph_bs", type=int, nargs="+")
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--skip-tokenizer-init", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--decode-log-interval", type=int, default=40)
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument("--served-model-name")
    p.add_argument("--page-size", type=int)
    p.add_argument("--grammar-backend", default="xgrammar")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--log-level", default="info")
    p.add_argument("--random-seed", type=int)
    p.add_argument("--chunked-prefill-size", type=int)
    p.add_argument("--context-length", type=int)
    p.add_argument("--load-format", default="auto", choices=["auto", "pt", "safetensors", "dummy"])
    return p


def parse_flags(traits: VersionTraits, argv: Sequence[str]) -> argparse.Namespace:
    return build_parser(traits).parse_args(list(argv))


def resolve(
    ns: argparse.Namespace, cfg: SimConfig, traits: VersionTraits, warnings: list[str] | None = None
) -> Resolved:
    """`warnings` collects SGLang's warning lines as they happen, so a caller can still log them
    when a later check raises `ServerArgsError`, the way SGLang's own log reads."""
    warnings = [] if warnings is None else warnings
    notes: list[str] = []

    backend, prefill_backend, decode_backend = (
        _dealias_backend(name, traits, warnings)
        for name in (ns.attention_backend, ns.prefill_attention_backend, ns.decode_attention_backend)
    )
    # What SGLang picks for an MLA model on Hopper with CUDA >= 12.3.
    backend = backend or "fa3"

    cuda_graph_max_bs = ns.cuda_graph_max_bs
    cuda_graph_bs = ns.cuda_graph_bs
    disable_cuda_graph = bool(ns.disable_cuda_graph)
    if traits.graph_flags != "legacy":
        if getattr(ns, "legacy_cuda_graph_max_bs", None) is not None:
            warnings.append("--cuda-graph-max-bs is deprecated, use --cuda-graph-max-bs-decode instead.")
            cuda_graph_max_bs = cuda_graph_max_bs or ns.legacy_cuda_graph_max_bs
        if getattr(ns, "legacy_cuda_graph_bs", None) is not None:
            warnings.append("--cuda-graph-bs is deprecated, use --cuda-graph-bs-decode instead.")
            cuda_graph_bs = cuda_graph_bs or ns.legacy_cuda_graph_bs
        if disable_cuda_graph:
            warnings.append(
                "--disable-cuda-graph is deprecated, use --cuda-graph-backend-decode disabled and "
                "--cuda-graph-backend-prefill disabled (or --disable-decode-cuda-graph / "
                "--disable-prefill-cuda-graph) instead."
            )
        disable_cuda_graph = disable_cuda_graph or ns.disable_decode_cuda_graph

    page_size = ns.page_size if ns.page_size is not None else 1
    if "flashmla" in (backend, decode_backend):
        warnings.append("FlashMLA only supports a page_size of 64, change page_size to 64.")
        page_size = 64

    algorithm = ns.speculative_algorithm.upper() if ns.speculative_algorithm else None
    removal = env_removal_warning(traits, cfg.enable_spec_v2_env)
    if removal:
        warnings.append(removal)
    if algorithm is not None:
        if algorithm not in traits.algorithms:
            raise ServerArgsError(f"ValueError: Unknown speculative algorithm name: {algorithm}")
        if algorithm == "NEXTN":
            algorithm = "EAGLE"
        if algorithm not in EMULATED_ALGORITHMS:
            raise ServerArgsError(
                f"ValueError: the specbench stand-in emulates only EAGLE, EAGLE3, NEXTN and STANDALONE, "
                f"not {algorithm}"
            )

    max_running = ns.max_running_requests
    steps, topk, draft = ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens
    draft_path = ns.speculative_draft_model_path
    speculative = algorithm is not None
    if speculative and max_running is None:
        max_running = 48
        warnings.append(
            "Max running requests is reset to 48 for speculative decoding. You can override this by "
            "explicitly setting --max-running-requests."
        )
    mode = resolve_spec_mode(
        traits,
        speculative=speculative,
        explicit_topk=topk,
        disable_overlap_flag=bool(ns.disable_overlap_schedule),
        env_value=cfg.enable_spec_v2_env,
    )
    warnings.extend(mode.warnings)
    if speculative:
        if draft_path is None:
            draft_path = ns.model_path  # the MTP layer ships inside a DeepSeek-V3 checkpoint
        else:
            warnings.append("DeepSeek MTP does not require setting speculative_draft_model_path.")
        if steps is None:
            if topk is not None or draft is not None:
                raise ServerArgsError("AssertionError")
            steps, topk, draft = 3, 1, 4
        if topk is None:
            raise ServerArgsError("TypeError: '>' not supported between instances of 'NoneType' and 'int'")
        if steps < 1 or topk < 1:
            raise ServerArgsError("ValueError: speculative_num_steps and speculative_eagle_topk must be >= 1")
        if topk == 1 and draft != steps + 1:
            warnings.append(
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                "speculative_eagle_topk == 1"
            )
            draft = steps + 1
        if topk > 1 and page_size > 1 and backend not in traits.paged_topk_backends:
            raise ServerArgsError(
                "ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable and produces "
                "incorrect results for paged attention backends. This combination is only supported for "
                "the 'flashinfer' backend."
            )
        if draft is None or draft < 2:
            raise ServerArgsError(
                "ValueError: speculative_num_draft_tokens must be >= 2 when speculative_eagle_topk > 1"
            )
        if "flashmla" in (backend, prefill_backend) and not traits.flashmla_draft_extend_graph:
            notes.append("flashmla prefill backend is not yet supported for draft extend.")
    else:
        steps = topk = draft = None
        draft_path = None

    tp = max(1, int(ns.tp_size))
    mem_fraction = ns.mem_fraction_static
    if mem_fraction is None:
        reserve = 10.0 + (traits.spec_extra_reserve_gb if speculative else 0.0)
        mem_fraction = round((cfg.gpu_memory_gb - reserve) / cfg.gpu_memory_gb, 3)
    if cuda_graph_max_bs is None:
        cuda_graph_max_bs = 256 if tp < 4 else 512

    context_len = ns.context_length or DEFAULT_CONTEXT_LEN
    kv_gb = (
        cfg.gpu_memory_gb * mem_fraction - cfg.weights_gb / tp - (DRAFT_WEIGHTS_GB if speculative else 0.0)
    )
    if kv_gb <= 0:
        raise ServerArgsError(
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            f"Current value: mem_fraction_static={mem_fraction}"
        )
    max_total = int(kv_gb * (1 << 30) / cfg.kv_bytes_per_token) // page_size * page_size
    pool_limit = min(max(int(max_total / context_len * 512), 2048), 4096)
    effective_running = min(max_running, pool_limit) if max_running is not None else pool_limit
    if disable_cuda_graph:
        graph_max_bs = 0
    elif cuda_graph_bs:
        graph_max_bs = min(max(cuda_graph_bs), effective_running)
    else:
        graph_max_bs = min(cuda_graph_max_bs, effective_running)

    chunked = ns.chunked_prefill_size if ns.chunked_prefill_size is not None else 8192
    if chunked > 0 and chunked % page_size != 0:
        raise ServerArgsError("AssertionError: chunked_prefill_size must be divisible by page_size")

    args = ServerArgs(
        model_path=ns.model_path,
        tokenizer_path=ns.tokenizer_path or ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        host=ns.host,
        port=ns.port,
        skip_tokenizer_init=bool(ns.skip_tokenizer_init),
        trust_remote_code=bool(ns.trust_remote_code),
        context_length=ns.context_length,
        mem_fraction_static=mem_fraction,
        max_running_requests=max_running,
        chunked_prefill_size=chunked,
        page_size=page_size,
        tp_size=tp,
        random_seed=ns.random_seed if ns.random_seed is not None else cfg.seed,
        log_level=ns.log_level,
        stream_interval=max(1, int(ns.stream_interval)),
        decode_log_interval=max(1, int(ns.decode_log_interval)),
        enable_metrics=bool(ns.enable_metrics),
        disable_radix_cache=bool(ns.disable_radix_cache),
        attention_backend=backend,
        prefill_attention_backend=prefill_backend,
        decode_attention_backend=decode_backend,
        grammar_backend=ns.grammar_backend,
        disable_cuda_graph=disable_cuda_graph,
        cuda_graph_max_bs=cuda_graph_max_bs,
        cuda_graph_bs=cuda_graph_bs,
        disable_overlap_schedule=mode.disable_overlap_schedule,
        speculative_algorithm=algorithm,
        speculative_draft_model_path=draft_path,
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft,
        speculative_attention_mode=ns.speculative_attention_mode,
        load_format=ns.load_format,
    )
    return Resolved(
        args=args,
        mode=mode,
        warnings=warnings,
        runtime_notes=notes,
        context_len=context_len,
        max_total_num_tokens=max_total,
        effective_max_running_requests=effective_running,
        graph_max_bs=graph_max_bs,
        kv_cache_gb=round(kv_gb, 2),
    )


def _dealias_backend(name: str | None, traits: VersionTraits, warnings: list[str]) -> str | None:
    for old, new in traits.backend_aliases:
        if name == old:
            warnings.append(f"Attention backend '{old}' is deprecated, use '{new}' instead.")
            return new
    return name
