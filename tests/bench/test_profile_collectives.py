"""Tensor-parallel collectives in traces: the kernel names SGLang's all-reduce paths produce, and the
all-reduce time and share per speculative cycle the summary stores."""

from __future__ import annotations

from typing import Any

import pytest

from bench.profile.collectives import collective_kind, short_name
from bench.profile.summary import summarize
from bench.profile.trace import load_trace
from tests.fixtures.traces import H200_V1_BS8

# Kernel names as the libraries SGLang 0.5.13.post1 calls for an all-reduce emit them (module doc of
# bench.profile.collectives), in the demangled form torch.profiler writes.
ALL_REDUCE_NAMES = [
    "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<(flashinfer::"
    "trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, true, true>(flashinfer::"
    "trtllm_allreduce_fusion::AllReduceFusionParams<__nv_bfloat16>)",
    "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_twoshot_sync<__nv_bfloat16, 8, true>"
    "(flashinfer::trtllm_allreduce_fusion::AllReduceFusionParams<__nv_bfloat16>, std::array<int, 8ul>)",
    "void device::distributed::all_reduce_one_shot_kernel<__nv_bfloat16, 8, true>(void*, "
    "device::distributed::AllReduceParams, device::distributed::Controller*)",
    "void device::distributed::all_reduce_two_shot_kernel<__nv_bfloat16, 8, false>(...)",
    "void device::distributed::all_reduce_one_shot_push_kernel<__nv_bfloat16, 8, true>(...)",
    "void sglang::cross_device_reduce_1stage<__nv_bfloat16, 8>(sglang::RankData*, sglang::RankSignals, "
    "sglang::Signal*, __nv_bfloat16*, int, int)",
    "void sglang::cross_device_reduce_2stage<__nv_bfloat16, 8>(...)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclKernel_AllReduce_RING_LL_Sum_bfloat16(ncclDevComm*, unsigned long, ncclWork*)",
    "void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 16, 8>(...)",
    "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, true, 8>(...)",
    "void tensorrt_llm::twoShotAllReduceKernel<__nv_bfloat16, 8, false>(...)",
]


@pytest.mark.parametrize("name", ALL_REDUCE_NAMES)
def test_every_all_reduce_path_is_recognised(name: str) -> None:
    assert collective_kind(name) == "all_reduce"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
        ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reduce_scatter"),
        ("void at::native::small_reduce_kernel<float>(float*)", None),  # "sm-all_reduce" is not one
        ("void cublasLt::splitKreduce_kernel<32, 16, int, float>(...)", None),
        ("fused_moe_kernel", None),
    ],
)
def test_other_collectives_and_lookalikes(name: str, kind: str | None) -> None:
    assert collective_kind(name) == kind


def test_no_kernel_of_a_real_one_gpu_trace_is_a_collective() -> None:
    """The H200 tp-1 trace (100+ distinct kernels: GEMMs, norms, reductions, MoE, FlashMLA) has none, and its
    summary says so with an empty `collectives`."""
    trace = load_trace(H200_V1_BS8)
    names = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel"}
    assert len(names) > 50
    assert [n for n in names if collective_kind(n)] == []
    assert summarize(trace)["collectives"] == {}


def test_short_names() -> None:
    assert short_name(ALL_REDUCE_NAMES[0]) == "allreduce_fusion_kernel_oneshot_lamport"
    assert short_name(ALL_REDUCE_NAMES[5]) == "cross_device_reduce_1stage"
    assert (
        short_name("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)")
        == "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
    )


def _k(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": {}}


def _step(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur}


def test_all_reduce_time_and_share_per_cycle() -> None:
    """Three verify steps 1000 us apart (two whole cycles). Cycle 1 holds all-reduces of 50 + 30 us (and an
    all-gather of 20 us), cycle 2 of 50 + 70 us, one of them overlapping a GEMM (time is the union, not the
    sum of kernels elsewhere). So all-reduce per cycle: 80 and 120 us; share 8 % and 12 %."""
    ar, gemm = ALL_REDUCE_NAMES[0], "nvjet_sm90_tst_128x32_64x10_4x1_v_bz_TNT"
    gather = "ncclDevKernel_AllGather_RING_LL(x)"
    events = [
        _step("step[TARGET_VERIFY bs=8]", 0, 600),
        _k(gemm, 0, 200),
        _k(ar, 200, 50),
        _k(gemm, 250, 200),
        _k(ar, 450, 30),
        _k(gather, 500, 20),
        _step("step[TARGET_VERIFY bs=8]", 1000, 600),
        _k(gemm, 1000, 200),
        _k(ar, 1200, 50),
        _k(gemm, 1250, 200),
        _k(ar, 1400, 70),
        _k("void other_stream_kernel(void)", 1420, 40),  # overlaps the all-reduce: the union counts it once
        _step("step[TARGET_VERIFY bs=8]", 2000, 600),
        _k(gemm, 2000, 100),
    ]
    s = summarize({"traceEvents": events})
    assert s["cycles"] == 3 and s["cycles_timed"] == 2
    ar_stats = s["collectives"]["all_reduce"]
    assert ar_stats["ms_per_cycle"]["min"] == pytest.approx(0.080)
    assert ar_stats["ms_per_cycle"]["max"] == pytest.approx(0.120)
    assert ar_stats["ms_per_cycle"]["median"] == pytest.approx(0.100)
    assert ar_stats["share_of_cycle"]["median"] == pytest.approx(0.10)
    assert ar_stats["kernels_per_cycle"]["median"] == 2
    assert ar_stats["kernels"] == 4
    assert ar_stats["kernel_names"] == {"allreduce_fusion_kernel_oneshot_lamport": 4}
    gather_stats = s["collectives"]["all_gather"]
    assert gather_stats["ms_per_cycle"]["max"] == pytest.approx(0.020)
    assert gather_stats["ms_per_cycle"]["min"] == 0.0  # a cycle without one counts as 0, not as missing
    per_cycle = [c["collective_ms"] for c in s["per_cycle"]]
    assert per_cycle[0]["all_reduce"] == pytest.approx(0.080)
    assert per_cycle[1]["all_reduce"] == pytest.approx(0.120)


def _gk(name: str, ts: float, dur: float, corr: int) -> dict[str, Any]:
    return {**_k(name, ts, dur), "args": {"stream": 7, "correlation": corr}}


def test_a_gpu_only_trace_of_a_tp_rank_cuts_cycles_at_the_verify_graph() -> None:
    """GPU-only (no annotations): the draft graph, the verify graph with its all-reduces, then the eager tree
    verification. The verify graph's last kernel reads as ending 0.25 us after the verification starts (the
    float resolution of absolute microsecond times): still the replay before it, so the verify; cycles are
    1000 us apart, not cut in two at the draft graph."""
    origin = 1.7e15  # absolute microseconds, as a trace writes them
    events, corr = [], 0
    for i in range(4):
        t = origin + i * 1000.0
        corr += 1
        events += [_gk("draft_gemm", t, 100, corr), _gk("draft_attn", t + 100, 100, corr)]
        corr += 1
        events += [
            _gk("verify_gemm", t + 200, 300, corr),
            _gk(ALL_REDUCE_NAMES[0], t + 500, 50, corr),
            _gk("verify_moe", t + 550, 250.25, corr),
        ]
        corr += 1
        events.append(_gk("void VerifyTreeGreedy<int, long>(int*)", t + 800, 10, corr))
    s = summarize({"traceEvents": events})
    assert s["track"] == "graph" and s["cycles"] == 4 and s["cycles_timed"] == 3
    assert s["cycle_ms"]["median"] == pytest.approx(1.0)
    assert s["per_cycle"][0]["start_ms"] == pytest.approx(0.2)  # at the verify graph, not the draft's
    assert s["collectives"]["all_reduce"]["ms_per_cycle"]["median"] == pytest.approx(0.050)
    assert s["collectives"]["all_reduce"]["share_of_cycle"]["median"] == pytest.approx(0.05)
