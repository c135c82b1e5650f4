"""SGLang launch flags specbench knows, so a sweep's pass-through `args` are checked before GPU time is spent.
The flags that define a point (model, backend, spec parameters, overlap, TP, host/port) are the sweep's
own."""

# Flags the sweep itself sets; refusing them in `args` keeps the stored server config truthful.
OWNED_BY_SWEEP: frozenset[str] = frozenset(
    {
        "model-path",
        "model",
        "host",
        "port",
        "attention-backend",
        "tp-size",
        "tp",
        "tensor-parallel-size",
        "speculative-algorithm",
        "speculative-draft-model-path",
        "speculative-draft-model",
        "speculative-num-steps",
        "speculative-eagle-topk",
        "speculative-num-draft-tokens",
        "disable-overlap-schedule",
    }
)

# Pass-through flags accepted in `args` (SGLang 0.5.12-0.5.23, contract §1.2 plus common serving flags).
KNOWN_PASSTHROUGH: frozenset[str] = frozenset(
    {
        "mem-fraction-static",
        "max-running-requests",
        "max-total-tokens",
        "max-prefill-tokens",
        "chunked-prefill-size",
        "context-length",
        "page-size",
        "cuda-graph-max-bs",
        "cuda-graph-max-bs-decode",
        "cuda-graph-bs",
        "cuda-graph-bs-decode",
        "disable-cuda-graph",
        "disable-piecewise-cuda-graph",
        "skip-tokenizer-init",
        "enable-metrics",
        "enable-metrics-for-all-schedulers",
        "disable-radix-cache",
        "enable-cache-report",
        "decode-log-interval",
        "stream-interval",
        "served-model-name",
        "grammar-backend",
        "log-level",
        "random-seed",
        "dtype",
        "kv-cache-dtype",
        "quantization",
        "dp-size",
        "ep-size",
        "enable-dp-attention",
        "prefill-attention-backend",
        "decode-attention-backend",
        "speculative-attention-mode",
        "speculative-draft-attention-backend",
        "moe-runner-backend",
        "schedule-policy",
        "schedule-conservativeness",
        "tokenizer-path",
        "load-format",
        "watchdog-timeout",
        "sleep-on-idle",  # an idle scheduler otherwise spins a CPU core: a co-resident pair's idle side
    }
)


# Flags making SGLang run a checkpoint's own Python: the host's decision, never a job's (issue 35 §1).
HOST_ONLY_FLAGS: dict[str, str] = {"trust-remote-code": "--trust-remote-code"}

# Pass-through flags whose value is a path: one string, checked like `model` (bench/host/policy.py).
PATH_FLAGS: frozenset[str] = frozenset({"tokenizer-path"})


def check_passthrough_flag(name: str) -> str | None:
    """Return an error message for a flag that may not appear in a sweep's `args`, else None."""
    if name.startswith("-"):
        return f"write flag names without leading dashes: {name!r} -> {name.lstrip('-')!r}"
    if name in HOST_ONLY_FLAGS:
        return (
            f"flag {name!r} makes SGLang run Python the checkpoint ships: the host decides it (specbench worker "
            f"or run {HOST_ONLY_FLAGS[name]}), never a sweep"
        )
    if name in OWNED_BY_SWEEP:
        return f"flag {name!r} is set by the sweep itself (model/server/grid fields), not via server.args"
    if name not in KNOWN_PASSTHROUGH:
        return f"unknown SGLang flag {name!r} (known pass-through flags: see bench/server/flags.py)"
    return None


def path_value_problem(where: str, value: object) -> str | None:
    """Why a path-typed value is not one path string (YAML lists, numbers, mappings: issue 35 §2), or None."""
    if isinstance(value, str):
        return None
    return f"{where}: one path or model id as a string, not {type(value).__name__}"
