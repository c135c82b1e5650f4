"""Tensor-parallel communication in a trace: which kernels are collectives, and of which kind.

A shard of a TP-N model on one GPU computes what each GPU of the deployment computes except the
communication; in a TP-N trace that communication is a set of kernels, named by the library that ran them.
What SGLang 0.5.13.post1 runs on CUDA for an all-reduce (sglang/srt/distributed/parallel_state.py,
`GroupCoordinator.all_reduce`, and srt/layers/flashinfer_comm_fusion.py):

- **FlashInfer's TensorRT-LLM all-reduce fusion** (all-reduce + residual add + RMSNorm in one kernel),
  which server_args.py enables by itself for DeepseekV3ForCausalLM on SM90/SM100 at tp_size > 1 on one node:
  `allreduce_fusion_kernel_oneshot_lamport`, `allreduce_fusion_kernel_twoshot_sync`; the MNNVL variants
  `oneshotAllreduceFusionKernel` / `twoshotAllreduceKernel`. Its time includes the fused add and norm (a few
  microseconds per layer), so the all-reduce time reads slightly high where it runs;
- **SGLang's custom all-reduce**, the JIT v2 (`SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2`, the default on CUDA;
  jit_kernel/csrc/distributed/custom_all_reduce_{pull,push}.cuh): `all_reduce_one_shot_kernel`,
  `all_reduce_two_shot_kernel`, `all_reduce_one_shot_push_kernel`; the legacy sgl-kernel one (vLLM's):
  `cross_device_reduce_1stage`, `cross_device_reduce_2stage`; sgl-kernel's TensorRT-LLM reduce:
  `oneShotAllReduceKernel`, `twoShotAllReduceKernel`;
- **torch symmetric memory** (`one_shot_all_reduce_kernel`, `two_shot_all_reduce_kernel`,
  `multimem_all_reduce_kernel`) and **mscclpp** (`allreduce_*`);
- **NCCL** (pynccl, or torch.distributed outside CUDA graphs): `ncclDevKernel_AllReduce_Sum_bf16_RING_LL`
  and, before NCCL 2.19, `ncclKernel_AllReduce_RING_LL_Sum_bfloat16`.

The vocabulary-parallel LM head gathers its logits (`all_gather`: NCCL `ncclDevKernel_AllGather_*`, torch
`all_gather`), and some paths reduce-scatter; those are named too, as their own kinds. A collective kernel's
time on one rank includes its wait for the slowest rank: that wait is part of what TP costs a step.
"""

from __future__ import annotations

import functools
import re

# kind -> the pattern of its kernel names (case-insensitive search). `(?<!sm)` keeps "small_reduce" out.
COLLECTIVE_PATTERNS: dict[str, re.Pattern[str]] = {
    "all_reduce": re.compile(r"(?<!sm)all_?reduce|cross_device_reduce", re.IGNORECASE),
    "all_gather": re.compile(r"all_?gather", re.IGNORECASE),
    "reduce_scatter": re.compile(r"reduce_?scatter", re.IGNORECASE),
}


# Cached: a trace repeats a few hundred distinct names thousands of times, and a templated CUDA kernel's name
# runs to kilobytes, so the case-insensitive searches were most of a trace summary's time.
@functools.lru_cache(maxsize=8192)
def collective_kind(kernel_name: str) -> str | None:
    """The collective a kernel performs ("all_reduce", "all_gather", "reduce_scatter"), or None."""
    for kind, pattern in COLLECTIVE_PATTERNS.items():
        if pattern.search(kernel_name):
            return kind
    return None


def short_name(kernel_name: str) -> str:
    """A kernel's name without its return type, namespaces and template arguments, for a summary's list:
    `void flashinfer::...::allreduce_fusion_kernel_oneshot_lamport<...>(...)` -> the function's own name."""
    name = kernel_name.strip()
    name = re.sub(r"^void\s+", "", name)
    name = name.split("(", 1)[0]
    depth, out = 0, []
    for ch in name:  # drop template arguments, nested ones included
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return "".join(out).rsplit("::", 1)[-1] or kernel_name[:80]
