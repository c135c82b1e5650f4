"""SGLang's launch flags: parsed as its argparse does (abbreviations too), resolved in its order (§1.2-4)."""

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from synthetic.server.config import SimConfig
from synthetic.server.release import ModeDecision, Release, env_removal_warning, resolve_spec_mode

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
DEFAULT_CONTEXT_LEN = 163_840  # DeepSeek-V3 family, the architecture the stand-in pretends to serve
MODEL_ARCHITECTURE = "DeepseekV3ForCausalLM"
DRAFT_WEIGHTS_GB = 1.0


# The flags the stand-in takes besides the speculative and CUDA-graph ones, with SGLang's defaults.
_TEXT_FLAGS: dict[str, str | None] = {
    **dict.fromkeys(
        ("--tokenizer-path", "--served-model-name", "--speculative-algorithm", "--grammar-backend")
    ),
    **dict.fromkeys(("--attention-backend", "--prefill-attention-backend", "--decode-attention-backend")),
    "--host": "127.0.0.1",
    "--log-level": "info",
}
_INT_FLAGS: dict[str, int | None] = {
    **dict.fromkeys(
        ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
    ),
    **dict.fromkeys(("--max-running-requests", "--page-size", "--random-seed", "--chunked-prefill-size")),
    "--context-length": None,
    "--port": 30000,
    "--decode-log-interval": 40,
    "--stream-interval": 1,
}
_SWITCHES = (
    "--disable-overlap-schedule",
    "--disable-cuda-graph",
    "--skip-tokenizer-init",
    "--enable-metrics",
    "--disable-radix-cache",
    "--trust-remote-code",
)


class ServerArgsError(Exception):
    """A launch SGLang would refuse; the message is what SGLang raises (type name included)."""


@dataclass
class ServerArgs:
    """The resolved arguments; graph-flag names are the release's (`flat`)."""

    model_path: str
    tokenizer_path: str
    served_model_name: str
    host: str
    port: int
    skip_tokenizer_init: bool
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
    # `dummy` in SGLang initialises weights from config.json; the stand-in has no weights either way.
    load_format: str

    def flat(self, rel: Release) -> dict[str, Any]:
        """The `/server_info` and `ServerArgs(...)` view, with the release's graph-flag names."""
        out = dict(vars(self))
        if rel.graph_flags != "legacy":
            for name in ("cuda_graph_max_bs", "cuda_graph_bs"):
                value = out.pop(name)
                if rel.graph_flags == "decode_with_alias":
                    out[name] = None  # the deprecated field survives, always unset
                out[f"{name}_decode"], out[f"{name}_prefill"] = value, None
            out["disable_decode_cuda_graph"] = self.disable_cuda_graph
        return out

    def dump(self, rel: Release) -> str:
        return "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in self.flat(rel).items()) + ")"

    @property
    def speculative(self) -> bool:
        return self.speculative_algorithm is not None


@dataclass
class Resolved:
    args: ServerArgs
    mode: ModeDecision
    # Lines a real server logs later, while building the model runner and the draft worker.
    runtime_notes: list[str]
    context_len: int
    max_total_num_tokens: int
    effective_max_running_requests: int
    # The largest batch a captured CUDA graph covers; 0 when graphs are off.
    graph_max_bs: int
    kv_cache_gb: float


def parse_flags(rel: Release, argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m synthetic.server",
        description=f"specbench stand-in for an SGLang {rel.version} server (CPU only, simulated).",
        allow_abbrev=True,
    )
    add = p.add_argument
    add("--model-path", required=True)
    add("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    add("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path")
    add("--speculative-attention-mode", choices=["prefill", "decode"], default="prefill")
    add("--load-format", default="auto", choices=["auto", "pt", "safetensors", "dummy"])
    add("--mem-fraction-static", type=float)
    for name, default in _TEXT_FLAGS.items():
        add(name, default=default)
    for name, number in _INT_FLAGS.items():
        add(name, type=int, default=number)
    for name in _SWITCHES:
        add(name, action="store_true")
    if rel.graph_flags == "legacy":
        add("--cuda-graph-max-bs", type=int)
        add("--cuda-graph-bs", type=int, nargs="+")
    else:
        add("--cuda-graph-max-bs-decode", dest="cuda_graph_max_bs", type=int)
        add("--cuda-graph-max-bs-prefill", type=int)
        add("--cuda-graph-bs-decode", dest="cuda_graph_bs", type=int, nargs="+")
        add("--cuda-graph-bs-prefill", type=int, nargs="+")
        add("--disable-decode-cuda-graph", action="store_true")
        add("--disable-prefill-cuda-graph", action="store_true")
        if rel.graph_flags == "decode_with_alias":
            # Deprecated spellings: exact matches, so they win over the prefix rule.
            add("--cuda-graph-max-bs", dest="legacy_cuda_graph_max_bs", type=int)
            add("--cuda-graph-bs", dest="legacy_cuda_graph_bs", type=int, nargs="+")
    return p.parse_args(list(argv))


def resolve(ns: argparse.Namespace, cfg: SimConfig, rel: Release, warnings: list[str]) -> Resolved:
    """`warnings` collects SGLang's lines as they happen, to be logged even when a later check raises."""
    backend = ns.attention_backend or "fa3"  # SGLang's pick for an MLA model on Hopper with CUDA >= 12.3
    max_bs, graph_bs, no_graph = _graph_flags(ns, rel, warnings)
    page_size = _page_size(ns, backend, warnings)
    if removal := env_removal_warning(rel, cfg.enable_spec_v2_env):
        warnings.append(removal)
    algorithm = _algorithm(ns.speculative_algorithm)
    max_running = ns.max_running_requests
    if algorithm is not None and max_running is None:
        max_running = 48
        warnings.append(
            "Max running requests is reset to 48 for speculative decoding. You can override this by "
            "explicitly setting --max-running-requests."
        )
    mode = resolve_spec_mode(
        rel,
        speculative=algorithm is not None,
        explicit_topk=ns.speculative_eagle_topk,
        disable_overlap_flag=bool(ns.disable_overlap_schedule),
        env=cfg.enable_spec_v2_env,
    )
    warnings.extend(mode.warnings)
    steps, topk, draft, draft_path = _speculative(ns, algorithm, backend, page_size, rel, warnings)
    notes = []
    flashmla_prefill = "flashmla" in (backend, ns.prefill_attention_backend)
    if algorithm and flashmla_prefill and not rel.flashmla_draft_extend_graph:
        notes.append("flashmla prefill backend is not yet supported for draft extend.")
    tp = max(1, int(ns.tp_size))
    mem_fraction, kv_gb = _memory(ns.mem_fraction_static, tp, algorithm is not None, cfg, rel)
    context_len = ns.context_length or DEFAULT_CONTEXT_LEN
    max_total = int(kv_gb * (1 << 30) / cfg.kv_bytes_per_token) // page_size * page_size
    pool_limit = min(max(int(max_total / context_len * 512), 2048), 4096)
    running = min(max_running, pool_limit) if max_running is not None else pool_limit
    max_bs = max_bs if max_bs is not None else 256 if tp < 4 else 512
    graph_max_bs = 0 if no_graph else min(max(graph_bs) if graph_bs else max_bs, running)
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
        prefill_attention_backend=ns.prefill_attention_backend,
        disable_cuda_graph=no_graph,
        cuda_graph_max_bs=max_bs,
        cuda_graph_bs=graph_bs,
        disable_overlap_schedule=mode.disable_overlap_schedule,
        speculative_algorithm=algorithm,
        speculative_draft_model_path=draft_path,
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft,
        speculative_attention_mode=ns.speculative_attention_mode,
        load_format=ns.load_format,
    )
    return Resolved(args, mode, notes, context_len, max_total, running, graph_max_bs, round(kv_gb, 2))


def _graph_flags(ns: argparse.Namespace, rel: Release, warnings: list[str]) -> tuple[Any, Any, bool]:
    """(max batch size, batch sizes, graphs off) from the release's spellings, deprecated ones warned."""
    max_bs, graph_bs, off = ns.cuda_graph_max_bs, ns.cuda_graph_bs, bool(ns.disable_cuda_graph)
    if rel.graph_flags == "legacy":
        return max_bs, graph_bs, off
    if getattr(ns, "legacy_cuda_graph_max_bs", None) is not None:
        warnings.append("--cuda-graph-max-bs is deprecated, use --cuda-graph-max-bs-decode instead.")
        max_bs = max_bs or ns.legacy_cuda_graph_max_bs
    if getattr(ns, "legacy_cuda_graph_bs", None) is not None:
        warnings.append("--cuda-graph-bs is deprecated, use --cuda-graph-bs-decode instead.")
        graph_bs = graph_bs or ns.legacy_cuda_graph_bs
    if off:
        warnings.append(
            "--disable-cuda-graph is deprecated, use --cuda-graph-backend-decode disabled and "
            "--cuda-graph-backend-prefill disabled (or --disable-decode-cuda-graph / "
            "--disable-prefill-cuda-graph) instead."
        )
    return max_bs, graph_bs, off or ns.disable_decode_cuda_graph


def _page_size(ns: argparse.Namespace, backend: str, warnings: list[str]) -> int:
    if "flashmla" in (backend, ns.decode_attention_backend):
        warnings.append("FlashMLA only supports a page_size of 64, change page_size to 64.")
        return 64
    return ns.page_size if ns.page_size is not None else 1


def _memory(fraction: float | None, tp: int, spec: bool, cfg: SimConfig, rel: Release) -> tuple[float, float]:
    """mem_fraction_static (SGLang's default leaves 10 GB) and the KV cache's GB after the weights."""
    if fraction is None:
        reserve = 10.0 + (rel.spec_extra_reserve_gb if spec else 0.0)
        fraction = round((cfg.gpu_memory_gb - reserve) / cfg.gpu_memory_gb, 3)
    kv_gb = cfg.gpu_memory_gb * fraction - cfg.weights_gb / tp - (DRAFT_WEIGHTS_GB if spec else 0.0)
    if kv_gb <= 0:
        raise ServerArgsError(
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            f"Current value: mem_fraction_static={fraction}"
        )
    return fraction, kv_gb


def _algorithm(name: str | None) -> str | None:
    if name is None:
        return None
    upper = "EAGLE" if name.upper() == "NEXTN" else name.upper()
    if upper not in EAGLE_FAMILY:
        raise ServerArgsError(
            f"ValueError: the specbench stand-in emulates only EAGLE, EAGLE3, NEXTN and STANDALONE, not {upper}"
        )
    return upper


def _speculative(
    ns: argparse.Namespace, algorithm: str | None, backend: str, page: int, rel: Release, warnings: list[str]
) -> tuple[int | None, int | None, int | None, str | None]:
    """(steps, topk, draft tokens, draft path) after SGLang's defaults and checks, in its order."""
    if algorithm is None:
        return None, None, None, None
    steps, topk, draft = ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens
    draft_path = ns.speculative_draft_model_path
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
    if topk > 1 and page > 1 and backend not in rel.paged_topk_backends:
        raise ServerArgsError(
            "ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable and produces "
            "incorrect results for paged attention backends. This combination is only supported for "
            "the 'flashinfer' backend."
        )
    if draft is None or draft < 2:
        raise ServerArgsError(
            "ValueError: speculative_num_draft_tokens must be >= 2 when speculative_eagle_topk > 1"
        )
    return steps, topk, draft, draft_path
