"""The stand-in's cost model: pure properties in-process, plus one end-to-end timing sanity check."""

from __future__ import annotations

import random

import pytest

from synthetic.server.acceptance import AcceptanceModel
from synthetic.server.config import PerfParams
from synthetic.server.perf import PerfModel
from tests.fixtures.sim import SimFactory, generate


def model(**overrides: object) -> PerfModel:
    base: dict[str, object] = {
        "params": PerfParams(),
        "overlap": True,
        "tp_size": 1,
        "steps": 3,
        "draft_tokens": 4,
        "graph_max_bs": 48,
        "draft_extend_without_graph": False,
        "scale": 1.0,
    }
    base.update(overrides)
    return PerfModel(**base)  # type: ignore[arg-type]


def test_documented_step_times() -> None:
    assert model().decode_ms(1) == pytest.approx(3.202)
    assert model(overlap=False).decode_ms(1) == pytest.approx(3.717)
    assert model().decode_ms(32) == pytest.approx(4.814)
    assert model(overlap=False).decode_ms(32) == pytest.approx(5.794)
    assert model(steps=0, draft_tokens=1).decode_ms(32) == pytest.approx(2.42)


def test_overlap_graphs_and_scale_matter() -> None:
    for batch in (1, 8, 32, 48):
        assert model(overlap=False).decode_ms(batch) > model().decode_ms(batch)
    assert model(graph_max_bs=16).decode_ms(32) > model().decode_ms(32)  # beyond the captured graphs
    assert model(draft_extend_without_graph=True).decode_ms(8) > model().decode_ms(8)
    assert model(scale=0.5).decode_ms(8) == pytest.approx(model().decode_ms(8) / 2)
    assert model(scale=0.0).prefill_ms(4, 4096) == 0.0
    assert model().prefill_ms(1, 8192) > model().prefill_ms(1, 1024)


def test_spec_wins_small_batches_and_loses_large_ones() -> None:
    tokens_per_step = AcceptanceModel(steps=3, topk=1, rate=0.7).expected_tokens_per_step()
    spec, plain = model(graph_max_bs=512), model(steps=0, draft_tokens=1, graph_max_bs=512)

    def speedup(b: int) -> float:
        return (tokens_per_step / spec.decode_ms(b)) / (1 / plain.decode_ms(b))

    assert speedup(1) > 1.5
    assert speedup(32) > 1.1
    assert speedup(256) < 1.0


@pytest.mark.parametrize(("p", "steps"), [(0.0, 3), (0.6, 2), (1.0, 4)])
def test_sampler_distribution(p: float, steps: int) -> None:
    acc = AcceptanceModel(steps=steps, topk=1, rate=p)
    rng = random.Random(3)
    draws = [acc.sample(rng) for _ in range(20000)]
    assert min(draws) >= 0 and max(draws) <= steps
    assert 1 + sum(draws) / len(draws) == pytest.approx(acc.expected_tokens_per_step(), rel=0.02)


def test_end_to_end_latency_follows_the_model(sim_server: SimFactory) -> None:
    # Every verify step commits 4 tokens, so 41 tokens = prefill + 10 decode steps at batch 1.
    sim = sim_server.start(
        "--attention-backend",
        "flashmla",
        "--speculative-algorithm",
        "NEXTN",
        env={
            "SGLANG_SIMULATE_ACC_LEN": "4",
            "SPECBENCH_SIM_TIME_SCALE": "2",
            "SPECBENCH_SIM_VERSION": "0.5.23",
        },
    )
    meta = generate(
        sim, {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 41, "ignore_eos": True}}
    )["meta_info"]
    assert meta["spec_verify_ct"] == 10
    expected_s = 2 * (model().prefill_ms(1, 3) + 10 * model().decode_ms(1)) / 1000
    assert expected_s * 0.9 < meta["e2e_latency"] < expected_s * 2.5
