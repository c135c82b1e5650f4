"""`/generate` against the stand-in: SSE format, meta_info, spec bookkeeping, prefix cache."""

from __future__ import annotations

import http.client
import json

import pytest

from tests.fixtures.sim import SimFactory, SimHandle, generate, generate_many, request, stream

INSTANT = {"SPECBENCH_SIM_INSTANT": "1"}
MTP = ("--attention-backend", "flashmla", "--speculative-algorithm", "NEXTN")
SPEC_KEYS = {
    "spec_verify_ct",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_accept_length",
    "spec_accept_rate",
    "spec_correct_drafts_histogram",
}


@pytest.fixture(scope="module")
def servers(sim_server_module: SimFactory) -> dict[str, SimHandle]:
    specs = {
        "spec": (MTP, {"SPECBENCH_SIM_VERSION": "0.5.13.post1"}),
        "spec_0515": (MTP, {"SPECBENCH_SIM_VERSION": "0.5.15"}),
        "plain": (("--attention-backend", "flashmla"), {"SPECBENCH_SIM_VERSION": "0.5.13.post1"}),
        "skip_tok": ((*MTP, "--skip-tokenizer-init"), {"SPECBENCH_SIM_VERSION": "0.5.14"}),
        "exact": (MTP, {"SGLANG_SIMULATE_ACC_LEN": "2"}),
        "no_radix": ((*MTP, "--disable-radix-cache"), {}),
    }
    handles = {
        name: sim_server_module.start(*flags, env={**INSTANT, **env}, wait=False)
        for name, (flags, env) in specs.items()
    }
    return {name: handle.wait_ready() for name, handle in handles.items()}


def _events(payloads: list[str]) -> list[dict]:
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


def test_stream_is_cumulative_and_capped(servers: dict[str, SimHandle]) -> None:
    payloads, headers = stream(
        servers["spec"],
        {"input_ids": list(range(5, 69)), "sampling_params": {"max_new_tokens": 37, "ignore_eos": True}},
    )
    assert headers["Content-Type"].startswith("text/event-stream")
    events = _events(payloads)
    first, final = events[0], events[-1]
    assert first["meta_info"]["completion_tokens"] == 1 and len(first["output_ids"]) == 1
    previous: list[int] = []
    for event in events:
        ids, meta = event["output_ids"], event["meta_info"]
        assert ids[: len(previous)] == previous, "events must be cumulative"
        assert meta["completion_tokens"] == len(ids) == len(event["text"].split())
        delta = len(ids) - len(previous)
        assert 1 <= delta <= 4  # one verify step: 1..steps+1 tokens
        if event is not final:
            assert meta["finish_reason"] is None
            assert not (SPEC_KEYS | {"e2e_latency"}) & meta.keys()
        assert meta["prompt_tokens"] == 64
        previous = ids
    meta = final["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 37}
    assert meta["completion_tokens"] == 37 and len(final["output_ids"]) == 37
    assert SPEC_KEYS | {"e2e_latency"} <= meta.keys()
    assert meta["spec_verify_ct"] == len(events) - 1  # every decode step streamed once


def test_unary_equals_stream_and_is_deterministic(servers: dict[str, SimHandle]) -> None:
    body = {"input_ids": [7, 8, 9, 10], "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}}
    one = generate(servers["spec"], body)
    two = generate(servers["spec"], body)
    streamed = _events(stream(servers["spec"], body)[0])[-1]
    assert one["output_ids"] == two["output_ids"] == streamed["output_ids"]
    assert one["text"] == streamed["text"] and one["text"].startswith(" t")
    assert set(one) == {"text", "output_ids", "meta_info"}
    other = generate(servers["spec_0515"], body)
    assert other["output_ids"] == one["output_ids"], "ids depend on seed and prompt only"


def test_spec_meta_is_consistent(servers: dict[str, SimHandle]) -> None:
    payloads = [
        {"input_ids": [1000 + i, 5, 6], "sampling_params": {"max_new_tokens": 10 + 7 * i, "ignore_eos": True}}
        for i in range(30)
    ]
    for out in generate_many(servers["spec"], payloads):
        m = out["meta_info"]
        n, v, d = m["completion_tokens"], m["spec_verify_ct"], m["spec_num_correct_drafts"]
        # Untruncated N would be 1 + D + V; the last step may overshoot max_new_tokens by up to `steps`.
        assert 0 <= 1 + d + v - n <= 3
        assert m["spec_accept_length"] == pytest.approx(n / v)
        assert m["spec_num_proposed_drafts"] == 3 * v
        assert m["spec_accept_rate"] == pytest.approx(d / (3 * v))
        hist = m["spec_correct_drafts_histogram"]
        assert len(hist) == 4 and sum(hist) == v and sum(k * c for k, c in enumerate(hist)) == d


def test_simulated_acceptance_is_exact(servers: dict[str, SimHandle]) -> None:
    # SGLANG_SIMULATE_ACC_LEN=2: every step commits 2 tokens, so an odd length is never truncated.
    out = generate(
        servers["exact"], {"input_ids": [3, 4], "sampling_params": {"max_new_tokens": 41, "ignore_eos": True}}
    )
    m = out["meta_info"]
    assert m["spec_verify_ct"] == 20 and m["spec_num_correct_drafts"] == 20
    assert m["completion_tokens"] == 1 + m["spec_num_correct_drafts"] + m["spec_verify_ct"]
    assert m["spec_accept_length"] == 41 / 20
    assert m["spec_correct_drafts_histogram"] == [0, 20, 0, 0]
    assert out["output_ids"][1:] == [100] * 40  # SGLang overwrites simulated tokens with id 100


def test_plain_decoding_has_no_spec_keys(servers: dict[str, SimHandle]) -> None:
    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}}
    events = _events(stream(servers["plain"], body)[0])
    assert [e["meta_info"]["completion_tokens"] for e in events] == list(range(1, 13))
    assert not SPEC_KEYS & events[-1]["meta_info"].keys()


def test_skip_tokenizer_init_drops_text(servers: dict[str, SimHandle]) -> None:
    sim = servers["skip_tok"]
    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 6, "ignore_eos": True}}
    assert "text" not in generate(sim, body)
    assert all("text" not in e for e in _events(stream(sim, body)[0]))
    status, raw, _ = request(sim, "POST", "/generate", {"text": "hi", "sampling_params": {}})
    assert status == 400 and "input_ids" in json.loads(raw)["error"]["message"]


def test_text_prompt_and_batch(servers: dict[str, SimHandle]) -> None:
    sim = servers["spec"]
    out = generate(sim, {"text": "The quick brown fox jumps", "sampling_params": {"max_new_tokens": 4}})
    assert out["meta_info"]["prompt_tokens"] == 7  # about four characters per token
    batch = generate(
        sim,
        {
            "input_ids": [[1, 2], [3, 4, 5]],
            "sampling_params": {"max_new_tokens": 5, "ignore_eos": True},
            "rid": ["a", "b"],
        },
    )
    assert [o["meta_info"]["id"] for o in batch] == ["a", "b"]
    assert [o["meta_info"]["prompt_tokens"] for o in batch] == [2, 3]
    events = _events(
        stream(
            sim,
            {"input_ids": [[1, 2], [3, 4, 5]], "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}},
        )[0]
    )
    finals = [e for e in events if e["meta_info"]["finish_reason"] is not None]
    assert sorted(e["index"] for e in finals) == [0, 1]
    assert all(e["meta_info"]["completion_tokens"] == 5 for e in finals)


def test_eos_ends_requests_that_do_not_ignore_it(servers: dict[str, SimHandle]) -> None:
    payloads = [{"input_ids": [i, i + 1], "sampling_params": {"max_new_tokens": 1500}} for i in range(20)]
    outs = generate_many(servers["spec"], payloads)
    stopped = [o for o in outs if o["meta_info"]["finish_reason"]["type"] == "stop"]
    assert stopped, "some requests should hit EOS before 1500 tokens"
    for o in stopped:
        assert o["meta_info"]["finish_reason"]["matched"] == o["output_ids"][-1]
        assert o["meta_info"]["completion_tokens"] < 1500


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (
            {"input_ids": [1], "sampling_params": {"max_new_token": 3}},
            "unexpected keyword argument 'max_new_token'",
        ),
        ({"sampling_params": {}}, "Either text, input_ids or input_embeds should be provided."),
        ({"input_ids": [1], "sampling_params": {"max_new_tokens": -1}}, "max_new_tokens"),
    ],
)
def test_bad_requests_are_400(servers: dict[str, SimHandle], body: dict, needle: str) -> None:
    status, raw, _ = request(servers["spec"], "POST", "/generate", body)
    assert status == 400
    assert needle in json.loads(raw)["error"]["message"]


def test_invalid_json_is_400(servers: dict[str, SimHandle]) -> None:
    sim = servers["spec"]
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    conn.request("POST", "/generate", body=b"{not json", headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 400 and "error" in json.loads(resp.read())
    conn.close()


def test_prefix_cache_hits_and_flush(servers: dict[str, SimHandle]) -> None:
    prompt = list(range(2000, 2200))  # 200 tokens; FlashMLA pages are 64 tokens
    body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
    sim = servers["spec"]
    assert request(sim, "POST", "/flush_cache")[0] == 200
    assert generate(sim, body)["meta_info"]["cached_tokens"] == 0
    assert generate(sim, body)["meta_info"]["cached_tokens"] == 192  # whole pages, never the last token
    assert request(sim, "POST", "/flush_cache")[0] == 200
    assert generate(sim, body)["meta_info"]["cached_tokens"] == 0
    generate(servers["no_radix"], body)
    assert generate(servers["no_radix"], body)["meta_info"]["cached_tokens"] == 0
