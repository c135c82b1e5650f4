"""The trace summariser on a hand-built trace whose figures are computed by hand in the comments."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from bench.profile.summary import distortion, spans_for_cycles, summarize
from bench.profile.trace import TraceError, load_trace

BASE = 1_700_000_000_000_000.0  # absolute microseconds, as Kineto writes them


def _x(cat: str, name: str, a: float, b: float, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "ts": BASE + a,
        "dur": b - a,
        "pid": 0,
        "tid": 7,
        "args": args,
    }


def _kernel(a: float, b: float, stream: int = 7) -> dict[str, Any]:
    return _x("kernel", "k", a, b, stream=stream)


def hand_trace() -> dict[str, Any]:
    tv, de = "step[TARGET_VERIFY bs=4]", "step[DRAFT_EXTEND_V2 bs=4]"
    ev = [
        # cycle 0, [0, 3000) us: verify kernels 0-600 and 650-1000, extend 1100-1500, draft 2000-2800 plus a
        # second-stream kernel 2700-2900 (union 2000-2900). Busy 600+350+400+900 = 2250; idle 750; largest
        # gap 1500-2000 = 500; verify 950, extend 400, draft 900.
        _x("gpu_user_annotation", tv, 0, 1000),
        _kernel(0, 600),
        _kernel(650, 1000),
        _x("gpu_user_annotation", de, 1100, 1500),
        _kernel(1100, 1500),
        _kernel(2000, 2800),
        _kernel(2700, 2900, stream=8),
        # cycle 1, [3000, 7000): verify 3000-4000 (annotated once per stream: merged), extend 4200-4600, draft
        # 6000-6500. Busy 1900; idle 2100; largest gap 4600-6000 = 1400; verify 1000, extend 400, draft 500.
        _x("gpu_user_annotation", tv, 3000, 4000),
        _x("gpu_user_annotation", tv, 3200, 3900),
        _kernel(3000, 4000),
        _x("gpu_user_annotation", de, 4200, 4600),
        _kernel(4200, 4600),
        _kernel(6000, 6500),
        # the third verify only closes cycle 1
        _x("gpu_user_annotation", tv, 7000, 7500),
        _kernel(7000, 7500),
        _x("gpu_user_annotation", de, 7600, 7800),
        _kernel(7600, 7800),
        # CPU track: cycle 0 [-500, 2500): verify 300, extend 100, outside 2600; cycle 1 [2500, 6500): verify
        # 200, extend 200, outside 3600.
        _x("user_annotation", tv, -500, -200),
        _x("user_annotation", de, -150, -50),
        _x("user_annotation", tv, 2500, 2700),
        _x("user_annotation", de, 2800, 3000),
        _x("user_annotation", tv, 6500, 6600),
        _x("user_annotation", "some_other_range", 100, 200),
        {"ph": "i", "cat": "instant", "name": "ignored", "ts": BASE, "pid": 0, "tid": 0},
    ]
    return {"traceEvents": ev}


def test_hand_built_trace_figures() -> None:
    s = summarize(hand_trace())
    assert s["cycles"] == 3
    assert s["cycles_timed"] == 2
    assert s["track"] == "gpu"
    assert s["cpu_recorded"] is True
    assert s["batch_sizes"] == [4]
    cyc = s["per_cycle"]
    assert [c["wall_ms"] for c in cyc] == pytest.approx([3.0, 4.0])
    assert [c["gpu_busy_ms"] for c in cyc] == pytest.approx([2.25, 1.9])
    assert [c["gpu_idle_ms"] for c in cyc] == pytest.approx([0.75, 2.1])
    assert [c["largest_idle_gap_ms"] for c in cyc] == pytest.approx([0.5, 1.4])
    assert cyc[0]["gpu_phase_ms"] == pytest.approx({"target_verify": 0.95, "draft_extend": 0.4, "draft": 0.9})
    assert cyc[1]["gpu_phase_ms"] == pytest.approx({"target_verify": 1.0, "draft_extend": 0.4, "draft": 0.5})
    assert cyc[0]["cpu_phase_ms"] == pytest.approx(
        {"target_verify": 0.3, "draft_extend": 0.1, "outside_steps": 2.6}
    )
    assert s["cycle_ms"]["median"] == pytest.approx(3.5)
    assert (s["cycle_ms"]["min"], s["cycle_ms"]["max"]) == pytest.approx((3.0, 4.0))
    assert s["gpu_busy_fraction"]["median"] == pytest.approx((0.75 + 0.475) / 2)
    assert s["gpu_idle_ms_per_cycle"]["median"] == pytest.approx(1.425)
    assert s["phases"]["draft"]["gpu_ms"]["median"] == pytest.approx(0.7)
    assert s["phases"]["target_verify"]["cpu_ms"]["median"] == pytest.approx(0.25)
    assert s["phases"]["outside_steps"]["cpu_ms"]["median"] == pytest.approx(3.1)
    json.dumps(s)  # stored as JSON


def test_cpu_track_is_the_fallback() -> None:
    t = hand_trace()
    t["traceEvents"] = [e for e in t["traceEvents"] if e["cat"] != "gpu_user_annotation"]
    s = summarize(t)
    assert s["track"] == "cpu"
    assert s["cycles"] == 3
    assert [c["wall_ms"] for c in s["per_cycle"]] == pytest.approx([3.0, 4.0])


def test_gpu_only_trace_has_no_cpu_figures() -> None:
    t = hand_trace()
    t["traceEvents"] = [e for e in t["traceEvents"] if e["cat"] != "user_annotation"]
    s = summarize(t)
    assert s["cpu_recorded"] is False
    assert s["phases"]["target_verify"]["cpu_ms"] is None
    assert s["gpu_idle_ms_per_cycle"]["median"] == pytest.approx(1.425)


def test_prefill_cycles_are_left_out_of_the_figures() -> None:
    t = hand_trace()
    t["traceEvents"].append(_x("gpu_user_annotation", "step[EXTEND bs=1 toks=128]", 5000, 5500))
    s = summarize(copy.deepcopy(t))
    assert s["cycles_with_prefill"] == 1
    assert s["cycles_timed"] == 1
    assert s["cycle_ms"]["median"] == pytest.approx(3.0)


def test_distortion_ratio_and_warning() -> None:
    d = distortion(3.5, tpot_ms=1.0, accept_length=2.5)
    assert d["unprofiled_cycle_ms"] == pytest.approx(2.5)
    assert d["ratio"] == pytest.approx(1.4)
    assert "x1.40" in d["warning"]
    assert distortion(2.6, tpot_ms=1.0, accept_length=2.5)["warning"] is None
    assert distortion(2.6, tpot_ms=None, accept_length=2.5)["ratio"] is None
    # Far shorter than unprofiled: the cycles were cut wrong (the bs 8 H200 trace once gave x0.20).
    low = distortion(2.28, tpot_ms=4.52, accept_length=2.53)
    assert low["ratio"] == pytest.approx(0.1994, abs=1e-4) and "cut into too many cycles" in low["warning"]
    assert distortion(10.4, tpot_ms=4.52, accept_length=2.53)["warning"] is None  # x0.91


def test_timeline_spans_cover_the_cycles_shown() -> None:
    rows = spans_for_cycles(hand_trace(), first=0, count=1)
    assert {r["row"] for r in rows} == {"GPU steps", "CPU steps", "GPU kernels"}
    assert max(r["end_ms"] for r in rows) == pytest.approx(3.0)
    assert min(r["start_ms"] for r in rows) == pytest.approx(0.0)


def test_load_trace_reads_gzip_and_rejects_garbage(tmp_path: Path) -> None:
    p = tmp_path / "x.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(hand_trace()).encode()))
    assert summarize(load_trace(p))["cycles"] == 3
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceError, match="not a"):
        load_trace(bad)
    (tmp_path / "nolist.json").write_text('{"a": 1}')
    with pytest.raises(TraceError, match="traceEvents"):
        load_trace(tmp_path / "nolist.json")


def test_cli_summarize_json_and_table(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from runners.cli import app

    p = tmp_path / "t.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(hand_trace()).encode()))
    r = CliRunner().invoke(app, ["profile", "summarize", str(p), "--format", "json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    assert {"cycles", "cycle_ms", "gpu_busy_fraction", "gpu_idle_ms_per_cycle", "phases"} <= s.keys()
    assert s["gpu_idle_ms_per_cycle"]["median"] == pytest.approx(1.425)
    r = CliRunner().invoke(
        app,
        ["profile", "summarize", str(p), "--tpot-ms", "1", "--accept-length", "2.5"],
        env={"COLUMNS": "200"},
    )
    assert r.exit_code == 0 and "x1.40" in r.output and "warning" in r.output
    (tmp_path / "bad.json").write_text("[]]")
    r = CliRunner().invoke(app, ["profile", "summarize", str(tmp_path / "bad.json")])
    assert r.exit_code == 2 and "not a" in r.output


def test_kernels_in_the_timeline_carry_their_phase() -> None:
    rows = spans_for_cycles(hand_trace(), first=0, count=1)
    kernels = [(r["start_ms"], r["phase"]) for r in rows if r["kind"] == "kernel"]
    # 0-600 and 650-1000 under the verify, 1100-1500 under the extend, the rest draft
    assert kernels == [
        (0.0, "target_verify"),
        (0.65, "target_verify"),
        (1.1, "draft_extend"),
        (2.0, "draft"),
        (2.7, "draft"),
    ]


def test_overlap_figures_and_verdict() -> None:
    from bench.profile.overlap import overlap_figures, verdict

    v1 = summarize(hand_trace())  # idle 1.425, cycle 3.5
    t = hand_trace()
    t["traceEvents"].append(_kernel(1500, 2000))  # fills cycle 0's largest gap: idle 0.75 -> 0.25
    v2 = summarize(t)
    f = overlap_figures(v1, v2)
    assert f["gpu_idle_ms_v2"] == pytest.approx((0.25 + 2.1) / 2)
    assert f["cpu_hidden_ms"] == pytest.approx(0.25)
    assert f["overlap_share"] == pytest.approx(0.25 / 1.425)  # of v1's idle time, what v2 removes
    assert verdict(v1, v2) == (
        "v2 hides 0.25 ms of CPU per cycle; GPU idle per cycle 1.43 → 1.18 ms; cycle 3.50 → 3.50 ms (+0.0%); "
        "v2 hides 18% of what overlap could hide"
    )
    assert verdict(v2, v1).startswith("v2 hides no CPU work (GPU idle per cycle 0.25 ms longer")
    assert "cannot tell" in verdict({"gpu_idle_ms_per_cycle": None}, v2)


def test_gpu_only_trace_cut_at_the_largest_graph_replays() -> None:
    def k(a: float, b: float, corr: int) -> dict[str, Any]:
        return _x("kernel", "k", a, b, stream=7, correlation=corr)

    ev = [
        # verify = the 3-kernel graph (corr 1, 4, 7); the 2-kernel draft graph and eager extend are not.
        *(k(a, a + 100, 1) for a in (0, 100, 200)),
        k(350, 400, 2),
        *(k(a, a + 100, 3) for a in (600, 700)),
        *(k(a, a + 100, 4) for a in (1000, 1100, 1200)),
        k(1300, 1400, 5),
        *(k(a, a + 100, 6) for a in (1800, 1900)),
        *(k(a, a + 100, 7) for a in (2000, 2100, 2200)),
        _x("kernel", "no correlation", 2500, 2600),
    ]
    s = summarize({"traceEvents": ev})
    assert (s["track"], s["cycles"], s["cycles_timed"]) == ("graph", 3, 2)
    # cycle 0 [0, 1000): busy 300 + 50 + 200; cycle 1 [1000, 2000): busy 300 + 100 + 200
    assert [c["gpu_idle_ms"] for c in s["per_cycle"]] == pytest.approx([0.45, 0.4])
    assert s["phases"]["target_verify"]["gpu_ms"]["median"] == pytest.approx(0.3)
    assert s["phases"]["draft"]["gpu_ms"]["median"] == pytest.approx((0.25 + 0.3) / 2)
    rows = spans_for_cycles({"traceEvents": ev}, first=0, count=1)
    assert [r["end_ms"] for r in rows if r["row"] == "GPU steps"] == pytest.approx([0.3])


def test_gpu_only_trace_verify_is_the_graph_before_the_tree_verification() -> None:
    def g(a: float, n: int, corr: int, name: str) -> list[dict[str, Any]]:
        return [
            _x("kernel", f"{name}{j}", a + 100 * j, a + 100 * j + 100, stream=7, correlation=corr)
            for j in range(n)
        ]

    check = "void VerifyTreeGreedy<int, long>(int*, int*, long*)"
    ev = []
    for i, t in enumerate((0, 2000, 4000)):
        # draft graph of 4 kernels (the larger one), verify graph of 3, then the eager tree verification
        ev += g(t, 4, 10 * i + 1, "draft") + g(t + 600, 3, 10 * i + 2, "verify")
        ev.append(_x("kernel", check, t + 950, t + 1000, stream=7, correlation=10 * i + 3))
    s = summarize({"traceEvents": ev})
    assert (s["track"], s["cycles"], s["cycles_timed"]) == ("graph", 3, 2)
    assert [c["start_ms"] for c in s["per_cycle"]] == pytest.approx([0.6, 2.6])
    assert s["phases"]["target_verify"]["gpu_ms"]["median"] == pytest.approx(0.3)
    # Without a tree verification kernel the largest graph (here the draft) cuts: still one cut per step.
    s = summarize({"traceEvents": [e for e in ev if e["name"] != check]})
    assert (s["cycles"], [c["start_ms"] for c in s["per_cycle"]]) == (3, pytest.approx([0.0, 2.0]))


def test_real_h200_gpu_only_trace_at_batch_8_has_one_cycle_per_step() -> None:
    """Regression: on the H200 trace of v1 at batch 8 (tests/fixtures/traces.py) the draft graph (112 kernels)
    and the verify graph (106) are within 10 % of each other, and a "largest graphs" rule cut every cycle in
    two (22 cycles for 12 steps). The verify graph is the one before VerifyTreeGreedy."""
    from tests.fixtures.traces import H200_V1_BS8

    s = summarize(load_trace(H200_V1_BS8))
    assert (s["track"], s["cycles"], s["cycles_timed"], s["kernels"]) == ("graph", 5, 4, 1616)
    # verify-graph replays start at 4.466, 15.009, 25.427, 35.736 and 49.506 ms after the first kernel
    assert [c["start_ms"] for c in s["per_cycle"]] == pytest.approx(
        [4.466, 15.009, 25.427, 35.736], abs=0.002
    )
    assert [c["wall_ms"] for c in s["per_cycle"]] == pytest.approx(
        [10.543, 10.418, 10.309, 13.770], abs=0.002
    )
    assert s["cycle_ms"]["median"] == pytest.approx(10.48, abs=0.01)
    assert s["gpu_idle_ms_per_cycle"]["median"] == pytest.approx(5.19, abs=0.01)
    assert s["phases"]["target_verify"]["gpu_ms"]["median"] == pytest.approx(2.17, abs=0.01)
    # The fallback (no tree verification kernel named) keeps to one graph: 5 cuts, not 10.
    trace = load_trace(H200_V1_BS8)
    for e in trace["traceEvents"]:
        e["name"] = str(e.get("name", "")).replace("VerifyTreeGreedy", "Kernel")
    assert summarize(trace)["cycles"] == 5


def test_trimming_a_real_trace_keeps_whole_cycles() -> None:
    from tests.fixtures.traces import H200_V1_BS8, trim_trace

    trimmed = trim_trace(load_trace(H200_V1_BS8), until_ms=30.0)
    kinds = {e["ph"] for e in trimmed["traceEvents"]}
    assert kinds == {"M", "X"} and "deviceProperties" in trimmed
    s = summarize(trimmed)
    assert (s["cycles"], s["cycles_timed"]) == (3, 2)
