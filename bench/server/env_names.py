"""The server variables a sweep may set (`server.env`): an explicit list of names, never a prefix family.

Each was read in SGLang's source of the supported releases and only tunes the server (a number, switch or
built-in choice); none loads code, runs a program, names a path or changes a compile. Prefixes cannot know
that: SGLANG_PLUGINS, TRITON_CACHE_MANAGER and FLASHINFER_EXTRA_CFLAGS sit inside them (issue 30 §3).
HF_HUB_OFFLINE is the host's (bench/server/env.py, issue 35 §1). `since`: the first supported release reading
the name. docs/reference/sglang-contract.md lists the same names; tests keep both equal and find each in the
pinned release's source."""

from typing import NamedTuple


class ServerVariable(NamedTuple):
    name: str
    since: str  # the first supported SGLang release that reads it
    tunes: str  # one line: what it changes


SWEEP_VARIABLES: tuple[ServerVariable, ...] = (
    # Speculative decoding and what a synthetic model leaves out
    ServerVariable("SGLANG_SIMULATE_ACC_LEN", "0.5.12", "pins speculative acceptance length (grid.accept_lengths)"),
    ServerVariable("SGLANG_SIMULATE_ACC_METHOD", "0.5.12", "how a pinned acceptance is drawn (built-in methods)"),
    ServerVariable("SGLANG_SIMULATE_UNIFORM_EXPERTS", "0.5.13.post1", "routes MoE tokens to experts uniformly"),
    ServerVariable("SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS", "0.5.13.post1", "routes MoE tokens to experts in turn"),
    ServerVariable("SGLANG_ENABLE_OVERLAP_PLAN_STREAM", "0.5.12", "spec v2 plans the next draft on its own stream"),
    # Scheduler
    ServerVariable("SGLANG_INIT_NEW_TOKEN_RATIO", "0.5.12", "scheduler's first estimate of tokens still to decode"),
    ServerVariable("SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR", "0.5.12", "floor of that estimate"),
    ServerVariable("SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS", "0.5.12", "steps over which the estimate decays"),
    ServerVariable("SGLANG_RETRACT_DECODE_STEPS", "0.5.12", "decode steps reserved when requests are retracted"),
    ServerVariable("SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION", "0.5.12", "cap on max_new_tokens when admitting"),
    ServerVariable("SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DEFAULT", "0.5.12", "how often the scheduler polls (default)"),
    ServerVariable("SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_DECODE", "0.5.12", "how often it polls during decode"),
    ServerVariable("SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_TARGET_VERIFY", "0.5.12", "how often it polls in verify"),
    ServerVariable("SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_NONE", "0.5.12", "how often it polls when idle"),
    ServerVariable("SGLANG_SCHEDULER_MAX_RECV_PER_POLL", "0.5.12", "requests taken in per poll"),
    ServerVariable("SGLANG_EMPTY_CACHE_INTERVAL", "0.5.12", "seconds between torch.cuda.empty_cache when idle"),
    ServerVariable("SGLANG_FORCE_STREAM_INTERVAL", "0.5.12", "tokens between outputs of non-streaming requests"),
    ServerVariable("SGLANG_DISABLE_CONSECUTIVE_PREFILL_OVERLAP", "0.5.12", "no overlap of back-to-back prefills"),
    # Kernel choices and sizes (which built-in kernel runs; nothing is compiled differently)
    ServerVariable("SGLANG_ENABLE_JIT_DEEPGEMM", "0.5.12", "uses DeepGEMM's kernels for FP8 GEMMs"),
    ServerVariable("SGLANG_JIT_DEEPGEMM_PRECOMPILE", "0.5.12", "warms DeepGEMM's kernels up at start"),
    ServerVariable("SGLANG_JIT_DEEPGEMM_FAST_WARMUP", "0.5.12", "warms up fewer DeepGEMM shapes"),
    ServerVariable("SGLANG_CHUNKED_PREFIX_CACHE_THRESHOLD", "0.5.12", "MLA prefix length that switches to chunks"),
    ServerVariable("SGLANG_MAX_KV_CHUNK_CAPACITY", "0.5.12", "tokens per chunk of that MLA prefill path"),
    ServerVariable("SGLANG_FLASHINFER_WORKSPACE_SIZE", "0.5.12", "bytes of FlashInfer's workspace buffer"),
    ServerVariable("SGLANG_ENABLE_TORCH_INFERENCE_MODE", "0.5.12", "torch.inference_mode instead of no_grad"),
    ServerVariable("SGLANG_ENABLE_DETERMINISTIC_INFERENCE", "0.5.12", "batch-invariant, deterministic kernels"),
    ServerVariable("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "0.5.12", "DeepEP low-latency buffer size"),
    ServerVariable("SGLANG_MOE_PADDING", "0.5.12", "pads FP8 MoE weights for aligned kernels"),
    # What the server records and reports
    ServerVariable("SGLANG_RECORD_STEP_TIME", "0.5.12", "adds step_time_dict to internal_states"),
    ServerVariable("SGLANG_PROFILE_WITH_STACK", "0.5.12", "profiler default: record Python stacks"),
    ServerVariable("SGLANG_PROFILE_RECORD_SHAPES", "0.5.12", "profiler default: record tensor shapes"),
    ServerVariable("SGLANG_LOG_GC", "0.5.12", "logs Python garbage collections"),
    ServerVariable("SGLANG_LOG_FORWARD_ITERS", "0.5.12", "logs every forward iteration"),
    ServerVariable("SGLANG_LOG_MS", "0.5.12", "milliseconds in log timestamps"),
    ServerVariable("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "0.5.12", "/health runs a one-token generation"),
    ServerVariable("SGLANG_ENABLE_METRICS_DEVICE_TIMER", "0.5.12", "GPU-side timers in the metrics"),
    ServerVariable("SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK", "0.5.12", "start-up check that TP ranks' memory agrees"),
    # Start-up and HTTP
    ServerVariable("SGLANG_WARMUP_TIMEOUT", "0.5.12", "seconds a warm-up batch may take before the server stops"),
    ServerVariable("SGLANG_TIMEOUT_KEEP_ALIVE", "0.5.12", "HTTP keep-alive seconds"),
    # The GPU stack under SGLang (SGLang's source sets or reads each of these)
    ServerVariable("PYTORCH_CUDA_ALLOC_CONF", "0.5.12", "PyTorch's CUDA allocator (e.g. expandable_segments)"),
    ServerVariable("NCCL_ALGO", "0.5.12", "NCCL's collective algorithm"),
    ServerVariable("NCCL_NVLS_ENABLE", "0.5.12", "NCCL's NVLink SHARP"),
    ServerVariable("NCCL_CUMEM_ENABLE", "0.5.12", "NCCL's cuMem allocations"),
    ServerVariable("CUDA_VISIBLE_DEVICES", "0.5.12", "which GPUs the server sees (conflicts with --gpus)"),
    ServerVariable("TOKENIZERS_PARALLELISM", "0.5.12", "HF tokenizers' own threads"),
)  # fmt: skip

# Read by SGLang, but specbench sets them itself; a sweep says what it wants elsewhere.
SET_BY_SPECBENCH: dict[str, tuple[str, str]] = {
    "SGLANG_ENABLE_SPEC_V2": ("0.5.12", "grid.spec_modes picks v1 or v2 (bench/server/spec_modes.py)"),
}

SWEEP_NAMES: frozenset[str] = frozenset(v.name for v in SWEEP_VARIABLES)
