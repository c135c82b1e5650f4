"""The stand-in's greedy tokens are a function of the prompt, the same on every server, unless it is wrong on
purpose (`v2_draft`, `v2_verify`, or sglang 0.5.12's FlashMLA draft-extend path)."""

from __future__ import annotations

from typing import Any

import pytest

from synthetic.server import wrong
from synthetic.server.config import Faults, SimConfigError
from synthetic.server.tokens import prompt_key
from tests.fixtures.sim import SimFactory, SimHandle, generate_many, get_json

SPEC = (
    "--attention-backend",
    "flashmla",
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
)
V1 = ("--disable-overlap-schedule",)
PROMPTS = [[1000 + 7 * i, 17, 4242 + i, 99] for i in range(12)]
OUT = 64


def answers(sim: SimHandle) -> list[dict[str, Any]]:
    payloads = [
        {"input_ids": p, "sampling_params": {"max_new_tokens": OUT, "temperature": 0, "ignore_eos": True}}
        for p in PROMPTS
    ]
    return list(generate_many(sim, payloads))


def start(factory: SimFactory, *flags: str, version: str = "0.5.13.post1", fault: str = "") -> SimHandle:
    env = {
        "SPECBENCH_SIM_INSTANT": "1",
        "SPECBENCH_SIM_VERSION": version,
        "SPECBENCH_SIM_ACCEPTANCE_RATE": "0.7",
    }
    if fault:
        env["SPECBENCH_SIM_FAULT"] = fault
    return factory.start(*flags, env=env, wait=False)


def verify_counts(outs: list[dict[str, Any]]) -> list[int]:
    return [o["meta_info"]["spec_verify_ct"] for o in outs]


def test_tokens_and_acceptance_are_functions_of_the_prompt(sim_server: SimFactory) -> None:
    base, v1, v2 = (start(sim_server, *f).wait_ready() for f in ((), (*SPEC, *V1), SPEC))
    b, a1, a2 = answers(base), answers(v1), answers(v2)
    assert [o["output_ids"] for o in a1] == [o["output_ids"] for o in b] == [o["output_ids"] for o in a2]
    assert len({tuple(o["output_ids"]) for o in b}) == len(PROMPTS)  # the prompt decides, not the server
    assert verify_counts(a1) == verify_counts(a2)  # the same drafts accepted per request, v1 and v2
    again = answers(v2)  # a second pass (prompts now cached): greedy decoding is deterministic
    assert [o["output_ids"] for o in again] == [o["output_ids"] for o in a2]
    assert verify_counts(again) == verify_counts(a2)


def test_v2_draft_fault_lowers_acceptance_and_keeps_tokens(sim_server: SimFactory) -> None:
    base = start(sim_server).wait_ready()
    v1 = start(sim_server, *SPEC, *V1, fault="v2_draft").wait_ready()
    v2 = start(sim_server, *SPEC, fault="v2_draft").wait_ready()
    b, a1, a2 = answers(base), answers(v1), answers(v2)
    assert [o["output_ids"] for o in a2] == [o["output_ids"] for o in b] == [o["output_ids"] for o in a1]
    # Fewer tokens per verify step: more verify steps for the same 64 tokens.
    assert sum(verify_counts(a2)) > 1.5 * sum(verify_counts(a1))
    assert "v2_draft" in get_json(v2, "/server_info")["specbench_sim"]["wrong"]
    assert "wrong" not in get_json(v1, "/server_info")["specbench_sim"]  # v1 (non-overlap) is untouched
    assert "computes wrongly on purpose (v2_draft)" in v2.log()


def test_v2_verify_fault_leaves_the_baselines_tokens(sim_server: SimFactory) -> None:
    base = start(sim_server).wait_ready()
    v2 = start(sim_server, *SPEC, fault="v2_verify").wait_ready()
    b, a2 = answers(base), answers(v2)
    for prompt, ours, theirs in zip(PROMPTS, a2, b, strict=True):
        at = wrong.diverge_at(prompt_key(prompt, 0))
        assert 1 <= at <= wrong.DIVERGE_SPAN
        assert ours["output_ids"][:at] == theirs["output_ids"][:at]
        assert ours["output_ids"][at] != theirs["output_ids"][at]
        assert ours["meta_info"]["completion_tokens"] == OUT


@pytest.mark.parametrize(
    ("version", "wrong_draft"), [("0.5.12", True), ("0.5.13", False), ("0.5.13.post1", False)]
)
def test_0_5_12_flashmla_v2_shows_the_draft_extend_bug(
    sim_server: SimFactory, version: str, wrong_draft: bool
) -> None:
    v1 = start(sim_server, *SPEC, *V1, version=version).wait_ready()
    v2 = start(sim_server, *SPEC, version=version).wait_ready()
    a1, a2 = answers(v1), answers(v2)
    assert [o["output_ids"] for o in a1] == [o["output_ids"] for o in a2]
    said = get_json(v2, "/server_info")["specbench_sim"].get("wrong", {})
    if wrong_draft:
        assert said["v2_draft"].startswith("auto: sglang 0.5.12 with FlashMLA")
        assert sum(verify_counts(a2)) > 1.5 * sum(verify_counts(a1))
    else:
        assert said == {} and verify_counts(a1) == verify_counts(a2)


def test_fault_words_parse() -> None:
    f = Faults.parse("v2_draft, crash_after=3")
    assert f.v2_draft and not f.v2_verify and f.crash_after == 3
    with pytest.raises(SimConfigError, match="v2_draft or v2_verify"):
        Faults.parse("v3_draft")
