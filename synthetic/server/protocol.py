"""The `/generate` wire format (contract §3.1-3.3): request validation, `meta_info`, stream events.

Non-final stream events sit on the hot path of the client-ceiling benchmark, so `EventEncoder`
assembles them from pre-encoded byte pieces plus two buffer slices from the request's
`TokenTape`. The final event, which carries the rarely-read keys, goes through orjson.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

import orjson

from synthetic.server.args import ServerArgs
from synthetic.server.request import Req
from synthetic.server.text import Encode
from synthetic.server.versions import VersionTraits

SAMPLING_KEYS = (
    "max_new_tokens",
    "min_new_tokens",
    "stop",
    "stop_token_ids",
    "stop_regex",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "ignore_eos",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "no_stop_trim",
    "n",
    "json_schema",
    "regex",
    "ebnf",
    "structural_tag",
    "custom_params",
    "stream_interval",
    "logit_bias",
    "sampling_seed",
)
_SAMPLING_KEY_SET = frozenset(SAMPLING_KEYS)
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


@dataclass(frozen=True)
class GenerateCall:
    prompts: list[PromptSpec]
    batch: bool
    stream: bool


def parse_generate(
    body: Any, *, args: ServerArgs, traits: VersionTraits, encode: Encode, context_len: int
) -> GenerateCall:
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    stream = body.get("stream", False)
    if traits.strict_generate_body and not isinstance(stream, bool):
        raise RequestError(f"invalid type: {type(stream).__name__} for field `stream`, expected a boolean")
    text, input_ids = body.get("text"), body.get("input_ids")
    if (text is None) == (input_ids is None):
        raise RequestError("Either text, input_ids or input_embeds should be provided.")
    prompts: list[list[int]]
    if input_ids is not None:
        batch = isinstance(input_ids, list) and bool(input_ids) and isinstance(input_ids[0], list)
        prompts = [_ids(x) for x in input_ids] if batch else [_ids(input_ids)]
    else:
        if args.skip_tokenizer_init:
            raise RequestError("The server was started with --skip-tokenizer-init; send input_ids, not text.")
        batch = isinstance(text, list)
        texts: list[Any] = list(text) if isinstance(text, list) else [text]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise RequestError("text must be a string or a list of strings.")
        prompts = [encode(str(t)) for t in texts]
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
    else:
        if not isinstance(rids, str):
            raise RequestError("rid must be a string.")
        rid_list = [rids]
    specs = []
    for ids, params, rid in zip(prompts, per_item, rid_list, strict=True):
        specs.append(_prompt_spec(ids, params, rid, traits=traits, context_len=context_len))
    return GenerateCall(prompts=specs, batch=batch, stream=bool(stream))


def _ids(value: Any) -> list[int]:
    if not isinstance(value, list) or not value:
        raise RequestError("input_ids must be a non-empty list of token ids (or a list of such lists).")
    # array() checks every element at C speed: long prompts are the common case.
    try:
        ok = min(array("q", value)) >= 0
    except (TypeError, OverflowError):
        ok = False
    if not ok:
        raise RequestError("input_ids must contain non-negative integers.")
    return value


def _prompt_spec(
    ids: list[int], params: Any, rid: str | None, *, traits: VersionTraits, context_len: int
) -> PromptSpec:
    if not isinstance(params, dict):
        raise RequestError("sampling_params must be a JSON object.")
    for key in params:
        if key not in _SAMPLING_KEY_SET:
            if traits.strict_generate_body:
                expected = ", ".join(f"`{k}`" for k in SAMPLING_KEYS)
                raise RequestError(f"unknown field `{key}`, expected one of {expected}")
            raise RequestError(f"SamplingParams.__init__() got an unexpected keyword argument '{key}'")
    max_new = params.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if max_new is None:
        max_new = DEFAULT_MAX_NEW_TOKENS
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
    return PromptSpec(
        ids=ids,
        rid=rid,
        max_new_tokens=max_new,
        min_new_tokens=min_new,
        ignore_eos=bool(params.get("ignore_eos", False)),
        stream_interval=interval,
    )


@dataclass(frozen=True)
class MetaOptions:
    """What the final `meta_info` carries for this server."""

    with_text: bool
    speculative: bool
    draft_tokens: int
    spec_aliases: bool
    running_waiting: bool
    timing: bool


def final_output(
    req: Req, opts: MetaOptions, *, running: int, waiting: int, index: int | None
) -> dict[str, Any]:
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
    }
    if opts.running_waiting:
        meta["num_running_reqs"] = running
        meta["num_waiting_reqs"] = waiting
    meta["e2e_latency"] = req.t_finished - req.t_created
    if opts.speculative and req.verify_ct > 0:
        proposed = req.verify_ct * (opts.draft_tokens - 1)
        meta["spec_verify_ct"] = req.verify_ct
        meta["spec_num_correct_drafts"] = req.correct_drafts
        meta["spec_num_proposed_drafts"] = proposed
        meta["spec_accept_length"] = n / req.verify_ct
        meta["spec_accept_rate"] = req.correct_drafts / proposed if proposed else 0.0
        meta["spec_correct_drafts_histogram"] = list(req.hist)
        if opts.spec_aliases:
            meta["spec_accepted_drafts"] = req.correct_drafts
            meta["spec_proposed_drafts"] = proposed
            meta["spec_accept_histogram"] = list(req.hist)
    if opts.timing:
        decode_s = req.t_finished - req.t_first
        meta["request_received_ts"] = req.received_ts
        meta["request_finished_ts"] = req.received_ts + (req.t_finished - req.t_created)
        meta["queue_time"] = max(0.0, req.t_first - req.t_created)
        meta["decode_throughput"] = (n - 1) / decode_s if n > 1 and decode_s > 0 else 0.0
    out: dict[str, Any] = {}
    if opts.with_text:
        out["text"] = req.tape.text_fragment(n).decode()
    out["output_ids"] = req.tape.ids[:n]
    out["meta_info"] = meta
    if index is not None:
        out["index"] = index
    return out


class EventEncoder:
    """Builds the `data: ...` events of one request from pre-encoded pieces."""

    __slots__ = ("_head", "_index", "_live", "_meta", "_mid", "_tail", "_with_text", "opts", "req")

    def __init__(self, req: Req, opts: MetaOptions, index: int | None) -> None:
        self.req = req
        self.opts = opts
        self._with_text = opts.with_text
        self._live = opts.running_waiting
        self._head = b'data: {"text":"' if opts.with_text else b"data: {"
        self._mid = b'","output_ids":[' if opts.with_text else b'"output_ids":['
        fixed = (
            b',"finish_reason":null,"prompt_tokens":%d,"weight_version":"default","num_retractions":0,'
            % (len(req.prompt))
        )
        self._meta = b'],"meta_info":{"id":' + orjson.dumps(req.rid) + fixed + b'"completion_tokens":'
        self._index = b"}}\n\n" if index is None else b'},"index":%d}\n\n' % index
        # cached_tokens is known once the request is prefilled, i.e. by its first event.
        self._tail = b""

    def event(self, n: int, *, running: int, waiting: int) -> bytes:
        tape = self.req.tape
        if n > len(tape.ids):
            tape.extend_to(n)
        if self._live:
            tail = b',"cached_tokens":%d,"reasoning_tokens":0,"num_running_reqs":%d,"num_waiting_reqs":%d' % (
                self.req.cached_tokens,
                running,
                waiting,
            )
            tail += self._index
        else:
            tail = self._tail
            if not tail:
                tail = self._tail = (
                    b',"cached_tokens":%d,"reasoning_tokens":0' % self.req.cached_tokens + self._index
                )
        return b"".join(
            (
                self._head,
                tape.text[: tape.text_end[n]] if self._with_text else b"",
                self._mid,
                tape.ids_json[: tape.ids_end[n] - 1] if n else b"",
                self._meta,
                b"%d" % n,
                tail,
            )
        )

    def final_event(self, *, running: int, waiting: int, index: int | None) -> bytes:
        out = final_output(self.req, self.opts, running=running, waiting=waiting, index=index)
        return b"data: " + orjson.dumps(out) + b"\n\n"


def error_body(message: str) -> bytes:
    return orjson.dumps({"error": {"message": message}})
