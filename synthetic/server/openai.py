"""OpenAI-compatible `/v1/completions` and `/v1/chat/completions`, shaped as SGLang 0.5.13's serve them.

Field names and order follow sglang/srt/entrypoints/openai/protocol.py (CompletionResponse,
CompletionStreamResponse, ChatCompletionResponse, ChatCompletionStreamResponse, UsageInfo, LogProbs,
ChoiceLogprobs): streaming sends one chunk per wake-up with the new text, then (with
`stream_options.include_usage`) a chunk with empty `choices` and the `usage`, then `data: [DONE]`.

Logprobs are made up but deterministic (a function of the token id), with SGLang's layout: completions
get `LogProbs` (`text_offset` is -1 for every token, as SGLang has it), chat gets `ChoiceLogprobs`.
A chat prompt is rendered as "role: content" lines plus "assistant:", which is the synthetic
tokenizer's chat template (synthetic.model.tokenizer), then tokenized like any text prompt.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiohttp import web

from synthetic.server.protocol import PromptSpec, RequestError
from synthetic.server.request import Req, Sink
from synthetic.server.server import SimServer

SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
DONE = b"data: [DONE]\n\n"
DEFAULT_COMPLETION_MAX_TOKENS = 16  # CompletionRequest.max_tokens


def token_text(tok: int) -> str:
    return f"t{tok}"


def token_logprob(tok: int) -> float:
    """A stable stand-in log-probability in (-2, 0)."""
    return -((tok * 2654435761) % 10007) / 5003.5


def _top(tok: int, k: int) -> list[tuple[str, float]]:
    """The sampled token first (greedy), then k-1 others with lower logprobs."""
    lp = token_logprob(tok)
    return [(token_text(tok), lp)] + [(token_text(tok + i), lp - i) for i in range(1, k)]


async def completions(server: SimServer, request: web.Request) -> web.StreamResponse:
    try:
        body = _body(await request.read())
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            ids = server.encode(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            ids = list(prompt)
        else:
            raise RequestError(
                "prompt must be a string or a list of token ids (one prompt per request here)."
            )
        max_tokens = _positive(body.get("max_tokens", DEFAULT_COMPLETION_MAX_TOKENS), "max_tokens")
        logprobs = body.get("logprobs")
        if logprobs is not None and (not isinstance(logprobs, int) or logprobs < 0):
            raise RequestError("logprobs must be a non-negative integer.")
    except RequestError as exc:
        return _error(str(exc))
    return await _serve(server, request, body, ids, max_tokens, chat=False, top_k=logprobs)


async def chat_completions(server: SimServer, request: web.Request) -> web.StreamResponse:
    try:
        body = _body(await request.read())
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError("messages must be a non-empty list.")
        lines = []
        for m in messages:
            if not isinstance(m, dict) or not isinstance(m.get("content"), str):
                raise RequestError("each message needs a role and a string content.")
            lines.append(f"{m.get('role', 'user')}: {m['content']}\n")
        ids = server.encode("".join(lines) + "assistant:")
        raw_max = body.get("max_completion_tokens") or body.get("max_tokens")
        max_tokens = None if raw_max is None else _positive(raw_max, "max_completion_tokens")
        top_k: int | None = None
        if body.get("logprobs"):
            top = body.get("top_logprobs") or 0
            if not isinstance(top, int) or top < 0:
                raise RequestError("top_logprobs must be a non-negative integer.")
            top_k = top
    except RequestError as exc:
        return _error(str(exc))
    # No max_tokens: SGLang generates up to the context; the stand-in's /generate default stands in.
    return await _serve(server, request, body, ids, max_tokens or 128, chat=True, top_k=top_k)


async def _serve(
    server: SimServer,
    request: web.Request,
    body: dict[str, Any],
    ids: list[int],
    max_tokens: int,
    *,
    chat: bool,
    top_k: int | None,
) -> web.StreamResponse:
    if len(ids) + max_tokens > server.resolved.context_len:
        return _error(
            f"Requested token count exceeds the model's maximum context length of "
            f"{server.resolved.context_len} tokens. You requested a total of {len(ids) + max_tokens} tokens."
        )
    spec = PromptSpec(
        ids=ids,
        rid=None,
        max_new_tokens=max_tokens,
        min_new_tokens=0,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream_interval=None,
    )
    sink = Sink()
    req = server.new_request(spec, sink)
    server.engine.submit(req)
    shape = _Shape(req, str(body.get("model") or server.args.served_model_name), chat=chat, top_k=top_k)
    try:
        if body.get("stream"):
            opts = body.get("stream_options") or {}
            return await _stream(request, req, sink, shape, include_usage=bool(opts.get("include_usage")))
        while not req.finished:
            await sink.wait()
        return web.Response(body=orjson.dumps(shape.full()), content_type="application/json")
    finally:
        server.engine.abort(req)


async def _stream(
    request: web.Request, req: Req, sink: Sink, shape: _Shape, *, include_usage: bool
) -> web.StreamResponse:
    resp = web.StreamResponse(headers=SSE_HEADERS)
    await resp.prepare(request)
    sent = 0
    try:
        if shape.chat:
            await resp.write(shape.chunk(0, 0, first=True))
        while True:
            await sink.wait()
            if req.aborted:
                break  # a stalled or cancelled request: nothing more will come
            n = req.bounds[-1] if req.bounds else 0
            done = req.finished and not req.aborted
            if n > sent or done:
                await resp.write(shape.chunk(sent, n, final=done))
                sent = n
            if done:
                break
        tail = b"data: " + orjson.dumps(shape.usage_chunk()) + b"\n\n" if include_usage else b""
        await resp.write_eof(tail + DONE)
    except ConnectionResetError:
        pass
    return resp


class _Shape:
    """Builds the response objects of one request."""

    def __init__(self, req: Req, model: str, *, chat: bool, top_k: int | None) -> None:
        self.req = req
        self.model = model
        self.chat = chat
        self.top_k = top_k
        self.created = int(time.time())
        self.id = req.rid

    def _text(self, a: int, b: int) -> str:
        tape = self.req.tape
        tape.extend_to(b)
        if not tape.with_text:
            return ""
        return tape.text[tape.text_end[a] : tape.text_end[b]].decode()

    def _finish(self) -> str | None:
        reason = self.req.finish_reason
        return str(reason["type"]) if isinstance(reason, dict) else None

    def _usage(self) -> dict[str, Any]:
        n = self.req.n_out
        prompt = len(self.req.prompt)
        return {
            "prompt_tokens": prompt,
            "total_tokens": prompt + n,
            "completion_tokens": n,
            "prompt_tokens_details": None,
            "reasoning_tokens": 0,
        }

    def _logprobs(self, a: int, b: int) -> dict[str, Any] | None:
        if self.top_k is None:
            return None
        toks = self.req.tape.ids[a:b]
        if self.chat:
            content = []
            for t in toks:
                text = token_text(t)
                top = [
                    {"token": s, "bytes": list(s.encode()), "logprob": lp} for s, lp in _top(t, self.top_k)
                ]
                content.append(
                    {
                        "token": text,
                        "bytes": list(text.encode()),
                        "logprob": token_logprob(t),
                        "top_logprobs": top,
                    }
                )
            return {"content": content}
        return {
            "text_offset": [-1] * len(toks),
            "token_logprobs": [token_logprob(t) for t in toks],
            "tokens": [token_text(t) for t in toks],
            "top_logprobs": [dict(_top(t, self.top_k)) if self.top_k else None for t in toks],
        }

    def full(self) -> dict[str, Any]:
        n = self.req.n_out
        text = self._text(0, n)
        choice: dict[str, Any]
        if self.chat:
            choice = {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "reasoning_content": None,
                    "tool_calls": None,
                },
                "logprobs": self._logprobs(0, n),
                "finish_reason": self._finish(),
                "matched_stop": self._matched(),
            }
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": self._logprobs(0, n),
                "finish_reason": self._finish(),
                "matched_stop": self._matched(),
            }
        return {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self._usage(),
            "metadata": None,
        }

    def _matched(self) -> int | None:
        reason = self.req.finish_reason
        if isinstance(reason, dict) and "matched" in reason:
            return int(reason["matched"])
        return None

    def chunk(self, a: int, b: int, *, first: bool = False, final: bool = False) -> bytes:
        finish = self._finish() if final else None
        matched = self._matched() if final else None
        if self.chat:
            # DeltaMessage serialised by pydantic: every field, None included.
            delta: dict[str, Any] = {
                "role": "assistant" if first else None,
                "content": "" if first else self._text(a, b),
                "reasoning_content": None,
                "tool_calls": None,
            }
            choice: dict[str, Any] = {
                "index": 0,
                "delta": delta,
                "logprobs": None if first else self._logprobs(a, b),
                "finish_reason": finish,
                "matched_stop": matched,
            }
        else:
            choice = {
                "index": 0,
                "text": self._text(a, b),
                "logprobs": self._logprobs(a, b),
                "finish_reason": finish,
                "matched_stop": matched,
            }
        obj = {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": None,
        }
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def usage_chunk(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": self._usage(),
        }


def _body(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"Invalid JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    if body.get("n", 1) != 1:
        raise RequestError("n > 1 (parallel sampling) is not supported by the specbench stand-in.")
    return body


def _positive(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(f"{name} must be positive")
    return value


def _error(message: str, status: int = 400) -> web.Response:
    # SGLang's ErrorResponse for OpenAI routes.
    body = {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": status}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


def register(app: web.Application, server: SimServer) -> None:
    async def _completions(request: web.Request) -> web.StreamResponse:
        return await completions(server, request)

    async def _chat(request: web.Request) -> web.StreamResponse:
        return await chat_completions(server, request)

    app.router.add_post("/v1/completions", _completions)
    app.router.add_post("/v1/chat/completions", _chat)
