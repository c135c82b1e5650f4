"""HTTP routes (contract §2, §3, §7): the same paths, methods, status codes and bodies as SGLang."""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from synthetic.server import logs, openai, profiler
from synthetic.server.args import MODEL_ARCHITECTURE, MODEL_TYPE
from synthetic.server.generate import handle_generate, health_generation
from synthetic.server.server import SimServer

FLUSH_OK = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
    "requests, the operation will not be performed.)\n"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(server: SimServer) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    routes = Routes(server)
    app.router.add_get("/health", routes.health)
    app.router.add_get("/health_generate", routes.health_generate)
    if server.traits.ready_endpoint:
        app.router.add_get("/ready", routes.ready)
    app.router.add_get("/server_info", routes.server_info)
    app.router.add_get("/get_server_info", routes.get_server_info)
    app.router.add_get("/model_info", routes.model_info)
    app.router.add_get("/get_model_info", routes.model_info)
    app.router.add_get("/v1/models", routes.models)
    app.router.add_route("GET", "/flush_cache", routes.flush_cache)
    app.router.add_route("POST", "/flush_cache", routes.flush_cache)
    if server.args.enable_metrics:
        app.router.add_get("/metrics", routes.metrics)
    generate: Handler = routes.generate
    app.router.add_post("/generate", generate)
    app.router.add_put("/generate", generate)
    profiler.register(app, server)
    openai.register(app, server)
    return app


class Routes:
    def __init__(self, server: SimServer) -> None:
        self.s = server

    async def health(self, request: web.Request) -> web.Response:
        if not self.s.cfg.health_generation:
            return web.Response(status=200 if self._serving else 503)
        return await self.health_generate(request)

    async def health_generate(self, request: web.Request) -> web.Response:
        if not self._serving:
            return web.Response(status=503)
        return web.Response(status=200 if await health_generation(self.s) else 503)

    async def ready(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self._serving else 503)

    async def server_info(self, request: web.Request) -> web.Response:
        return _json(self.s.server_info())

    async def get_server_info(self, request: web.Request) -> web.Response:
        logs.launch.warning(
            "Endpoint '/get_server_info' is deprecated and will be removed; use '/server_info'."
        )
        return _json(self.s.server_info())

    async def model_info(self, request: web.Request) -> web.Response:
        args = self.s.args
        info: dict[str, Any] = {
            "model_path": args.model_path,
            "tokenizer_path": args.tokenizer_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": MODEL_TYPE,
            "architectures": [MODEL_ARCHITECTURE],
        }
        if self.s.traits.launch_info_keys:
            info.update(
                served_model_name=args.served_model_name,
                load_format=args.load_format,
                reasoning_parser=None,
                tool_call_parser=None,
                disaggregation_mode="null",
            )
        return _json(info)

    async def models(self, request: web.Request) -> web.Response:
        args = self.s.args
        card = {
            "id": args.served_model_name,
            "object": "model",
            "created": int(self.s.started_at),
            "owned_by": "sglang",
            "root": args.served_model_name,
            "parent": None,
            "max_model_len": self.s.resolved.context_len,
        }
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
        # SGLang serves /metrics through prometheus_client, which gzips the page for any client that accepts
        # gzip (aiohttp's default Accept-Encoding does). A client that reads it raw must ask for identity.
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, headers=headers)

    async def generate(self, request: web.Request) -> web.StreamResponse:
        return await handle_generate(self.s, request)

    @property
    def _serving(self) -> bool:
        return self.s.ready and not self.s.shutting_down


def _json(payload: Any) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type="application/json")
