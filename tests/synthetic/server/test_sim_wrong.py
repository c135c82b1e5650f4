"""The stand-in's greedy tokens are a function of the prompt, the same on every server, unless it is wrong on
purpose (`v2_draft`, `v2_verify`, `flashmla_draft_decode_context`); emulating sglang 0.5.12 with FlashMLA and v2,
it dies at its warm-up as the real one did on a GPU. What a launch with no wrong path answers is known without
one: the stand-in's reference (synthetic/server/reference.py) is held to the server's own answers."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from bench.correctness.outputs import prompts_digest
from bench.server.known_bugs import FLASHMLA_DRAFT_DECODE_CONTEXT, identify_failure
from bench.sweep import SimSettings
from synthetic.server import wrong
from synthetic.server.acceptance import AcceptanceModel, prompt_rng, verify_steps
from synthetic.server.config import Faults, SimConfigError
from synthetic.server.reference import reference_outputs
from synthetic.server.tokens import prompt_key
from tests.fixtures.sim import SimFactory, SimHandle, generate_many, get_json, http_status

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


def test_0_5_12_flashmla_v2_dies_at_its_warm_up_as_measured(sim_server: SimFactory) -> None:
    """As on the H100: up, /health 503 while the warm-up runs, then the scheduler's traceback, SGLang's SIGQUIT
    line and SIGKILL; the log's signature names the known bug."""
    env = {"SPECBENCH_SIM_VERSION": "0.5.12", "SPECBENCH_SIM_STARTUP_S": "3"}
    sim = sim_server.start(*SPEC, env=env, wait=False)
    seen: list[int | None] = []
    while sim.proc.poll() is None and 503 not in seen:
        seen.append(http_status(sim.url("/health"), timeout=1.0))
        time.sleep(0.05)
    assert 503 in seen, sim.log()  # it came up and answered, not ready, while its warm-up ran
    said = get_json(sim, "/server_info")["specbench_sim"]["wrong"]
    assert said["draft_extend_crash"].startswith("auto: sglang 0.5.12 with FlashMLA and spec v2")
    assert sim.wait_exit(timeout=30) == -signal.SIGKILL
    log = sim.log()
    assert "ready to roll" not in log and 200 not in seen
    tail = log.rstrip().splitlines()
    assert tail[-1].endswith("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    assert tail[-3] == "AttributeError: 'PrefillMetadata' object has no attribute 'block_kv_indices'"
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert 'eagle_worker_v2.py", line 614, in _draft_extend_for_decode' in log
    found = identify_failure("0.5.12", "flashmla", "v2", log)
    assert found is not None and found.bug.key == "flashmla-draft-extend-v2"


@pytest.mark.parametrize("version", ["0.5.12", "0.5.13", "0.5.13.post1"])
def test_what_serves_computes_right(sim_server: SimFactory, version: str) -> None:
    """0.5.12's v1 and the fixed releases' v2 serve on FlashMLA with the same tokens and the same drafts
    accepted per request: nothing is wrong unless asked for (the old automatic `v2_draft` is gone)."""
    v1 = start(sim_server, *SPEC, *V1, version=version).wait_ready()
    a1 = answers(v1)
    if version != "0.5.12":
        v2 = start(sim_server, *SPEC, version=version).wait_ready()
        a2 = answers(v2)
        assert [o["output_ids"] for o in a1] == [o["output_ids"] for o in a2]
        assert verify_counts(a1) == verify_counts(a2)
        assert "wrong" not in get_json(v2, "/server_info")["specbench_sim"]
    assert "wrong" not in get_json(v1, "/server_info")["specbench_sim"]


def test_fault_words_parse() -> None:
    f = Faults.parse("v2_draft, crash_after=3")
    assert f.v2_draft and not f.v2_verify and f.crash_after == 3 and not f.flashmla_draft_decode_context
    assert Faults.parse("flashmla_draft_decode_context").flashmla_draft_decode_context
    with pytest.raises(SimConfigError, match="v2_draft, v2_verify or flashmla_draft_decode_context"):
        Faults.parse("v3_draft")


def with_steps(n: int) -> tuple[str, ...]:
    out = list(SPEC)
    out[out.index("--speculative-num-steps") + 1] = str(n)
    out[out.index("--speculative-num-draft-tokens") + 1] = str(n + 1)
    return tuple(out)


def test_the_reference_is_what_a_launch_with_no_wrong_path_answers(sim_server: SimFactory) -> None:
    """Tokens and each request's tokens per verify step, exactly, for v1 and v2 (v2 on 0.5.13.post1)."""
    ref = reference_outputs(SimSettings(acceptance_rate=0.7), PROMPTS, OUT, [3])
    assert ref.prompts_digest == prompts_digest(PROMPTS, OUT) and ref.device == "stand-in"
    for flags in ((*SPEC, *V1), SPEC):
        outs = answers(start(sim_server, *flags).wait_ready())
        assert [o["output_ids"] for o in outs] == ref.tokens
        assert [OUT / v for v in verify_counts(outs)] == ref.accept_lengths[3]


def test_flashmla_draft_decode_context_lowers_acceptance_on_v1_and_v2_alike(sim_server: SimFactory) -> None:
    """As the mirror checkpoint measured on an H100: FlashMLA launches accept at most 2 drafts per verify step
    (the draft extend's and draft decode step 0's), v1 and v2 the same, tokens right; the log and /server_info
    say so. Triton (the control), and FlashMLA with 2 steps (every draft it makes is still right on the
    mirror), accept what the reference does."""
    fault = "flashmla_draft_decode_context"
    ref = reference_outputs(SimSettings(acceptance_rate=0.7), PROMPTS, OUT, [2, 3])
    v1 = start(sim_server, *SPEC, *V1, fault=fault)
    v2 = start(sim_server, *SPEC, fault=fault)
    triton = [*SPEC, *V1]
    triton[triton.index("flashmla")] = "triton"
    control = start(sim_server, *triton, fault=fault)
    two = start(sim_server, *with_steps(2), *V1, fault=fault)
    a1, a2, ac, a_two = (answers(s.wait_ready()) for s in (v1, v2, control, two))
    for outs in (a1, a2, ac, a_two):
        assert [o["output_ids"] for o in outs] == ref.tokens  # verify is right: so are the tokens
    capped = AcceptanceModel(steps=3, topk=1, rate=0.7, max_accepted=wrong.DRAFT_DECODE_CONTEXT_ACCEPTED)
    expected = [verify_steps(capped.sampler(), prompt_rng(0, prompt_key(p, 0)), OUT) for p in PROMPTS]
    assert verify_counts(a1) == verify_counts(a2) == expected
    assert sum(OUT / v for v in expected) < 0.95 * sum(ref.accept_lengths[3])  # what the gate fails
    assert [OUT / v for v in verify_counts(ac)] == ref.accept_lengths[3]
    assert [OUT / v for v in verify_counts(a_two)] == ref.accept_lengths[2]
    for sim in (v1, v2):
        said = get_json(sim, "/server_info")["specbench_sim"]["wrong"][fault]
        assert said.startswith(
            f"asked for (server.sim.fault): known SGLang issue {FLASHMLA_DRAFT_DECODE_CONTEXT.key}"
        )
        assert f"emulates a known SGLang issue on purpose ({fault})" in sim.log()
    assert "wrong" not in get_json(control, "/server_info")["specbench_sim"]
