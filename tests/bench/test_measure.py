"""The per-point procedure against the real stand-in: repeats, verdicts, and faults that end a point cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from bench.client import LoadClient
from bench.host.telemetry import WindowTelemetry
from bench.measure import (
    SERVER_STALL_KEY,
    Window,
    WindowSettings,
    judge,
    measure_point,
    measure_windows,
    server_stall_ms,
)
from bench.metrics import compute_metrics
from bench.results import RequestRecord, SampleResult
from bench.sweep import WorkloadSpec
from bench.workload import build_prompts
from tests.fixtures.sim import SimFactory, SimHandle

SPEC = (
    "--attention-backend",
    "flashmla",
    "--speculative-algorithm",
    "EAGLE",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
)
BATCH = 4
N = 16  # four waves of BATCH
WARMUP = BATCH  # one warmup wave; the stand-in's fault counters include these requests


def measure(
    url: str, repeats: range | list[int] = range(2), expect_spec: bool = True, timeout_s: float = 10.0
):
    prompts = build_prompts(WorkloadSpec.model_validate({"input_len": 64, "output_len": 48}), N)
    settings = WindowSettings(
        batch_size=BATCH, warmup_waves=1, request_timeout_s=timeout_s, expect_spec=expect_spec
    )

    async def collect() -> list[SampleResult]:
        async with LoadClient(url) as client:
            return [s async for s in measure_point(client, prompts, repeats, settings)]

    t = time.monotonic()
    samples = asyncio.run(collect())
    assert time.monotonic() - t < 15, "a point must never hang"
    return samples


@pytest.fixture(scope="module")
def servers(sim_server_module: SimFactory) -> dict[str, SimHandle]:
    def env(fault: str | None = None) -> dict[str, str]:
        e = {"SPECBENCH_SIM_TIME_SCALE": "0.05"}
        if fault:
            e["SPECBENCH_SIM_FAULT"] = fault
        return e

    handles = {
        "spec": sim_server_module.start(*SPEC, env=env(), wait=False),
        "baseline": sim_server_module.start("--attention-backend", "flashmla", env=env(), wait=False),
        "crash_window": sim_server_module.start(*SPEC, env=env(f"crash_after={WARMUP + 5}"), wait=False),
        "crash_warmup": sim_server_module.start(*SPEC, env=env("crash_after=1"), wait=False),
        "stall": sim_server_module.start(*SPEC, env=env(f"stall_after={WARMUP + 2}"), wait=False),
        "malformed": sim_server_module.start(*SPEC, env=env(f"malformed_after={WARMUP + 3}"), wait=False),
        "hiccup": sim_server_module.start(*SPEC, env=env(f"hiccup_after={WARMUP + 5}"), wait=False),
        "held": sim_server_module.start(*SPEC, env=env(), wait=False),
    }
    return {name: h.wait_ready() for name, h in handles.items()}


def test_every_repeat_is_measured_and_clean(servers: dict[str, SimHandle]) -> None:
    samples = measure(servers["spec"].base_url, repeats=[3, 4, 5])
    assert [s.repeat for s in samples] == [3, 4, 5]
    for s in samples:
        assert s.status == "ok", s.reason
        assert s.reason is None
        m = s.metrics
        assert m is not None
        assert (m.completed, m.failed, m.incomplete, m.wrong_length) == (N, 0, 0, 0)
        assert len(s.requests) == N
        # The warmup sent these very prompts; the flush before each window is what keeps the cache cold.
        assert all(r.cached_tokens == 0 for r in s.requests)
        assert m.server_accept_length is not None  # > 40 decode iterations since the flush
        assert m.accept_length_weighted is not None and 2.0 < m.accept_length_weighted < 3.1
        assert s.overhead_s > 0


def test_spec_stats_must_match_the_expected_mode(servers: dict[str, SimHandle]) -> None:
    [s] = measure(servers["baseline"].base_url, repeats=range(1), expect_spec=True)
    assert s.status == "mode_mismatch"
    assert s.reason is not None and "no request reported spec_verify_ct" in s.reason
    [s] = measure(servers["spec"].base_url, repeats=range(1), expect_spec=False)
    assert s.status == "mode_mismatch"
    [s] = measure(servers["baseline"].base_url, repeats=range(1), expect_spec=False)
    assert s.status == "ok", s.reason
    assert s.metrics is not None and s.metrics.accept_length is None


def test_crash_in_the_window_fails_the_point_and_stops(servers: dict[str, SimHandle]) -> None:
    samples = measure(servers["crash_window"].base_url, repeats=range(3))
    assert len(samples) == 1, "no further repeats once the server is gone"
    [s] = samples
    assert s.status == "failed"
    assert s.reason is not None and s.reason.startswith("server died: ")
    assert "connection lost" in s.reason
    assert s.metrics is not None and s.metrics.failed >= 1


def test_crash_during_warmup(servers: dict[str, SimHandle]) -> None:
    [s] = measure(servers["crash_warmup"].base_url, repeats=range(3))
    assert s.status == "failed"
    assert s.reason is not None and s.reason.startswith("warmup: server died: ")
    assert s.metrics is None and s.requests == []


def test_stall_invalidates_one_repeat_only(servers: dict[str, SimHandle]) -> None:
    first, second = measure(servers["stall"].base_url, repeats=range(2), timeout_s=0.5)
    assert first.status == "invalid"
    assert first.reason is not None and f"1 of {N} requests failed: stalled" in first.reason
    assert second.status == "ok", second.reason


def test_malformed_event_invalidates_the_repeat(servers: dict[str, SimHandle]) -> None:
    first, second = measure(servers["malformed"].base_url, repeats=range(2))
    assert first.status == "invalid"
    assert first.reason == f"1 of {N} requests failed: malformed JSON event"
    assert first.metrics is not None and first.metrics.completed == N - 1
    assert second.status == "ok", second.reason


def test_a_genuinely_unstable_stand_in_is_still_unstable(servers: dict[str, SimHandle]) -> None:
    """The stand-in's queue hangs (`hiccup_after`) mid-window: a few requests wait seconds for their first token.
    That is the server's doing, which its own stall probe does not see (the hold awaits on its loop), so the
    host's stalls cannot excuse it on any host."""
    first, second = measure(servers["hiccup"].base_url, repeats=range(2))
    assert first.status == "unstable", first.reason
    assert first.reason is not None and first.reason.startswith("p99 TTFT ")
    assert "held the client up to" in first.reason and "and the server up to" in first.reason  # both read
    assert first.metrics is not None and first.metrics.completed == N  # slow, not failed
    assert second.status == "ok", second.reason


HOLD_S = 1.0  # long beside a loaded host's median TTFT (tens of ms in CI), so the tail is over 10x it


class _HostHoldsTheServer(WindowTelemetry):
    """Window telemetry whose start, just before the window's first request, stops the stand-in's process for
    HOLD_S: what a loaded host does to it (SIGSTOP), while the client runs on."""

    def __init__(self, pid: int) -> None:
        super().__init__(source="none", read=None)
        self.pid = pid
        self.resume = threading.Timer(HOLD_S, os.kill, (pid, signal.SIGCONT))

    def start(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)
        self.resume.start()
        super().start()

    def stop(self) -> None:
        self.resume.join()
        super().stop()


def test_a_stall_the_host_deals_the_stand_in_is_not_instability(servers: dict[str, SimHandle]) -> None:
    """The first wave's requests wait HOLD_S for a server the host keeps off the CPU: p99 TTFT is far above 10x
    the median, the client's own loop was never held up, and only the stand-in's own stall probe (reported in
    /server_info) can tell that the tail is the host's."""
    held = servers["held"]
    prompts = build_prompts(WorkloadSpec.model_validate({"input_len": 64, "output_len": 48}), N)
    settings = WindowSettings(
        batch_size=BATCH,
        warmup_waves=1,
        request_timeout_s=10.0,
        expect_spec=True,
        telemetry=lambda: _HostHoldsTheServer(held.proc.pid),
    )

    async def one() -> tuple[SampleResult, Window]:
        async with LoadClient(held.base_url) as client:
            [measured] = [x async for x in measure_windows(client, prompts, range(1), settings)]
            return measured

    sample, window = asyncio.run(one())
    m = sample.metrics
    assert m is not None and m.ttft_p99_ms is not None and m.ttft_p50_ms is not None
    assert m.ttft_p99_ms > 10 * m.ttft_p50_ms  # the hold landed on first tokens: a tail to judge
    assert window.telemetry is not None and window.telemetry[SERVER_STALL_KEY] >= HOLD_S * 1000 * 0.8
    assert sample.status == "ok", sample.reason


def test_server_stall_is_read_from_the_stand_ins_block_only() -> None:
    assert server_stall_ms({"specbench_sim": {"loop_stall_max_ms": 12.5}}) == 12.5
    assert server_stall_ms({"specbench_sim": {"loop_stall_max_ms": 0}}) == 0.0
    for odd in ({}, {"specbench_sim": None}, {"specbench_sim": {"loop_stall_max_ms": "12"}}):
        assert server_stall_ms(odd) is None  # SGLang, or an answer that says nothing usable
    for bad in (-1.0, float("nan"), True):
        assert server_stall_ms({"specbench_sim": {"loop_stall_max_ms": bad}}) is None


def _done(i: int, tokens: int, want: int = 256, ttft: float = 0.1) -> RequestRecord:
    return RequestRecord(
        index=i,
        prompt_len=8,
        max_new_tokens=want,
        start=0.0,
        ttft=ttft,
        e2e=ttft + 1.0,
        completion_tokens=tokens,
        spec_verify_ct=100,
        chunk_times=[ttft, ttft + 1.0],
        chunk_tokens=[1, tokens],
    )


def test_judge_wrong_lengths() -> None:
    recs = [_done(0, 256), _done(1, 255), _done(2, 255), _done(3, 250)]
    status, reason = judge(compute_metrics(recs, 2.0), recs, expect_spec=True)
    assert status == "invalid"
    assert (
        reason == "2 requests returned 255 tokens, expected 256, 1 request returned 250 tokens, expected 256"
    )


def test_judge_unstable_ttft() -> None:
    # Two stragglers in 100: p99 (rank 98.01 of 0..99) lands on them; one alone would be interpolated away.
    recs = [_done(i, 256, ttft=0.01) for i in range(98)] + [_done(i, 256, ttft=5.0) for i in (98, 99)]
    status, reason = judge(compute_metrics(recs, 2.0), recs, expect_spec=True)
    assert status == "unstable"
    assert (
        reason is not None and reason.startswith("p99 TTFT ") and reason.endswith("> 10x median TTFT 10.0 ms")
    )


def test_a_ttft_tail_the_host_explains_is_not_instability() -> None:
    """A stand-in's TTFT is well under a millisecond: one 50 ms stall of a loaded host makes p99 10x the median.
    When the client's own loop was held up about as long in that window, the tail is the host's."""
    recs = [_done(i, 256, ttft=0.001) for i in range(98)] + [_done(i, 256, ttft=0.051) for i in (98, 99)]
    m = compute_metrics(recs, 2.0)
    assert judge(m, recs, expect_spec=True, host_stall_ms=40.0) == ("ok", None)
    # The same tail on a host that never stalled the client by more than 2 ms: the server's doing.
    status, reason = judge(m, recs, expect_spec=True, host_stall_ms=2.0)
    assert status == "unstable" and reason is not None and "held the client up to 2.0 ms" in reason
    # A GPU server's queue hiccup (seconds against tens of ms) stays unstable on a busy host too.
    gpu = [_done(i, 256, ttft=0.056) for i in range(98)] + [_done(i, 256, ttft=9.8) for i in (98, 99)]
    assert judge(compute_metrics(gpu, 20.0), gpu, expect_spec=True, host_stall_ms=300.0)[0] == "unstable"


def test_the_stand_ins_own_stalls_explain_a_tail_the_clients_do_not() -> None:
    """The host can hold the server off its CPU while the client runs on: the stand-in reports its own stalls,
    and a request held up in both processes can take the two together."""
    recs = [_done(i, 256, ttft=0.001) for i in range(98)] + [_done(i, 256, ttft=0.051) for i in (98, 99)]
    m = compute_metrics(recs, 2.0)
    assert judge(m, recs, expect_spec=True, host_stall_ms=2.0, server_stall_ms=40.0) == ("ok", None)
    assert judge(m, recs, expect_spec=True, host_stall_ms=None, server_stall_ms=40.0) == ("ok", None)
    assert judge(m, recs, expect_spec=True, host_stall_ms=9.0, server_stall_ms=8.0) == ("ok", None)  # 3 x 17
    status, reason = judge(m, recs, expect_spec=True, host_stall_ms=2.0, server_stall_ms=3.0)
    assert status == "unstable"
    assert reason is not None and reason.endswith("held the client up to 2.0 ms and the server up to 3.0 ms")
    status, reason = judge(m, recs, expect_spec=True, host_stall_ms=None, server_stall_ms=3.0)
    assert reason is not None and reason.endswith("this host held the server up to 3.0 ms")
    # A stalled stand-in cannot excuse a tail of seconds.
    gpu = [_done(i, 256, ttft=0.056) for i in range(98)] + [_done(i, 256, ttft=9.8) for i in (98, 99)]
    slow = compute_metrics(gpu, 20.0)
    assert judge(slow, gpu, expect_spec=True, host_stall_ms=300.0, server_stall_ms=300.0)[0] == "unstable"


def test_loop_lag_sees_a_stall_of_the_clients_loop() -> None:
    import asyncio

    from bench.host.loop_lag import LoopLag

    async def window() -> LoopLag:
        lag = LoopLag(period_s=0.002)
        lag.start()
        await asyncio.sleep(0.02)
        time.sleep(0.12)  # what a host holding the process off its CPU looks like from inside the loop
        await asyncio.sleep(0.02)
        await lag.stop()
        return lag

    lag = asyncio.run(window())
    assert lag.max_ms is not None and lag.max_ms >= 100.0
    summary = lag.summary()
    assert summary["client_loop_ticks"] and summary["client_loop_lag_max_ms"] == lag.max_ms


def test_judge_puts_the_worst_problem_first() -> None:
    recs = [_done(0, 255), RequestRecord(index=1, prompt_len=8, max_new_tokens=256, error="HTTP 500: boom")]
    status, reason = judge(compute_metrics(recs, 2.0), recs, expect_spec=False)
    assert status == "mode_mismatch"
    assert reason is not None
    parts = reason.split("; ")
    assert parts[0].startswith("baseline server")
    assert "1 of 2 requests failed: HTTP 500" in parts
    assert "1 request returned 255 tokens, expected 256" in parts


def test_judge_keeps_other_reasons_beside_a_launch_mismatch() -> None:
    """A server that resolved to another mode is one more problem: the repeat's own reasons stay."""
    recs = [_done(0, 256), RequestRecord(index=1, prompt_len=8, max_new_tokens=256, error="HTTP 500: boom")]
    status, reason = judge(
        compute_metrics(recs, 2.0),
        recs,
        expect_spec=True,
        launch_mismatches=["spec mode v2 requested, v1 ran"],
    )
    assert status == "mode_mismatch"
    assert reason is not None
    parts = reason.split("; ")
    assert parts[0] == "server ran something else: spec mode v2 requested, v1 ran"
    assert "1 of 2 requests failed: HTTP 500" in parts
    died = judge(
        compute_metrics(recs, 2.0), recs, expect_spec=True, server_died=True, launch_mismatches=["x"]
    )
    assert died[0] == "failed" and died[1] is not None and "server ran something else: x" in died[1]


def test_judge_all_failed() -> None:
    recs = [
        RequestRecord(index=i, prompt_len=8, max_new_tokens=4, error="stalled: no event for 1 s")
        for i in range(3)
    ]
    assert judge(compute_metrics(recs, 1.0), recs, expect_spec=True) == (
        "failed",
        "all 3 requests failed: stalled",
    )


def test_no_gc_pause_inside_the_window() -> None:
    """A gen-2 collection in the middle of a window delays every request in flight (tens to hundreds of ms
    in a big runner process), which reads as a server stall; the collector must be off inside the window
    and back on afterwards."""
    import gc

    from bench.measure import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()
