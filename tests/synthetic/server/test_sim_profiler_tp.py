"""The stand-in's traces at tensor parallelism > 1 hold TP's all-reduces, as the documented model draws them:
the cost model's `tp_comm_ms x (tp - 1)` per verify, two kernels per layer of the verify graph."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.profile.summary import summarize
from synthetic.server.config import PerfParams
from synthetic.server.perf import PerfModel
from synthetic.server.profiler import ALL_REDUCES_PER_LAYER, GRAPH_REPEAT, _Session, build_trace


def _trace(tp: int, overlap: bool, activities: list[str]) -> dict[str, object]:
    perf = PerfModel(
        params=PerfParams(),
        overlap=overlap,
        tp_size=tp,
        steps=3,
        draft_tokens=4,
        graph_max_bs=64,
        draft_extend_without_graph=False,
        scale=1.0,
    )
    server = SimpleNamespace(perf=perf, resolved=SimpleNamespace(mode=SimpleNamespace(overlap=overlap)))
    sess = _Session(Path("/unused"), activities, "1", "", None, steps=[("decode", 8, 0)] * 10)
    return build_trace(server, sess)  # type: ignore[arg-type]


@pytest.mark.parametrize("activities", [["GPU"], ["CPU", "GPU"]])
@pytest.mark.parametrize("overlap", [False, True])
def test_all_reduce_time_per_cycle_is_the_cost_models_communication(
    overlap: bool, activities: list[str]
) -> None:
    s = summarize(_trace(8, overlap, activities))
    assert s["cycles_timed"] >= 8
    ar = s["collectives"]["all_reduce"]
    comm_ms = PerfParams().tp_comm_ms * 7
    # Trace times are absolute microseconds since the epoch (~1.7e15): a double resolves them to 0.25 us, so
    # 16 kernels a cycle carry up to a few microseconds of rounding.
    assert ar["ms_per_cycle"]["min"] == pytest.approx(comm_ms, abs=0.005)
    assert ar["ms_per_cycle"]["max"] == pytest.approx(comm_ms, abs=0.005)
    assert ar["kernels_per_cycle"]["median"] == ALL_REDUCES_PER_LAYER * GRAPH_REPEAT["target_verify"]
    assert ar["share_of_cycle"]["median"] == pytest.approx(comm_ms / s["cycle_ms"]["median"], rel=0.01)
    assert list(ar["kernel_names"]) == ["allreduce_fusion_kernel_oneshot_lamport"]
    one_gpu = summarize(_trace(1, overlap, activities))
    assert one_gpu["collectives"] == {}


def test_the_verify_graph_keeps_its_all_reduces() -> None:
    """On a GPU-only trace the verify is found by its CUDA graph: the all-reduces ride in that graph (one
    correlation id), so the cycles are cut exactly as without them."""
    with_ar, without = summarize(_trace(8, False, ["GPU"])), summarize(_trace(1, False, ["GPU"]))
    assert with_ar["track"] == without["track"] == "graph"
    assert with_ar["cycles"] == without["cycles"]
