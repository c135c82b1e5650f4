"""Tensor-parallel communication in a trace: which kernels are collectives, and of which kind. A shard on one
GPU computes what each GPU of a TP-N deployment computes but the communication, which in a TP-N trace is a set
of kernels named by their library; the all-reduce paths SGLang 0.5.13.post1 runs on CUDA and their kernel
names are tabled in docs/reference/shard-vs-tp.md. The vocabulary-parallel head's `all_gather` and any
reduce-scatter are kinds of their own. A collective's time on one rank includes its wait for the slowest rank:
part of what TP costs a step."""

import functools
import re

# kind -> the pattern of its kernel names (case-insensitive search). `(?<!sm)` keeps "small_reduce" out.
COLLECTIVE_PATTERNS: dict[str, re.Pattern[str]] = {
    "all_reduce": re.compile(r"(?<!sm)all_?reduce|cross_device_reduce", re.IGNORECASE),
    "all_gather": re.compile(r"all_?gather", re.IGNORECASE),
    "reduce_scatter": re.compile(r"reduce_?scatter", re.IGNORECASE),
}


# Cached: a few hundred distinct names, kilobytes each for templated kernels, repeated thousands of times.
@functools.lru_cache(maxsize=8192)
def collective_kind(kernel_name: str) -> str | None:
    """The collective a kernel performs ("all_reduce", "all_gather", "reduce_scatter"), or None."""
    return next((kind for kind, pattern in COLLECTIVE_PATTERNS.items() if pattern.search(kernel_name)), None)


def short_name(kernel_name: str) -> str:
    """A kernel's name without return type, namespaces and template arguments."""
    name = re.sub(r"^void\s+", "", kernel_name.strip()).split("(", 1)[0]
    depth, out = 0, []
    for ch in name:  # drop template arguments, nested ones included
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return "".join(out).rsplit("::", 1)[-1] or kernel_name[:80]
