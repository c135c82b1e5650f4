"""Hand-computed records against bench_serving's definitions (contract §5.1); every expected figure is worked
out in the comments, not by calling the code under test."""

from __future__ import annotations

import pytest

from bench.metrics import compute_metrics
from bench.results import RequestRecord


def _rec(
    index: int,
    *,
    start: float,
    prompt_len: int,
    max_new: int,
    times: list[float],
    tokens: list[int],
    e2e: float,
    verify: int | None = None,
) -> RequestRecord:
    return RequestRecord(
        index=index,
        prompt_len=prompt_len,
        max_new_tokens=max_new,
        start=start,
        ttft=times[0],
        e2e=e2e,
        completion_tokens=tokens[-1],
        spec_verify_ct=verify,
        chunk_times=times,
        chunk_tokens=tokens,
        finish_reason="length",
    )


def _records() -> list[RequestRecord]:
    return [
        # A: ITL 0.2/2 twice, then 0.1/1 -> [0.1, 0.1, 0.1]; TPOT (0.5-0.1)/3.
        _rec(
            0, start=0.0, prompt_len=10, max_new=4, times=[0.1, 0.3, 0.4], tokens=[1, 3, 4], e2e=0.5, verify=2
        ),
        # B: one 3-token event after the first: ITL 0.6/3 three times -> [0.2]*3; TPOT 0.8/3.
        _rec(1, start=0.25, prompt_len=20, max_new=4, times=[0.2, 0.8], tokens=[1, 4], e2e=1.0, verify=1),
        # C: failed; its (bogus) timings must not leak into any statistic.
        RequestRecord(
            index=2, prompt_len=99, max_new_tokens=4, start=0.3, ttft=5.0, e2e=9.0, error="stalled"
        ),
        # D: a single token: no TPOT, no ITL.
        _rec(3, start=0.5, prompt_len=5, max_new=1, times=[0.05], tokens=[1], e2e=0.06),
        # E: 3 tokens where 4 were asked (wrong length); ITL 0.1/2 twice -> [0.05]*2; TPOT (0.3-0.1)/2.
        _rec(4, start=1.0, prompt_len=10, max_new=4, times=[0.1, 0.2], tokens=[1, 3], e2e=0.3, verify=2),
        # F: never sent.
        RequestRecord(index=5, prompt_len=7, max_new_tokens=4),
    ]


def test_counts_and_throughput() -> None:
    m = compute_metrics(_records(), duration_s=2.0, server_accept_length=2.4)
    assert (m.completed, m.failed, m.incomplete, m.wrong_length) == (4, 1, 1, 1)
    assert m.total_input_tokens == 10 + 20 + 5 + 10  # dataset lengths of completed requests only
    assert m.total_output_tokens == 4 + 4 + 1 + 3
    assert m.request_throughput == pytest.approx(4 / 2.0)
    assert m.input_throughput == pytest.approx(45 / 2.0)
    assert m.output_throughput == pytest.approx(12 / 2.0)
    assert m.total_throughput == pytest.approx(57 / 2.0)
    assert m.concurrency == pytest.approx((0.5 + 1.0 + 0.06 + 0.3) / 2.0)
    assert m.server_accept_length == 2.4


def test_ttft_and_e2e_percentiles_use_linear_interpolation() -> None:
    m = compute_metrics(_records(), duration_s=2.0)
    # TTFT ms sorted [50, 100, 100, 200]: p90 at rank 2.7 -> 100 + 0.7*100; p99 at 2.97 -> 197.
    assert m.ttft_mean_ms == pytest.approx(112.5)
    assert m.ttft_p50_ms == pytest.approx(100.0)
    assert m.ttft_p90_ms == pytest.approx(170.0)
    assert m.ttft_p99_ms == pytest.approx(197.0)
    # E2E ms sorted [60, 300, 500, 1000]: p50 400, p90 at 2.7 -> 500 + 0.7*500.
    assert m.e2e_mean_ms == pytest.approx((500 + 1000 + 60 + 300) / 4)
    assert m.e2e_p50_ms == pytest.approx(400.0)
    assert m.e2e_p90_ms == pytest.approx(850.0)


def test_tpot_excludes_the_first_token_and_single_token_outputs() -> None:
    m = compute_metrics(_records(), duration_s=2.0)
    tpots = [400 / 3, 800 / 3, 200 / 2]  # ms; D (one token) contributes nothing
    assert m.tpot_mean_ms == pytest.approx(sum(tpots) / 3)
    assert m.tpot_p50_ms == pytest.approx(400 / 3)


def test_itl_is_split_per_token() -> None:
    m = compute_metrics(_records(), duration_s=2.0)
    # [100]*3 from A, [200]*3 from B, [50]*2 from E: 8 values.
    assert m.itl_mean_ms == pytest.approx((300 + 600 + 100) / 8)
    assert m.itl_p50_ms == pytest.approx(100.0)  # sorted 50,50,100,100,100,200,200,200: rank 3.5
    assert m.itl_p90_ms == pytest.approx(200.0)  # rank 6.3


def test_acceptance_length_mean_and_token_weighted() -> None:
    m = compute_metrics(_records(), duration_s=2.0)
    assert m.accept_length == pytest.approx((4 / 2 + 4 / 1 + 3 / 2) / 3)  # D has no spec stats
    assert m.accept_length_weighted == pytest.approx((4 + 4 + 3) / (2 + 1 + 2))


def test_max_output_tokens_per_s_buckets_rebuilt_token_times() -> None:
    m = compute_metrics(_records(), duration_s=2.0)
    # Token times from the earliest start (0.0): A 0.1,0.2,0.3,0.4; B 0.45,0.65,0.85,1.05; D 0.55;
    # E 1.1,1.15,1.2. Second 0 holds 4+3+1 = 8 tokens, second 1 holds 1+3 = 4.
    assert m.max_output_tokens_per_s == 8.0


def test_nothing_completed() -> None:
    recs = [RequestRecord(index=0, prompt_len=4, max_new_tokens=4, error="HTTP 500: boom")]
    m = compute_metrics(recs, duration_s=1.0)
    assert (m.completed, m.failed, m.output_throughput) == (0, 1, 0.0)
    assert m.ttft_mean_ms is None and m.itl_p99_ms is None and m.accept_length is None
    assert m.concurrency is None and m.max_output_tokens_per_s is None


def test_unknown_dataset_length_falls_back_to_server_prompt_tokens() -> None:
    r = _rec(0, start=0.0, prompt_len=0, max_new=2, times=[0.1, 0.2], tokens=[1, 2], e2e=0.3)
    r.prompt_tokens = 17
    assert compute_metrics([r], duration_s=1.0).total_input_tokens == 17


def test_spread_and_itl_tail_follow_bench_serving() -> None:
    # Request A: TTFT 10 ms, then a 20 ms gap carrying 2 tokens (ITLs 10, 10) and a 10 ms gap with 1 (10);
    # request B: TTFT 30 ms, then a 40 ms gap with 1 token (40).
    a = _rec(0, start=0.0, prompt_len=4, max_new=4, times=[0.010, 0.030, 0.040], tokens=[1, 3, 4], e2e=0.040)
    b = _rec(1, start=0.0, prompt_len=4, max_new=2, times=[0.030, 0.070], tokens=[1, 2], e2e=0.070)
    m = compute_metrics([a, b], 0.1)
    itls = [10.0, 10.0, 10.0, 40.0]
    assert m.itl_max_ms == pytest.approx(40.0)
    # numpy's linear interpolation: rank 0.95 * 3 = 2.85 -> 10 + 0.85 * 30
    assert m.itl_p95_ms == pytest.approx(10.0 + 0.85 * 30.0)
    mean = sum(itls) / 4
    assert m.itl_std_ms == pytest.approx((sum((x - mean) ** 2 for x in itls) / 4) ** 0.5)  # ddof=0
    assert m.ttft_std_ms == pytest.approx(10.0)  # TTFTs 10 and 30 ms
    assert m.e2e_std_ms == pytest.approx(15.0)  # 40 and 70 ms
    # TPOT: A (40-10)/3 = 10 ms, B (70-30)/1 = 40 ms
    assert m.tpot_std_ms == pytest.approx(15.0)
