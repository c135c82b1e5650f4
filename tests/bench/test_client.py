"""The load client against the real stand-in over loopback: complete records, exact closed-loop concurrency,
acceptance against the analytic truth, and every failure mode ending in a record instead of a hang."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import numpy as np
import pytest

from bench.client import FlushError, LoadClient, ServerUnavailableError, _read_stream
from bench.host.processes import free_port
from bench.metrics import _itl, compute_metrics
from bench.results import RequestRecord
from bench.sweep import WorkloadSpec
from bench.workload import Prompt, build_prompts
from tests.fixtures.sim import SimFactory, SimHandle, request

T = TypeVar("T")
MTP = ("--attention-backend", "flashmla", "--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "1")
ACCEPTANCE_CASES = [(0.5, 2), (0.7, 3), (0.9, 5)]


def spec_flags(steps: int) -> tuple[str, ...]:
    return (*MTP, "--speculative-num-steps", str(steps), "--speculative-num-draft-tokens", str(steps + 1))


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def prompts(n: int, input_len: int = 16, output_len: int = 32, seed: int = 1) -> list[Prompt]:
    return build_prompts(
        WorkloadSpec.model_validate({"input_len": input_len, "output_len": output_len, "seed": seed}), n
    )


async def closed_loop(
    url: str, ps: list[Prompt], concurrency: int, timeout_s: float = 10.0, flush: bool = True
) -> tuple[list[RequestRecord], float]:
    async with LoadClient(url) as client:
        if flush:
            await client.flush_cache()
        return await client.run_closed_loop(ps, concurrency, timeout_s)


@pytest.fixture(scope="module")
def servers(sim_server_module: SimFactory) -> dict[str, SimHandle]:
    """Every server this module needs, started in parallel."""
    fast = {"SPECBENCH_SIM_TIME_SCALE": "0.05"}
    handles = {
        "spec": sim_server_module.start(*spec_flags(3), env=fast, wait=False),
        "skip_tok": sim_server_module.start(*spec_flags(3), "--skip-tokenizer-init", env=fast, wait=False),
        "slow": sim_server_module.start(*spec_flags(3), env={"SPECBENCH_SIM_TIME_SCALE": "1"}, wait=False),
    }
    for p, steps in ACCEPTANCE_CASES:
        env = {
            "SPECBENCH_SIM_INSTANT": "1",
            "SPECBENCH_SIM_ACCEPTANCE_RATE": str(p),
            "SPECBENCH_SIM_SEED": "3",
        }
        handles[f"acc-{p}-{steps}"] = sim_server_module.start(*spec_flags(steps), env=env, wait=False)
    return {name: h.wait_ready() for name, h in handles.items()}


def test_stream_records_are_complete(servers: dict[str, SimHandle]) -> None:
    ps = prompts(12, input_len=24, output_len=40)
    records, duration = run(closed_loop(servers["spec"].base_url, ps, 4))
    assert duration > 0
    assert [r.index for r in records] == list(range(12))
    for r in records:
        assert r.ok, r.error
        assert r.start >= 0
        assert r.completion_tokens == r.max_new_tokens == 40
        assert r.prompt_len == r.prompt_tokens == 24
        assert r.cached_tokens == 0  # flushed, and the prompts share no prefix
        assert r.finish_reason == "length"
        assert r.spec_verify_ct and r.spec_verify_ct > 0
        assert r.spec_accept_length == pytest.approx(40 / r.spec_verify_ct, rel=1e-3)
        assert r.chunk_tokens[0] == 1  # the prefill event carries exactly one token
        assert r.chunk_tokens[-1] == 40
        assert all(b > a for a, b in zip(r.chunk_tokens, r.chunk_tokens[1:], strict=False))
        assert all(b >= a for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False))
        assert r.ttft == r.chunk_times[0]
        assert r.e2e is not None and r.e2e >= r.chunk_times[-1]


def test_ttft_counts_tokens_not_text_under_skip_tokenizer_init(servers: dict[str, SimHandle]) -> None:
    # No `text` in any event: bench_serving would report TTFT 0 and no ITL here (contract §5.1).
    records, duration = run(closed_loop(servers["skip_tok"].base_url, prompts(6), 3))
    m = compute_metrics(records, duration)
    assert m.completed == 6
    assert m.ttft_p50_ms is not None and m.ttft_p50_ms > 0
    # Every token after the first has its inter-token latency, counted from the events' token counts. Not
    # `> 0`: at these 0.5 ms steps a loaded host that holds the client off its CPU gets several events in one
    # read, which share a time (ITL 0), as bench_serving would see them too.
    assert m.itl_mean_ms is not None and m.itl_mean_ms >= 0
    assert all(
        r.chunk_tokens[0] == 1 and r.chunk_tokens[-1] == 32 and len(r.chunk_tokens) > 1 for r in records
    )
    assert sum(len(_itl(r)) for r in records) == 6 * 31
    assert m.total_output_tokens == 6 * 32


def test_closed_loop_keeps_exactly_concurrency_requests_in_flight(servers: dict[str, SimHandle]) -> None:
    records, _ = run(closed_loop(servers["spec"].base_url, prompts(20, output_len=24), 5))
    edges = sorted([(r.start, 1) for r in records] + [(r.start + (r.e2e or 0), -1) for r in records])
    in_flight = np.cumsum([d for _, d in edges])
    assert in_flight.max() == 5
    # Refills happen the moment a slot frees: the window is about 20/5 = 4 request-lifetimes long.
    assert compute_metrics(
        records, max(r.start + (r.e2e or 0) for r in records)
    ).concurrency == pytest.approx(5, rel=0.2)


def test_flush_is_what_keeps_prefixes_out_of_the_cache(servers: dict[str, SimHandle]) -> None:
    # 128-token prompts span two FlashMLA pages, so a repeat without a flush hits the cache.
    ps = prompts(4, input_len=128, output_len=8, seed=9)
    url = servers["spec"].base_url
    run(closed_loop(url, ps, 4))
    again, _ = run(closed_loop(url, ps, 4, flush=False))
    assert all((r.cached_tokens or 0) > 0 for r in again)
    flushed, _ = run(closed_loop(url, ps, 4, flush=True))
    assert all(r.cached_tokens == 0 for r in flushed)


def verify_steps_distribution(p: float, steps: int, tokens: int) -> np.ndarray:
    """P(V = v): verify steps needed to commit `tokens` tokens when each step commits 1 + (accepted drafts),
    drafts accepted in order with probability p, at most `steps`, and the last step's overshoot dropped."""
    per_step = [p**k * (1 - p) for k in range(steps)] + [p**steps]  # P(step commits k+1 tokens)
    dist = np.zeros((tokens + 1, tokens + 1))  # dist[r, v] = P(v steps | r tokens still to commit)
    dist[0, 0] = 1.0
    for r in range(1, tokens + 1):
        for k, q in enumerate(per_step):
            dist[r, 1:] += q * dist[max(r - (k + 1), 0), :-1]
    return dist[tokens]


@pytest.mark.parametrize(("p", "steps"), ACCEPTANCE_CASES)
def test_acceptance_matches_the_analytic_truth(servers: dict[str, SimHandle], p: float, steps: int) -> None:
    """Derivation. One verify step commits a = 1 + j tokens, j accepted drafts with P(j >= k) = p^k (k <=
    steps), so the per-step truth is mu = E[a] = (1 - p^(steps+1)) / (1 - p). SGLang's per-request figure
    N/V is not mu: with ignore_eos, N = out exactly, of which 1 comes from prefill and out - 1 from V verify
    steps whose last one is truncated at max_new_tokens (contract §3.4). So, over requests,
      token-weighted  sum N / sum V  ->  out / E[V],
      request mean    mean(N / V)    ->  E[out / V],
    with the law of V computed exactly by `verify_steps_distribution`. The prefill token (+1/V) and the
    truncated overshoot (about -E[a^2]/(2 mu V)) nearly cancel, so both stay within ~1 % of mu as well.
    The server's own avg_spec_accept_length is 1 + sum(drafts)/sum(steps), untruncated: mu directly."""
    out, n = 256, 64
    records, duration = run(closed_loop(servers[f"acc-{p}-{steps}"].base_url, prompts(n, output_len=out), n))

    async def server_accept() -> float | None:
        async with LoadClient(servers[f"acc-{p}-{steps}"].base_url) as client:
            return (await client.server_info())["internal_states"][0].get("avg_spec_accept_length")

    m = compute_metrics(records, duration, run(server_accept()))
    assert m.completed == n
    mu = (1 - p ** (steps + 1)) / (1 - p)
    pv = verify_steps_distribution(p, steps, out - 1)
    v = np.arange(len(pv))
    assert pv.sum() == pytest.approx(1.0)
    expected_weighted = out / float((v * pv).sum())
    expected_mean = float((out / np.maximum(v, 1) * pv).sum())
    assert expected_weighted == pytest.approx(mu, rel=0.015)
    assert m.accept_length_weighted == pytest.approx(expected_weighted, rel=0.02)
    assert m.accept_length == pytest.approx(expected_mean, rel=0.02)
    assert m.accept_length_weighted == pytest.approx(mu, rel=0.02)
    assert m.server_accept_length == pytest.approx(mu, rel=0.02)


def test_http_errors_become_records(servers: dict[str, SimHandle]) -> None:
    # A text prompt on a --skip-tokenizer-init server is a 400; every request fails fast, none hangs.
    text = [Prompt(prompt_len=3, output_len=4, text="hello there") for _ in range(3)]
    records, _ = run(closed_loop(servers["skip_tok"].base_url, text, 2))
    assert all(r.error and r.error.startswith("HTTP 400: ") and "input_ids" in r.error for r in records)


def test_flush_retries_while_requests_are_in_flight(servers: dict[str, SimHandle]) -> None:
    url = servers["slow"].base_url
    long = prompts(1, output_len=120, seed=5)  # ~50 verify steps of ~3.7 ms: about 0.2 s

    async def scenario() -> tuple[int, RequestRecord]:
        async with LoadClient(url) as client:
            task = asyncio.create_task(client.run_closed_loop(long, 1, 10))
            await asyncio.sleep(0.05)
            attempts = await client.flush_cache(timeout_s=0, retries=20, backoff_s=0.02)
            records, _ = await task
            return attempts, records[0]

    attempts, rec = run(scenario())
    assert attempts > 1
    assert rec.ok


def test_flush_gives_up_with_a_clear_error(servers: dict[str, SimHandle]) -> None:
    url = servers["slow"].base_url
    long = prompts(1, output_len=200, seed=6)

    async def scenario() -> None:
        async with LoadClient(url) as client:
            task = asyncio.create_task(client.run_closed_loop(long, 1, 10))
            await asyncio.sleep(0.05)
            try:
                with pytest.raises(FlushError, match=r"after 3 attempt\(s\).*HTTP 400"):
                    await client.flush_cache(timeout_s=0, retries=2, backoff_s=0.01)
            finally:
                await task

    run(scenario())


def fault_server(sim_server: SimFactory, fault: str, time_scale: float = 0.05) -> SimHandle:
    env = {"SPECBENCH_SIM_TIME_SCALE": str(time_scale), "SPECBENCH_SIM_FAULT": fault}
    return sim_server.start(*spec_flags(3), env=env)


def test_malformed_event_fails_that_request_only(sim_server: SimFactory) -> None:
    sim = fault_server(sim_server, "malformed_after=2")
    records, _ = run(closed_loop(sim.base_url, prompts(8), 2))
    bad = [r for r in records if not r.ok]
    assert len(bad) == 1 and bad[0].index == 2
    assert bad[0].error is not None and bad[0].error.startswith("malformed JSON event")
    assert sum(r.ok for r in records) == 7


def test_stall_is_detected_and_stops_dispatch(sim_server: SimFactory) -> None:
    # Slow enough (~40 ms a request) that the healthy worker is still busy when the stall is noticed.
    sim = fault_server(sim_server, "stall_after=1", time_scale=0.5)
    t = time.monotonic()
    records, _ = run(closed_loop(sim.base_url, prompts(40, output_len=64), 2, timeout_s=0.5))
    assert time.monotonic() - t < 10
    assert records[1].error == "stalled: no event for 0.5 s"
    assert all(r.ok for r in records if r.index != 1 and r.e2e is not None)
    # Once a request stalls, no more are sent: the rest are neither completed nor failed.
    assert any(r.error is None and r.e2e is None for r in records)


def test_server_crash_ends_the_loop_and_marks_the_server_down(sim_server: SimFactory) -> None:
    sim = fault_server(sim_server, "crash_after=3")

    async def scenario() -> tuple[list[RequestRecord], bool]:
        async with LoadClient(sim.base_url) as client:
            records, _ = await client.run_closed_loop(prompts(30, output_len=64), 3, 10)
            with pytest.raises(ServerUnavailableError):
                await client.server_info()
            return records, client.server_down

    t = time.monotonic()
    records, down = run(scenario())
    assert time.monotonic() - t < 10
    assert down
    failed = [r for r in records if r.error]
    assert any(r.error and r.error.startswith("connection lost") for r in failed)
    assert all(r.index < 30 for r in failed)
    unsent = [r for r in records if r.error is None and r.e2e is None]
    assert unsent, "dispatch should stop once connections are refused"
    assert sum(r.ok for r in records) <= 3


def test_no_server_at_all() -> None:
    url = f"http://127.0.0.1:{free_port()}"

    async def scenario() -> list[RequestRecord]:
        async with LoadClient(url) as client:
            with pytest.raises(ServerUnavailableError):
                await client.flush_cache()
            with pytest.raises(ServerUnavailableError):
                await client.server_info()
            records, _ = await client.run_closed_loop(prompts(10), 2, 5)
            assert client.server_down
            return records

    records = run(scenario())
    assert all(r.error is None or r.error.startswith("connection refused") for r in records)
    assert 1 <= sum(r.error is not None for r in records) <= 2


class _Chunks:
    """Feeds `_read_stream` a recorded body in given pieces, the way a socket may cut it."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = iter(pieces)

    async def readany(self) -> bytes:
        return next(self._pieces, b"")


def _parse(pieces: list[bytes]) -> RequestRecord:
    rec = RequestRecord(index=0, prompt_len=8, max_new_tokens=24)
    run(_read_stream(_Chunks(pieces), rec, time.perf_counter()))  # type: ignore[arg-type]
    return rec


def test_parser_gives_the_same_record_however_the_stream_is_cut(servers: dict[str, SimHandle]) -> None:
    body = {
        "input_ids": [3, 4, 5, 6, 7, 8, 9, 10],
        "sampling_params": {"max_new_tokens": 24, "ignore_eos": True},
    }
    status, raw, _ = request(servers["spec"], "POST", "/generate", {**body, "stream": True})
    assert status == 200 and raw.endswith(b"data: [DONE]\n\n")
    whole = _parse([raw])
    assert whole.ok and whole.completion_tokens == 24 and whole.spec_verify_ct
    for cut in range(1, len(raw)):
        rec = _parse([raw[:cut], raw[cut:]])
        assert (rec.error, rec.chunk_tokens, rec.completion_tokens) == (None, whole.chunk_tokens, 24), cut
    rec = _parse([raw[i : i + 1] for i in range(len(raw))])  # one byte per read
    assert rec.ok and rec.chunk_tokens == whole.chunk_tokens


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'data: {"error": {"message": "boom"}}\n\ndata: [DONE]\n\n', "server error: boom"),
        (
            b'data: {"text": "a", "meta_info": {"completion_tokens": 1}}\n\ndata: {"te',
            "stream ended before [DONE]",
        ),
        (b"data: [DONE]\n\n", "[DONE] without any generation event"),
        (b"event: ping\n\n", "malformed JSON event: event: ping"),
        (
            b'data: {"meta_info": {"completion_tokens": 1}}\n\ndata: {"x": 1}\n\n',
            "malformed event (no meta_info",
        ),
    ],
)
def test_parser_names_what_went_wrong(body: bytes, error: str) -> None:
    rec = _parse([body])
    assert rec.error is not None and rec.error.startswith(error), rec.error
