"""The `/generate` wire format (contract §3.1-3.3): request validation, `meta_info`, stream events. Non-final
events are on the client-ceiling benchmark's hot path, so they are assembled from pre-encoded pieces.
"""

from array import array
from dataclasses import dataclass
from typing import Any

import orjson

from synthetic.server.request import Req
from synthetic.server.text import Encode

# SGLang's SamplingParams keywords: anything else is the TypeError its constructor raises.
SAMPLING_KEYS = frozenset(
    (
        *("max_new_tokens", "min_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p"),
        *("top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "ignore_eos"),
        *("skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim", "json_schema", "regex"),
        *("n", "ebnf", "structural_tag", "custom_params", "stream_interval", "logit_bias", "sampling_seed"),
    )
)
DEFAULT_MAX_NEW_TOKENS = 128


class RequestError(ValueError):
    """Becomes HTTP 400 with SGLang's `{"error": {"message": ...}}` body."""


@dataclass(frozen=True)
class PromptSpec:
    ids: list[int]
    rid: str | None
    max_new_tokens: int
    min_new_tokens: int
    ignore_eos: bool
    stream_interval: int | None


def parse_generate(
    body: Any, *, text_ok: bool, encode: Encode, context_len: int
) -> tuple[list[PromptSpec], bool, bool]:
    """(prompts, batch, stream); `text_ok`: the server has a tokenizer (no `--skip-tokenizer-init`)."""
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    text, input_ids = body.get("text"), body.get("input_ids")
    if (text is None) == (input_ids is None):
        raise RequestError("Either text, input_ids or input_embeds should be provided.")
    prompts: list[list[int]]
    if input_ids is not None:
        batch = isinstance(input_ids, list) and bool(input_ids) and isinstance(input_ids[0], list)
        prompts = [_ids(x) for x in input_ids] if batch else [_ids(input_ids)]
    else:
        if not text_ok:
            raise RequestError("The server was started with --skip-tokenizer-init; send input_ids, not text.")
        batch = isinstance(text, list)
        texts: list[Any] = text if isinstance(text, list) else [text]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise RequestError("text must be a string or a list of strings.")
        prompts = [encode(t) for t in texts]
    n = len(prompts)
    sampling = body.get("sampling_params") or {}
    per_item = sampling if isinstance(sampling, list) else [sampling] * n
    if len(per_item) != n:
        raise RequestError("sampling_params must be an object or a list with one object per prompt.")
    rids = body.get("rid")
    if rids is None:
        rid_list: list[str | None] = [None] * n
    elif batch:
        if not isinstance(rids, list) or len(rids) != n or not all(isinstance(r, str) for r in rids):
            raise RequestError("For a batch, rid must be a list of strings, one per prompt.")
        rid_list = list(rids)
    elif isinstance(rids, str):
        rid_list = [rids]
    else:
        raise RequestError("rid must be a string.")
    specs = [_prompt_spec(*item, context_len) for item in zip(prompts, per_item, rid_list, strict=True)]
    return specs, batch, bool(body.get("stream", False))


def _ids(value: Any) -> list[int]:
    if not isinstance(value, list) or not value:
        raise RequestError("input_ids must be a non-empty list of token ids (or a list of such lists).")
    try:  # array() checks every element at C speed: long prompts are the common case
        ok = min(array("q", value)) >= 0
    except (TypeError, OverflowError):
        ok = False
    if not ok:
        raise RequestError("input_ids must contain non-negative integers.")
    return value


def _prompt_spec(ids: list[int], params: Any, rid: str | None, context_len: int) -> PromptSpec:
    if not isinstance(params, dict):
        raise RequestError("sampling_params must be a JSON object.")
    for key in params:
        if key not in SAMPLING_KEYS:
            raise RequestError(f"SamplingParams.__init__() got an unexpected keyword argument '{key}'")
    max_new = DEFAULT_MAX_NEW_TOKENS if params.get("max_new_tokens") is None else params["max_new_tokens"]
    min_new = params.get("min_new_tokens", 0)
    for name, value in (("max_new_tokens", max_new), ("min_new_tokens", min_new)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RequestError(f"{name} must be a non-negative integer, got {value!r}.")
    temperature = params.get("temperature", 1.0)
    if not isinstance(temperature, int | float) or isinstance(temperature, bool) or temperature < 0:
        raise RequestError(f"temperature must be non-negative, got {temperature!r}.")
    if params.get("n", 1) != 1:
        raise RequestError("n > 1 (parallel sampling) is not supported by the specbench stand-in.")
    interval = params.get("stream_interval")
    if interval is not None and (not isinstance(interval, int) or interval < 1):
        raise RequestError("stream_interval must be a positive integer.")
    if len(ids) >= context_len:
        raise RequestError(
            f"The input ({len(ids)} tokens) is longer than the model's context length ({context_len} tokens)."
        )
    ignore_eos = bool(params.get("ignore_eos", False))
    return PromptSpec(ids, rid, max_new, min_new, ignore_eos, interval)


def final_output(req: Req, *, with_text: bool, draft_tokens: int, index: int | None) -> dict[str, Any]:
    n = req.n_out
    req.tape.extend_to(n)
    meta: dict[str, Any] = {
        "id": req.rid,
        "finish_reason": req.finish_reason,
        "prompt_tokens": len(req.prompt),
        "weight_version": "default",
        "num_retractions": 0,
        "completion_tokens": n,
        "cached_tokens": req.cached_tokens,
        "reasoning_tokens": 0,
        "e2e_latency": req.t_finished - req.t_created,
    }
    if req.verify_ct > 0:
        proposed = req.verify_ct * (draft_tokens - 1)
        meta["spec_verify_ct"] = req.verify_ct
        meta["spec_num_correct_drafts"] = req.correct_drafts
        meta["spec_num_proposed_drafts"] = proposed
        meta["spec_accept_length"] = n / req.verify_ct
        meta["spec_accept_rate"] = req.correct_drafts / proposed if proposed else 0.0
        meta["spec_correct_drafts_histogram"] = list(req.hist)
    out: dict[str, Any] = {"text": req.tape.text[: req.tape.text_end[n]].decode()} if with_text else {}
    out["output_ids"] = req.tape.ids[:n]
    out["meta_info"] = meta
    if index is not None:
        out["index"] = index
    return out


class EventEncoder:
    """Builds the `data: ...` events of one request from pre-encoded pieces."""

    __slots__ = ("_head", "_meta", "_mid", "_tail", "draft_tokens", "index", "req", "with_text")

    def __init__(self, req: Req, *, with_text: bool, draft_tokens: int, index: int | None) -> None:
        self.req, self.with_text, self.draft_tokens, self.index = req, with_text, draft_tokens, index
        self._head = b'data: {"text":"' if with_text else b"data: {"
        self._mid = b'","output_ids":[' if with_text else b'"output_ids":['
        fixed = b',"finish_reason":null,"prompt_tokens":%d,"weight_version":"default","num_retractions":0,'
        self._meta = b'],"meta_info":{"id":' + orjson.dumps(req.rid) + fixed % len(req.prompt)
        self._meta += b'"completion_tokens":'
        # cached_tokens is known once the request is prefilled, i.e. by its first event.
        self._tail = b""

    def event(self, n: int) -> bytes:
        tape = self.req.tape
        if n > len(tape.ids):
            tape.extend_to(n)
        if not self._tail:
            end = b"}}\n\n" if self.index is None else b'},"index":%d}\n\n' % self.index
            self._tail = b',"cached_tokens":%d,"reasoning_tokens":0' % self.req.cached_tokens + end
        text = tape.text[: tape.text_end[n]] if self.with_text else b""
        ids = tape.ids_json[: tape.ids_end[n] - 1] if n else b""
        return b"".join((self._head, text, self._mid, ids, self._meta, b"%d" % n, self._tail))

    def final_event(self) -> bytes:
        out = final_output(
            self.req, with_text=self.with_text, draft_tokens=self.draft_tokens, index=self.index
        )
        return b"data: " + orjson.dumps(out) + b"\n\n"


def error_body(message: str) -> bytes:
    return orjson.dumps({"error": {"message": message}})
