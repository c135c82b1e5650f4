"""The stand-in's OpenAI-compatible routes: `/v1/completions` and `/v1/chat/completions`, as SGLang serves them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synthetic.model.tokenizer import write_tokenizer
from tests.fixtures.sim import SimFactory, SimHandle, request, sse_payloads

pytest.importorskip("tokenizers")

PROMPT = " ".join(f"t{i}" for i in range(100, 164))  # 64 tokens with the synthetic tokenizer


@pytest.fixture(scope="module")
def server(sim_server_module: SimFactory, tmp_path_factory: pytest.TempPathFactory) -> SimHandle:
    d: Path = tmp_path_factory.mktemp("tok")
    write_tokenizer(d, 4096)
    return sim_server_module.start(
        "--attention-backend", "flashmla", "--speculative-algorithm", "NEXTN",
        env={"SPECBENCH_SIM_INSTANT": "1"}, model_path=str(d),
    )  # fmt: skip


def _post(handle: SimHandle, path: str, payload: dict) -> tuple[int, bytes]:
    status, body, _ = request(handle, "POST", path, payload, timeout=20)
    return status, body


def test_completions_usage_text_and_logprobs(server: SimHandle) -> None:
    status, body = _post(
        server,
        "/v1/completions",
        {"model": "m", "prompt": PROMPT, "max_tokens": 12, "ignore_eos": True, "logprobs": 2},
    )
    assert status == 200, body
    out = json.loads(body)
    assert out["object"] == "text_completion" and out["model"] == "m"
    assert out["usage"] == {
        "prompt_tokens": 64,
        "total_tokens": 76,
        "completion_tokens": 12,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
    }
    (choice,) = out["choices"]
    assert choice["finish_reason"] == "length" and choice["index"] == 0
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 12
    assert lp["text_offset"] == [-1] * 12  # SGLang does not fill it
    assert all(len(top) == 2 and max(top.values()) <= 0 for top in lp["top_logprobs"])
    # The text is the tokens' text, in order.
    assert choice["text"].split() == lp["tokens"]


def test_completions_stream_matches_unary_and_ends_with_usage(server: SimHandle) -> None:
    payload = {"model": "m", "prompt": PROMPT, "max_tokens": 40, "ignore_eos": True}
    _, unary = _post(server, "/v1/completions", payload)
    status, raw = _post(
        server, "/v1/completions", {**payload, "stream": True, "stream_options": {"include_usage": True}}
    )
    assert status == 200
    payloads = sse_payloads(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 40
    text_chunks = chunks[:-1]
    assert len(text_chunks) > 1 and all(c["usage"] is None for c in text_chunks)
    assert [c["choices"][0]["finish_reason"] for c in text_chunks][-1] == "length"
    assert "".join(c["choices"][0]["text"] for c in text_chunks) == json.loads(unary)["choices"][0]["text"]


def test_chat_completions_unary_and_stream(server: SimHandle) -> None:
    messages = [{"role": "user", "content": PROMPT}]
    payload = {
        "model": "m",
        "messages": messages,
        "max_tokens": 10,
        "ignore_eos": True,
        "logprobs": True,
        "top_logprobs": 3,
    }
    status, body = _post(server, "/v1/chat/completions", payload)
    assert status == 200, body
    out = json.loads(body)
    assert out["object"] == "chat.completion"
    msg = out["choices"][0]["message"]
    assert msg["role"] == "assistant" and len(msg["content"].split()) == 10
    # "user: <64 tokens>\nassistant:" -> the two role words are <unk> tokens: 66 in all.
    assert out["usage"]["prompt_tokens"] == 66 and out["usage"]["completion_tokens"] == 10
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == 10 and all(len(c["top_logprobs"]) == 3 for c in content)
    assert content[0]["bytes"] == list(content[0]["token"].encode())

    status, raw = _post(server, "/v1/chat/completions", {**payload, "stream": True})
    payloads = sse_payloads(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == msg["content"]


def test_bad_requests_are_400_with_sglangs_error_body(server: SimHandle) -> None:
    status, body = _post(server, "/v1/completions", {"model": "m", "prompt": "t5", "max_tokens": 0})
    assert status == 400
    err = json.loads(body)
    assert err["object"] == "error" and "max_tokens" in err["message"]
    status, body = _post(server, "/v1/chat/completions", {"model": "m", "messages": []})
    assert status == 400
