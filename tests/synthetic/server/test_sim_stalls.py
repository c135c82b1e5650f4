"""The stand-in's view of this host's stalls (`specbench_sim.loop_stall_max_ms`), and a genuine instability on
purpose (`hiccup_after`) that the view must not excuse."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import time

import pytest

from bench.sweep import SweepError, parse_sweep
from bench.sweep.sections import SIM_COUNTED_FAULTS, SIM_WRONG_FAULTS
from synthetic.server.config import COUNTED_FAULTS, HICCUP_S, WRONG_FAULTS, Faults
from synthetic.server.stalls import LoopStalls
from tests.fixtures.sim import SimFactory, SimHandle, get_json, request

SPEC = (
    "--attention-backend",
    "flashmla",
    "--speculative-algorithm",
    "EAGLE",
    "--speculative-num-steps",
    "2",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "3",
)
HOLD_S = 0.5


def _stalls(sim: SimHandle) -> tuple[float, int]:
    block = get_json(sim, "/server_info")["specbench_sim"]
    return block["loop_stall_max_ms"], block["loop_stall_ticks"]


def _flush(sim: SimHandle) -> None:
    assert request(sim, "POST", "/flush_cache")[0] == 200


def test_the_stand_in_reports_how_long_the_host_held_it_since_the_last_flush(sim_server: SimFactory) -> None:
    sim = sim_server.start(*SPEC)
    _flush(sim)  # a window starts
    # A request runs through the hold, so the probe is ticking then however late this test gets there.
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=30)
    body = {"input_ids": [4, 5, 6], "sampling_params": {"max_new_tokens": 100_000, "ignore_eos": True}}
    conn.request("POST", "/generate", body=json.dumps({**body, "stream": True}).encode())
    stream = conn.getresponse()
    assert stream.status == 200 and stream.readline().startswith(b"data: ")  # running now
    os.kill(sim.proc.pid, signal.SIGSTOP)  # what a loaded host does to the process, for HOLD_S
    try:
        time.sleep(HOLD_S)
    finally:
        os.kill(sim.proc.pid, signal.SIGCONT)
    held_ms, ticks = _stalls(sim)
    conn.close()  # the request is aborted
    assert held_ms >= HOLD_S * 1000 * 0.8 and ticks > 0
    assert request(sim, "POST", "/flush_cache?timeout=30")[0] == 200  # the next window starts from nothing
    assert _stalls(sim)[0] < held_ms


def test_a_hiccup_holds_the_queue_without_stalling_the_loop(sim_server: SimFactory) -> None:
    sim = sim_server.start(
        *SPEC, env={"SPECBENCH_SIM_TIME_SCALE": "0.05", "SPECBENCH_SIM_FAULT": "hiccup_after=0"}
    )
    _flush(sim)
    body = {"input_ids": [4, 5, 6], "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}
    t0 = time.monotonic()
    status, raw, _ = request(sim, "POST", "/generate", body, timeout=30)
    assert status == 200 and json.loads(raw)["meta_info"]["completion_tokens"] == 8
    assert time.monotonic() - t0 >= HICCUP_S  # request 1 waited out the hold for its first token
    # The hold is the server's (awaited on its loop), so its probe never saw it: the host's stalls cannot
    # excuse the tail it makes (bench.measure.judge).
    assert _stalls(sim)[0] < HICCUP_S * 1000 / 3
    t0 = time.monotonic()
    assert request(sim, "POST", "/generate", body, timeout=30)[0] == 200
    assert time.monotonic() - t0 < HICCUP_S  # one hold only


def test_the_probe_ticks_only_while_there_is_work_or_lately_was() -> None:
    async def scenario() -> None:
        busy = False
        probe = LoopStalls(busy=lambda: busy, period_s=0.002, linger_s=0.5)
        task = asyncio.create_task(probe.run())
        await asyncio.sleep(0.05)
        assert probe.ticks == 0  # never poked, never busy: asleep
        probe.poke()
        await asyncio.sleep(0.01)
        time.sleep(0.1)  # the loop held up, as a host holding the process off its CPU makes it
        await asyncio.sleep(0.01)
        assert probe.max_ms >= 90 and probe.ticks > 0
        await asyncio.sleep(0.8)  # past the linger: asleep again
        idle = probe.ticks
        await asyncio.sleep(0.05)
        assert probe.ticks == idle
        busy = True
        probe.reset()  # a flush: the figures start again, and so does the ticking
        assert probe.view() == {"loop_stall_max_ms": 0.0, "loop_stall_ticks": 0}
        await asyncio.sleep(0.8)  # beyond the linger, but busy: still ticking
        ticks = probe.ticks
        await asyncio.sleep(0.05)
        assert probe.ticks > ticks
        task.cancel()

    asyncio.run(scenario())


def test_the_fault_words_are_one_list_in_the_sweep_and_in_the_stand_in() -> None:
    assert SIM_COUNTED_FAULTS == COUNTED_FAULTS and SIM_WRONG_FAULTS == WRONG_FAULTS
    faults = Faults.parse("hiccup_after=2")
    assert faults.for_request(3) == {"hiccup"} and faults.for_request(2) == frozenset()
    sweep = """
name: hiccup
model: sim-tiny
server: {backend: sim, sim: {fault: "%s"}}
grid: {batch_sizes: [1], spec_modes: [v1], steps: [2]}
"""
    assert parse_sweep(sweep % "hiccup_after=3").server.sim.fault == "hiccup_after=3"
    with pytest.raises(SweepError, match="hiccup_after=N"):
        parse_sweep(sweep % "hiccup_after=x")
