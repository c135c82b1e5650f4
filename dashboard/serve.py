"""Run `streamlit run dashboard/app.py ...` in-process, with st.navigation in charge from the first request.
A `pages/` folder beside the entry script starts Streamlit's legacy multipage mode, where a first visit to
/trends runs pages/trends.py without the router (no menu, no page config). We switch that internal flag off;
if a release drops it, only that first-visit quirk returns."""

import gc
import importlib
import json
import mimetypes
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dashboard.navigation import PAGES

# What every page imports, loaded once before the server answers: the first visit to a page then runs its
# script, not seconds of imports (pandas, Altair, the analysis modules). Modules that declare Streamlit caches
# (services, components) are left to the pages: their decorators want the running server.
WARM_MODULES = (
    *("pandas", "altair", "dashboard.charts", "dashboard.profile_charts", "analysis.changes"),
    *("analysis.comparability", "analysis.facets", "analysis.profiles", "analysis.regressions"),
    *("analysis.report", "analysis.sweep", "analysis.trace_files", "analysis.v2_vs_v1"),
    *("bench.profile.overlap", "bench.profile.summary", "db.profile_queries", "db.queue_queries"),
    # found by running every page once after the list above: what a first visit still imported
    *("analysis.floors", "analysis.jobs", "analysis.run_counts", "analysis.tp_compare", "analysis.tp_pair"),
    *("bench.floor", "bench.host.gpus", "bench.model_config", "dashboard.charts.speedup"),
    *("dashboard.charts.tp", "db.engine"),
    "narwhals._pandas_like.dataframe",  # Altair's data conversion
    "pandas.io.formats.csvs",  # the pages' CSV downloads
    "pyarrow.pandas_compat",  # st.dataframe's Arrow serialisation
    *("sqlalchemy.dialects.sqlite", "sqlalchemy.dialects.postgresql.psycopg"),
    "streamlit.dataframe.lazy_df_adapters",
)


def skip_chart_validation() -> None:
    """Altair's schema validation costs a page 1-2 s on a loaded host; tests/dashboard/test_charts.py
    validates the same pure builders, so the server skips it."""
    import functools

    import altair as alt
    from altair.utils import schemapi

    schemapi.disable_debug_mode()  # no validation when a chart object is created
    to_dict = alt.TopLevelMixin.to_dict

    @functools.wraps(to_dict)
    def unvalidated(self: alt.TopLevelMixin, validate: bool = True, **kwargs: object) -> dict[str, object]:
        return to_dict(self, False, **kwargs)  # type: ignore[arg-type]

    alt.TopLevelMixin.to_dict = unvalidated  # type: ignore[method-assign]


def warm_charts() -> None:
    """One chart with what the pages use (layers, facets, conditions), so Altair fills its lookup tables now
    rather than on the first page a user opens."""
    import altair as alt
    import pandas as pd

    from dashboard.charts.style import value_if

    frame = pd.DataFrame({"x": [1, 2], "y": [1.0, 2.0], "k": ["a", "b"], "on": [True, False]})
    base = alt.Chart(frame).encode(x=alt.X("x:O"), y=alt.Y("y:Q"), color=alt.Color("k:N", scale=None))
    rule = base.mark_rule().encode(
        strokeDash=value_if(alt.StrokeDashValue, "datum.on", [5, 4], [1, 0]), tooltip=[alt.Tooltip("k:N")]
    )
    text = base.mark_text().encode(text=alt.Text("y:Q", format=".2f"), color=alt.ColorValue("black"))
    alt.layer(rule, text, data=frame).facet(column=alt.Column("k:N")).to_dict()


def warm_streamlit() -> None:
    """Streamlit's first-run work, before the first visitor: the emoji and Material icon tables (0.1-0.2 s),
    and its REPL check (it reads every frame's source), moot under `streamlit run`."""
    importlib.import_module("streamlit.emojis")
    importlib.import_module("streamlit.material_icon_names")
    from streamlit import delta_generator

    if hasattr(delta_generator, "_use_warning_has_been_displayed"):
        delta_generator._use_warning_has_been_displayed = True


def tcp_nodelay() -> None:
    """Streamlit binds its socket with protocol 0, so asyncio sets no TCP_NODELAY on the connections it
    accepts and a response's body waited for the browser's delayed ACK of its headers: 44 ms a request,
    1.0 s for the ~140 files a page loads over 6 connections (0.4 s without); so the socket is made TCP."""
    try:
        from streamlit.web.server.starlette import starlette_server as server

        bind = server._bind_socket
    except (ImportError, AttributeError):  # pragma: no cover - depends on the Streamlit release
        return

    def bind_tcp(address: str, port: int, backlog: int) -> socket.socket:
        sock = bind(address, port, backlog)
        tcp = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, sock.detach())
        tcp.setblocking(False)
        tcp.set_inheritable(True)
        return tcp

    server._bind_socket = bind_tcp


ASGI = Callable[..., Awaitable[None]]
IMMUTABLE = "public, immutable, max-age=31536000"  # as Streamlit serves its bundles
# Streamlit's frontend guesses where its server is from the address: for /trends it asks /trends/_stcore/health,
# gets a 404 and asks /_stcore/health after a 0.1-0.4 s back-off, on every page but the Overview. Our pages name
# the base themselves (Streamlit's `window.__streamlit` embedding hook); any other address keeps the guess.
BASE_HINT = """<script>(() => { const pages = %s, path = location.pathname.replace(/\\/+$/, "");
  const last = path.slice(path.lastIndexOf("/") + 1);
  if (pages.includes(last)) window.__streamlit = {...window.__streamlit,
    BACKEND_BASE_URL: location.origin + path.slice(0, path.length - last.length)};
})();</script>"""


def with_base_hint(app: ASGI, pages: list[str]) -> ASGI:
    """`app` whose HTML (Streamlit's index.html, served at every page address) carries BASE_HINT before its
    first script; a document is asked for uncompressed, to be edited. Everything else passes as it is."""
    hint = (BASE_HINT % json.dumps(pages)).encode()

    async def hinted(scope: dict[str, Any], receive: ASGI, send: ASGI) -> None:
        if scope["type"] != "http" or b"text/html" not in dict(scope["headers"]).get(b"accept", b""):
            return await app(scope, receive, send)
        start: dict[str, Any] = {}
        body: list[bytes] = []

        async def edit(msg: dict[str, Any]) -> None:
            if msg["type"] == "http.response.start" and b"text/html" in dict(msg["headers"]).get(
                b"content-type", b""
            ):
                start.update(msg)
                return
            if msg["type"] != "http.response.body" or not start:
                return await send(msg)
            body.append(msg.get("body", b""))
            if not msg.get("more_body"):
                page = b"".join(body).replace(b"<script", hint + b"<script", 1)
                heads = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                await send({**start, "headers": [*heads, (b"content-length", str(len(page)).encode())]})
                await send({"type": "http.response.body", "body": page})

        plain = [(k, v) for k, v in scope["headers"] if k != b"accept-encoding"]
        await app({**scope, "headers": plain}, receive, edit)

    return hinted


def with_static_cache(app: ASGI, static: Path, prefix: str) -> ASGI:
    """`app` that answers GETs of Streamlit's own bundles (`static`, content-hashed, immutable) from memory in
    one message: through Starlette's file handler and middleware each cost the server 3-5 ms of Python, 0.2-0.4 s
    of a 2-core host's CPU for the 60-140 files of a fresh tab. Any other path goes to `app`."""
    files = {prefix + f.relative_to(static).as_posix(): f for f in static.rglob("*") if f.is_file()}
    cache: dict[Path, tuple[bytes, list[tuple[bytes, bytes]]]] = {}

    async def cached(scope: dict[str, Any], receive: ASGI, send: ASGI) -> None:
        file = (
            files.get(scope.get("path", "")) if scope["type"] == "http" and scope["method"] == "GET" else None
        )
        if file is None:
            return await app(scope, receive, send)
        if file not in cache:
            body, kind = file.read_bytes(), mimetypes.guess_type(file.name)[0] or "application/octet-stream"
            heads = {b"content-type": kind, b"content-length": len(body), b"cache-control": IMMUTABLE}
            cache[file] = body, [(k, str(v).encode()) for k, v in heads.items()]
        body, headers = cache[file]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return cached


def serve_faster() -> None:
    """Serve the pages with BASE_HINT (`with_base_hint`) and Streamlit's bundles from memory
    (`with_static_cache`)."""
    try:
        from streamlit import config, file_util
        from streamlit.web.server.starlette import starlette_server as server

        create = server.create_starlette_app
    except (ImportError, AttributeError):  # pragma: no cover - depends on the Streamlit release
        return
    pages = [p.url_path for p in PAGES if p.url_path]
    static = Path(file_util.get_static_dir()) / "static"
    base = "/" + "/".join(
        filter(None, [(config.get_option("server.baseUrlPath") or "").strip("/"), "static/"])
    )

    def create_app(runtime: Any) -> ASGI:
        return with_static_cache(with_base_hint(create(runtime), pages), static, base)

    server.create_starlette_app = create_app  # type: ignore[assignment]


def freeze_heap() -> None:
    """Move what is loaded so far (modules and tables that live as long as the server) out of the collector's
    reach: a full collection walks some 180,000 objects, 0.2-0.4 s holding the GIL on a loaded 2-core host
    (`specbench dashboard` also turns off Streamlit's `runner.postScriptGC`)."""
    gc.collect()
    gc.freeze()


def main(argv: list[str]) -> None:
    for name in WARM_MODULES:
        importlib.import_module(name)
    skip_chart_validation()
    warm_charts()
    warm_streamlit()
    tcp_nodelay()
    serve_faster()
    try:
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False
    except ImportError:  # pragma: no cover - depends on the Streamlit release
        pass
    from streamlit.web import cli

    from dashboard import warmup

    warmup.gate_health(warmup.start(argv))
    freeze_heap()
    sys.argv = ["streamlit", *argv]
    cli.main()


if __name__ == "__main__":
    main(sys.argv[1:])
