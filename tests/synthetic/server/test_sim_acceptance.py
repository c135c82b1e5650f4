"""Acceptance ground truth: the stand-in's tokens per verify step against the analytic chain formula,
and the server-side `avg_spec_accept_length` window (contract §3.4)."""

from __future__ import annotations

import pytest

from tests.fixtures.sim import SimFactory, SimHandle, generate, generate_many, get_json, request

MTP = ("--attention-backend", "flashmla", "--speculative-algorithm", "NEXTN")
CASES = [(0.3, 1), (0.5, 2), (0.7, 3), (0.9, 5)]


def expected_tokens_per_step(p: float, steps: int) -> float:
    return (1 - p ** (steps + 1)) / (1 - p)


@pytest.fixture(scope="module")
def by_rate(sim_server_module: SimFactory) -> dict[tuple[float, int], SimHandle]:
    handles = {
        (p, s): sim_server_module.start(
            *MTP,
            "--speculative-num-steps",
            str(s),
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            str(s + 1),
            env={
                "SPECBENCH_SIM_INSTANT": "1",
                "SPECBENCH_SIM_ACCEPTANCE_RATE": str(p),
                "SPECBENCH_SIM_SEED": "7",
            },
            wait=False,
        )
        for p, s in CASES
    }
    return {key: handle.wait_ready() for key, handle in handles.items()}


@pytest.mark.parametrize(("p", "steps"), CASES)
def test_mean_tokens_per_verify_step_matches_formula(
    by_rate: dict[tuple[float, int], SimHandle], p: float, steps: int
) -> None:
    sim = by_rate[(p, steps)]
    payloads = [
        {"input_ids": [i, 1, 2], "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}}
        for i in range(64)
    ]
    metas = [out["meta_info"] for out in generate_many(sim, payloads)]
    verify = sum(m["spec_verify_ct"] for m in metas)
    drafts = sum(m["spec_num_correct_drafts"] for m in metas)
    assert verify > 4000
    expected = expected_tokens_per_step(p, steps)
    assert 1 + drafts / verify == pytest.approx(expected, rel=0.02)
    info = get_json(sim, "/server_info")
    assert info["specbench_sim"]["expected_tokens_per_verify_step"] == pytest.approx(expected)
    # The scheduler's lifetime figure (1 + sum D / sum V over closed windows) agrees as well.
    assert info["internal_states"][0]["avg_spec_accept_length"] == pytest.approx(expected, rel=0.02)


def test_avg_accept_length_needs_a_full_window_and_resets_on_flush(sim_server: SimFactory) -> None:
    # Acceptance 0: one token per verify step, so decode iterations are exactly countable.
    sim = sim_server.start(*MTP, env={"SPECBENCH_SIM_INSTANT": "1", "SPECBENCH_SIM_ACCEPTANCE_RATE": "0"})

    def avg() -> float | None:
        return get_json(sim, "/server_info")["internal_states"][0].get("avg_spec_accept_length")

    assert request(sim, "POST", "/flush_cache")[0] == 200
    assert avg() is None
    body = {"input_ids": [5, 6], "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}}
    assert generate(sim, body)["meta_info"]["spec_verify_ct"] == 39
    assert avg() is None  # 39 decode iterations: the 40-step window is not closed yet
    generate(sim, {"input_ids": [5, 6], "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}})
    assert avg() == pytest.approx(1.0)
    assert "Decode batch, #running-req: " in sim.log() and "accept len: 1.00" in sim.log()
    assert request(sim, "GET", "/flush_cache")[0] == 200
    assert avg() is None


def test_simulated_acceptance_length_is_clamped(sim_server: SimFactory) -> None:
    sim = sim_server.start(*MTP, env={"SPECBENCH_SIM_INSTANT": "1", "SGLANG_SIMULATE_ACC_LEN": "9.5"})
    meta = generate(sim, {"input_ids": [1], "sampling_params": {"max_new_tokens": 41, "ignore_eos": True}})[
        "meta_info"
    ]
    assert meta["spec_verify_ct"] == 10 and meta["spec_correct_drafts_histogram"] == [0, 0, 0, 10]
