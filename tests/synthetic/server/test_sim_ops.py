"""Operational endpoints and failure modes: /flush_cache while busy, /metrics, injected faults."""

from __future__ import annotations

import http.client
import json
import socket
import threading

import pytest

from tests.fixtures.sim import (
    SimFactory,
    SimHandle,
    generate,
    generate_many,
    http_status,
    request,
    sse_payloads,
)

MTP = ("--attention-backend", "flashmla", "--speculative-algorithm", "NEXTN")


def _open_stream(sim: SimHandle, payload: dict, timeout: float = 10.0) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=timeout)
    conn.request("POST", "/generate", body=json.dumps({**payload, "stream": True}).encode())
    resp = conn.getresponse()
    assert resp.status == 200
    return resp


def _read_event(resp: http.client.HTTPResponse) -> str:
    """The next `data:` payload (blocking)."""
    while True:
        line = resp.readline()
        if not line:
            raise EOFError("stream closed")
        if line.startswith(b"data: "):
            return line[len(b"data: ") :].decode().rstrip("\n")


def test_flush_refuses_while_busy_and_waits_with_timeout(sim_server: SimFactory) -> None:
    # Real modelled time: 600 tokens take most of a second.
    sim = sim_server.start(*MTP)
    resp = _open_stream(
        sim, {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 600, "ignore_eos": True}}
    )
    json.loads(_read_event(resp))  # the request is running now
    status, body, _ = request(sim, "POST", "/flush_cache")
    assert status == 400 and b"Cache not flushed" in body
    drained = threading.Thread(target=resp.read)
    drained.start()
    status, body, _ = request(sim, "POST", "/flush_cache?timeout=10")
    assert status == 200 and body.startswith(b"Cache flushed.")
    drained.join(10)
    assert request(sim, "GET", "/flush_cache")[0] == 200


def test_metrics_only_with_flag_and_counts_add_up(sim_server: SimFactory) -> None:
    env = {"SPECBENCH_SIM_INSTANT": "1", "SPECBENCH_SIM_VERSION": "0.5.13.post1"}
    with_metrics = sim_server.start(*MTP, "--enable-metrics", env=env, wait=False)
    without = sim_server.start(*MTP, env=env, wait=False)
    without.wait_ready()
    assert http_status(without.url("/metrics")) == 404
    sim = with_metrics.wait_ready()
    payloads = [
        {"input_ids": [9, i], "sampling_params": {"max_new_tokens": 20 + i, "ignore_eos": True}}
        for i in range(6)
    ]
    metas = [o["meta_info"] for o in generate_many(sim, payloads)]
    status, body, headers = request(sim, "GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    values = _samples(body.decode())
    assert values["sglang:num_requests_total"] == 6
    assert values["sglang:prompt_tokens_total"] == 12  # what the cross-check reads
    assert values["sglang:generation_tokens_total"] == sum(m["completion_tokens"] for m in metas)
    assert "# TYPE sglang:prompt_tokens_total counter" in body.decode()


def _samples(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name_labels, value = line.rsplit(" ", 1)
            out[name_labels.split("{", 1)[0]] = float(value)
    return out


@pytest.fixture
def faulty(sim_server: SimFactory) -> SimHandle:
    # Request 1 gets a malformed chunk, request 2 stalls, request 4 kills the server.
    env = {
        "SPECBENCH_SIM_INSTANT": "1",
        "SPECBENCH_SIM_FAULT": "malformed_after=0,stall_after=1,crash_after=3",
    }
    return sim_server.start(*MTP, env=env)


def test_faults(faulty: SimHandle) -> None:
    body = {"input_ids": [4, 5, 6], "sampling_params": {"max_new_tokens": 30, "ignore_eos": True}}
    # 1: exactly one malformed data chunk, the rest of the stream intact.
    status, raw, _ = request(faulty, "POST", "/generate", {**body, "stream": True})
    assert status == 200
    payloads = sse_payloads(raw)
    broken = []
    for p in payloads[:-1]:
        try:
            json.loads(p)
        except json.JSONDecodeError:
            broken.append(p)
    assert len(broken) == 1 and payloads[-1] == "[DONE]"
    assert json.loads(payloads[-2])["meta_info"]["completion_tokens"] == 30
    # 2: the first event, then silence.
    resp = _open_stream(faulty, body, timeout=0.5)
    assert json.loads(_read_event(resp))["meta_info"]["completion_tokens"] == 1
    with pytest.raises((TimeoutError, socket.timeout)):
        _read_event(resp)
    resp.close()
    # 3: the server still serves others.
    assert generate(faulty, body)["meta_info"]["completion_tokens"] == 30
    # 4: the process dies mid-stream.
    resp = _open_stream(faulty, body)
    _read_event(resp)
    with pytest.raises((EOFError, http.client.IncompleteRead, ConnectionError)):
        while True:
            if _read_event(resp) == "[DONE]":
                break
    assert faulty.wait_exit(5) != 0
    assert "simulated crash" in faulty.log()
