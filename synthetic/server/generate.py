"""`POST /generate` and the health probe's generation: submit to the scheduler, then stream or answer.

Streaming follows SGLang's tokenizer manager: each wake-up sends the latest cumulative state of
each request, so outputs that queued up while the handler was blocked on a slow client are merged
into one event. In instant mode (no modelled time, the client-ceiling benchmark) every scheduler
output becomes its own event instead, and all events queued for one response go out in a single
transport write.
"""

from __future__ import annotations

import asyncio
import os
import sys

import orjson
from aiohttp import web

from synthetic.server import logs
from synthetic.server.protocol import (
    EventEncoder,
    PromptSpec,
    RequestError,
    error_body,
    final_output,
    parse_generate,
)
from synthetic.server.request import Req, Sink
from synthetic.server.server import SimServer

DONE = b"data: [DONE]\n\n"
MALFORMED_EVENT = b'data: {"text":" t1","output_ids":[1,2,\n\n'
MALFORMED_BODY = b'{"text":" t1","output_ids":[1,2,'
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


async def handle_generate(server: SimServer, request: web.Request) -> web.StreamResponse:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        return _bad_request(f"Invalid JSON body: {exc}")
    args = server.args
    try:
        call = parse_generate(
            body,
            args=args,
            traits=server.traits,
            encode=server.encode,
            context_len=server.resolved.context_len,
        )
    except RequestError as exc:
        logs.launch.error(f"[http_server] Error: {exc}")
        return _bad_request(str(exc))
    sink = Sink()
    reqs = [server.new_request(p, sink) for p in call.prompts]
    for req in reqs:
        server.engine.submit(req)
    try:
        if call.stream:
            return await _stream(server, request, reqs, sink, batch=call.batch)
        return await _unary(server, reqs, sink, batch=call.batch)
    finally:
        for req in reqs:
            server.engine.abort(req)


async def _stream(
    server: SimServer, request: web.Request, reqs: list[Req], sink: Sink, *, batch: bool
) -> web.StreamResponse:
    resp = web.StreamResponse(headers=SSE_HEADERS)
    await resp.prepare(request)
    engine = server.engine
    opts = server.meta_opts
    merge = not server.cfg.instant
    pending = [(req, EventEncoder(req, opts, i if batch else None), i) for i, req in enumerate(reqs)]
    try:
        while pending:
            await sink.wait()
            parts: list[bytes] = []
            still = []
            running, waiting = len(engine.running), len(engine.waiting)
            for item in pending:
                req, enc, i = item
                count = len(req.bounds)
                done = req.finished and not req.aborted
                start = count - 1 if merge and req.sent < count else req.sent
                for j in range(start, count):
                    if done and j == count - 1:
                        parts.append(
                            enc.final_event(running=running, waiting=waiting, index=i if batch else None)
                        )
                    else:
                        parts.append(enc.event(req.bounds[j], running=running, waiting=waiting))
                    if req.faults and req.sent == 0 and j == start:
                        await _inject_fault(server, resp, req, parts)
                req.sent = count
                # A stalled request is aborted on the scheduler side but never completes here.
                if not done:
                    still.append(item)
            pending = still
            if not pending:
                parts.append(DONE)
                # The last events, [DONE] and the chunked terminator leave in one send.
                await resp.write_eof(b"".join(parts))
            elif parts:
                await resp.write(b"".join(parts))
    except ConnectionResetError:
        pass  # the client left; the caller aborts its requests
    return resp


async def _inject_fault(server: SimServer, resp: web.StreamResponse, req: Req, parts: list[bytes]) -> None:
    """Faults strike right after the request's first event, i.e. mid-stream."""
    if "malformed" in req.faults:
        parts.append(MALFORMED_EVENT)
    if "crash" in req.faults:
        await resp.write(b"".join(parts))
        _crash(server)


async def _unary(server: SimServer, reqs: list[Req], sink: Sink, *, batch: bool) -> web.Response:
    faults = frozenset().union(*(r.faults for r in reqs))
    if "crash" in faults or "stall" in faults:
        while not all(r.bounds for r in reqs if r.faults):
            await sink.wait()
        if "crash" in faults:
            _crash(server)
        await asyncio.Event().wait()  # stall: the answer never comes
    while not all(r.finished for r in reqs):
        await sink.wait()
    if "malformed" in faults:
        return web.Response(body=MALFORMED_BODY, content_type="application/json")
    engine = server.engine
    running, waiting = len(engine.running), len(engine.waiting)
    outs = [final_output(r, server.meta_opts, running=running, waiting=waiting, index=None) for r in reqs]
    return web.Response(body=orjson.dumps(outs if batch else outs[0]), content_type="application/json")


async def health_generation(server: SimServer) -> bool:
    """SGLang's `/health_generate`: a one-token generation that must produce output in time."""
    sink = Sink()
    probe = PromptSpec(
        ids=[0], rid=None, max_new_tokens=1, min_new_tokens=0, ignore_eos=True, stream_interval=None
    )
    req = server.new_request(probe, sink, internal=True)
    server.engine.submit(req)
    try:
        async with asyncio.timeout(server.cfg.health_timeout_s):
            while not req.bounds:
                await sink.wait()
        return True
    except TimeoutError:
        return False
    finally:
        server.engine.abort(req)


async def warmup(server: SimServer, max_new_tokens: int = 8) -> None:
    """The request SGLang sends itself before declaring readiness (contract §1.1): 8 tokens."""
    ids = [10, 11, 12] if server.args.skip_tokenizer_init else server.encode("The capital city of France is")
    sink = Sink()
    spec = PromptSpec(
        ids=ids,
        rid=None,
        max_new_tokens=max_new_tokens,
        min_new_tokens=0,
        ignore_eos=False,
        stream_interval=None,
    )
    req = server.new_request(spec, sink, internal=True)
    server.engine.submit(req)
    while not req.finished:
        await sink.wait()


def _crash(server: SimServer) -> None:
    logs.scheduler.error(
        f"Scheduler hit an exception: simulated crash (SPECBENCH_SIM_FAULT crash_after="
        f"{server.cfg.faults.crash_after})"
    )
    sys.stderr.flush()
    os._exit(1)


def _bad_request(message: str) -> web.Response:
    return web.Response(status=400, body=error_body(message), content_type="application/json")
