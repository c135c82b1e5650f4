"""The routes specbench and bench_serving call (contract §2, §3, §7), with SGLang's paths, codes and bodies.

Each wake-up sends a request's latest cumulative state, as SGLang's tokenizer manager does.
"""

import asyncio
import gzip
import os
import sys
from typing import Any

import orjson
from aiohttp import web

from synthetic.server import logs, profiler
from synthetic.server.protocol import (
    PromptSpec,
    RequestError,
    error_body,
    final_output,
    parse_generate,
)
from synthetic.server.request import Req, Sink
from synthetic.server.server import SimServer

FLUSH_OK = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
    "requests, the operation will not be performed.)\n"
)
DONE = b"data: [DONE]\n\n"
MALFORMED_EVENT = b'data: {"text":" t1","output_ids":[1,2,\n\n'
MALFORMED_BODY = b'{"text":" t1","output_ids":[1,2,'
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


def build_app(server: SimServer) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    r = Routes(server)
    app.router.add_get("/health", r.health)
    if server.release.ready_endpoint:
        app.router.add_get("/ready", r.health)
    for path in ("/server_info", "/get_server_info"):  # specbench and bench_serving fall back to the old path
        app.router.add_get(path, r.server_info)
    app.router.add_get("/v1/models", r.models)  # bench_serving's model name when --model is not given
    for method in ("GET", "POST"):
        app.router.add_route(method, "/flush_cache", r.flush_cache)
    if server.metrics is not None:
        app.router.add_get("/metrics", r.metrics)
    for method in ("POST", "PUT"):
        app.router.add_route(method, "/generate", r.generate)
    profiler.register(app, server)
    return app


class Routes:
    def __init__(self, server: SimServer) -> None:
        self.s = server

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.s.ready and not self.s.shutting_down else 503)

    async def server_info(self, request: web.Request) -> web.Response:
        if request.path == "/get_server_info":
            logs.launch.warning(
                "Endpoint '/get_server_info' is deprecated and will be removed; use '/server_info'."
            )
        return _json(self.s.server_info())

    async def models(self, request: web.Request) -> web.Response:
        name = self.s.args.served_model_name
        card = {"id": name, "object": "model", "created": int(self.s.started_at), "owned_by": "sglang"}
        card.update(root=name, parent=None, max_model_len=self.s.resolved.context_len)
        return _json({"object": "list", "data": [card]})

    async def flush_cache(self, request: web.Request) -> web.Response:
        raw = request.query.get("timeout", "0")
        try:
            timeout = float(raw)
        except ValueError:
            return web.Response(status=400, text=f"Invalid timeout: {raw!r}\n")
        engine = self.s.engine
        if not await engine.wait_idle(max(0.0, timeout)):
            message = (
                "Cache not flushed because there are pending requests. "
                f"#queue-req: {len(engine.waiting)}, #running-req: {len(engine.running)}"
            )
            logs.scheduler.warning(message)
            return web.Response(status=400, text=message + "\n")
        engine.flush()
        self.s.stalls.reset()
        logs.scheduler.info("Cache flushed successfully!")
        return web.Response(status=200, text=FLUSH_OK)

    async def metrics(self, request: web.Request) -> web.Response:
        assert self.s.metrics is not None
        body = self.s.metrics.render().encode()
        headers = {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
        # prometheus_client gzips the page for any client that accepts gzip (aiohttp's default does).
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, headers=headers)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        server = self.s
        try:
            body = orjson.loads(await request.read())
            prompts, batch, stream = parse_generate(
                body,
                text_ok=not server.args.skip_tokenizer_init,
                encode=server.encode,
                context_len=server.resolved.context_len,
            )
        except orjson.JSONDecodeError as exc:
            return _bad_request(f"Invalid JSON body: {exc}")
        except RequestError as exc:
            logs.launch.error(f"[http_server] Error: {exc}")
            return _bad_request(str(exc))
        sink = Sink()
        reqs = [server.new_request(p, sink) for p in prompts]
        for req in reqs:
            server.engine.submit(req)
        try:
            if stream:
                return await _stream(server, request, reqs, sink, batch=batch)
            return await _unary(server, reqs, sink, batch=batch)
        finally:
            for req in reqs:
                server.engine.abort(req)


async def _stream(
    server: SimServer, request: web.Request, reqs: list[Req], sink: Sink, *, batch: bool
) -> web.StreamResponse:
    resp = web.StreamResponse(headers=SSE_HEADERS)
    await resp.prepare(request)
    merge = not server.cfg.instant
    pending = [(req, server.encoder(req, i if batch else None)) for i, req in enumerate(reqs)]
    try:
        while pending:
            await sink.wait()
            parts: list[bytes] = []
            still = []
            for req, enc in pending:
                count = len(req.bounds)
                done = req.finished and not req.aborted
                start = count - 1 if merge and req.sent < count else req.sent
                for j in range(start, count):
                    parts.append(enc.final_event() if done and j == count - 1 else enc.event(req.bounds[j]))
                    if req.faults and req.sent == 0 and j == start:
                        await _inject_fault(server, resp, req, parts)
                req.sent = count
                if not done:  # a stalled request is aborted on the scheduler side but never completes here
                    still.append((req, enc))
            pending = still
            if not pending:
                await resp.write_eof(b"".join([*parts, DONE]))  # the last events and [DONE] in one send
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
    with_text, draft = not server.args.skip_tokenizer_init, server.draft_tokens
    outs = [final_output(r, with_text=with_text, draft_tokens=draft, index=None) for r in reqs]
    return web.Response(body=orjson.dumps(outs if batch else outs[0]), content_type="application/json")


async def warmup(server: SimServer, max_new_tokens: int = 8) -> None:
    """The request SGLang sends itself before declaring readiness (contract §1.1): 8 tokens."""
    ids = [10, 11, 12] if server.args.skip_tokenizer_init else server.encode("The capital city of France is")
    sink = Sink()
    req = server.new_request(PromptSpec(ids, None, max_new_tokens, 0, False, None), sink, internal=True)
    server.engine.submit(req)
    while not req.finished:
        await sink.wait()


def _crash(server: SimServer) -> None:
    after = server.cfg.faults.crash_after
    logs.scheduler.error(
        f"Scheduler hit an exception: simulated crash (SPECBENCH_SIM_FAULT crash_after={after})"
    )
    sys.stderr.flush()
    os._exit(1)


def _json(payload: Any) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type="application/json")


def _bad_request(message: str) -> web.Response:
    return web.Response(status=400, body=error_body(message), content_type="application/json")
